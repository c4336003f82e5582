#pragma once
// GPT: a decoder-only Transformer language model with GPT-2's architecture (Radford et al. 2019,
// section 2.3): token and learned position embeddings, n_layer pre-LayerNorm blocks (nn::GPTBlock: causal
// multi-head self-attention and a GELU MLP), a final LayerNorm and an output layer tied to the token
// embedding.
//
// Tied weights: the output layer has no parameter of its own; it multiplies by wte.weight, so state_dict()
// (and every checkpoint) holds the matrix once, under "wte.weight" (the HF / safetensors convention:
// safetensors refuses two names sharing storage). Loading writes wte.weight, and the output layer reads it:
// the tie cannot break. In PyTorch, a GPT with lm_head.weight = wte.weight loads the file with strict=False
// (or by assigning lm_head.weight after load_state_dict), as transformers' GPT2LMHeadModel does.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/embedding.h"
#include "nn/gpt_block.h"
#include "nn/linear.h"
#include "nn/llama.h"
#include "nn/normalization.h"
#include "nn/serialization.h"
#include "ops/random.h"

namespace saccade::examples {

/// The sizes of a GPT.
struct GPTConfig {
  int64_t vocab_size = 256;  ///< tokens (256 for the byte tokenizer)
  int64_t context = 128;     ///< block size: the most positions the model sees at once
  int64_t n_layer = 4, n_head = 4, d_model = 128;
  double dropout = 0.1;            ///< on the embeddings, the attention weights and the residual branches
  std::string tokenizer = "byte";  ///< the tokenizer the model was trained with (make_tokenizer)
  /// The MLP's GELU: "gelu" (exact, the default) or "gelu_new" (the tanh approximation, GPT-2's own:
  /// a model loaded from a Hugging Face GPT-2 checkpoint keeps it). Metadata "activation", absent = "gelu".
  std::string activation = "gelu";
  /// The block: "gpt2" (GPT-2's: learned positions, LayerNorm, GELU MLP, biases, tied output), "llama"
  /// (the Llama family's: rotary positions, RMSNorm, SwiGLU, no biases, grouped-query attention with
  /// n_kv_head key/value heads; nn::LlamaBlock) or any other decoder row of the Hugging Face table
  /// (hf::supported_model_types(): "qwen3", "gemma3_text", "gpt_neox", "mixtral", ...): nn::LlamaBlock with
  /// that family's switches at its transformers config class's defaults, the sizes from the fields below
  /// (needs hf/). Metadata "arch", absent = "gpt2". The fields below are those of every arch but gpt2
  /// (metadata "n_kv_head", "rope_theta", "intermediate", "norm_eps", "tie", "window").
  std::string arch = "gpt2";
  int64_t n_kv_head = 0;        ///< key/value heads (0: n_head); divides n_head
  double rope_theta = 10000.0;  ///< the rotary base
  int64_t intermediate = 0;     ///< SwiGLU's hidden width (0: 8 d / 3 rounded up to a multiple of 16)
  double norm_eps = 1e-5;       ///< RMSNorm's epsilon
  bool tie = true;              ///< the output layer multiplies by wte.weight (false: lm_head of its own)
  int64_t window = 0;           ///< sliding-window attention: each position sees the last W (0: all)
  /// The decoder's config.json (transformers' fields), the whole truth of its blocks where it is not empty:
  /// what --init-from-hf read from a folder (every switch and rope scaling of its row), and in the metadata
  /// ("hf_config") of every checkpoint of an arch other than gpt2 and llama. Empty: the blocks follow the
  /// fields above.
  std::string hf_config;

  /// The nn::LlamaConfig of an arch other than gpt2: hf_config's (hf::llama_config), or for "llama" the
  /// fields' (head_dim d / n_head, max_position_embeddings = context), or the row `arch` at its defaults
  /// with the fields' sizes (hf_row_llama_config). Throws saccade::Error naming "GPTConfig" for gpt2, or an
  /// arch whose row cannot hold the fields.
  nn::LlamaConfig llama() const;
  /// n_kv_head, or n_head when 0.
  int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  /// intermediate, or its default when 0.
  int64_t ffn_hidden() const { return intermediate > 0 ? intermediate : (8 * d_model / 3 + 15) / 16 * 16; }
  /// Throws saccade::Error naming "GPTConfig" for sizes < 1, n_head not dividing d_model, dropout outside
  /// [0, 1), another activation or arch, n_kv_head not dividing n_head, an odd head size or a rope_theta
  /// <= 0 for llama, what llama() throws for another row, and a model whose router's load-balancing loss
  /// transformers trains (output_router_logits: train_gpt adds no auxiliary loss).
  void check() const;
  /// "gpt: 4 layers, 4 heads, d_model 128, context 128, vocab 256 (byte), dropout 0.1", with the llama
  /// fields for another arch, named by it ("qwen3: 4 layers, 4 heads (2 key/value), ...").
  std::string describe() const;
  /// The checkpoint metadata ("model": "gpt", "vocab_size", ...), and back. from_metadata throws
  /// saccade::Error naming "GPTConfig::from_metadata" for a checkpoint of another model (no "model": "gpt")
  /// or missing / malformed sizes.
  nn::Metadata to_metadata() const;
  static GPTConfig from_metadata(const nn::Metadata& metadata);
  /// The parameter elements of a GPT of this config (GPT(config).num_parameters()): for gpt2 V d + C d + 2 d
  /// (wte, wpe, ln_f) + n_layer (12 d² + 13 d) (per block: ln_1, ln_2 2 d each; W_q, W_k, W_v, W_o and
  /// biases 4 d² + 4 d; the MLP d x 4d and 4d x d with biases 8 d² + 5 d), for another arch
  /// nn::num_parameters(llama()); -1 when that passes 2^62. load_gpt compares it with what a file holds
  /// before building the model.
  int64_t num_parameters() const;
};

/// The GPT module. Children for arch "gpt2": wte Embedding(vocab, d), wpe Embedding(context, d), drop
/// (Dropout), h.0 ... h.<n_layer - 1> (nn::GPTBlock), ln_f LayerNorm(d): nanoGPT's names without its
/// "transformer." prefix. For every other arch, nn::LlamaForCausalLM's model under these names: wte
/// (model.embed_tokens, times embedding_multiplier: nn::scale_embeddings), drop (on the embeddings only),
/// h.N (model.layers.N, nn::LlamaBlock, in `layers`), ln_f (model.norm: nn::hidden_norm, in `norm_f`) and,
/// unless tied, lm_head Linear(d, vocab, no bias); the logits through nn::scale_logits.
class GPT : public nn::Module {
 public:
  /// The decoding state of one batch of sequences: one self-attention KV cache per block.
  using State = nn::KVCaches;

  /// Initialised as GPT-2 (embeddings and Linear weights N(0, 0.02²), residual projections
  /// N(0, (0.02/√(2 n_layer))²), biases 0, LayerNorms 1 and 0) from Generator(seed), which then draws the
  /// dropout masks. Throws what config.check() throws.
  GPT(const GPTConfig& config, uint64_t seed = 0);

  /// Logits of the next token at every position: idx int64 (B, T), 1 <= T <= context, ids in
  /// [0, vocab_size) -> (B, T, vocab_size). Throws saccade::Error naming "GPT" and the shape for another
  /// rank, T outside [1, context] or an id out of range.
  Variable forward(const Tensor& idx);
  /// Packed documents (transformers' packing, FlashAttention-2's variable-length batches): idx int64 (B, T)
  /// holding several documents a row, document_ids int64 (B, T) naming each token's document (non-decreasing
  /// along T, each document one run) -> logits (B, T, vocab_size), each document's rows equal to its own
  /// forward's: its positions (learned, or rotary) restart at 0 and it attends inside itself only, no (T, T)
  /// mask formed. Throws saccade::Error naming "GPT" as forward does, and for document_ids of another shape
  /// or that nn::PackedDocuments::of refuses.
  Variable forward(const Tensor& idx, const Tensor& document_ids);
  /// Incremental: idx (B, Tn) at positions [state.length(), state.length() + Tn) -> logits (B, Tn, vocab),
  /// equal (up to float rounding) to those rows of forward over the whole prefix; appends to the caches.
  /// With logits_to_keep > 0, the logits of the last logits_to_keep positions only (as
  /// LlamaForCausalLM::step). Throws saccade::Error naming "GPT::step" when the positions would pass the
  /// context, or for a negative logits_to_keep.
  Variable step(const Tensor& idx, State& state, int64_t logits_to_keep = 0);
  State init_state() const { return State{std::vector<nn::KVCache>(h.size() + layers.size())}; }

  /// Whether the attention layers keep their weights (see nn::MultiHeadAttention::need_weights); gpt2 only
  /// (llama's attention always runs the fused kernel).
  void set_need_weights(std::optional<bool> need);
  /// Each block's last self-attention weights (B, H, T, T) (throws when they were not kept, or for llama).
  std::vector<Tensor> attention_weights() const;

  const GPTConfig& config() const { return config_; }
  /// The blocks' configuration (config().llama()); a default one for gpt2.
  const nn::LlamaConfig& llama_config() const { return llama_; }
  /// The generator of the init and of the dropout masks (its offset goes into checkpoints, for exact
  /// resumes).
  Generator& generator() { return *gen_; }
  /// The parameters AdamW decays (the Linear weights of the blocks) and the rest (biases, LayerNorms,
  /// embeddings: GPT-2 / nanoGPT's split, with the embeddings undecayed).
  std::vector<Variable> decayed_parameters() const;
  std::vector<Variable> undecayed_parameters() const;

  /// nn::quantize_q8_0 on every Linear and, when the output layer is tied to wte, a Q8_0 copy of
  /// wte.weight (output_q8_0) that the output layer multiplies by instead (llama.cpp quantizes a tied token
  /// embedding the same way); the embedding lookup keeps wte.weight. Returns the matrices quantized.
  /// Inference only: forward and step then throw saccade::Error naming "GPT" under grad mode.
  int64_t quantize_q8_0();
  Q8_0Matrix output_q8_0;  ///< undefined until quantize_q8_0() (and for an untied lm_head, a Linear)

  std::shared_ptr<nn::Embedding> wte, wpe;  ///< wpe: gpt2 only
  std::shared_ptr<nn::Dropout> drop;
  std::vector<std::shared_ptr<nn::GPTBlock>> h;         ///< gpt2's blocks (empty for llama)
  std::vector<std::shared_ptr<nn::LlamaBlock>> layers;  ///< llama's blocks (empty for gpt2)
  std::shared_ptr<nn::LayerNorm> ln_f;                  ///< gpt2's final norm
  std::shared_ptr<nn::UnaryModule> norm_f;  ///< the final norm of an arch but gpt2 (child name "ln_f")
  std::shared_ptr<nn::Linear> lm_head;      ///< llama untied only

 private:
  Variable head(const Variable& x);  // ln_f, then the tied output layer
  Variable embed(const Tensor& idx, int64_t start);
  // embed's checks: idx int64 (B, T) at positions [start, start + T) within the context
  void check_ids(const Tensor& idx, int64_t start) const;
  GPTConfig config_;
  nn::LlamaConfig llama_;
  std::unique_ptr<Generator> gen_;
};

/// The same model with a shorter context (nanoGPT's crop_block_size): a copy of `model` whose config has
/// `context`, sharing no storage with it; gpt2's position table keeps its first `context` rows, llama (rotary
/// positions) has no table to cut. For fine-tuning a pretrained model on shorter windows (GPT-2's 1024 to
/// 256, say) with a smaller position table. Throws saccade::Error naming "crop_context" unless
/// 1 <= context <= model.config().context.
std::shared_ptr<GPT> crop_context(GPT& model, int64_t context);

}  // namespace saccade::examples
