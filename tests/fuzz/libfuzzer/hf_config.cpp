// libFuzzer target: hf::parse_config (a config.json of a model folder in the Hugging Face layout).
// Input: the config.json text.
// Properties: a rejected file raises saccade::Error naming it; an accepted one describes a model saccade can
// build (sizes >= 1, heads dividing the width or an explicit even head_dim, key/value heads dividing the
// heads, a supported activation, a positive finite epsilon and rotary base), and config_json writes it back
// as a file that parse_config reads into the same Config, whose config_json is the same text.
#include <cmath>
#include <string>

#include "hf/config.h"
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
         a.eos_token_id == b.eos_token_id && a.torch_dtype == b.torch_dtype;
}

void check_accepted(const hf::Config& c) {
  const bool gpt2 = c.architecture == hf::Architecture::GPT2;
  FUZZ_CHECK(gpt2 ? c.model_type == "gpt2"
                  : (c.model_type == "llama" || c.model_type == "mistral" || c.model_type == "qwen2" ||
                     c.model_type == "qwen3"),
             "model_type '{}'", c.model_type);
  // q/k/v-only biases exactly in a "qwen2" file (transformers' Qwen2 hard-codes them)
  FUZZ_CHECK(c.qkv_bias == (c.model_type == "qwen2"), "qkv_bias {} of a '{}' config", c.qkv_bias,
             c.model_type);
  // per-head q and k norms exactly in a "qwen3" file (transformers' Qwen3 always has them), never MLP biases
  FUZZ_CHECK(c.qk_norm == (c.model_type == "qwen3") && !(c.qk_norm && c.mlp_bias),
             "qk_norm {} of a '{}' config", c.qk_norm, c.model_type);
  // a window only where transformers runs one (a "llama" file's sliding_window is ignored)
  FUZZ_CHECK(c.sliding_window >= 0 && (c.sliding_window == 0 || c.model_type == "mistral"),
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
    FUZZ_CHECK(c.hidden_act == "silu", "Llama activation '{}'", c.hidden_act);
  }
  FUZZ_CHECK(std::isfinite(c.norm_eps) && c.norm_eps > 0, "norm_eps {}", c.norm_eps);
  FUZZ_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 0, "rope_theta {}", c.rope_theta);
  for (const int64_t id : c.bos_token_id) FUZZ_CHECK(id >= 0, "bos_token_id {}", id);
  for (const int64_t id : c.eos_token_id) FUZZ_CHECK(id >= 0, "eos_token_id {}", id);
  FUZZ_CHECK(!c.describe().empty(), "an empty describe()");
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
