#pragma once
// A GGUF file (hf/gguf.h) as a model: its metadata read into the same Config a config.json gives (one row
// per general.architecture: gguf_architectures()), its tensors under the Hugging Face names (so
// the rows' name tables and load_weights load them as they load safetensors), and its vocabulary as a
// tokenizer.
//
// What llama.cpp's convert_hf_to_gguf.py does to a checkpoint, undone here:
//   - names: "blk.N.attn_q.weight" is "model.layers.N.self_attn.q_proj.weight" (the table below);
//   - a "llama" file's q and k rows (weights and biases) are permuted for ggml's interleaved rotation:
//     within each head of d rows, GGUF row 2i + j is Hugging Face row j·d/2 + i (LlamaModel.permute);
//   - GPT-2's Conv1D weights (c_attn, c_proj, c_fc), transposed to (out, in) in the file, go back to (in,
//   out);
//   - no "output.weight" means the output layer is tied to the embedding.
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "hf/checkpoint.h"
#include "hf/config.h"
#include "hf/gguf.h"
#include "hf/tokenizer.h"
#include "nn/llama.h"

namespace saccade::hf {

/// The general.architecture values gguf_config reads.
std::vector<std::string> gguf_architectures();

/// The Config of `file`'s metadata, for general.architecture "llama" (LlamaForCausalLM's row; with
/// {arch}.expert_count and expert_used_count, MixtralForCausalLM's, which the converter writes as "llama"),
/// "qwen2" (biases on q, k and v), "qwen3" (q and k norms) or "qwen3moe" (Qwen3-MoE: expert_count,
/// expert_used_count, expert_feed_forward_length, all required; norm_topk_prob true, as llama.cpp's qwen3moe
/// graph renormalises), "qwen2moe" (Qwen2-MoE: as qwen3moe with expert_shared_feed_forward_length, the
/// shared expert, required; biases on q, k and v; norm_topk_prob false), "olmoe" (OLMoE: expert_count and
/// expert_used_count, full-width q and k norms, norm_topk_prob false as llama.cpp's olmoe graph; the
/// converter writes rms eps 1e-5 over the config's), "gemma" (GemmaForCausalLM: its norms stored as 1 + w,
/// read back to w; GeGLU; no rope key: 10000), "gemma2" and "gemma3" (Gemma2ForCausalLM, Gemma3ForCausalLM's
/// text model: gemma's norms, four a block (ffn_norm the pre-feedforward one), attn_logit_softcapping
/// (gemma2; 50) and final_logit_softcapping (gemma2: 30; gemma3: none), attention.sliding_window (gemma2:
/// 4096; gemma3: no window layers without it), gemma3's rope.freq_base_swa (10000) for its window layers;
/// what the converter does not write is taken as llama.cpp takes it: the window layers every layer but each
/// attention.sliding_window_pattern-th (2 for gemma2, 6 for gemma3), query_pre_attn_scalar head_dim but
/// hidden / heads for the 27B models (46 layers: gemma2; 62: gemma3) as their configs say) or "phi3"
/// (Phi3ForCausalLM: fused attn_qkv and ffn_up kept as
/// qkv_proj and gate_up_proj; rope.dimension_count below the head's width as partial_rotary_factor;
/// attention.sliding_window, 0 for none; with tensors rope_factors_long and rope_factors_short.weight,
/// LongRoPE over rope.scaling.original_context_length, rope.scaling.attn_factor its attention factor),
/// "olmo2" (Olmo2ForCausalLM: post_attention_norm and post_ffw_norm after the sublayers, full-width q and k
/// norms) or "granite" (GraniteForCausalLM: q and k rows permuted as llama's; attention.scale,
/// embedding_scale, residual_scale and logit_scale as its multipliers, 1 when absent), "smollm3"
/// (SmolLM3ForCausalLM: llama's keys, q and k rows permuted; every fourth layer without positions, as
/// llama.cpp takes it: the file does not say), "gptneox" (GPTNeoXForCausalLM: its own keys, block_count,
/// context_length, embedding_length, feed_forward_length, attention.head_count, attention.layer_norm_epsilon,
/// rope.dimension_count as rotary_pct, use_parallel_residual (true), the rope base 10000 and exact GELU,
/// which the file does not state; attn_qkv's q, k, v blocks read back head by head), "stablelm"
/// (StableLmForCausalLM: gptneox's keys with attention.head_count_kv, Llama's names, q/k/v biases as
/// use_qkv_bias, the rope base 10000) or "falcon" (FalconForCausalLM: tensor_data_layout "jploski", q, k and
/// v as blocks read back group by group; head_count_kv 1 with one norm a block is Falcon 7B's layout, else
/// new_decoder_architecture, with two norms where attn_norm_2 (ln_attn; attn_norm is then ln_mlp) is there;
/// ffn_hidden_size from ffn_up's rows, as the converter writes 4 hidden and context_length 2048 whatever the
/// config says); for the gemmas, phi3, olmo2, olmoe and smollm3, whose configs default one, pad_token_id is
/// tokenizer.ggml.padding_token_id or none: {arch}.block_count, embedding_length, feed_forward_length,
/// attention.head_count and context_length (required), attention.head_count_kv (default: head_count),
/// attention.key_length and value_length (default: embedding_length / head_count; equal),
/// rope.dimension_count (= the head's width but for phi3), rope.freq_base (10000), rope.scaling.* as
/// convert_hf_to_gguf.py writes a "linear" or "yarn" rope_type (type, factor; yarn's original_context_length,
/// yarn_attn_factor, yarn_beta_fast, yarn_beta_slow; a factor with no type is linear, as llama.cpp reads it),
/// attention.layer_norm_rms_epsilon (required), vocab_size (default: the rows of token_embd.weight); biases
/// where blk.0's tensors have them; tied without "output.weight"; bos / eos from tokenizer.ggml.bos_token_id
/// / eos_token_id; torch_dtype from general.file_type (0 float32, 1 float16, 32 bfloat16; other types:
/// empty); and "gpt2" (GPT2LMHeadModel's row: block_count, embedding_length, attention.head_count,
/// context_length, feed_forward_length (n_inner), attention.layer_norm_epsilon, all required; gelu_new, which
/// GPT-2 files do not state, tied). Checked as load_config checks a config.json. Throws saccade::Error naming
/// "hf::gguf_config", the file and the key for: an architecture not read (listing those that are), a missing
/// or mistyped key, any other "{arch}." key (a sliding window, experts, YaRN's yarn_ext_factor: each changes
/// the computation), a rope scaling type other than none, linear and yarn (longrope), a rope scaling beside
/// rope_freqs.weight, and a "rope_freqs.weight" tensor in a file of another row than "llama" or whose factors
/// are not Llama 3's. A "llama" file's rope_freqs.weight (Llama 3.1 / 3.2's rope scaling as the converter
/// writes it, one factor a frequency, and no key) is read back into rope_type "llama3": factor the largest,
/// low_freq_factor 1 and high_freq_factor 4 (every Llama 3.x model's), the original context the power of two
/// that gives the factors (8192 tried first), checked factor by factor.
Config gguf_config(const GgufFile& file);

/// The tensors of a GGUF file under the Hugging Face names of `config`'s row (llama_name_table's names, or
/// GPT-2's "transformer.h.N.attn.c_attn.weight", ...), with their Hugging Face shapes and row order; a tensor
/// the table does not know keeps its GGUF name (so a strict load refuses it by that name). A sparse layer's
/// stacked experts (blk.N.ffn_{gate,up,down}_exps.weight, (E, out, in)) show as one tensor an expert
/// (Mixtral's "block_sparse_moe.experts.e.w1.weight", the others' "mlp.experts.e.gate_proj.weight"), the
/// router as "block_sparse_moe.gate" / "mlp.gate", Qwen-MoE's shared expert as "mlp.shared_expert.*". Reads
/// dequantize (Q8_0) and convert, as GgufFile::read_into. Throws saccade::Error naming "hf::GgufWeights" and
/// the file for two tensors under one name, q or k rows that are not whole heads, and a stack of experts that
/// is not rank 3 or is of a type not read.
class GgufWeights : public TensorSource {
 public:
  /// `file` must outlive this object.
  GgufWeights(const GgufFile& file, const Config& config);
  GgufWeights(const GgufWeights&) = delete;  // its entries point into its own slices_
  GgufWeights& operator=(const GgufWeights&) = delete;
  const std::vector<std::string>& names() const override { return names_; }
  bool contains(const std::string& name) const override;
  Shape shape(const std::string& name) const override;
  std::string unreadable(const std::string& name) const override;
  Tensor read(const std::string& name) const override;
  void read_into(const std::string& name, const Tensor& dst) const override;
  const std::string& dir() const override { return file_.path(); }
  /// The Q8_0 blocks of `name` in the Hugging Face row order, as they are in the file; undefined when the
  /// tensor is not Q8_0, is transposed here (GPT-2's Conv1D weights) or holds its rows in another order here
  /// (GPT-NeoX's and Falcon's query_key_value: q8_0_parts). Throws as shape() for a name the file lacks.
  Q8_0Matrix q8_0(const std::string& name) const;
  /// A fused tensor's Q8_0 blocks (Phi-3's qkv_proj and gate_up_proj, GPT-NeoX's and Falcon's
  /// query_key_value) cut into the matrices it fuses, as the file holds them, one after another: q, k and v
  /// (gate and up) of rows[i] rows each; empty when the tensor is not Q8_0. Throws saccade::Error naming
  /// "hf::GgufWeights::q8_0_parts" when the rows do not add up to the tensor's, and as shape() for a name the
  /// file lacks.
  std::vector<Q8_0Matrix> q8_0_parts(const std::string& name, const std::vector<int64_t>& rows) const;

 private:
  struct Entry {
    std::string name;
    const GgufTensorInfo* info = nullptr;
    int64_t permuted_heads = 0;  // > 0: rows interleaved per head by LlamaModel.permute
    bool transposed = false;     // GPT-2's Conv1D weights: (out, in) in the file, (in, out) here
    bool minus_one = false;      // Gemma's norms: 1 + w in the file
    // > 0: GPT-NeoX's and Falcon's attn_qkv, q (qkv_heads heads), k and v (qkv_kv_heads) blocks in the file,
    // key/value group by group here
    int64_t qkv_heads = 0, qkv_kv_heads = 0;
  };
  const Entry& entry(const std::string& name) const;
  const GgufFile& file_;
  std::deque<GgufTensorInfo> slices_;  // each expert of a stacked tensor, as a tensor of its own
  std::vector<Entry> entries_;         // file order
  std::vector<std::string> names_;
  std::vector<std::pair<std::string, size_t>> index_;  // sorted
};

/// The tokenizer of `file`'s vocabulary: tokenizer.ggml.model "gpt2" (byte-level BPE: tokens, merges, the
/// pre-tokenizer tokenizer.ggml.pre names: "gpt-2" / "default", "llama-bpe" (Llama 3), "qwen2", "smollm"),
/// tokens of type CONTROL (3) and USER_DEFINED (4) as added tokens (CONTROL special), the BOS and EOS of
/// tokenizer.ggml.bos_token_id / eos_token_id, put around a prompt as tokenizer.ggml.add_bos_token /
/// add_eos_token say; and "llama" (SentencePiece's BPE vocabulary: pieces and scores, no merges) as
/// transformers reads one from a GGUF file: merges made from the scores, byte fallback, "▁" for spaces and
/// one before the text (tokenizer.ggml.add_space_prefix, true by default), BOS added by default. Throws
/// saccade::Error naming "hf::gguf_tokenizer", the file and the key for: no tokenizer.ggml.model; another
/// model (listing those read); an unknown pre-tokenizer (listing those that are); a token that is not UTF-8
/// or is given twice; token, type, score or merge lists of the wrong type or lengths; and what
/// BPETokenizer's reader throws.
std::unique_ptr<Tokenizer> gguf_tokenizer(const GgufFile& file);

/// Loads the GGUF file `path` (gguf_config's Llama-family rows; GPT-2 files: examples/gpt's
/// load_gguf_gpt2) into a new float32 nn::LlamaForCausalLM in eval mode, as
/// load_llama loads a folder. With `keep_q8_0`, each Linear whose tensor is Q8_0 in the file (the tied
/// output's too; each Linear of a fused tensor, Phi-3's, GPT-NeoX's and Falcon's, its rows of it) multiplies
/// by those blocks as they are (Linear::weight_q8_0: inference only; the float32 weight holds their
/// dequantized values); without, the model holds the dequantized weights only (to train). Throws what
/// GgufFile, gguf_config and load_weights throw; nothing is half-loaded.
std::shared_ptr<nn::LlamaForCausalLM> load_llama_gguf(const std::string& path, bool keep_q8_0 = true,
                                                      bool strict = true, LoadReport* report = nullptr);
/// As above, from the file already open (as gguf_config and gguf_tokenizer read it).
std::shared_ptr<nn::LlamaForCausalLM> load_llama_gguf(const GgufFile& file, bool keep_q8_0 = true,
                                                      bool strict = true, LoadReport* report = nullptr);
/// As above, with `config` the file's gguf_config already read, so that a caller that needs it too reads the
/// metadata once (as load_llama's overload).
std::shared_ptr<nn::LlamaForCausalLM> load_llama_gguf(const GgufFile& file, const Config& config,
                                                      bool keep_q8_0 = true, bool strict = true,
                                                      LoadReport* report = nullptr);

/// True when `path` names a GGUF file (ends in ".gguf"), which the loaders take in place of a folder.
bool is_gguf_path(const std::string& path);

}  // namespace saccade::hf
