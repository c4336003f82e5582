#pragma once
// GPT-2 checkpoints in the Hugging Face layout (transformers' GPT2LMHeadModel, as save_pretrained writes
// them and as the published "gpt2" files hold them) <-> this example's GPT: one name table, both directions.
// The other rows' checkpoints (Llama, Qwen, Gemma, Phi-3, GPT-NeoX, Mixtral, ...) go into a GPT of their
// model_type the same way (llama_gpt_name_table), so that `gpt train --init-from-hf` fine-tunes every family.
//
//   transformer.wte.weight (V, d)                 wte.weight
//   transformer.wpe.weight (C, d)                 wpe.weight
//   transformer.h.N.ln_1.{weight,bias}            h.N.ln_1.{weight,bias}
//   transformer.h.N.attn.c_attn.weight (d, 3d)    h.N.attn.W_q / W_k / W_v .weight, each (d, d): split,
//   transposed transformer.h.N.attn.c_attn.bias (3d)         h.N.attn.W_q / W_k / W_v .bias: split
//   transformer.h.N.attn.c_proj.weight (d, d)     h.N.attn.W_o.weight, transposed   (GPT-2's Conv1D is (in,
//   out)) transformer.h.N.ln_2, mlp.c_fc, mlp.c_proj    h.N.ln_2, mlp.c_fc, mlp.c_proj (weights transposed)
//   transformer.ln_f.{weight,bias}                ln_f.{weight,bias}
//   lm_head.weight                                tied to wte.weight: not stored by us, ignored when present
//
// The published files name the tensors without "transformer." (they were saved from GPT2Model) and carry the
// causal-mask buffers h.N.attn.bias / h.N.attn.masked_bias: both are accepted.
#include <memory>
#include <string>
#include <vector>

#include "examples/gpt/model.h"
#include "hf/checkpoint.h"
#include "hf/config.h"
#include "hf/peft.h"

namespace saccade::examples {

/// GPT-2's name table for a GPT of `n_layer` blocks, the checkpoint names prefixed with `prefix`
/// ("transformer." as transformers writes them, "" as the published files have them).
std::vector<hf::NameRule> gpt2_name_table(int64_t n_layer, const std::string& prefix = "transformer.");

/// How PEFT's files name this GPT's Linears for a GPT-2 of `n_layer` blocks: the units
/// transformer.h.N.attn.c_attn (h.N.attn.W_q, W_k, W_v: one lora_A, lora_B's rows q, k, v), attn.c_proj
/// (h.N.attn.W_o), mlp.c_fc and mlp.c_proj, and fan_in_fan_out (GPT-2's Conv1D stores (in, out)), so that
/// an adapter PEFT trained on transformers' GPT2LMHeadModel loads here and one trained here loads there
/// (hf::load_adapter / save_adapter; PEFT's default target for GPT-2 is c_attn).
hf::AdapterLayout gpt2_adapter_layout(int64_t n_layer);

/// The GPTConfig of a GPT-2 config.json: sizes, context = n_positions, dropout 0, activation "gelu_new"
/// (or "gelu"), tokenizer "hf". Throws saccade::Error naming "hf_gpt2_config" for a config that is not
/// GPT-2's or that this GPT cannot hold: untied embeddings, an MLP width other than 4 d, a layer_norm_epsilon
/// other than 1e-5, a relu activation.
GPTConfig hf_gpt2_config(const hf::Config& config);

/// The GPT-2 config.json fields of `config` (transformers' GPT2Config; bos and eos `eos_id` when >= 0).
hf::Config gpt2_hf_config(const GPTConfig& config, int64_t eos_id = -1);

/// Loads the GPT-2 checkpoint folder `dir` (config.json, model.safetensors or shards; float32, bfloat16 or
/// float16 on disk) into a new float32 GPT. Strict: a tensor the GPT has no place for is an error unless
/// `strict` is false, when it is listed in `report` (if given). Throws what hf::load_config, hf::Weights,
/// hf_gpt2_config and hf::load_weights throw (naming the file and the tensor); nothing is half-loaded.
std::shared_ptr<GPT> load_hf_gpt2(const std::string& dir, bool strict = true,
                                  hf::LoadReport* report = nullptr);
/// As above, with `config` the folder's config.json already read (hf::load_config), so that a caller that
/// needs it too reads the file once.
std::shared_ptr<GPT> load_hf_gpt2(const std::string& dir, const hf::Config& config, bool strict = true,
                                  hf::LoadReport* report = nullptr);
/// As above, from the tensors of `weights` under GPT-2's Hugging Face names: a folder's (hf::Weights) or a
/// GGUF file's (hf::GgufWeights of a "gpt2" file, with `config` its hf::gguf_config).
std::shared_ptr<GPT> load_hf_gpt2(const hf::TensorSource& weights, const hf::Config& config,
                                  bool strict = true, hf::LoadReport* report = nullptr);

/// Writes `model` to `dir` in the Hugging Face GPT-2 layout (config.json + model.safetensors in `dtype`),
/// which transformers' GPT2LMHeadModel.from_pretrained loads. Throws what hf::save_pretrained throws.
void save_hf_gpt2(const GPT& model, const std::string& dir, DType dtype = DType::Float32,
                  int64_t eos_id = -1);

/// The name table of a GPT of an arch but gpt2: hf::llama_name_table of its blocks' config under the GPT's
/// names (model.embed_tokens <-> wte, model.layers.N.<x> <-> h.N.<x>, model.norm <-> ln_f, lm_head unless
/// tied): the row's names on disk, Phi-3's, GPT-NeoX's and Falcon's fused projections and a MoE's experts
/// split as for nn::LlamaForCausalLM.
std::vector<hf::NameRule> llama_gpt_name_table(const GPT& model);

/// The GPTConfig of a Llama-architecture config.json (every row but gpt2): arch its model_type, hf_config the
/// config itself (hf::config_json: every switch, rope scaling included), the fields from it, context its
/// LlamaConfig::context(), dropout 0, tokenizer "hf". Throws saccade::Error naming "hf_llama_gpt_config"
/// for a GPT-2 config.
GPTConfig hf_llama_gpt_config(const hf::Config& config);

/// GPTConfig::llama() of an arch but gpt2 and llama, or of one with an hf_config: hf_config read as
/// hf::llama_config does; with none, the row's config class's defaults (a MoE row's: 8 experts of the
/// intermediate width, top-2) with the GPT's sizes, each under the row's key (Falcon: num_kv_heads with
/// new_decoder_architecture; Gemma 2/3: query_pre_attn_scalar the head size), no pad token, no sliding
/// window but `window` (Gemma 2/3's local layers keep the row's). Throws
/// saccade::Error naming "GPTConfig" (or hf::load_config) for a row that reads another size than the field
/// (GPT-NeoX's key/value heads), a window that does not cover every layer, or an hf_config of another
/// model_type than arch, or whose sizes are not the fields' (a context above its own).
nn::LlamaConfig hf_row_llama_config(const GPTConfig& config);

/// The config.json text of hf_row_llama_config(config) (hf::config_json of its row): checkpoint metadata
/// "hf_config".
std::string hf_row_config_json(const GPTConfig& config);

/// Loads a checkpoint folder of any row into a float32 GPT of the matching arch (load_hf_gpt2 for GPT-2;
/// hf_llama_gpt_config and llama_gpt_name_table for every other row), as load_hf_gpt2 does.
std::shared_ptr<GPT> load_hf_gpt(const std::string& dir, bool strict = true,
                                 hf::LoadReport* report = nullptr);
/// As above, with `config` the folder's config.json already read (as load_hf_gpt2's overload).
std::shared_ptr<GPT> load_hf_gpt(const std::string& dir, const hf::Config& config, bool strict = true,
                                 hf::LoadReport* report = nullptr);

/// Writes `model` in the Hugging Face layout of its arch (as save_hf_gpt2 for gpt2; for another arch the
/// config.json of its row, hf::llama_hf_config's: a llama with a window is MistralForCausalLM's, and the
/// names of llama_gpt_name_table). The config's bos_token_id and
/// eos_token_id: those of `source` (the config.json of the folder the model was initialised from, as
/// `gpt train --init-from-hf` reads it) where it has them; else the tokenizer's, `eos_id` and `bos_id` when
/// >= 0 (GPT-2: eos_id for both, as GPT-2's own config); else null. Throws what hf::save_pretrained throws.
void save_hf_gpt(const GPT& model, const std::string& dir, DType dtype = DType::Float32, int64_t eos_id = -1,
                 const hf::Config* source = nullptr, int64_t bos_id = -1);

/// Writes `path`, a tokenizer.json (Hugging Face tokenizers' format) that encodes every byte as its own value
/// (this example's byte tokenizer): a byte-level BPE of the 256 byte characters (GPT-2's bytes_to_unicode)
/// and no merges, a ByteLevel pre-tokenizer without the regex and the ByteLevel decoder; so that a model
/// trained on bytes and saved with save_hf_gpt2 samples in transformers. Atomic (a .tmp file renamed). Throws
/// saccade::Error naming "write_byte_tokenizer_json" and the file for an I/O failure.
void write_byte_tokenizer_json(const std::string& path);

}  // namespace saccade::examples
