#pragma once
// config.json of a model folder in the Hugging Face layout (transformers' PretrainedConfig, written by
// save_pretrained): the two architectures saccade runs, GPT-2 (GPT2LMHeadModel, Radford et al. 2019) and the
// Llama family (LlamaForCausalLM: Llama, TinyLlama, SmolLM, OLMo-style files; MistralForCausalLM, the same
// blocks with a sliding window, Jiang et al. 2023; Qwen2ForCausalLM, with biases on q, k and v;
// Qwen3ForCausalLM, with a per-head RMSNorm on queries and keys; GemmaForCausalLM, with (1 + w) norms, scaled
// embeddings and GeGLU; GraniteForCausalLM, with four multipliers), read into one struct with transformers'
// field names. Each model_type is one row of a table in config.cpp (its architectures names and its reader);
// a key means what it means to transformers for the file's model_type. GPT-2's own spellings (n_embd,
// n_layer, n_head, n_positions, n_inner, layer_norm_epsilon, activation_function) land in the common fields.
#include <cstdint>
#include <optional>
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
  std::string model_type;  ///< a row of supported_model_types(): "gpt2", "llama", "mistral", "qwen2", ...
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
  /// Llama family: rope_parameters / rope_scaling's rope_type ("default", "linear", "llama3", "yarn",
  /// "longrope") and its keys
  ops::RopeScaling rope_scaling;
  bool tie_word_embeddings = true;  ///< GPT-2: true, Llama: false, unless the file says
  std::string hidden_act;  ///< GPT-2: activation_function ("gelu_new"); Llama family: the MLP gate's ("silu")
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
  /// "gemma" only (always; no config key sets it): RMSNorm weights stored as offsets from one, x̂ ⊙ (1 + w)
  bool norm_unit_offset = false;
  /// The token embeddings' multiplier: "granite": embedding_multiplier (GraniteConfig's default 1); "gemma":
  /// √hidden_size (no key; GemmaModel's normalizer, rounded to the model's dtype); else 1
  double embedding_multiplier = 1.0;
  /// "granite" only: residual_multiplier, attention_multiplier (the scores' factor; GraniteConfig's default
  /// 1.0) and logits_scaling (the logits' divisor), 1 by default; other rows: 1, 0 (1/√head_dim) and 1
  double residual_multiplier = 1.0, attention_multiplier = 0.0, logits_scaling = 1.0;
  /// Llama family: the token whose embedding row gets no gradient (transformers passes pad_token_id to
  /// nn.Embedding's padding_idx); absent or null: none ("gemma": GemmaConfig's 0 when absent)
  std::optional<int64_t> pad_token_id;
  /// "smollm3" only: one flag a layer, 1 = rotary positions, 0 = none (NoPE; transformers' no_rope_layers,
  /// from no_rope_layer_interval when absent); other rows: empty (every layer rotates)
  std::vector<int64_t> no_rope_layers;
  /// "phi3", "gpt_neox" and "stablelm": the share of each head that rotates (rope_parameters'
  /// partial_rotary_factor, else the top-level key (GPT-NeoX's older rotary_pct), else 1, or 0.25 for
  /// "gpt_neox" and "stablelm"); other rows refuse a value other than 1 (their transformers models rotate
  /// whole heads)
  double partial_rotary_factor = 1.0;
  /// "olmo2" only (always; no config key sets them): RMSNorm over all heads' queries and keys after the
  /// projections (q_norm, k_norm), and norm_placement "post" (each sublayer's output normed before its
  /// residual add: post_attention_layernorm, post_feedforward_layernorm); other rows: false and "pre"
  bool qk_norm_full_width = false;
  std::string norm_placement = "pre";  ///< "olmo2": "post"; "gemma3_text": "sandwich" (four norms a block)
  /// "gpt_neox", "stablelm" and "falcon" (always; no key sets it): LayerNorm with a bias, eps layer_norm_eps
  /// (Falcon: layer_norm_epsilon), in place of RMSNorm ("layer_norm"); other rows "rms_norm"
  std::string norm_type = "rms_norm";
  /// Attention and MLP both read the block's input: "gpt_neox"'s and "stablelm"'s use_parallel_residual
  /// (GPTNeoXConfig's true, StableLmConfig's false), "falcon"'s parallel_attn or new_decoder_architecture
  bool parallel_residual = false;
  /// With parallel_residual, the norms a block reads its input through: 2 ("gpt_neox"; "falcon" with
  /// new_decoder_architecture's ln_attn and ln_mlp) or 1 ("falcon" 7B's input_layernorm, "stablelm"'s
  /// parallel layer)
  int64_t parallel_norms = 2;
  /// The MLP gated (SwiGLU / GeGLU, every row but "gpt_neox" and "falcon") or not (up, act, down)
  bool gated_mlp = true;
  /// Each layer's "full_attention" or "sliding_attention": "gemma2" / "gemma3_text" (layer_types, or every
  /// sliding_window_pattern-th layer full), "qwen2" / "qwen3" / "smollm3" where some layer slides (else
  /// empty: the window is 0); and "gemma3_text" only: the sliding layers' rotary base (rope_parameters'
  /// sliding_attention, or rope_local_base_freq; 10000); other rows: empty and 0
  std::vector<std::string> layer_types;
  double rope_local_base_freq = 0.0;
  /// "gemma2" only: attn_logit_softcapping (Gemma2Config's 50) and final_logit_softcapping (30); null: 0,
  /// none
  double attn_logit_softcapping = 0.0, final_logit_softcapping = 0.0;
  /// Sparse mixture-of-experts MLPs ("mixtral": num_local_experts; "qwen2_moe", "qwen3_moe", "olmoe":
  /// num_experts), each token through num_experts_per_tok of them; other rows: 0 (dense MLPs). The expert
  /// width is moe_intermediate_size ("qwen2_moe", "qwen3_moe"; 0: intermediate_size, as "mixtral" and
  /// "olmoe"); norm_topk_prob ("mixtral": always true); Qwen2-MoE's shared expert
  /// (shared_expert_intermediate_size); the Qwen-MoE rows' dense layers (decoder_sparse_step,
  /// mlp_only_layers); the load-balancing loss in training (output_router_logits, router_aux_loss_coef)
  int64_t num_experts = 0, num_experts_per_tok = 0, moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0, decoder_sparse_step = 1;
  bool norm_topk_prob = false;
  std::vector<int64_t> mlp_only_layers;
  bool output_router_logits = false;
  double router_aux_loss_coef = 0.0;
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
/// architecture with biases on q, k and v; with use_sliding_window and a sliding_window (4096 when absent),
/// the layers layer_types names, or those from max_window_layers on, slide) and "qwen3"
/// (Qwen3ForCausalLM or Qwen3Model, or none: the Llama architecture with qk_norm, Qwen3Config's defaults
/// head_dim 128 and num_key_value_heads 32 when absent, biases by attention_bias, sliding layers as
/// Qwen2's), "gemma" (GemmaForCausalLM or GemmaModel, or none: the Llama architecture with norm_unit_offset,
/// embedding_multiplier √hidden_size and hidden_act gelu_pytorch_tanh, a legacy "gelu" read as it;
/// GemmaConfig's defaults head_dim 256, num_key_value_heads 16, tie_word_embeddings true and pad_token_id 0
/// when absent; use_bidirectional_attention refused) and "granite" (GraniteForCausalLM or GraniteModel, or
/// none: the Llama architecture with GraniteConfig's four multipliers, 1.0 each by default) and "smollm3"
/// (SmolLM3ForCausalLM or SmolLM3Model, or none: the Llama architecture with NoPE layers by no_rope_layers or
/// no_rope_layer_interval; SmolLM3Config's defaults 4 key/value heads, tied, pad_token_id 128004; sliding
/// layers as Qwen2's, by default the NoPE ones) and "phi3" (Phi3ForCausalLM or Phi3Model, or none: the Llama
/// architecture with partial_rotary_factor and sliding_window; Phi3Config's defaults pad_token_id 32000 and
/// rms_norm_eps 1e-5); "olmo2" (Olmo2ForCausalLM or Olmo2Model, or none: the Llama architecture with
/// qk_norm_full_width and norm_placement "post"; Olmo2Config's rms_norm_eps 1e-5 and pad_token_id 1 when
/// absent) and "gemma3_text" (Gemma3ForCausalLM or Gemma3TextModel, or none: Gemma's switches with four norms
/// a block, per-head q and k norms, attention_multiplier query_pre_attn_scalar^-1/2, layer_types with the
/// sliding layers' own rotary base; Gemma3TextConfig's defaults; softcapping refused) and "gemma2"
/// (Gemma2ForCausalLM or Gemma2Model, or none: as gemma3_text without q and k norms or a local rotary base,
/// with attn_logit_softcapping and final_logit_softcapping; Gemma2Config's defaults, every other layer full);
/// the mixture-of-experts rows "mixtral" (MixtralForCausalLM or MixtralModel, or none: Mistral's blocks with
/// sparse MoE MLPs, num_local_experts, top-k weights renormalised; router_jitter_noise refused), "qwen2_moe"
/// (Qwen2MoeForCausalLM or Qwen2MoeModel, or none: Qwen2's blocks, qkv_bias, a gated shared expert, dense
/// layers by decoder_sparse_step and mlp_only_layers), "qwen3_moe" (Qwen3MoeForCausalLM or Qwen3MoeModel, or
/// none: Qwen3's blocks with sparse layers as Qwen2-MoE's, no shared expert) and "olmoe" (OlmoeForCausalLM or
/// OlmoeModel, or none: pre-norm blocks with OLMo 2's full-width q and k norms; clip_qkv refused),
/// "gpt_neox" (GPTNeoXForCausalLM or GPTNeoXModel, or none: LayerNorm blocks, parallel residual by
/// use_parallel_residual, q, k and v in one query_key_value on disk, biases by attention_bias, an ungated
/// MLP, partial rotation by rotary_pct / partial_rotary_factor, the base by rotary_emb_base / rope_theta) and
/// "stablelm" (StableLmForCausalLM or StableLmModel, or none: LayerNorm blocks, q/k/v biases by
/// use_qkv_bias, partial rotation, use_parallel_residual's one-norm parallel layer; qk_layernorm refused) and
/// "falcon" (FalconForCausalLM or FalconModel, or none: LayerNorm blocks, q, k and v in one query_key_value
/// grouped by key/value head, multi_query, num_kv_heads with new_decoder_architecture, parallel_attn with one
/// norm or num_ln_in_parallel_attn's two, biases by bias, ffn_hidden_size, activation; alibi refused), each
/// with its config class's defaults;
/// rotary settings either as a top-level "rope_theta" (as most published files have it) or inside
/// "rope_parameters" / "rope_scaling" (newer transformers; "rope_type", else the older "type"), where the
/// rope types "default", "linear", "llama3", "yarn" and "longrope" are supported (longrope's
/// original_max_position_embeddings at the top level wins, as transformers' standardize_rope_params; for
/// "phi3" Phi3Config's 4096 when absent). Keys the model_type's transformers
/// model does not read
/// ("llama": sliding_window; "mistral", "qwen2": attention_bias, mlp_bias; "qwen3": mlp_bias) are ignored
/// with a warning on stderr naming the file and the key. Throws saccade::Error naming "hf::load_config", the
/// file and the key for: a file that cannot be read or is not a JSON object, an unknown model_type or
/// architectures entry, a missing field the architecture needs, a value of the wrong type or out of range
/// (sizes < 1, heads not dividing the width, key/value heads not dividing the heads, a GPT-2 activation other
/// than gelu_new / gelu / relu, a Llama-family hidden_act other than silu, gelu_pytorch_tanh, gelu_new or
/// gelu, a pad_token_id not below vocab_size, an odd head_dim, a longrope factor that is not positive), and a
/// rope type other than those five.
Config load_config(const std::string& path);

/// Parses config.json text (as load_config, `path` only names the file in errors).
Config parse_config(const std::string& text, const std::string& path = "config.json");

/// The row (model_type) whose transformers model runs the layout of a Llama-architecture `config`: its own
/// model_type where that row's config can say every switch set (and has the switch the row always has);
/// else "qwen3" with qk_norm; "qwen2" with biases on q, k and v only; "gemma" with norm_unit_offset;
/// "granite" with multipliers other than a Llama's; "smollm3" with no_rope_layers; "phi3" with partial
/// rotation; "olmo2" with post-norms or full-width q/k norms; "gemma3_text" with sandwich norms and q/k
/// norms, "gemma2" without; "mistral" with a sliding window, the one transformers runs with a window; else
/// "llama". config_json writes this row, and llama_hf_config names its configs by it.
std::string llama_family(const Config& config);

/// The config.json that transformers writes for `config` (its save_pretrained fields; GPT-2's own spellings
/// for GPT-2), as JSON text; a Llama-architecture config under the row that holds its layout (llama_family)
/// with that row's first architectures name (Qwen3ForCausalLM, Qwen2ForCausalLM, MistralForCausalLM,
/// LlamaForCausalLM). For each c that parse_config returns, parse_config(config_json(c)) == c in every field
/// above. Throws saccade::Error naming "hf::config_json" and the switch for a switch the row's config cannot
/// say (a sliding window with attention or MLP biases, q/k/v-only biases with a window or MLP biases, qk_norm
/// with a window, MLP biases or q/k/v-only biases, Granite's multipliers with another row's switches, a Gemma
/// with exact GELU or an embedding multiplier other than √hidden_size: no transformers model has both).
std::string config_json(const Config& config);

}  // namespace saccade::hf
