#pragma once
// config.json of a model folder in the Hugging Face layout (transformers' PretrainedConfig, written by
// save_pretrained): the two architectures saccade runs, GPT-2 (GPT2LMHeadModel, Radford et al. 2019) and the
// Llama family (LlamaForCausalLM: Llama, TinyLlama, SmolLM, OLMo-style files; MistralForCausalLM, the same
// blocks with a sliding window, Jiang et al. 2023; Qwen2ForCausalLM, with biases on q, k and v;
// Qwen3ForCausalLM, with a per-head RMSNorm on queries and keys), read into one struct with transformers'
// field names. Each model_type is one row of a table in config.cpp (its architectures names and its reader);
// a key means what it means to transformers for the file's model_type. GPT-2's own spellings (n_embd,
// n_layer, n_head, n_positions, n_inner, layer_norm_epsilon, activation_function) land in the common fields.
#include <cstdint>
#include <string>
#include <vector>

#include "ops/rotary.h"

namespace saccade::hf {

/// The architecture a config.json describes.
enum class Architecture { GPT2, Llama };

/// The fields of a config.json that shape a model, with transformers' names. Defaults are transformers'
/// where a file may leave the field out (GPT2Config's and LlamaConfig's), and fields that the architecture
/// needs and has no default for must be present (load_config refuses the file otherwise).
struct Config {
  Architecture architecture = Architecture::GPT2;
  std::string model_type;  ///< a row of supported_model_types(): "gpt2", "llama", "mistral", "qwen2", "qwen3"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;              ///< GPT-2: n_embd
  int64_t num_hidden_layers = 0;        ///< GPT-2: n_layer
  int64_t num_attention_heads = 0;      ///< GPT-2: n_head
  int64_t num_key_value_heads = 0;      ///< H_kv (Llama; grouped-query when < heads); GPT-2: = heads
  int64_t head_dim = 0;                 ///< Llama's head_dim, else hidden_size / num_attention_heads
  int64_t intermediate_size = 0;        ///< the MLP's width; GPT-2: n_inner, or 4 hidden_size when null
  int64_t max_position_embeddings = 0;  ///< the context; GPT-2: n_positions
  double norm_eps = 1e-5;               ///< Llama: rms_norm_eps (1e-6); GPT-2: layer_norm_epsilon (1e-5)
  double rope_theta = 10000.0;          ///< Llama: rope_theta, or rope_parameters / rope_scaling's
  /// Llama family: rope_parameters / rope_scaling's rope_type ("default", "linear", "llama3") and its keys
  ops::RopeScaling rope_scaling;
  bool tie_word_embeddings = true;  ///< GPT-2: true, Llama: false, unless the file says
  std::string hidden_act;           ///< GPT-2: activation_function ("gelu_new"), Llama: "silu"
  /// "llama" (both) and "qwen3" (attention_bias) only (GPT-2 has biases everywhere, Mistral none): biases on
  /// q, k, v and o_proj, on the MLP
  bool attention_bias = false, mlp_bias = false;
  /// Biases on the q, k and v projections only, not on o_proj ("qwen2": always; no config key sets it)
  bool qkv_bias = false;
  /// RMSNorm on each head's queries and keys before the rotation ("qwen3": always, q_norm and k_norm; no
  /// config key sets it)
  bool qk_norm = false;
  /// "mistral" only: "sliding_window" (absent: MistralConfig's 4096; null: 0, none). A "llama" file's
  /// sliding_window is ignored (transformers' LlamaForCausalLM never reads it): 0.
  int64_t sliding_window = 0;
  std::vector<int64_t> bos_token_id, eos_token_id;  ///< empty when null or absent (a list: several eos)
  std::string torch_dtype;  ///< "float32", "bfloat16", "float16" or "" (the dtype on disk)

  /// "gpt2: 12 layers, 12 heads, hidden 768, context 1024, vocab 50257"
  std::string describe() const;
};

/// The model_types load_config reads, one row each, in the table's order.
std::vector<std::string> supported_model_types();

/// Reads and checks `path` (a config.json). Accepts "model_type" "gpt2" (architectures GPT2LMHeadModel or
/// GPT2Model, or none), "llama" (LlamaForCausalLM or LlamaModel, or none), "mistral" (MistralForCausalLM
/// or MistralModel, or none: the Llama architecture with MistralConfig's defaults, num_key_value_heads 8 and
/// sliding_window 4096 when absent) and "qwen2" (Qwen2ForCausalLM or Qwen2Model, or none: the Llama
/// architecture with biases on q, k and v; a file where some layer uses a sliding window, by layer_types
/// or by use_sliding_window with max_window_layers below num_hidden_layers, is refused) and "qwen3"
/// (Qwen3ForCausalLM or Qwen3Model, or none: the Llama architecture with qk_norm, Qwen3Config's defaults
/// head_dim 128 and num_key_value_heads 32 when absent, biases by attention_bias, sliding layers refused as
/// Qwen2's); rotary settings either as a top-level "rope_theta" (as most published files have it) or inside
/// "rope_parameters" / "rope_scaling" (newer transformers; "rope_type", else the older "type"), where the
/// rope types "default", "linear" and "llama3" are supported. Keys the model_type's transformers model does
/// not read ("llama": sliding_window; "mistral", "qwen2": attention_bias, mlp_bias; "qwen3": mlp_bias) are
/// ignored with a warning on stderr naming the file and the key. Throws saccade::Error naming
/// "hf::load_config", the file and the key for: a file that cannot be read or is not a JSON object, an
/// unknown model_type or architectures entry, a missing field the architecture needs, a value of the wrong
/// type or out of range (sizes < 1, heads not dividing the width, key/value heads not dividing the heads, a
/// GPT-2 activation other than gelu_new / gelu / relu, a Llama hidden_act other than silu, an odd head_dim),
/// and a rope type other than those three.
Config load_config(const std::string& path);

/// Parses config.json text (as load_config, `path` only names the file in errors).
Config parse_config(const std::string& text, const std::string& path = "config.json");

/// The row (model_type) whose transformers model runs the layout of a Llama-architecture `config`: "qwen3"
/// with qk_norm; "qwen2" with biases on q, k and v only; "mistral" with a sliding window (or model_type
/// "mistral"), the one transformers runs with a window; else "llama". config_json writes this row, and
/// llama_hf_config names its configs by it.
std::string llama_family(const Config& config);

/// The config.json that transformers writes for `config` (its save_pretrained fields; GPT-2's own spellings
/// for GPT-2), as JSON text; a Llama-architecture config under the row that holds its layout (llama_family)
/// with that row's first architectures name (Qwen3ForCausalLM, Qwen2ForCausalLM, MistralForCausalLM,
/// LlamaForCausalLM). For each c that parse_config returns, parse_config(config_json(c)) == c in every field
/// above. Throws saccade::Error naming "hf::config_json" for a sliding window with
/// attention or MLP biases, q/k/v-only biases with a window or MLP biases, or qk_norm with a window, MLP
/// biases or q/k/v-only biases (no transformers model has both).
std::string config_json(const Config& config);

}  // namespace saccade::hf
