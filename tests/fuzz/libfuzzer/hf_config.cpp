// libFuzzer target: hf::parse_config (a config.json of a model folder in the Hugging Face layout).
// Input: the config.json text.
// Properties: a rejected file raises saccade::Error naming it; an accepted one describes a model saccade can
// build (sizes >= 1, heads dividing the width or an explicit even head_dim, key/value heads dividing the
// heads, a supported activation, a positive finite epsilon, a finite rotary base above 1), and config_json
// writes it back as a file that parse_config reads into the same Config, whose config_json is the same text;
// a Llama-architecture one's nn::num_parameters is positive (or -1 for sizes past 2^62), and where it is at
// most 2^20 the model builds (no constructor refuses what the reader took) with that many parameters and
// runs a forward to logits of its vocabulary.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "hf/config.h"
#include "hf/llama.h"
#include "nn/llama.h"
#include "ops/creation.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"

using namespace saccade;

namespace {

bool same_config(const hf::Config& a, const hf::Config& b) {
  return a.architecture == b.architecture && a.model_type == b.model_type && a.vocab_size == b.vocab_size &&
         a.hidden_size == b.hidden_size && a.num_hidden_layers == b.num_hidden_layers &&
         a.num_attention_heads == b.num_attention_heads && a.num_key_value_heads == b.num_key_value_heads &&
         a.head_dim == b.head_dim && a.intermediate_size == b.intermediate_size &&
         a.max_position_embeddings == b.max_position_embeddings && a.norm_eps == b.norm_eps &&
         a.rope_theta == b.rope_theta && a.tie_word_embeddings == b.tie_word_embeddings &&
         a.hidden_act == b.hidden_act && a.attention_bias == b.attention_bias && a.mlp_bias == b.mlp_bias &&
         a.qkv_bias == b.qkv_bias && a.qk_norm == b.qk_norm && a.rope_scaling == b.rope_scaling &&
         a.sliding_window == b.sliding_window && a.bos_token_id == b.bos_token_id &&
         a.eos_token_id == b.eos_token_id && a.torch_dtype == b.torch_dtype &&
         a.norm_unit_offset == b.norm_unit_offset && a.embedding_multiplier == b.embedding_multiplier &&
         a.residual_multiplier == b.residual_multiplier && a.attention_multiplier == b.attention_multiplier &&
         a.logits_scaling == b.logits_scaling && a.pad_token_id == b.pad_token_id &&
         a.no_rope_layers == b.no_rope_layers && a.partial_rotary_factor == b.partial_rotary_factor &&
         a.qk_norm_full_width == b.qk_norm_full_width && a.norm_placement == b.norm_placement &&
         a.norm_type == b.norm_type && a.parallel_residual == b.parallel_residual &&
         a.gated_mlp == b.gated_mlp && a.parallel_norms == b.parallel_norms &&
         a.layer_types == b.layer_types && a.rope_local_base_freq == b.rope_local_base_freq &&
         a.attn_logit_softcapping == b.attn_logit_softcapping &&
         a.final_logit_softcapping == b.final_logit_softcapping && a.num_experts == b.num_experts &&
         a.num_experts_per_tok == b.num_experts_per_tok &&
         a.moe_intermediate_size == b.moe_intermediate_size &&
         a.shared_expert_intermediate_size == b.shared_expert_intermediate_size &&
         a.decoder_sparse_step == b.decoder_sparse_step && a.norm_topk_prob == b.norm_topk_prob &&
         a.mlp_only_layers == b.mlp_only_layers && a.output_router_logits == b.output_router_logits &&
         a.router_aux_loss_coef == b.router_aux_loss_coef;
}

void check_accepted(const hf::Config& c) {
  const bool gpt2 = c.architecture == hf::Architecture::GPT2;
  const std::vector<std::string> rows = hf::supported_model_types();
  FUZZ_CHECK(
      gpt2 == (c.model_type == "gpt2") && std::find(rows.begin(), rows.end(), c.model_type) != rows.end(),
      "model_type '{}'", c.model_type);
  // sparse MoE layers exactly in the MoE rows, k of E experts a token, a shared expert only in Qwen2-MoE
  const bool moe = c.model_type == "mixtral" || c.model_type == "qwen2_moe" || c.model_type == "qwen3_moe" ||
                   c.model_type == "olmoe";
  FUZZ_CHECK((c.num_experts > 0) == moe &&
                 (!moe || (c.num_experts_per_tok >= 1 && c.num_experts_per_tok <= c.num_experts)) &&
                 (c.shared_expert_intermediate_size > 0) == (c.model_type == "qwen2_moe") &&
                 c.router_aux_loss_coef >= 0,
             "num_experts {}, num_experts_per_tok {}, shared {} of a '{}' config", c.num_experts,
             c.num_experts_per_tok, c.shared_expert_intermediate_size, c.model_type);
  // q/k/v-only biases in a "qwen2" file (transformers' Qwen2 hard-codes them), a "qwen2_moe" one (its
  // qkv_bias) and a "stablelm" one (use_qkv_bias)
  FUZZ_CHECK(
      c.qkv_bias == (c.model_type == "qwen2") || c.model_type == "qwen2_moe" || c.model_type == "stablelm",
      "qkv_bias {} of a '{}' config", c.qkv_bias, c.model_type);
  // per-head q and k norms exactly in a "qwen3" file (transformers' Qwen3 always has them), never MLP biases
  const bool gemma3 = c.model_type == "gemma3_text", gemma2 = c.model_type == "gemma2";
  const bool sandwich = gemma2 || gemma3, gemma = c.model_type == "gemma" || sandwich;
  FUZZ_CHECK(c.qk_norm == (c.model_type == "qwen3" || c.model_type == "qwen3_moe" || gemma3) &&
                 !(c.qk_norm && c.mlp_bias),
             "qk_norm {} of a '{}' config", c.qk_norm, c.model_type);
  // (1 + w) norms and a sqrt(d) embedding scale exactly in a "gemma" file; multipliers only in a "granite"
  // one
  FUZZ_CHECK(
      c.norm_unit_offset == gemma && (gemma ? c.embedding_multiplier == std::sqrt(double(c.hidden_size))
                                            : c.model_type == "granite" || c.embedding_multiplier == 1.0),
      "norm_unit_offset {}, embedding_multiplier {} of a '{}' config", c.norm_unit_offset,
      c.embedding_multiplier, c.model_type);
  FUZZ_CHECK(c.model_type == "granite"
                 ? c.residual_multiplier > 0 && c.attention_multiplier > 0 && c.logits_scaling > 0
                 : c.residual_multiplier == 1.0 && c.logits_scaling == 1.0 &&
                       (sandwich ? c.attention_multiplier > 0 : c.attention_multiplier == 0.0),
             "multipliers {}, {}, {} of a '{}' config", c.residual_multiplier, c.attention_multiplier,
             c.logits_scaling, c.model_type);
  FUZZ_CHECK(!c.pad_token_id || (!gpt2 && *c.pad_token_id >= 0 && *c.pad_token_id < c.vocab_size),
             "pad_token_id {} of a '{}' config with vocab {}", c.pad_token_id.value_or(-1), c.model_type,
             c.vocab_size);
  // NoPE flags exactly in a "smollm3" file, one 0 or 1 a layer
  FUZZ_CHECK(c.model_type == "smollm3"
                 ? static_cast<int64_t>(c.no_rope_layers.size()) == c.num_hidden_layers &&
                       std::all_of(c.no_rope_layers.begin(), c.no_rope_layers.end(),
                                   [](int64_t f) { return f == 0 || f == 1; })
                 : c.no_rope_layers.empty(),
             "{} no_rope_layers of a '{}' config with {} layers", c.no_rope_layers.size(), c.model_type,
             c.num_hidden_layers);
  // LayerNorms exactly in the GPT-NeoX, StableLM and Falcon files, a parallel residual only there (one norm
  // in StableLM's, two in GPT-NeoX's), an ungated MLP in GPT-NeoX's and Falcon's
  const bool layer_norm =
      c.model_type == "gpt_neox" || c.model_type == "stablelm" || c.model_type == "falcon";
  FUZZ_CHECK((c.norm_type == "layer_norm") == layer_norm && (c.norm_type == "rms_norm") == !layer_norm &&
                 (!c.parallel_residual || layer_norm) && (c.parallel_norms == 1 || c.parallel_norms == 2) &&
                 (c.model_type != "stablelm" || c.parallel_norms == 1) &&
                 (c.model_type != "gpt_neox" || c.parallel_norms == 2) &&
                 c.gated_mlp == (c.model_type != "gpt_neox" && c.model_type != "falcon"),
             "norm_type '{}', parallel_residual {} ({} norms), gated_mlp {} of a '{}' config", c.norm_type,
             c.parallel_residual, c.parallel_norms, c.gated_mlp, c.model_type);
  // a share of each head rotated only in "phi3", "gpt_neox" and "stablelm" files, whole pairs of dims
  const auto rotated = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
  FUZZ_CHECK((c.partial_rotary_factor == 1.0 || c.model_type == "phi3" || c.model_type == "gpt_neox" ||
              c.model_type == "stablelm") &&
                 c.partial_rotary_factor <= 1.0 && (gpt2 || (rotated >= 2 && rotated % 2 == 0)),
             "partial_rotary_factor {} of a '{}' config with head_dim {}", c.partial_rotary_factor,
             c.model_type, c.head_dim);
  // post-norms and full-width q and k norms exactly in an "olmo2" file
  FUZZ_CHECK(c.qk_norm_full_width == (c.model_type == "olmo2" || c.model_type == "olmoe") &&
                 c.norm_placement == (c.model_type == "olmo2" ? "post"
                                      : sandwich              ? "sandwich"
                                                              : "pre"),
             "qk_norm_full_width {}, norm_placement '{}' of a '{}' config", c.qk_norm_full_width,
             c.norm_placement, c.model_type);
  // per-layer attention types in the Gemma 2/3 files, and in Qwen and SmolLM3 files where some layer slides;
  // a local rotary base exactly in a "gemma3_text" file
  const bool qwen = c.model_type == "qwen2" || c.model_type == "qwen3" || c.model_type == "smollm3" ||
                    c.model_type == "qwen2_moe";
  const bool some_slide =
      std::find(c.layer_types.begin(), c.layer_types.end(), "sliding_attention") != c.layer_types.end();
  FUZZ_CHECK(
      (sandwich ? static_cast<int64_t>(c.layer_types.size()) == c.num_hidden_layers
       : qwen ? c.layer_types.empty() || (static_cast<int64_t>(c.layer_types.size()) == c.num_hidden_layers &&
                                          some_slide && c.sliding_window > 0)
              : c.layer_types.empty()) &&
          (gemma3 ? c.rope_local_base_freq > 1 : c.rope_local_base_freq == 0.0) &&
          (sandwich || (c.attn_logit_softcapping == 0.0 && c.final_logit_softcapping == 0.0)) &&
          c.attn_logit_softcapping >= 0 && c.final_logit_softcapping >= 0,
      "{} layer_types, rope_local_base_freq {} of a '{}' config", c.layer_types.size(),
      c.rope_local_base_freq, c.model_type);
  // a window only where transformers runs one (a "llama" file's sliding_window is ignored)
  FUZZ_CHECK(
      c.sliding_window >= 0 && (c.sliding_window == 0 || c.model_type == "mistral" ||
                                c.model_type == "phi3" || c.model_type == "mixtral" ||
                                c.model_type == "qwen3_moe" || sandwich || (qwen && !c.layer_types.empty())),
      "sliding_window {} of a '{}' config", c.sliding_window, c.model_type);
  for (const int64_t n : {c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
                          c.num_key_value_heads, c.head_dim, c.intermediate_size, c.max_position_embeddings})
    FUZZ_CHECK(n >= 1, "a size of {} in {}", n, c.describe());
  FUZZ_CHECK(c.num_attention_heads % c.num_key_value_heads == 0, "{} key/value heads for {} heads",
             c.num_key_value_heads, c.num_attention_heads);
  if (gpt2) {
    FUZZ_CHECK(c.head_dim * c.num_attention_heads == c.hidden_size, "GPT-2 head_dim {} x {} heads != {}",
               c.head_dim, c.num_attention_heads, c.hidden_size);
    FUZZ_CHECK(c.hidden_act == "gelu_new" || c.hidden_act == "gelu" || c.hidden_act == "relu",
               "GPT-2 activation '{}'", c.hidden_act);
  } else {
    FUZZ_CHECK(c.head_dim % 2 == 0, "odd Llama head_dim {}", c.head_dim);
    FUZZ_CHECK(c.hidden_act == "silu" || c.hidden_act == "gelu_pytorch_tanh" || c.hidden_act == "gelu_new" ||
                   (c.hidden_act == "gelu" && c.model_type != "gemma"),
               "Llama-family activation '{}' of a '{}' config", c.hidden_act, c.model_type);
  }
  FUZZ_CHECK(std::isfinite(c.norm_eps) && c.norm_eps > 0, "norm_eps {}", c.norm_eps);
  FUZZ_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 1, "rope_theta {}", c.rope_theta);
  for (const int64_t id : c.bos_token_id) FUZZ_CHECK(id >= 0, "bos_token_id {}", id);
  for (const int64_t id : c.eos_token_id) FUZZ_CHECK(id >= 0, "eos_token_id {}", id);
  FUZZ_CHECK(!c.describe().empty(), "an empty describe()");
}

// A small accepted Llama-architecture config builds and runs: the reader refuses what the model would
void check_builds(const hf::Config& c) {
  if (c.architecture != hf::Architecture::Llama) return;
  const nn::LlamaConfig lc = hf::llama_config(c);
  const int64_t n = nn::num_parameters(lc);
  FUZZ_CHECK(n > 0 || n == -1, "num_parameters {} of {}", n, c.describe());
  if (n <= 0 || n > (int64_t{1} << 20)) return;
  std::unique_ptr<nn::LlamaForCausalLM> model;
  try {
    model = std::make_unique<nn::LlamaForCausalLM>(lc);
  } catch (const Error& e) {
    FUZZ_CHECK(false, "an accepted config builds no model: {}\n{}", e.what(), hf::config_json(c));
  }
  FUZZ_CHECK(model->num_parameters() == n, "num_parameters {} of a model of {} (nn::num_parameters {})",
             model->num_parameters(), c.describe(), n);
  NoGradGuard no_grad;
  const int64_t T = std::min<int64_t>(3, lc.context());
  const Tensor logits = model->forward(ops::zeros({1, T}, DType::Int64)).data();
  FUZZ_CHECK(logits.shape() == Shape({1, T, lc.vocab_size}), "logits {} of {}", logits.shape(), c.describe());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size), path = "fuzz_config.json";
  hf::Config c;
  try {
    c = hf::parse_config(text, path);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    return 0;
  }
  check_accepted(c);
  check_builds(c);
  const std::string written = hf::config_json(c);
  hf::Config back;
  try {
    back = hf::parse_config(written, "written.json");
  } catch (const Error& e) {
    FUZZ_CHECK(false, "config_json wrote a file parse_config refuses: {}\n{}", e.what(), written);
  }
  FUZZ_CHECK(same_config(c, back), "parse_config(config_json(c)) != c:\n{}", written);
  FUZZ_CHECK(hf::config_json(back) == written, "config_json is not a fixed point:\n{}", written);
  return 0;
}
