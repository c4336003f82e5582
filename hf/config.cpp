#include "hf/config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "nn/transformer_layers.h"

namespace saccade::hf {

using nlohmann::json;

namespace {

// Reading one config.json: every error names the function, the file and the key.
struct Reader {
  const json& j;
  const std::string& path;

  Error fail(const std::string& key, const std::string& what) const {
    return Error(fmt::format("hf::load_config: '{}': \"{}\": {}", path, key, what));
  }
  bool has(const std::string& key) const { return j.contains(key) && !j[key].is_null(); }
  // A key the architecture's transformers model does not read: a warning on stderr, naming the file.
  void ignored(const std::string& key, const std::string& why) const {
    std::fprintf(stderr, "hf::load_config: warning: '%s': \"%s\": %s ignored: %s\n", path.c_str(),
                 key.c_str(), j[key].dump().c_str(), why.c_str());
  }
  // ... warned about only when it is there and not false (a bias switch the model hard-codes off or on)
  void ignored_unless_false(const std::string& key, const std::string& why) const {
    if (has(key) && j[key] != false) ignored(key, why);
  }

  // An integer >= lo, required unless a default is given.
  int64_t integer(const std::string& key, std::optional<int64_t> fallback, int64_t lo = 1) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      throw fail(key, "missing (the architecture needs it)");
    }
    const json& v = j[key];
    if (!v.is_number_integer()) throw fail(key, fmt::format("{} is not an integer", v.dump()));
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > (int64_t{1} << 40))
      throw fail(key, fmt::format("{} is out of range (need >= {})", x, lo));
    return x;
  }
  double number(const json& v, const std::string& key, bool positive = true) const {
    if (!v.is_number()) throw fail(key, fmt::format("{} is not a number", v.dump()));
    const double x = v.get<double>();
    if (!std::isfinite(x)) throw fail(key, fmt::format("{} is not a finite number", x));
    if (positive && !(x > 0)) throw fail(key, fmt::format("{} is not a positive number", x));
    return x;
  }
  double number(const std::string& key, double fallback) const {
    return has(key) ? number(j[key], key) : fallback;
  }
  // A rotary base (rope_theta and its older spellings): the frequencies theta^(-2i/R) fall with i only when
  // theta > 1 (ops::rotary_tables refuses the rest); checked here so that the error names the file.
  double rotary_base(const json& v, const std::string& key) const {
    const double x = number(v, key);  // finite
    if (!(x > 1)) throw fail(key, fmt::format("{} is not a finite rotary base above 1", x));
    return x;
  }
  double rotary_base(const std::string& key, double fallback) const {
    return has(key) ? rotary_base(j[key], key) : fallback;
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_boolean()) throw fail(key, fmt::format("{} is not true or false", j[key].dump()));
    return j[key].get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_string()) throw fail(key, fmt::format("{} is not a string", j[key].dump()));
    return j[key].get<std::string>();
  }
  // null, an id, or a list of ids.
  std::vector<int64_t> ids(const std::string& key) const {
    std::vector<int64_t> out;
    if (!has(key)) return out;
    const json& v = j[key];
    auto one = [&](const json& x) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0)
        throw fail(key, fmt::format("{} is not a token id", v.dump()));
      out.push_back(x.get<int64_t>());
    };
    if (v.is_array()) {
      for (const json& x : v) one(x);
    } else {
      one(v);
    }
    return out;
  }
};

// The rotary base and its scaling: "rope_theta" at the top level, or inside "rope_parameters" (transformers
// >= 5) or "rope_scaling", whose rope_type picks transformers' ROPE_INIT_FUNCTIONS entry. "default", "linear"
// (factor), "dynamic" (factor; its original context is max_position_embeddings, as transformers reads it),
// "llama3" (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings, all required, as
// transformers' rope config validation requires them), "yarn" and "longrope" are implemented
// (ops::RopeScaling); any other type changes the frequencies in ways saccade does not implement, and is
// refused rather than run wrongly.
void read_rope(const Reader& r, Config& c) {
  // the defaults: the row's (GPT-NeoX's older rotary_emb_base and rotary_pct keys, read before this)
  c.rope_theta = r.rotary_base("rope_theta", c.rope_theta);
  c.partial_rotary_factor = r.number("partial_rotary_factor", c.partial_rotary_factor);
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!r.has(key)) continue;
    const json& p = r.j[key];
    if (!p.is_object()) throw r.fail(key, fmt::format("{} is not an object", p.dump()));
    // transformers reads "rope_type" and falls back to the older "type" only without it
    std::string type = "default";
    for (const char* k : {"type", "rope_type"})
      if (p.contains(k) && p[k].is_string()) type = p[k].get<std::string>();
    const Reader sub{p, r.path};
    auto number = [&](const char* k) {
      if (!sub.has(k))
        throw r.fail(fmt::format("{}.{}", key, k), fmt::format("missing (rope_type '{}' needs it)", type));
      return sub.number(p[k], fmt::format("{}.{}", key, k));
    };
    using Type = ops::RopeScaling::Type;
    ops::RopeScaling& s = c.rope_scaling;
    if (type == "default") {
      s = {};
    } else if (type == "linear") {
      s = {.type = Type::Linear, .factor = number("factor")};
    } else if (type == "dynamic") {
      s = {.type = Type::Dynamic,
           .factor = number("factor"),
           .original_max_position_embeddings = c.max_position_embeddings};
    } else if (type == "llama3") {
      s = {.type = Type::Llama3,
           .factor = number("factor"),
           .low_freq_factor = number("low_freq_factor"),
           .high_freq_factor = number("high_freq_factor"),
           .original_max_position_embeddings = sub.integer("original_max_position_embeddings", std::nullopt)};
    } else if (type == "yarn") {
      // transformers: original_max_position_embeddings defaults to max_position_embeddings, the rest as its
      // _compute_yarn_parameters
      auto optional = [&](const char* k, double fallback) {
        return sub.has(k) ? sub.number(p[k], fmt::format("{}.{}", key, k)) : fallback;
      };
      s = {.type = Type::Yarn,
           .factor = number("factor"),
           .original_max_position_embeddings =
               sub.integer("original_max_position_embeddings", c.max_position_embeddings),
           .beta_fast = optional("beta_fast", 32.0),
           .beta_slow = optional("beta_slow", 1.0),
           .attention_factor = optional("attention_factor", 0.0),
           .mscale = optional("mscale", 0.0),
           .mscale_all_dim = optional("mscale_all_dim", 0.0),
           .truncate = sub.boolean("truncate", true)};
    } else if (type == "longrope") {
      // transformers' _compute_longrope_parameters and standardize_rope_params: a top-level
      // original_max_position_embeddings wins over the one inside (Phi-3 keeps it there), else
      // max_position_embeddings; factor defaults to max_position_embeddings over it
      auto factors = [&](const char* k) {
        const std::string name = fmt::format("{}.{}", key, k);
        if (!sub.has(k)) throw r.fail(name, fmt::format("missing (rope_type '{}' needs it)", type));
        if (!p[k].is_array()) throw r.fail(name, fmt::format("{} is not a list of numbers", p[k].dump()));
        std::vector<double> f;
        for (const json& v : p[k]) {
          f.push_back(sub.number(v, name));
          if (!(f.back() > 0)) throw r.fail(name, fmt::format("{} is not a positive factor", f.back()));
        }
        return f;
      };
      const int64_t L = r.has("original_max_position_embeddings")
                            ? r.integer("original_max_position_embeddings", std::nullopt)
                            : sub.integer("original_max_position_embeddings", c.max_position_embeddings);
      if (L < 1) throw r.fail("original_max_position_embeddings", fmt::format("{} is below 1", L));
      s = {.type = Type::LongRope,
           .factor = sub.has("factor")
                         ? number("factor")
                         : static_cast<double>(c.max_position_embeddings) / static_cast<double>(L),
           .original_max_position_embeddings = L,
           .attention_factor = sub.has("attention_factor") ? number("attention_factor") : 0.0,
           .short_factor = factors("short_factor"),
           .long_factor = factors("long_factor")};
    } else {
      throw r.fail(key,
                   fmt::format("rope_type '{}' is not supported (saccade implements 'default', 'linear', "
                               "'dynamic', 'llama3', 'yarn' and 'longrope')",
                               type));
    }
    if (s.type != Type::Default && s.type != Type::LongRope && !(s.factor >= 1))
      throw r.fail(fmt::format("{}.factor", key), fmt::format("{} is below 1", s.factor));
    if (s.type == Type::LongRope && !(s.factor > 0))
      throw r.fail(fmt::format("{}.factor", key), fmt::format("{} is not positive", s.factor));
    if (s.type == Type::Llama3 && !(s.high_freq_factor > s.low_freq_factor))
      throw r.fail(fmt::format("{}.high_freq_factor", key),
                   fmt::format("{} is not above low_freq_factor {}", s.high_freq_factor, s.low_freq_factor));
    if (p.contains("rope_theta"))
      c.rope_theta = r.rotary_base(p["rope_theta"], std::string(key) + ".rope_theta");
    if (sub.has("partial_rotary_factor"))
      c.partial_rotary_factor =
          r.number(p["partial_rotary_factor"], std::string(key) + ".partial_rotary_factor");
  }
  if (!(c.partial_rotary_factor <= 1))
    throw r.fail("partial_rotary_factor", fmt::format("{} is above 1", c.partial_rotary_factor));
}

// What the rope scaling asks of the R = `rotated` dims of a head: dynamic NTK scaling raises the base to the
// power R / (R - 2) (ops::rotary_inv_freq), so it needs more than one rotated pair; LongRoPE's short_factor
// and long_factor hold one factor a rotated pair, R / 2 each (transformers' _validate_longrope_parameters).
void check_rope_dims(const Reader& r, const Config& c, int64_t rotated) {
  const std::string key = r.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  if (c.rope_scaling.type == ops::RopeScaling::Type::Dynamic && rotated <= 2)
    throw r.fail(key,
                 fmt::format("rope_type 'dynamic' needs more than 2 rotated dims a head, got {}", rotated));
  if (c.rope_scaling.type != ops::RopeScaling::Type::LongRope) return;
  for (const auto& [name, f] : {std::pair{"short_factor", &c.rope_scaling.short_factor},
                                std::pair{"long_factor", &c.rope_scaling.long_factor}})
    if (static_cast<int64_t>(f->size()) != rotated / 2)
      throw r.fail(key + "." + name,
                   fmt::format("{} factors for {} rotated dims a head (need one a pair: {})", f->size(),
                               rotated, rotated / 2));
}

void check_architectures(const Reader& r, const std::vector<std::string>& known) {
  if (!r.has("architectures")) return;
  const json& a = r.j["architectures"];
  if (!a.is_array()) throw r.fail("architectures", fmt::format("{} is not a list", a.dump()));
  for (const json& name : a) {
    if (!name.is_string() || std::find(known.begin(), known.end(), name.get<std::string>()) == known.end())
      throw r.fail("architectures", fmt::format("{} is not supported (saccade reads {})", name.dump(),
                                                fmt::join(known, ", ")));
  }
}

}  // namespace

std::string Config::describe() const {
  std::string heads = num_key_value_heads != num_attention_heads
                          ? fmt::format("{} heads ({} key/value)", num_attention_heads, num_key_value_heads)
                          : fmt::format("{} heads", num_attention_heads);
  return fmt::format("{}: {} layers, {}, hidden {}, context {}, vocab {}", model_type, num_hidden_layers,
                     heads, hidden_size, max_position_embeddings, vocab_size);
}

namespace {

// ---- the family rows: one reader a model_type ----

// GPT-2's own spellings into the common fields; variants that change the computation are refused.
void read_gpt2(const Reader& r, Config& c) {
  c.architecture = Architecture::GPT2;
  c.hidden_size = r.integer("n_embd", std::nullopt);
  c.num_hidden_layers = r.integer("n_layer", std::nullopt);
  c.num_attention_heads = r.integer("n_head", std::nullopt);
  c.max_position_embeddings = r.integer("n_positions", std::nullopt);
  c.intermediate_size = r.integer("n_inner", 4 * c.hidden_size);
  c.norm_eps = r.number("layer_norm_epsilon", 1e-5);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", true);
  c.hidden_act = r.string("activation_function", "gelu_new");
  if (c.hidden_act != "gelu_new" && c.hidden_act != "gelu" && c.hidden_act != "relu")
    throw r.fail("activation_function",
                 fmt::format("'{}' is not supported (gelu_new, gelu or relu)", c.hidden_act));
  // GPT-2 variants that change the computation (their defaults are GPT-2's own)
  if (r.boolean("scale_attn_by_inverse_layer_idx", false))
    throw r.fail("scale_attn_by_inverse_layer_idx", "true is not supported");
  if (!r.boolean("scale_attn_weights", true)) throw r.fail("scale_attn_weights", "false is not supported");
  if (r.boolean("add_cross_attention", false)) throw r.fail("add_cross_attention", "true is not supported");
  c.num_key_value_heads = c.num_attention_heads;
  if (c.hidden_size % c.num_attention_heads != 0)
    throw r.fail("n_head", fmt::format("{} does not divide n_embd {}", c.num_attention_heads, c.hidden_size));
  c.head_dim = c.hidden_size / c.num_attention_heads;
  c.attention_bias = c.mlp_bias = true;
}

// The sliding_window key: `absent` when the file has none (the config class's default), 0 (no window) when
// null.
int64_t read_window(const Reader& r, int64_t absent) {
  if (!r.j.contains("sliding_window")) return absent;
  return r.has("sliding_window") ? r.integer("sliding_window", std::nullopt) : 0;
}

// What the Llama-architecture rows share (transformers' LlamaConfig field names): sizes, RMSNorm, rotary,
// SwiGLU. `default_kv_heads` is the family's num_key_value_heads when the key is absent, `default_head_dim`
// its head_dim (0: hidden_size / num_attention_heads, LlamaConfig's).
// The MLP gate's activation under `key` (transformers' ACT2FN name; `fallback` when absent), one that
// nn::SwiGLU runs, or an Error naming the key.
std::string read_gate_act(const Reader& r, const char* key, const char* fallback) {
  const std::string act = r.string(key, fallback);
  const std::vector<std::string>& known = nn::SwiGLU::activations();
  if (std::find(known.begin(), known.end(), act) == known.end())
    throw r.fail(key, fmt::format("'{}' is not supported ({})", act, fmt::join(known, ", ")));
  return act;
}

// pad_token_id when the file gives one (null: none), which the vocabulary must hold (transformers'
// nn.Embedding refuses a padding_idx outside it too); default_pad sets a family's default when it is absent.
void read_pad(const Reader& r, Config& c) {
  if (r.has("pad_token_id")) c.pad_token_id = r.integer("pad_token_id", std::nullopt, 0);
  if (c.pad_token_id && *c.pad_token_id >= c.vocab_size)
    throw r.fail("pad_token_id", fmt::format("{} is not below vocab_size {}", *c.pad_token_id, c.vocab_size));
}

void read_llama_common(const Reader& r, Config& c, int64_t default_kv_heads, int64_t default_head_dim = 0,
                       const char* default_act = "silu") {
  c.architecture = Architecture::Llama;
  c.hidden_size = r.integer("hidden_size", std::nullopt);
  c.num_hidden_layers = r.integer("num_hidden_layers", std::nullopt);
  c.num_attention_heads = r.integer("num_attention_heads", std::nullopt);
  c.num_key_value_heads =
      r.integer("num_key_value_heads", default_kv_heads > 0 && !r.j.contains("num_key_value_heads")
                                           ? default_kv_heads
                                           : c.num_attention_heads);
  c.intermediate_size = r.integer("intermediate_size", std::nullopt);
  c.max_position_embeddings = r.integer("max_position_embeddings", std::nullopt);
  c.norm_eps = r.number("rms_norm_eps", 1e-6);
  read_rope(r, c);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  c.hidden_act = read_gate_act(r, "hidden_act", default_act);
  read_pad(r, c);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    throw r.fail("num_key_value_heads", fmt::format("{} does not divide num_attention_heads {}",
                                                    c.num_key_value_heads, c.num_attention_heads));
  if (r.has("head_dim") || (default_head_dim > 0 && !r.j.contains("head_dim"))) {
    c.head_dim = r.integer("head_dim", default_head_dim > 0 ? std::optional(default_head_dim) : std::nullopt);
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      throw r.fail("num_attention_heads", fmt::format("{} does not divide hidden_size {} (and no head_dim)",
                                                      c.num_attention_heads, c.hidden_size));
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0)
    throw r.fail("head_dim", fmt::format("{} is odd (rotary needs pairs)", c.head_dim));
  if (c.partial_rotary_factor != 1.0 && c.model_type != "phi3" && c.norm_type != "layer_norm")
    throw r.fail("partial_rotary_factor",
                 fmt::format("{} is not supported for '{}' (its transformers model rotates whole heads)",
                             c.partial_rotary_factor, c.model_type));
  const auto rotated = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
  if (rotated < 2 || rotated % 2 != 0)
    throw r.fail("partial_rotary_factor",
                 fmt::format("{} of head_dim {} rotates {} dims (need an even count)",
                             c.partial_rotary_factor, c.head_dim, rotated));
  check_rope_dims(r, c, rotated);
}

// Llama (Touvron et al. 2023): biases by attention_bias and mlp_bias; a "llama" file's sliding_window is a
// key transformers' LlamaForCausalLM never reads, so it is ignored here too, with a warning.
void read_llama(const Reader& r, Config& c) {
  read_llama_common(r, c, 0);
  if (r.has("sliding_window"))
    r.ignored(
        "sliding_window",
        "transformers' LlamaForCausalLM has no sliding window (a windowed model is model_type 'mistral')");
  c.attention_bias = r.boolean("attention_bias", false);
  c.mlp_bias = r.boolean("mlp_bias", false);
}

// Mistral (Jiang et al. 2023): Llama's blocks with a sliding window and no biases; MistralConfig's defaults
// (num_key_value_heads 8, sliding_window 4096 when absent, null for none).
void read_mistral(const Reader& r, Config& c) {
  read_llama_common(r, c, 8);
  c.sliding_window = read_window(r, 4096);
  for (const char* key : {"attention_bias", "mlp_bias"})
    r.ignored_unless_false(key, "transformers' MistralForCausalLM has no biases");
}

// The list `key` with one entry a layer, or an Error naming the key.
const json& per_layer(const Reader& r, const char* key, int64_t layers) {
  const json& list = r.j[key];
  if (!list.is_array() || static_cast<int64_t>(list.size()) != layers)
    throw r.fail(key, fmt::format("{} is not a list of num_hidden_layers ({}) entries", list.dump(), layers));
  return list;
}

// layer_types: one "full_attention" or "sliding_attention" a layer, or an Error naming the key.
std::vector<std::string> read_layer_types(const Reader& r, int64_t layers) {
  std::vector<std::string> out;
  for (const json& t : per_layer(r, "layer_types", layers)) {
    if (t != "full_attention" && t != "sliding_attention")
      throw r.fail("layer_types", fmt::format("{} is not full_attention or sliding_attention", t.dump()));
    out.push_back(t.get<std::string>());
  }
  return out;
}

// Sliding layers as the Qwen and SmolLM3 configs make them: the window is sliding_window (`default_window`
// when absent, none when null) when use_sliding_window, else none; a layer slides when layer_types says
// "sliding_attention" (absent: where `slides_by_default(layer)`) and there is a window. Config::layer_types
// and sliding_window are set only when some layer slides.
void read_sliding_layers(const Reader& r, Config& c, int64_t default_window,
                         const std::function<bool(int64_t)>& slides_by_default) {
  const int64_t window = r.boolean("use_sliding_window", false) ? read_window(r, default_window) : 0;
  std::vector<std::string> types;
  if (r.has("layer_types")) {
    types = read_layer_types(r, c.num_hidden_layers);
  } else {
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      types.push_back(window > 0 && slides_by_default(i) ? "sliding_attention" : "full_attention");
  }
  if (window > 0 && std::find(types.begin(), types.end(), "sliding_attention") != types.end()) {
    c.sliding_window = window;
    c.layer_types = types;
  }
}

// Qwen2Config / Qwen3Config: a window of 4096 by default, in the layers from max_window_layers (28) on.
void read_qwen_sliding_layers(const Reader& r, Config& c) {
  const int64_t first = r.integer("max_window_layers", 28, 0);
  read_sliding_layers(r, c, 4096, [&](int64_t i) { return i >= first; });
}

// Qwen2 (Yang et al. 2024, Qwen2 Technical Report; transformers' Qwen2Config): Llama's blocks with biases on
// the q, k and v projections (not on o_proj, nor in the MLP: no config key sets them).
void read_qwen2(const Reader& r, Config& c) {
  read_llama_common(r, c, 0);
  c.qkv_bias = true;
  for (const char* key : {"attention_bias", "mlp_bias"})
    r.ignored_unless_false(key, "transformers' Qwen2ForCausalLM has biases on q, k and v only, always");
  read_qwen_sliding_layers(r, c);
}

// Qwen3 (Yang et al. 2025, Qwen3 Technical Report; transformers' Qwen3Config): Llama's blocks with an RMSNorm
// over head_dim on each head's queries and keys before the rotation (q_norm, k_norm: always), biases on all
// four attention projections by attention_bias and none in the MLP; Qwen3Config's head_dim 128 and
// num_key_value_heads 32 when absent.
void read_qwen3(const Reader& r, Config& c) {
  read_llama_common(r, c, 32, 128);
  c.qk_norm = true;
  c.attention_bias = r.boolean("attention_bias", false);
  r.ignored_unless_false("mlp_bias", "transformers' Qwen3MLP has no biases");
  read_qwen_sliding_layers(r, c);
}

// A family's pad_token_id when the key is absent (its config class's default), which the vocabulary must hold
// (transformers' nn.Embedding refuses a padding_idx outside it too).
void default_pad(const Reader& r, Config& c, int64_t pad) {
  if (r.j.contains("pad_token_id")) return;
  if (pad >= c.vocab_size)
    throw r.fail("pad_token_id", fmt::format("absent: {}'s default {} is not below vocab_size {}",
                                             c.model_type, pad, c.vocab_size));
  c.pad_token_id = pad;
}

// Gemma (Gemma Team 2024; transformers' GemmaConfig): Llama's blocks with RMSNorm weights as offsets from one
// (x̂ ⊙ (1 + w)), the token embeddings scaled by √hidden_size (rounded to the model's dtype), a GeGLU MLP
// (gelu_pytorch_tanh; a legacy "gelu" means it too, as GemmaConfig says), biases by attention_bias (none in
// the MLP); GemmaConfig's defaults head_dim 256, 16 key/value heads, tied embeddings and pad_token_id 0 when
// absent. A bidirectional (encoder) Gemma is refused.
void read_gemma(const Reader& r, Config& c) {
  read_llama_common(r, c, 16, 256, "gelu_pytorch_tanh");
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", true);
  if (c.hidden_act == "gelu") c.hidden_act = "gelu_pytorch_tanh";
  default_pad(r, c, 0);
  c.norm_unit_offset = true;
  c.embedding_multiplier = std::sqrt(static_cast<double>(c.hidden_size));
  c.attention_bias = r.boolean("attention_bias", false);
  if (r.boolean("use_bidirectional_attention", false))
    throw r.fail("use_bidirectional_attention", "true is not supported (saccade runs causal decoders)");
  r.ignored_unless_false("mlp_bias", "transformers' GemmaMLP has no biases");
}

// Granite (IBM; transformers' GraniteConfig): Llama's blocks with four multipliers, the token embeddings'
// (embedding_multiplier), each sublayer's output before its residual add (residual_multiplier), the scores'
// factor in place of 1/√head_dim (attention_multiplier; GraniteConfig's default is 1.0), and the logits'
// divisor (logits_scaling); biases by attention_bias and mlp_bias.
void read_granite(const Reader& r, Config& c) {
  read_llama_common(r, c, 0);
  c.attention_bias = r.boolean("attention_bias", false);
  c.mlp_bias = r.boolean("mlp_bias", false);
  c.embedding_multiplier = r.number("embedding_multiplier", 1.0);
  c.residual_multiplier = r.number("residual_multiplier", 1.0);
  c.attention_multiplier = r.number("attention_multiplier", 1.0);
  c.logits_scaling = r.number("logits_scaling", 1.0);
}

// SmolLM3 (Hugging Face 2025; transformers' SmolLM3Config): Llama's blocks where the layers flagged 0 in
// no_rope_layers have no rotary positions (NoPE; absent: every no_rope_layer_interval-th layer, 4 by
// default), biases by attention_bias and mlp_bias; SmolLM3Config's defaults 4 key/value heads, tied
// embeddings and pad_token_id 128004 when absent; sliding layers with use_sliding_window and a sliding_window
// (by default the NoPE layers).
void read_smollm3(const Reader& r, Config& c) {
  read_llama_common(r, c, 4);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", true);
  default_pad(r, c, 128004);
  c.attention_bias = r.boolean("attention_bias", false);
  c.mlp_bias = r.boolean("mlp_bias", false);
  if (r.has("no_rope_layers")) {
    const json& flags = per_layer(r, "no_rope_layers", c.num_hidden_layers);
    for (const json& f : flags) {
      if (!f.is_number_integer() || (f.get<int64_t>() != 0 && f.get<int64_t>() != 1))
        throw r.fail("no_rope_layers", fmt::format("{} holds {}, not 0 or 1", flags.dump(), f.dump()));
      c.no_rope_layers.push_back(f.get<int64_t>());
    }
  } else {
    const int64_t interval = r.integer("no_rope_layer_interval", 4);
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.no_rope_layers.push_back((i + 1) % interval != 0);
  }
  // SmolLM3Config: no window by default; the NoPE layers slide
  read_sliding_layers(r, c, 0, [&](int64_t i) { return c.no_rope_layers[static_cast<size_t>(i)] == 0; });
}

// Phi-3 (Abdin et al. 2024; transformers' Phi3Config): Llama's blocks with q, k and v in one qkv_proj and the
// MLP's gate and up in one gate_up_proj on disk (split on load: hf::llama_name_table), no biases, a sliding
// window when sliding_window is set (every layer), partial_rotary_factor (Phi-4-mini's 0.75); Phi3Config's
// defaults: pad_token_id 32000, rms_norm_eps 1e-5, original_max_position_embeddings 4096 (a field of its own
// that wins over the rope dict's). Rotary 'default' or 'longrope' (the 128k variants, Phi-4-mini).
void read_phi3(const Reader& r, Config& c) {
  read_llama_common(r, c, 0);
  c.norm_eps = r.number("rms_norm_eps", 1e-5);
  default_pad(r, c, 32000);
  using Type = ops::RopeScaling::Type;
  if (c.rope_scaling.type != Type::Default && c.rope_scaling.type != Type::LongRope)
    throw r.fail("rope_parameters", "Phi3Config runs 'default' or 'longrope' rotary only");
  if (c.rope_scaling.type == Type::LongRope && !r.has("original_max_position_embeddings")) {
    ops::RopeScaling& s = c.rope_scaling;  // Phi3Config's own field, 4096 unless given, wins
    if (!(r.has("rope_scaling") ? r.j["rope_scaling"] : r.j["rope_parameters"])
             .contains("factor"))  // read last
      s.factor = static_cast<double>(c.max_position_embeddings) / 4096.0;
    s.original_max_position_embeddings = 4096;
  }
  c.sliding_window = read_window(r, 0);
  for (const char* key : {"attention_bias", "mlp_bias"})
    r.ignored_unless_false(key, "transformers' Phi3ForCausalLM has no biases");
}

// What OLMo 2 and OLMoE share: rms_norm_eps 1e-5, pad_token_id 1, biases by attention_bias only (`mlp`
// names the MLP class that has none) and the full-width q and k norms.
void read_olmo_common(const Reader& r, Config& c, const char* mlp) {
  read_llama_common(r, c, 0);
  c.norm_eps = r.number("rms_norm_eps", 1e-5);
  default_pad(r, c, 1);
  c.attention_bias = r.boolean("attention_bias", false);
  r.ignored_unless_false("mlp_bias", fmt::format("transformers' {} has no biases", mlp));
  c.qk_norm_full_width = true;
}

// OLMo 2 (OLMo et al. 2024, "2 OLMo 2 Furious"; transformers' Olmo2Config): Llama's blocks with the norms
// after each sublayer (its output normed before the residual add; no input norm) and an RMSNorm over all
// heads' queries and keys after the projections; biases by attention_bias; Olmo2Config's defaults:
// rms_norm_eps 1e-5, pad_token_id 1.
void read_olmo2(const Reader& r, Config& c) {
  read_olmo_common(r, c, "Olmo2MLP");
  c.norm_placement = "post";
}

// What GPT-NeoX and StableLM share: LayerNorm with a bias (eps layer_norm_eps, 1e-5), a quarter of each
// head rotating unless the config says otherwise (both config classes' default), no pad token by default.
void read_layer_norm_common(const Reader& r, Config& c, const char* default_act, double default_partial) {
  c.norm_type = "layer_norm";
  c.partial_rotary_factor = default_partial;  // rope_parameters' or a top-level partial_rotary_factor wins
  read_llama_common(r, c, 0, 0, default_act);
  c.norm_eps = r.number("layer_norm_eps", 1e-5);
  if (r.has("rms_norm_eps")) r.ignored("rms_norm_eps", "the model's norms are LayerNorms (layer_norm_eps)");
}

// GPT-NeoX (Black et al. 2022; Pythia, Biderman et al. 2023; transformers' GPTNeoXConfig): LayerNorm blocks
// whose attention and MLP both read the block's input when use_parallel_residual (the default), q, k and v in
// one query_key_value tensor on disk (per head: q, k, v rows; split on load), biases on all four attention
// projections by attention_bias (true) and always in the MLP, an ungated MLP (dense_h_to_4h, act,
// dense_4h_to_h; hidden_act "gelu"), every head a key/value head; the older spellings rotary_pct (0.25) and
// rotary_emb_base (10000) of partial_rotary_factor and rope_theta.
void read_gpt_neox(const Reader& r, Config& c) {
  c.rope_theta =
      r.rotary_base("rotary_emb_base", 10000.0);  // rope_theta, top-level or in rope_parameters, wins
  read_layer_norm_common(r, c, "gelu", r.number("rotary_pct", 0.25));
  if (r.has("num_key_value_heads") && c.num_key_value_heads != c.num_attention_heads)
    throw r.fail("num_key_value_heads", fmt::format("{} is not num_attention_heads {} (GPT-NeoX has no "
                                                    "grouped-query attention)",
                                                    c.num_key_value_heads, c.num_attention_heads));
  if (c.head_dim * c.num_attention_heads != c.hidden_size)
    throw r.fail("head_dim", fmt::format("{} times {} heads is not hidden_size {}", c.head_dim,
                                         c.num_attention_heads, c.hidden_size));
  c.parallel_residual = r.boolean("use_parallel_residual", true);
  c.attention_bias = r.boolean("attention_bias", true);
  c.mlp_bias = true;
  c.gated_mlp = false;
}

// StableLM (Stability AI's StableLM-3B-4E1T and StableLM 2; transformers' StableLmConfig): Llama's blocks
// (SwiGLU, grouped-query attention) with LayerNorms, a quarter of each head rotating by default, biases on q,
// k and v by use_qkv_bias, and with use_parallel_residual a parallel layer whose MLP reads the attention's
// normed input (one norm a block). Per-head q/k LayerNorms (qk_layernorm, StableLM 2 12B's) are refused by
// name.
void read_stablelm(const Reader& r, Config& c) {
  read_layer_norm_common(r, c, "silu", 0.25);
  c.qkv_bias = r.boolean("use_qkv_bias", false);
  if (r.boolean("qk_layernorm", false))
    throw r.fail("qk_layernorm", "true is not supported (per-head LayerNorms on q and k)");
  c.parallel_residual = r.boolean("use_parallel_residual", false);
  c.parallel_norms = 1;
  for (const char* key : {"attention_bias", "mlp_bias"})
    r.ignored_unless_false(key, "transformers' StableLmForCausalLM sets its biases by use_qkv_bias only");
}

// Falcon (Almazrouei et al. 2023; transformers' FalconConfig): LayerNorm blocks (layer_norm_epsilon) with an
// ungated MLP (ffn_hidden_size, 4 hidden_size by default; activation "gelu"), biases everywhere or nowhere
// (bias), rotary positions over whole heads, q, k and v in one query_key_value grouped by key/value head
// (each group's queries, then its key and value: hf::llama_name_table); key/value heads num_kv_heads with
// new_decoder_architecture (Falcon 40B, 180B), else 1 when multi_query (Falcon 7B) or one a head. The layer:
// new_decoder_architecture's is parallel with num_ln_in_parallel_attn norms (2 by default: ln_attn, ln_mlp);
// the older one parallel through its one input_layernorm when parallel_attn, else sequential. alibi
// (Falcon-RW) is refused by name. FalconConfig's defaults: tied embeddings, multi_query, parallel_attn.
void read_falcon(const Reader& r, Config& c) {
  if (r.boolean("alibi", false))
    throw r.fail("alibi", "true is not supported (saccade runs rotary positions)");
  c.architecture = Architecture::Llama;
  c.norm_type = "layer_norm";
  c.gated_mlp = false;
  c.hidden_size = r.integer("hidden_size", std::nullopt);
  c.num_hidden_layers = r.integer("num_hidden_layers", std::nullopt);
  c.num_attention_heads = r.integer("num_attention_heads", std::nullopt);
  c.max_position_embeddings = r.integer("max_position_embeddings", 2048);
  if (c.hidden_size % c.num_attention_heads != 0)
    throw r.fail("num_attention_heads",
                 fmt::format("{} does not divide hidden_size {}", c.num_attention_heads, c.hidden_size));
  c.head_dim = c.hidden_size / c.num_attention_heads;
  if (c.head_dim % 2 != 0)
    throw r.fail("hidden_size", fmt::format("head_dim {} is odd (rotary needs pairs)", c.head_dim));
  c.intermediate_size = r.integer("ffn_hidden_size", 4 * c.hidden_size);
  c.norm_eps = r.number("layer_norm_epsilon", 1e-5);
  c.hidden_act = read_gate_act(r, "activation", "gelu");
  c.attention_bias = c.mlp_bias = r.boolean("bias", false);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", true);
  read_rope(r, c);
  if (c.partial_rotary_factor != 1.0)
    throw r.fail("partial_rotary_factor", "transformers' Falcon rotates whole heads");
  check_rope_dims(r, c, c.head_dim);
  read_pad(r, c);
  if (r.boolean("new_decoder_architecture", false)) {
    c.num_key_value_heads = r.integer("num_kv_heads", c.num_attention_heads);
    c.parallel_residual = true;  // transformers adds the attention to the MLP's output either way
    c.parallel_norms = r.integer("num_ln_in_parallel_attn", 2);
    if (c.parallel_norms > 2)
      throw r.fail("num_ln_in_parallel_attn", fmt::format("{} is not 1 or 2", c.parallel_norms));
    if (c.parallel_norms == 1 && !r.boolean("parallel_attn", true))
      throw r.fail("parallel_attn",
                   "false with num_ln_in_parallel_attn 1 is a layer transformers cannot run");
  } else {
    c.num_key_value_heads = r.boolean("multi_query", true) ? 1 : c.num_attention_heads;
    c.parallel_residual = r.boolean("parallel_attn", true);
    c.parallel_norms = 1;
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    throw r.fail("num_kv_heads", fmt::format("{} does not divide num_attention_heads {}",
                                             c.num_key_value_heads, c.num_attention_heads));
}

// attn_logit_softcapping and final_logit_softcapping: the family's defaults when absent, none when null.
void read_softcaps(const Reader& r, Config& c, double attn, double final) {
  c.attn_logit_softcapping =
      r.j.contains("attn_logit_softcapping") ? r.number("attn_logit_softcapping", 0.0) : attn;
  c.final_logit_softcapping =
      r.j.contains("final_logit_softcapping") ? r.number("final_logit_softcapping", 0.0) : final;
}

// What Gemma 2 and Gemma 3's text model share: Gemma's (1 + w) norms, √d embeddings and GeGLU
// (hidden_activation), four norms a block, query_pre_attn_scalar, sliding_window layers by layer_types (or
// every default_pattern-th layer full); their configs' defaults (head_dim 256, 4 key/value heads,
// sliding_window 4096, tied, pad 0). A bidirectional model is refused.
void read_gemma_sandwich(const Reader& r, Config& c, int64_t default_pattern) {
  read_llama_common(r, c, 4, 256, "gelu_pytorch_tanh");
  c.hidden_act = read_gate_act(r, "hidden_activation", "gelu_pytorch_tanh");
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", true);
  default_pad(r, c, 0);
  c.norm_unit_offset = true;
  c.norm_placement = "sandwich";
  c.embedding_multiplier = std::sqrt(static_cast<double>(c.hidden_size));
  c.attention_bias = r.boolean("attention_bias", false);
  c.attention_multiplier = 1.0 / std::sqrt(static_cast<double>(r.integer("query_pre_attn_scalar", 256)));
  if (r.boolean("use_bidirectional_attention", false))
    throw r.fail("use_bidirectional_attention", "true is not supported (saccade runs causal decoders)");
  c.sliding_window = read_window(r, 4096);
  if (r.has("layer_types")) {
    c.layer_types = read_layer_types(r, c.num_hidden_layers);
  } else {
    const int64_t pattern = r.integer("sliding_window_pattern", default_pattern);
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      c.layer_types.push_back((i + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
  }
}

// Gemma 3's text model (Gemma Team 2025; transformers' Gemma3TextConfig): Gemma's (1 + w) norms, scaled
// embeddings and GeGLU (hidden_activation), with four norms a block (the "sandwich"), per-head q and k norms,
// the scores scaled by query_pre_attn_scalar^-1/2, and sliding_window layers by layer_types (default: five
// sliding to one full, sliding_window_pattern 6) whose rotary base is the local one (rope_parameters'
// sliding_attention, or rope_local_base_freq; 10000) while the full layers take rope_theta (1e6) and the rope
// scaling; softcapping as Gemma 2's when the file sets it (none by default).
void read_gemma3_text(const Reader& r, Config& c) {
  read_gemma_sandwich(r, c, 6);
  c.qk_norm = true;
  read_softcaps(r, c, 0.0, 0.0);  // Gemma3TextConfig: none by default
  // rotary: rope_parameters per layer type (transformers >= 5), else rope_theta, rope_scaling and
  // rope_local_base_freq at the top level
  c.rope_theta = r.rotary_base("rope_theta", 1e6);
  c.rope_local_base_freq = r.rotary_base("rope_local_base_freq", 10000.0);
  if (r.has("rope_parameters") && r.j["rope_parameters"].is_object() &&
      (r.j["rope_parameters"].contains("full_attention") ||
       r.j["rope_parameters"].contains("sliding_attention"))) {
    const json& p = r.j["rope_parameters"];
    if (p.contains("full_attention")) {
      const json full = {{"rope_parameters", p["full_attention"]}};
      const double theta = c.rope_theta;
      read_rope(Reader{full, r.path}, c);
      if (!p["full_attention"].contains("rope_theta")) c.rope_theta = theta;
    }
    if (p.contains("sliding_attention")) {
      Config local;
      const json sliding = {{"rope_parameters", p["sliding_attention"]},
                            {"rope_theta", c.rope_local_base_freq}};
      read_rope(Reader{sliding, r.path}, local);
      if (local.rope_scaling.type != ops::RopeScaling::Type::Default)
        throw r.fail("rope_parameters.sliding_attention",
                     "a rope_type other than 'default' is not supported");
      c.rope_local_base_freq = local.rope_theta;
    }
  }
}

// Gemma 2 (Gemma Team 2024; transformers' Gemma2Config): read_gemma_sandwich's blocks (every other layer
// full by default) with one rotary base (rope_theta, 10000) and logit soft-capping of the attention scores
// and of the final logits (attn_logit_softcapping 50, final_logit_softcapping 30 when absent; null: none).
void read_gemma2(const Reader& r, Config& c) {
  read_gemma_sandwich(r, c, 2);
  read_softcaps(r, c, 50.0, 30.0);
}

// ---- the mixture-of-experts rows ----

// The MoE keys every MoE row has: the expert count under `experts_key`, num_experts_per_tok (k <= E), the
// load-balancing loss's output_router_logits and router_aux_loss_coef; `defaults` are the config class's.
struct MoeDefaults {
  int64_t experts, k;
  double aux_loss_coef;
};
void read_moe(const Reader& r, Config& c, const char* experts_key, const MoeDefaults& d,
              const char* alias = nullptr) {
  // the config class's attribute_map: `alias` in a file means `experts_key` (transformers 5 writes
  // Qwen3-MoE's num_experts as num_local_experts; the published files say num_experts)
  if (alias && r.has(alias)) {
    if (r.has(experts_key) && r.j[alias] != r.j[experts_key])
      throw r.fail(alias, fmt::format("{} disagrees with \"{}\": {}", r.j[alias].dump(), experts_key,
                                      r.j[experts_key].dump()));
    experts_key = alias;
  }
  c.num_experts = r.integer(experts_key, d.experts);
  c.num_experts_per_tok = r.integer("num_experts_per_tok", d.k);
  if (c.num_experts_per_tok > c.num_experts)
    throw r.fail("num_experts_per_tok",
                 fmt::format("{} is above {} {}", c.num_experts_per_tok, experts_key, c.num_experts));
  c.output_router_logits = r.boolean("output_router_logits", false);
  c.router_aux_loss_coef = r.has("router_aux_loss_coef")
                               ? r.number(r.j["router_aux_loss_coef"], "router_aux_loss_coef", false)
                               : d.aux_loss_coef;
  if (c.router_aux_loss_coef < 0)
    throw r.fail("router_aux_loss_coef", fmt::format("{} is negative", c.router_aux_loss_coef));
}

// The Qwen-MoE rows' keys: each expert's width, renormalised top-k weights, and which layers stay dense
// (decoder_sparse_step, mlp_only_layers; their dense MLPs keep intermediate_size).
void read_qwen_moe(const Reader& r, Config& c, const MoeDefaults& d, int64_t default_width,
                   const char* alias = nullptr) {
  read_moe(r, c, "num_experts", d, alias);
  c.moe_intermediate_size = r.integer("moe_intermediate_size", default_width);
  c.norm_topk_prob = r.boolean("norm_topk_prob", false);
  c.decoder_sparse_step = r.integer("decoder_sparse_step", 1);
  if (r.has("mlp_only_layers")) {
    const json& list = r.j["mlp_only_layers"];
    if (!list.is_array()) throw r.fail("mlp_only_layers", fmt::format("{} is not a list", list.dump()));
    for (const json& i : list) {
      if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= c.num_hidden_layers)
        throw r.fail("mlp_only_layers", fmt::format("{} holds {}, not a layer", list.dump(), i.dump()));
      c.mlp_only_layers.push_back(i.get<int64_t>());
    }
  }
}

// Mixtral (Jiang et al. 2024, Mixtral of Experts; transformers' MixtralConfig): Mistral's blocks (no biases,
// a sliding window when sliding_window is set: none by default) whose MLPs are num_local_experts SwiGLU
// experts (8), 2 a token, the top-k weights always renormalised; MixtralConfig's defaults
// num_key_value_heads 8 and rms_norm_eps 1e-5. router_jitter_noise (training noise on the input) is refused.
void read_mixtral(const Reader& r, Config& c) {
  read_llama_common(r, c, 8);
  c.norm_eps = r.number("rms_norm_eps", 1e-5);
  c.sliding_window = read_window(r, 0);
  read_moe(r, c, "num_local_experts", {8, 2, 0.001}, "num_experts");
  c.norm_topk_prob = true;
  if (r.has("router_jitter_noise") && r.number(r.j["router_jitter_noise"], "router_jitter_noise", false) != 0)
    throw r.fail("router_jitter_noise", "a value other than 0 is not supported");
  for (const char* key : {"attention_bias", "mlp_bias"})
    r.ignored_unless_false(key, "transformers' MixtralForCausalLM has no biases");
}

// Qwen2-MoE (Qwen1.5-MoE; transformers' Qwen2MoeConfig): Qwen2's blocks (biases on q, k and v by qkv_bias,
// true by default) with sparse MLPs (60 experts of moe_intermediate_size 1408, 4 a token, weights not
// renormalised by default) beside a shared expert (shared_expert_intermediate_size 5632) gated by
// sigmoid(shared_expert_gate x); dense layers by decoder_sparse_step and mlp_only_layers; Qwen2MoeConfig's
// defaults (16 key/value heads); sliding layers with use_sliding_window: every other layer below
// max_window_layers, or as layer_types says.
void read_qwen2_moe(const Reader& r, Config& c) {
  read_llama_common(r, c, 16);
  c.qkv_bias = r.boolean("qkv_bias", true);
  for (const char* key : {"attention_bias", "mlp_bias"})
    r.ignored_unless_false(key, "transformers' Qwen2MoeForCausalLM has biases on q, k and v only (qkv_bias)");
  const int64_t below = r.integer("max_window_layers", 28, 0);
  read_sliding_layers(r, c, 4096, [&](int64_t i) { return (i + 1) % 2 != 0 && i < below; });
  read_qwen_moe(r, c, {60, 4, 0.001}, 1408);
  c.shared_expert_intermediate_size = r.integer("shared_expert_intermediate_size", 5632);
}

// Qwen3-MoE (Qwen3 Technical Report; transformers' Qwen3MoeConfig): Qwen3's blocks (per-head q and k norms,
// biases by attention_bias; head_dim hidden / heads unless given) with sparse MLPs (128 experts of 768, 8 a
// token, norm_topk_prob) and dense layers as Qwen2-MoE's; a sliding window in every layer with
// use_sliding_window; Qwen3MoeConfig's defaults (4 key/value heads).
void read_qwen3_moe(const Reader& r, Config& c) {
  read_llama_common(r, c, 4);
  c.qk_norm = true;
  c.attention_bias = r.boolean("attention_bias", false);
  r.ignored_unless_false("mlp_bias", "transformers' Qwen3MoeMLP has no biases");
  c.sliding_window = r.boolean("use_sliding_window", false) ? read_window(r, 4096) : 0;
  read_qwen_moe(r, c, {128, 8, 0.001}, 768, "num_local_experts");
}

// OLMoE (Muennighoff et al. 2024; transformers' OlmoeConfig): pre-norm blocks with RMSNorms over all heads'
// queries and keys (OLMo 2's q_norm and k_norm) and sparse MLPs (64 experts of intermediate_size, 8 a token,
// weights not renormalised by default); OlmoeConfig's defaults rms_norm_eps 1e-5, pad_token_id 1,
// router_aux_loss_coef 0.01. clip_qkv (clamping q, k and v) is refused.
void read_olmoe(const Reader& r, Config& c) {
  read_olmo_common(r, c, "OlmoeMLP");
  if (r.has("clip_qkv")) throw r.fail("clip_qkv", "clamping q, k and v is not supported (null: none)");
  read_moe(r, c, "num_experts", {64, 8, 0.01}, "num_local_experts");
  c.norm_topk_prob = r.boolean("norm_topk_prob", false);
}

// One row a model_type: the architectures names transformers writes for it, and its reader.
struct Family {
  const char* model_type;
  std::vector<std::string> architectures;
  void (*read)(const Reader&, Config&);
};
const std::vector<Family>& families() {
  static const std::vector<Family> rows = {
      {"gpt2", {"GPT2LMHeadModel", "GPT2Model"}, read_gpt2},
      {"llama", {"LlamaForCausalLM", "LlamaModel"}, read_llama},
      {"mistral", {"MistralForCausalLM", "MistralModel"}, read_mistral},
      {"qwen2", {"Qwen2ForCausalLM", "Qwen2Model"}, read_qwen2},
      {"qwen3", {"Qwen3ForCausalLM", "Qwen3Model"}, read_qwen3},
      {"gemma", {"GemmaForCausalLM", "GemmaModel"}, read_gemma},
      {"granite", {"GraniteForCausalLM", "GraniteModel"}, read_granite},
      {"smollm3", {"SmolLM3ForCausalLM", "SmolLM3Model"}, read_smollm3},
      {"phi3", {"Phi3ForCausalLM", "Phi3Model"}, read_phi3},
      {"olmo2", {"Olmo2ForCausalLM", "Olmo2Model"}, read_olmo2},
      {"gemma3_text", {"Gemma3ForCausalLM", "Gemma3TextModel"}, read_gemma3_text},
      {"gemma2", {"Gemma2ForCausalLM", "Gemma2Model"}, read_gemma2},
      {"mixtral", {"MixtralForCausalLM", "MixtralModel"}, read_mixtral},
      {"qwen2_moe", {"Qwen2MoeForCausalLM", "Qwen2MoeModel"}, read_qwen2_moe},
      {"qwen3_moe", {"Qwen3MoeForCausalLM", "Qwen3MoeModel"}, read_qwen3_moe},
      {"olmoe", {"OlmoeForCausalLM", "OlmoeModel"}, read_olmoe},
      {"gpt_neox", {"GPTNeoXForCausalLM", "GPTNeoXModel"}, read_gpt_neox},
      {"stablelm", {"StableLmForCausalLM", "StableLmModel"}, read_stablelm},
      {"falcon", {"FalconForCausalLM", "FalconModel"}, read_falcon},
  };
  return rows;
}

// The row of `model_type`, or null when the table has none.
const Family* find_family(const std::string& model_type) {
  for (const Family& f : families())
    if (model_type == f.model_type) return &f;
  return nullptr;
}

// Granite's own multipliers differ from a Llama's (a Gemma's embedding multiplier is its own √hidden_size)
bool granite_scalars(const Config& c) {
  return (!c.norm_unit_offset && c.embedding_multiplier != 1.0) || c.residual_multiplier != 1.0 ||
         c.logits_scaling != 1.0;
}

// ... or its attention multiplier does (0: a Llama's 1/√head_dim)
bool granite_multipliers(const Config& c) { return granite_scalars(c) || c.attention_multiplier > 0; }

// Qwen-MoE's switches: dense MLPs among the sparse ones, and experts narrower than intermediate_size
bool moe_dense_layers(const Config& c) { return c.decoder_sparse_step != 1 || !c.mlp_only_layers.empty(); }
bool moe_narrow_experts(const Config& c) {
  return c.moe_intermediate_size > 0 && c.moe_intermediate_size != c.intermediate_size;
}

// Gemma 3's query_pre_attn_scalar: the integer s with attention_multiplier = s^-1/2, or 0 when there is none
int64_t query_pre_attn_scalar(const Config& c) {
  if (!(c.attention_multiplier > 0)) return 0;
  const double s = std::round(1.0 / (c.attention_multiplier * c.attention_multiplier));
  return s >= 1 && s < 1e12 && 1.0 / std::sqrt(s) == c.attention_multiplier ? static_cast<int64_t>(s) : 0;
}

// The switches of a Llama-architecture config that some rows' transformers configs cannot say: `type` (the
// row llama_family picked) must read every one that is set, else config_json would write a config that
// transformers runs differently.
std::optional<std::string> unwritable(const Config& c, const std::string& type) {
  struct Switch {
    bool set;
    std::string what;
    std::vector<std::string> rows;  // the rows whose config says it
  };
  const bool gemma = type == "gemma" || type == "gemma2" || type == "gemma3_text";
  const bool sandwich_row = type == "gemma2" || type == "gemma3_text";
  const Switch switches[] = {
      {c.sliding_window > 0,
       fmt::format("a sliding window ({})", c.sliding_window),
       {"mistral", "phi3", "gemma2", "gemma3_text", "qwen2", "qwen3", "smollm3", "mixtral", "qwen2_moe",
        "qwen3_moe"}},
      {c.num_experts > 0, "sparse MoE MLPs", {"mixtral", "qwen2_moe", "qwen3_moe", "olmoe"}},
      {c.shared_expert_intermediate_size > 0, "a shared expert", {"qwen2_moe"}},
      {c.num_experts > 0 && !c.norm_topk_prob,
       "top-k weights not renormalised",
       {"qwen2_moe", "qwen3_moe", "olmoe"}},
      {c.num_experts > 0 && moe_dense_layers(c),
       "dense layers among the sparse ones",
       {"qwen2_moe", "qwen3_moe"}},
      {moe_narrow_experts(c), "experts of another width than intermediate_size", {"qwen2_moe", "qwen3_moe"}},
      {c.partial_rotary_factor != 1.0,
       fmt::format("partial_rotary_factor {}", c.partial_rotary_factor),
       {"phi3", "gpt_neox", "stablelm"}},
      {c.attention_bias,
       "attention biases",
       {"llama", "qwen3", "gemma", "granite", "smollm3", "olmo2", "gemma2", "gemma3_text", "qwen3_moe",
        "olmoe", "gpt_neox", "falcon"}},
      {c.norm_type == "layer_norm", "LayerNorms", {"gpt_neox", "stablelm", "falcon"}},
      {c.parallel_residual && c.parallel_norms == 2,
       "a parallel residual with two norms",
       {"gpt_neox", "falcon"}},
      {c.parallel_residual && c.parallel_norms == 1,
       "a parallel residual with one norm",
       {"stablelm", "falcon"}},
      {!c.gated_mlp, "an ungated MLP", {"gpt_neox", "falcon"}},
      {c.qk_norm_full_width, "q and k norms over all heads", {"olmo2", "olmoe"}},
      {c.norm_placement == "post", "norm_placement 'post'", {"olmo2"}},
      {c.norm_placement == "sandwich", "norm_placement 'sandwich'", {"gemma2", "gemma3_text"}},
      {!c.layer_types.empty(),
       "layer_types",
       {"gemma2", "gemma3_text", "qwen2", "qwen3", "smollm3", "qwen2_moe"}},
      {c.attn_logit_softcapping > 0 || c.final_logit_softcapping > 0,
       "logit soft-capping",
       {"gemma2", "gemma3_text"}},
      {c.rope_local_base_freq > 0, "a local rotary base", {"gemma3_text"}},
      {c.mlp_bias, "MLP biases", {"llama", "granite", "smollm3", "gpt_neox", "falcon"}},
      {c.qkv_bias && !c.attention_bias, "biases on q, k and v only", {"qwen2", "qwen2_moe", "stablelm"}},
      {c.qk_norm, "per-head q and k norms", {"qwen3", "gemma3_text", "qwen3_moe"}},
      {c.norm_unit_offset, "RMSNorm weights as offsets from one", {"gemma", "gemma2", "gemma3_text"}},
      {granite_scalars(c), "Granite's multipliers", {"granite"}},
      {c.attention_multiplier > 0, "an attention multiplier", {"granite", "gemma2", "gemma3_text"}},
      {sandwich_row && query_pre_attn_scalar(c) == 0,
       fmt::format("an attention multiplier {} (Gemma 3's is query_pre_attn_scalar^-1/2 of an integer)",
                   c.attention_multiplier),
       {}},
      {!c.no_rope_layers.empty(), "no_rope_layers (NoPE layers)", {"smollm3"}},
      {gemma && c.embedding_multiplier != std::sqrt(static_cast<double>(c.hidden_size)),
       fmt::format("an embedding multiplier {} (Gemma's is sqrt(hidden_size))", c.embedding_multiplier),
       {}},
      {type == "gemma" && c.hidden_act == "gelu",
       "exact GELU (GemmaConfig reads 'gelu' as its tanh form)",
       {}},
  };
  // what a row's transformers model always has
  const std::pair<const char*, bool> needs[] = {
      {"qwen2", c.qkv_bias && !c.attention_bias},
      {"qwen3", c.qk_norm},
      {"gemma", c.norm_unit_offset},
      {"granite", c.attention_multiplier > 0},
      {"smollm3", !c.no_rope_layers.empty()},
      {"olmo2", c.qk_norm_full_width && c.norm_placement == "post"},
      {"gemma3_text",
       c.norm_unit_offset && c.qk_norm && c.norm_placement == "sandwich" && !c.layer_types.empty()},
      {"gemma2", c.norm_unit_offset && c.norm_placement == "sandwich" && !c.layer_types.empty()},
      {"mixtral", c.num_experts > 0 && c.norm_topk_prob},
      {"qwen2_moe", c.num_experts > 0 && c.shared_expert_intermediate_size > 0},
      {"qwen3_moe", c.num_experts > 0 && c.qk_norm},
      {"olmoe", c.num_experts > 0 && c.qk_norm_full_width && c.norm_placement == "pre"},
      {"gpt_neox", c.norm_type == "layer_norm" && !c.gated_mlp && c.mlp_bias &&
                       c.num_key_value_heads == c.num_attention_heads &&
                       c.head_dim * c.num_attention_heads == c.hidden_size},
      {"stablelm", c.norm_type == "layer_norm" && c.gated_mlp},
      {"falcon", c.norm_type == "layer_norm" && !c.gated_mlp && c.attention_bias == c.mlp_bias &&
                     c.head_dim * c.num_attention_heads == c.hidden_size &&
                     (c.parallel_residual || c.num_key_value_heads == 1 ||
                      c.num_key_value_heads == c.num_attention_heads)}};
  for (const auto& [row, has] : needs)
    if (type == row && !has)
      return fmt::format("a '{}' config without the switch every '{}' model has", row, row);
  for (const Switch& w : switches)
    if (w.set && std::find(w.rows.begin(), w.rows.end(), type) == w.rows.end())
      return fmt::format(
          "a Llama-architecture model with {} has no transformers config (its other switches "
          "are the '{}' row's)",
          w.what, type);
  return std::nullopt;
}

void refuse_unwritable(const Config& c, const std::string& type) {
  if (const std::optional<std::string> why = unwritable(c, type)) throw Error("hf::config_json: " + *why);
}

}  // namespace

// The row that holds the layout (hf/config.h): the one it was read as where that row's config can say it,
// else the row its switches need; a window alone is Mistral's (transformers' LlamaForCausalLM ignores
// "sliding_window")
std::string llama_family(const Config& c) {
  if (const Family* f = find_family(c.model_type); f && f->read != read_gpt2 && !unwritable(c, c.model_type))
    return c.model_type;  // the row it was read as, where that row's config says every switch
  if (c.norm_type == "layer_norm") {
    if (c.gated_mlp) return "stablelm";
    const bool neox = c.num_key_value_heads == c.num_attention_heads && c.mlp_bias &&
                      (!c.parallel_residual || c.parallel_norms == 2);
    return neox ? "gpt_neox" : "falcon";
  }
  if (c.num_experts > 0) {
    if (c.shared_expert_intermediate_size > 0) return "qwen2_moe";
    if (c.qk_norm) return "qwen3_moe";
    if (c.qk_norm_full_width) return "olmoe";
    return c.norm_topk_prob && !moe_dense_layers(c) && !moe_narrow_experts(c) ? "mixtral" : "qwen3_moe";
  }
  if (c.norm_placement == "sandwich") return c.qk_norm ? "gemma3_text" : "gemma2";
  if (c.qk_norm) return "qwen3";
  if (c.qkv_bias && !c.attention_bias) return "qwen2";
  if (c.norm_unit_offset) return "gemma";
  if (granite_multipliers(c)) return "granite";
  if (!c.no_rope_layers.empty()) return "smollm3";
  if (c.partial_rotary_factor != 1.0) return "phi3";
  if (c.qk_norm_full_width || c.norm_placement != "pre") return "olmo2";
  if (c.model_type == "mistral" || c.sliding_window > 0) return "mistral";
  return "llama";
}

std::vector<std::string> supported_model_types() {
  std::vector<std::string> out;
  for (const Family& f : families()) out.push_back(f.model_type);
  return out;
}

Config parse_config(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("hf::load_config: '{}': not JSON: {}", path, e.what()));
  }
  if (!j.is_object()) throw Error(fmt::format("hf::load_config: '{}': not a JSON object", path));
  const Reader r{j, path};
  Config c;
  c.model_type = r.string("model_type", "");
  c.vocab_size = r.integer("vocab_size", std::nullopt);
  c.bos_token_id = r.ids("bos_token_id");
  c.eos_token_id = r.ids("eos_token_id");
  c.torch_dtype = r.has("dtype") ? r.string("dtype", "") : r.string("torch_dtype", "");
  if (const Family* f = find_family(c.model_type)) {
    check_architectures(r, f->architectures);
    f->read(r, c);
    return c;
  }
  const std::string known = fmt::format("'{}'", fmt::join(supported_model_types(), "', '"));
  throw r.fail("model_type", c.model_type.empty() ? fmt::format("missing (saccade reads {})", known)
                                                  : fmt::format("'{}' is not supported (saccade reads {})",
                                                                c.model_type, known));
}

Config load_config(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(fmt::format("hf::load_config: cannot read '{}'", path));
  std::ostringstream text;
  text << f.rdbuf();
  return parse_config(text.str(), path);
}

std::string config_json(const Config& c) {
  json j;
  auto ids = [](const std::vector<int64_t>& v) -> json {
    if (v.empty()) return nullptr;
    if (v.size() == 1) return v[0];
    return v;
  };
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["bos_token_id"] = ids(c.bos_token_id);
  j["eos_token_id"] = ids(c.eos_token_id);
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (!c.torch_dtype.empty()) j["dtype"] = c.torch_dtype;
  if (c.architecture == Architecture::GPT2) {
    j["architectures"] = {"GPT2LMHeadModel"};
    j["n_embd"] = c.hidden_size;
    j["n_layer"] = c.num_hidden_layers;
    j["n_head"] = c.num_attention_heads;
    j["n_positions"] = c.max_position_embeddings;
    j["n_inner"] = c.intermediate_size;
    j["layer_norm_epsilon"] = c.norm_eps;
    j["activation_function"] = c.hidden_act;
  } else {
    const std::string type = llama_family(c);
    refuse_unwritable(c, type);
    j["model_type"] = type;
    j["architectures"] = {find_family(type)->architectures.front()};  // llama_family names a row
    j["hidden_size"] = c.hidden_size;
    j["num_hidden_layers"] = c.num_hidden_layers;
    j["num_attention_heads"] = c.num_attention_heads;
    j["num_key_value_heads"] = c.num_key_value_heads;
    j["head_dim"] = c.head_dim;
    j["intermediate_size"] = c.intermediate_size;
    j["max_position_embeddings"] = c.max_position_embeddings;
    j["rms_norm_eps"] = c.norm_eps;
    j["rope_theta"] = c.rope_theta;
    const ops::RopeScaling& s = c.rope_scaling;
    if (s.type == ops::RopeScaling::Type::Linear) {
      j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", s.factor}};
    } else if (s.type == ops::RopeScaling::Type::Dynamic) {
      j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", s.factor}};
    } else if (s.type == ops::RopeScaling::Type::Llama3) {
      j["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", s.factor},
                           {"low_freq_factor", s.low_freq_factor},
                           {"high_freq_factor", s.high_freq_factor},
                           {"original_max_position_embeddings", s.original_max_position_embeddings}};
    } else if (s.type == ops::RopeScaling::Type::Yarn) {
      j["rope_scaling"] = {{"rope_type", "yarn"},
                           {"factor", s.factor},
                           {"original_max_position_embeddings", s.original_max_position_embeddings},
                           {"beta_fast", s.beta_fast},
                           {"beta_slow", s.beta_slow},
                           {"truncate", s.truncate}};
      if (s.attention_factor > 0) j["rope_scaling"]["attention_factor"] = s.attention_factor;
      if (s.mscale > 0) j["rope_scaling"]["mscale"] = s.mscale;
      if (s.mscale_all_dim > 0) j["rope_scaling"]["mscale_all_dim"] = s.mscale_all_dim;
    } else if (s.type == ops::RopeScaling::Type::LongRope) {
      j["rope_scaling"] = {{"rope_type", "longrope"},
                           {"factor", s.factor},
                           {"original_max_position_embeddings", s.original_max_position_embeddings},
                           {"short_factor", s.short_factor},
                           {"long_factor", s.long_factor}};
      if (s.attention_factor > 0) j["rope_scaling"]["attention_factor"] = s.attention_factor;
      // also at the top level, where Phi3Config keeps its own (and where it wins for every config)
      j["original_max_position_embeddings"] = s.original_max_position_embeddings;
    }
    const bool sandwich_row = type == "gemma2" || type == "gemma3_text";
    const auto or_null = [](auto v) { return v > 0 ? json(v) : json(nullptr); };  // 0: none, null in the file
    j[sandwich_row ? "hidden_activation" : "hidden_act"] = c.hidden_act;
    j["pad_token_id"] = c.pad_token_id ? json(*c.pad_token_id) : json(nullptr);
    if (sandwich_row) {
      j["query_pre_attn_scalar"] = query_pre_attn_scalar(c);
      j["sliding_window"] = or_null(c.sliding_window);
      j["layer_types"] = c.layer_types;
      if (type == "gemma3_text") j["rope_local_base_freq"] = c.rope_local_base_freq;
      j["attn_logit_softcapping"] = or_null(c.attn_logit_softcapping);
      j["final_logit_softcapping"] = or_null(c.final_logit_softcapping);
    }
    if (type == "qwen3" || type == "gemma" || type == "olmo2" || sandwich_row || type == "qwen3_moe" ||
        type == "olmoe") {
      j["attention_bias"] = c.attention_bias;
    } else if (type == "mistral" || type == "phi3" || type == "mixtral") {
      j["sliding_window"] = or_null(c.sliding_window);
    } else if (type == "llama" || type == "granite" || type == "smollm3") {
      j["attention_bias"] = c.attention_bias;
      j["mlp_bias"] = c.mlp_bias;
    }
    if (type == "qwen2" || type == "qwen3" || type == "smollm3") {
      // the window in the layers layer_types names, else in every layer
      j["use_sliding_window"] = c.sliding_window > 0;
      j["sliding_window"] = or_null(c.sliding_window);
      if (c.sliding_window > 0)
        j["layer_types"] =
            !c.layer_types.empty()
                ? c.layer_types
                : std::vector<std::string>(static_cast<size_t>(c.num_hidden_layers), "sliding_attention");
    }
    if (type == "qwen3_moe") {
      j["use_sliding_window"] = c.sliding_window > 0;
      j["sliding_window"] = or_null(c.sliding_window);
    }
    if (type == "qwen2_moe") {
      j["qkv_bias"] = c.qkv_bias;
      j["use_sliding_window"] = c.sliding_window > 0;
      j["sliding_window"] = or_null(c.sliding_window);
      j["layer_types"] =
          !c.layer_types.empty()
              ? c.layer_types
              : std::vector<std::string>(static_cast<size_t>(c.num_hidden_layers),
                                         c.sliding_window > 0 ? "sliding_attention" : "full_attention");
      j["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
    }
    if (type == "olmoe") j["clip_qkv"] = nullptr;
    if (c.num_experts > 0) {
      j[type == "mixtral" ? "num_local_experts" : "num_experts"] = c.num_experts;
      j["num_experts_per_tok"] = c.num_experts_per_tok;
      if (type != "mixtral") j["norm_topk_prob"] = c.norm_topk_prob;
      if (type == "qwen2_moe" || type == "qwen3_moe") {
        j["moe_intermediate_size"] =
            c.moe_intermediate_size > 0 ? c.moe_intermediate_size : c.intermediate_size;
        j["decoder_sparse_step"] = c.decoder_sparse_step;
        j["mlp_only_layers"] = c.mlp_only_layers;
      }
      j["output_router_logits"] = c.output_router_logits;
      j["router_aux_loss_coef"] = c.router_aux_loss_coef;
    }
    if (type == "phi3") j["partial_rotary_factor"] = c.partial_rotary_factor;
    if (type == "falcon") {
      // FalconConfig's own names: the sizes, bias, activation, and the layer (read_falcon)
      for (const char* key : {"num_key_value_heads", "head_dim", "intermediate_size", "rms_norm_eps",
                              "hidden_act", "attention_bias", "mlp_bias"})
        j.erase(key);
      const bool grouped = c.num_key_value_heads != 1 && c.num_key_value_heads != c.num_attention_heads;
      const bool new_arch = (c.parallel_residual && c.parallel_norms == 2) || grouped;
      j["new_decoder_architecture"] = new_arch;
      j["num_kv_heads"] = c.num_key_value_heads;
      j["multi_query"] = c.num_key_value_heads == 1;
      j["parallel_attn"] = c.parallel_residual;
      j["num_ln_in_parallel_attn"] = new_arch ? json(c.parallel_norms) : json(nullptr);
      j["bias"] = c.attention_bias;
      j["alibi"] = false;
      j["layer_norm_epsilon"] = c.norm_eps;
      j["ffn_hidden_size"] = c.intermediate_size;
      j["activation"] = c.hidden_act;
    }
    if (type == "gpt_neox" || type == "stablelm") {
      // LayerNorm's eps under its own name; the rotary settings in rope_parameters, where GPTNeoXConfig
      // reads partial_rotary_factor (a top-level key of that name it does not read), with the older
      // rotary_pct and rotary_emb_base beside them for transformers before 5
      j.erase("rms_norm_eps");
      j["layer_norm_eps"] = c.norm_eps;
      json rope = j.contains("rope_scaling") ? j["rope_scaling"] : json{{"rope_type", "default"}};
      j.erase("rope_scaling");
      rope["rope_theta"] = c.rope_theta;
      rope["partial_rotary_factor"] = c.partial_rotary_factor;
      j["rope_parameters"] = rope;
      j["use_parallel_residual"] = c.parallel_residual;
      if (type == "gpt_neox") {
        j["attention_bias"] = c.attention_bias;
        j["rotary_pct"] = c.partial_rotary_factor;
        j["rotary_emb_base"] = c.rope_theta;
      } else {
        j["use_qkv_bias"] = c.qkv_bias;
        j["qk_layernorm"] = false;
        j["partial_rotary_factor"] = c.partial_rotary_factor;
      }
    }
    if (type == "smollm3") j["no_rope_layers"] = c.no_rope_layers;
    if (type == "granite") {
      j["embedding_multiplier"] = c.embedding_multiplier;
      j["residual_multiplier"] = c.residual_multiplier;
      j["attention_multiplier"] = c.attention_multiplier;
      j["logits_scaling"] = c.logits_scaling;
    }
  }
  return j.dump(2) + "\n";
}

}  // namespace saccade::hf
