#include "hf/gguf_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <utf8proc.h>
#include <nlohmann/json.hpp>

#include "hf/bpe.h"
#include "hf/llama.h"
#include "nn/linear.h"
#include "ops/elementwise.h"

namespace saccade::hf {

using nlohmann::json;

namespace {

// ---- the metadata ----

// Typed lookups of `file`'s metadata, each naming `op`, the file and the key in its errors.
struct Meta {
  const GgufFile& file;
  const char* op;

  Error fail(const std::string& key, const std::string& what) const {
    return Error(fmt::format("{}: '{}': key '{}': {}", op, file.path(), key, what));
  }
  const GgufValue* get(const std::string& key, GgufValue::Kind kind, bool required) const {
    const GgufValue* v = file.find(key);
    if (!v) {
      if (required) throw fail(key, "missing");
      return nullptr;
    }
    if (v->kind != kind) {
      static const char* const kinds[] = {"an integer", "a float", "a bool", "a string", "an array"};
      throw fail(key, fmt::format("not {} (GGUF value type {})", kinds[static_cast<int>(kind)], v->type));
    }
    return v;
  }
  // An integer >= lo; `fallback` when absent (required when it has none).
  int64_t integer(const std::string& key, std::optional<int64_t> fallback, int64_t lo = 1) const {
    const GgufValue* v = get(key, GgufValue::Kind::Int, !fallback);
    if (!v) return *fallback;
    if (v->i < lo) throw fail(key, fmt::format("{} is below {}", v->i, lo));
    return v->i;
  }
  std::optional<int64_t> maybe_integer(const std::string& key) const {
    const GgufValue* v = get(key, GgufValue::Kind::Int, false);
    return v ? std::optional<int64_t>(v->i) : std::nullopt;
  }
  double number(const std::string& key, std::optional<double> fallback) const {
    const GgufValue* v = get(key, GgufValue::Kind::Float, !fallback);
    if (!v) return *fallback;
    if (!(v->f > 0) || !std::isfinite(v->f))
      throw fail(key, fmt::format("{} is not a finite positive number", v->f));
    // a float32 stands for the shortest decimal that rounds to it (the writer's 1e-6, not 9.99999997e-7)
    // (strtod, not stod: a subnormal's ERANGE would throw std::out_of_range)
    return v->type == 6 ? std::strtod(fmt::format("{}", static_cast<float>(v->f)).c_str(), nullptr) : v->f;
  }
  bool flag(const std::string& key, bool fallback) const {
    const GgufValue* v = get(key, GgufValue::Kind::Bool, false);
    return v ? v->b : fallback;
  }
  std::string string(const std::string& key) const { return get(key, GgufValue::Kind::String, true)->s; }
  // An array of `kind`s (the whole list is checked).
  const std::vector<GgufValue>& list(const std::string& key, GgufValue::Kind kind) const {
    const GgufValue* v = get(key, GgufValue::Kind::Array, true);
    for (size_t i = 0; i < v->array.size(); ++i)
      if (v->array[i].kind != kind)
        throw fail(fmt::format("{}[{}]", key, i), "of another type than the list needs");
    return v->array;
  }
};

// ---- the rows: general.architecture -> model_type, and what each reads ----

using Names = std::vector<std::pair<std::string, std::string>>;

struct Row {
  const char* arch;
  const char* model_type;
  const char* architectures;
  // convert_hf_to_gguf's LlamaModel.permute (ggml rotates pairs of adjacent rows)
  bool permuted_qk = false;
  // GPT-2's keys and names, and its Conv1D weights, stored (in, out) by transformers
  bool gpt2 = false;
  // Gemma's: every RMSNorm weight stored as 1 + w (GemmaModel.modify_tensors)
  bool norm_plus_one = false;
  // Phi-3's: fused attn_qkv and ffn_up (gate, then up), partial rotation, LongRoPE factors
  bool phi3 = false;
  // GPT-NeoX's: its keys and names, LayerNorms with biases, attn_qkv as q, k, v blocks (GPTNeoXModel)
  bool neox = false;
  // StableLM's: GPT-NeoX's keys with key/value heads, Llama's names, LayerNorms with biases (StableLMModel)
  bool stablelm = false;
  // Falcon's: its keys and names, attn_qkv as q, k, v blocks ("jploski" layout), parallel blocks
  // (FalconModel)
  bool falcon = false;
  // Gemma 2's and 3's: four norms a block (ffn_norm the pre-feedforward one), sliding-window layers in a
  // pattern, the score scale llama.cpp derives (Gemma2Model, Gemma3Model)
  bool sandwich = false;
};

constexpr Row kRows[] = {
    {.arch = "llama", .model_type = "llama", .architectures = "LlamaForCausalLM", .permuted_qk = true},
    {.arch = "qwen2", .model_type = "qwen2", .architectures = "Qwen2ForCausalLM"},
    {.arch = "qwen3", .model_type = "qwen3", .architectures = "Qwen3ForCausalLM"},
    {.arch = "qwen3moe", .model_type = "qwen3_moe", .architectures = "Qwen3MoeForCausalLM"},
    {.arch = "olmoe", .model_type = "olmoe", .architectures = "OlmoeForCausalLM"},
    {.arch = "qwen2moe", .model_type = "qwen2_moe", .architectures = "Qwen2MoeForCausalLM"},
    {.arch = "olmo2", .model_type = "olmo2", .architectures = "Olmo2ForCausalLM"},
    {.arch = "granite", .model_type = "granite", .architectures = "GraniteForCausalLM", .permuted_qk = true},
    {.arch = "smollm3", .model_type = "smollm3", .architectures = "SmolLM3ForCausalLM", .permuted_qk = true},
    {.arch = "gemma", .model_type = "gemma", .architectures = "GemmaForCausalLM", .norm_plus_one = true},
    {.arch = "gemma2",
     .model_type = "gemma2",
     .architectures = "Gemma2ForCausalLM",
     .norm_plus_one = true,
     .sandwich = true},
    {.arch = "gemma3",
     .model_type = "gemma3_text",
     .architectures = "Gemma3ForCausalLM",
     .norm_plus_one = true,
     .sandwich = true},
    {.arch = "phi3", .model_type = "phi3", .architectures = "Phi3ForCausalLM", .phi3 = true},
    {.arch = "gptneox", .model_type = "gpt_neox", .architectures = "GPTNeoXForCausalLM", .neox = true},
    {.arch = "stablelm", .model_type = "stablelm", .architectures = "StableLmForCausalLM", .stablelm = true},
    {.arch = "falcon", .model_type = "falcon", .architectures = "FalconForCausalLM", .falcon = true},
    {.arch = "gpt2", .model_type = "gpt2", .architectures = "GPT2LMHeadModel", .gpt2 = true},
};

const Row* find_row(const std::string& arch) {
  for (const Row& r : kRows)
    if (arch == r.arch) return &r;
  return nullptr;
}

// The "{arch}." keys gguf_config reads (every other one is refused): the Llama family's, GPT-2's.
const std::vector<std::string> kReadKeys = {"block_count",
                                            "context_length",
                                            "embedding_length",
                                            "feed_forward_length",
                                            "attention.head_count",
                                            "attention.head_count_kv",
                                            "attention.key_length",
                                            "attention.value_length",
                                            "rope.dimension_count",
                                            "rope.freq_base",
                                            "rope.scaling.type",
                                            "rope.scaling.factor",
                                            "rope.scaling.original_context_length",
                                            "rope.scaling.yarn_attn_factor",
                                            "rope.scaling.yarn_beta_fast",
                                            "rope.scaling.yarn_beta_slow",
                                            "attention.layer_norm_rms_epsilon",
                                            "expert_count",
                                            "expert_used_count",
                                            "expert_feed_forward_length",
                                            "expert_shared_feed_forward_length",
                                            "vocab_size"};
// Phi-3's besides (Phi3MiniModel.set_gguf_parameters and generate_extra_tensors), and Granite's multipliers
// (GraniteModel.set_gguf_parameters)
const std::vector<std::string> kPhi3ReadKeys = {"rope.scaling.attn_factor", "attention.sliding_window"};
const std::vector<std::string> kGraniteReadKeys = {"attention.scale", "embedding_scale", "residual_scale",
                                                   "logit_scale"};
// Gemma 2's and Gemma 3's (Gemma2Model / Gemma3Model.set_gguf_parameters; the pattern, which the converter
// does not write, as llama.cpp reads it); Gemma 3 has no attention soft-capping and a local rotary base
const std::vector<std::string> kGemma2ReadKeys = {"attn_logit_softcapping", "final_logit_softcapping",
                                                  "attention.sliding_window",
                                                  "attention.sliding_window_pattern"};
const std::vector<std::string> kGemma3ReadKeys = {"final_logit_softcapping", "attention.sliding_window",
                                                  "attention.sliding_window_pattern", "rope.freq_base_swa"};
// GPT-NeoX's (GPTNeoXModel.set_gguf_parameters: no rope base, llama.cpp's 10000)
const std::vector<std::string> kNeoxReadKeys = {"block_count",
                                                "context_length",
                                                "embedding_length",
                                                "feed_forward_length",
                                                "attention.head_count",
                                                "rope.dimension_count",
                                                "use_parallel_residual",
                                                "attention.layer_norm_epsilon",
                                                "vocab_size"};
// Falcon's (FalconModel.set_gguf_parameters: context_length always 2048, feed_forward_length always 4 hidden)
const std::vector<std::string> kFalconReadKeys = {
    "tensor_data_layout",  "block_count",          "context_length",          "embedding_length",
    "feed_forward_length", "attention.head_count", "attention.head_count_kv", "attention.layer_norm_epsilon",
    "vocab_size"};
// StableLM's (StableLMModel.set_gguf_parameters: no rope base either)
const std::vector<std::string> kStableLmReadKeys = {"block_count",
                                                    "context_length",
                                                    "embedding_length",
                                                    "feed_forward_length",
                                                    "attention.head_count",
                                                    "attention.head_count_kv",
                                                    "rope.dimension_count",
                                                    "use_parallel_residual",
                                                    "attention.layer_norm_epsilon",
                                                    "vocab_size"};
const std::vector<std::string> kGpt2ReadKeys = {
    "block_count",         "context_length",       "embedding_length",
    "feed_forward_length", "attention.head_count", "attention.layer_norm_epsilon",
    "vocab_size"};

// GGUF's tensor names -> Hugging Face's: a block's tensors "blk.N.<gguf>.weight" (or .bias) are
// "model.layers.N.<hf>.weight" (GPT-2: "transformer.h.N.<hf>.weight"), the others by the second tables.
const Names kBlockNames = {
    {"attn_norm", "input_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"ffn_norm", "post_attention_layernorm"},
    {"post_attention_norm", "post_attention_layernorm"},  // OLMo 2's norms after the sublayers
    {"post_ffw_norm", "post_feedforward_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};
const Names kGlobalNames = {
    {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};
const Names kGpt2BlockNames = {{"attn_norm", "ln_1"},          {"attn_qkv", "attn.c_attn"},
                               {"attn_output", "attn.c_proj"}, {"ffn_norm", "ln_2"},
                               {"ffn_up", "mlp.c_fc"},         {"ffn_down", "mlp.c_proj"}};
const Names kGpt2GlobalNames = {{"token_embd", "transformer.wte"},
                                {"position_embd", "transformer.wpe"},
                                {"output_norm", "transformer.ln_f"},
                                {"output", "lm_head"}};

// How a GGUF tensor becomes its Hugging Face one: the name, the heads its rows are permuted in (0: none), and
// whether it goes back to a Conv1D's (in, out).
struct HfName {
  std::string name;
  int64_t permuted_heads = 0;
  bool transposed = false;
  bool experts = false;    // a stack of experts (E, out, in): `name` holds "{}" for each one's index
  bool minus_one = false;  // Gemma's norms: the file's 1 + w back to w
  // GPT-NeoX's and Falcon's attn_qkv: q (qkv_heads heads), k and v (qkv_kv_heads each) blocks in the file,
  // grouped by key/value head on disk in HF (GPT-NeoX: every head its own group)
  int64_t qkv_heads = 0, qkv_kv_heads = 0;
};

// Falcon's names (transformers' FalconForCausalLM; FalconModel's tensor map): 7B's one norm; 40B's two, its
// ln_mlp as attn_norm and ln_attn as attn_norm_2
const Names kFalconBlockNames = {{"attn_norm", "input_layernorm"},
                                 {"attn_norm_2", "ln_attn"},
                                 {"attn_qkv", "self_attention.query_key_value"},
                                 {"attn_output", "self_attention.dense"},
                                 {"ffn_up", "mlp.dense_h_to_4h"},
                                 {"ffn_down", "mlp.dense_4h_to_h"}};
const Names kFalconGlobalNames = {{"token_embd", "transformer.word_embeddings"},
                                  {"output_norm", "transformer.ln_f"},
                                  {"output", "lm_head"}};

// GPT-NeoX's names (transformers' GPTNeoXForCausalLM; GPTNeoXModel's tensor map)
const Names kNeoxBlockNames = {{"attn_norm", "input_layernorm"},   {"attn_qkv", "attention.query_key_value"},
                               {"attn_output", "attention.dense"}, {"ffn_norm", "post_attention_layernorm"},
                               {"ffn_up", "mlp.dense_h_to_4h"},    {"ffn_down", "mlp.dense_4h_to_h"}};
const Names kNeoxGlobalNames = {{"token_embd", "gpt_neox.embed_in"},
                                {"output_norm", "gpt_neox.final_layer_norm"},
                                {"output", "embed_out"}};

// A sparse MLP's tensors (blk.N.<gguf>.weight): the router and Qwen-MoE's shared expert under "mlp." (the
// router under Mixtral's "block_sparse_moe." for a mixtral), and the stacked experts, one Hugging Face
// tensor an expert (Mixtral's w1, w3, w2; the others' gate_proj, up_proj, down_proj).
const Names kMoeNames = {{"ffn_gate_inp", "gate"},
                         {"ffn_gate_inp_shexp", "shared_expert_gate"},
                         {"ffn_gate_shexp", "shared_expert.gate_proj"},
                         {"ffn_up_shexp", "shared_expert.up_proj"},
                         {"ffn_down_shexp", "shared_expert.down_proj"}};
const Names kExpertNames = {
    {"ffn_gate_exps", "gate_proj"}, {"ffn_up_exps", "up_proj"}, {"ffn_down_exps", "down_proj"}};
const Names kMixtralExpertNames = {{"ffn_gate_exps", "w1"}, {"ffn_up_exps", "w3"}, {"ffn_down_exps", "w2"}};

// `gguf` under its Hugging Face name; unknown names are kept as they are.
HfName hf_name(const std::string& gguf, const Row& row, const Config& c) {
  std::string base = gguf, suffix;
  for (const char* s : {".weight", ".bias"})
    if (gguf.size() > std::strlen(s) &&
        gguf.compare(gguf.size() - std::strlen(s), std::string::npos, s) == 0) {
      base = gguf.substr(0, gguf.size() - std::strlen(s));
      suffix = s;
    }
  if (suffix.empty()) return {gguf};
  if (base.rfind("blk.", 0) == 0) {
    const size_t dot = base.find('.', 4);
    const std::string layer = dot == std::string::npos ? "" : base.substr(4, dot - 4);
    if (layer.empty() || layer.size() > 9 || !std::all_of(layer.begin(), layer.end(), ::isdigit))
      return {gguf};
    const std::string rest = base.substr(dot + 1);
    if (row.neox) {
      for (const auto& [g, h] : kNeoxBlockNames)
        if (rest == g)
          return {.name = fmt::format("gpt_neox.layers.{}.{}{}", std::stoll(layer), h, suffix),
                  .qkv_heads = rest == "attn_qkv" ? c.num_attention_heads : 0,
                  .qkv_kv_heads = rest == "attn_qkv" ? c.num_attention_heads : 0};
      return {gguf};
    }
    if (row.falcon) {
      const bool two_norms = c.parallel_residual && c.parallel_norms == 2;
      for (const auto& [g, h] : kFalconBlockNames)
        if (rest == g)
          return {.name = fmt::format("transformer.h.{}.{}{}", std::stoll(layer),
                                      rest == "attn_norm" && two_norms ? "ln_mlp" : h, suffix),
                  .qkv_heads = rest == "attn_qkv" ? c.num_attention_heads : 0,
                  .qkv_kv_heads = rest == "attn_qkv" ? c.num_key_value_heads : 0};
      return {gguf};
    }
    if (row.sandwich && rest == "ffn_norm")  // Gemma 2/3: the norm before the MLP, not after attention
      return {.name = fmt::format("model.layers.{}.pre_feedforward_layernorm{}", std::stoll(layer), suffix),
              .minus_one = true};
    if (row.phi3 && (rest == "attn_qkv" || rest == "ffn_up"))  // kept fused, as transformers' Phi3 holds them
      return {fmt::format("model.layers.{}.{}{}", std::stoll(layer),
                          rest == "attn_qkv" ? "self_attn.qkv_proj" : "mlp.gate_up_proj", suffix)};
    for (const auto& [g, h] : row.gpt2 ? kGpt2BlockNames : kBlockNames) {
      if (rest != g) continue;
      const long long n = std::stoll(layer);
      if (row.gpt2)  // the projections' weights are Conv1D's; the norms' are not
        return {fmt::format("transformer.h.{}.{}{}", n, h, suffix), 0,
                suffix == ".weight" && rest != "attn_norm" && rest != "ffn_norm"};
      const int64_t heads = !row.permuted_qk   ? 0
                            : rest == "attn_q" ? c.num_attention_heads
                            : rest == "attn_k" ? c.num_key_value_heads
                                               : 0;
      return {.name = fmt::format("model.layers.{}.{}{}", n, h, suffix),
              .permuted_heads = heads,
              .minus_one = row.norm_plus_one && rest.ends_with("_norm")};
    }
    if (row.gpt2) return {gguf};
    const bool mixtral = c.model_type == "mixtral";
    const std::string moe =
        fmt::format("model.layers.{}.{}", std::stoll(layer), mixtral ? "block_sparse_moe." : "mlp.");
    for (const auto& [g, h] : kMoeNames)
      if (rest == g) return {moe + h + suffix};
    for (const auto& [g, h] : mixtral ? kMixtralExpertNames : kExpertNames)
      if (rest == g && suffix == ".weight")
        return {.name = moe + "experts.{}." + h + suffix, .experts = true};
    return {gguf};
  }
  for (const auto& [g, h] : row.gpt2     ? kGpt2GlobalNames
                            : row.neox   ? kNeoxGlobalNames
                            : row.falcon ? kFalconGlobalNames
                                         : kGlobalNames)
    if (base == g) return {.name = h + suffix, .minus_one = row.norm_plus_one && base == "output_norm"};
  return {gguf};
}

bool readable_type(uint32_t type) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::F32:
    case GgufType::F16:
    case GgufType::BF16:
    case GgufType::Q8_0:
      return true;
  }
  return false;
}

// Rows of `src` (rows × width elements of `elem` bytes) into `dst` in Hugging Face order: within each head of
// d rows, GGUF row 2i + j is row j·d/2 + i (the inverse of LlamaModel.permute).
void unpermute_rows(unsigned char* dst, const unsigned char* src, int64_t rows, size_t row_bytes,
                    int64_t heads) {
  const int64_t d = rows / heads, half = d / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::memcpy(dst + static_cast<size_t>(h * d + j * half + i) * row_bytes,
                    src + static_cast<size_t>(h * d + 2 * i + j) * row_bytes, row_bytes);
}

// Llama 3's rope scaling from the factors convert_hf_to_gguf.py writes in its place, one a frequency
// (rope_freqs.weight, LlamaModel.generate_extra_tensors: θ_i / factor_i is the scaled frequency): the
// rope_scaling whose factors these are, with factor the largest, low_freq_factor 1 and high_freq_factor 4
// (every Llama 3.x model's) and the original context the power of two that gives them (Llama 3's 8192 tried
// first), checked factor by factor. Throws for factors no such rope_scaling gives, naming the tensor.
json llama3_scaling(const GgufFile& file, const GgufTensorInfo& t, int64_t head_dim, double theta) {
  auto fail = [&](const std::string& what) {
    return Error(fmt::format("hf::gguf_config: '{}': tensor 'rope_freqs.weight' {}", file.path(), what));
  };
  if (t.shape.size() != 1 || t.shape[0] != head_dim / 2 || !readable_type(t.type))
    throw fail(fmt::format("is {} of shape {} (need {} floats, one a frequency)", gguf_type_name(t.type),
                           t.shape, head_dim / 2));
  Tensor f = Tensor::empty(t.shape, DType::Float32, Device::cpu(), "hf::gguf_config");
  file.read_into(t, f);
  const float* pf = f.data<float>();
  double factor = 1.0;
  for (int64_t i = 0; i < t.shape[0]; ++i) {
    if (!(pf[i] >= 1.0f) || !std::isfinite(pf[i]))
      throw fail(fmt::format("holds {} at {} (Llama 3's factors are finite and at least 1)", pf[i], i));
    factor = std::max(factor, static_cast<double>(pf[i]));
  }
  const std::vector<double> plain = ops::rotary_inv_freq(head_dim, theta);
  std::vector<int64_t> contexts = {8192};
  for (int64_t L = 16; L <= (int64_t{1} << 24); L *= 2)
    if (L != 8192) contexts.push_back(L);
  for (const int64_t L : contexts) {
    ops::RopeScaling s;
    s.type = ops::RopeScaling::Type::Llama3;
    s.factor = factor, s.low_freq_factor = 1.0, s.high_freq_factor = 4.0,
    s.original_max_position_embeddings = L;
    const std::vector<double> scaled = ops::rotary_inv_freq(head_dim, theta, s, "hf::gguf_config");
    bool same = true;
    for (size_t i = 0; i < plain.size() && same; ++i)
      same = std::fabs(plain[i] / scaled[i] - pf[i]) <= 1e-4 * pf[i];
    if (same)
      return {{"rope_type", "llama3"},
              {"factor", factor},
              {"low_freq_factor", 1.0},
              {"high_freq_factor", 4.0},
              {"original_max_position_embeddings", L},
              {"rope_theta", theta}};
  }
  throw fail(
      fmt::format("holds factors that Llama 3's rope scaling (factor {}, low_freq_factor 1, high_freq_factor "
                  "4, an original context of a power of two) does not give",
                  factor));
}

// The floats of a 1-D tensor of `n` (Phi-3's rope_factors_long / _short.weight), each positive and finite, as
// the shortest decimals that round to them (the config's 1.1, not 1.10000002).
std::vector<double> factor_list(const GgufFile& file, const GgufTensorInfo& t, int64_t n) {
  auto fail = [&](const std::string& what) {
    return Error(fmt::format("hf::gguf_config: '{}': tensor '{}' {}", file.path(), t.name, what));
  };
  if (t.shape.size() != 1 || t.shape[0] != n || !readable_type(t.type))
    throw fail(fmt::format("is {} of shape {} (need {} floats, one a rotated pair)", gguf_type_name(t.type),
                           t.shape, n));
  Tensor f = Tensor::empty(t.shape, DType::Float32, Device::cpu(), "hf::gguf_config");
  file.read_into(t, f);
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) {
    const float v = f.data<float>()[i];
    if (!(v > 0) || !std::isfinite(v))
      throw fail(fmt::format("holds {} at {} (need positive factors)", v, i));
    // its shortest decimal, as Meta::number reads a float32 key
    out.push_back(std::strtod(fmt::format("{}", v).c_str(), nullptr));
  }
  return out;
}

// The rope scaling of the keys convert_hf_to_gguf.py writes for a config's "linear" and "yarn" rope_type
// (TextModel.set_gguf_parameters), as that rope_parameters dict; null without them. rope.scaling.type
// "none", or absent with no factor: none; "linear", or absent with a factor (as llama.cpp reads a factor
// alone): factor; "yarn": factor and original_context_length (required), yarn_attn_factor (transformers'
// attention_factor), yarn_beta_fast and yarn_beta_slow. Another type ("longrope": its factors are not in the
// metadata) and a factor < 1 are refused by key.
json rope_scaling_keys(const Meta& m, const std::string& p, double theta) {
  const std::string type_key = p + "rope.scaling.type", factor_key = p + "rope.scaling.factor";
  const bool has_factor = m.file.find(factor_key) != nullptr;
  const std::string type = m.file.find(type_key) ? m.string(type_key)
                           : has_factor          ? std::string("linear")
                                                 : std::string("none");
  if (type == "none") {
    for (const char* k :
         {"rope.scaling.factor", "rope.scaling.original_context_length", "rope.scaling.yarn_attn_factor",
          "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow"})
      if (m.file.find(p + k)) throw m.fail(p + k, "given without a rope scaling type");
    return nullptr;
  }
  if (type != "linear" && type != "yarn")
    throw m.fail(type_key, fmt::format("'{}' is not read ('none', 'linear' and 'yarn' are)", type));
  const double factor = m.number(factor_key, std::nullopt);
  if (!(factor >= 1)) throw m.fail(factor_key, fmt::format("{} is below 1", factor));
  json r = {{"rope_type", type}, {"factor", factor}, {"rope_theta", theta}};
  if (type == "yarn") {
    r["original_max_position_embeddings"] =
        m.integer(p + "rope.scaling.original_context_length", std::nullopt);
    for (const auto& [key, name] :
         {std::pair{"yarn_attn_factor", "attention_factor"}, std::pair{"yarn_beta_fast", "beta_fast"},
          std::pair{"yarn_beta_slow", "beta_slow"}})
      if (m.file.find(p + "rope.scaling." + key)) r[name] = m.number(p + "rope.scaling." + key, std::nullopt);
  } else {
    for (const char* k : {"rope.scaling.original_context_length", "rope.scaling.yarn_attn_factor",
                          "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow"})
      if (m.file.find(p + k)) throw m.fail(p + k, "not read with rope scaling type 'linear'");
  }
  return r;
}

// Phi-3's rotary (Phi3MiniModel): rope.dimension_count as partial_rotary_factor, attention.sliding_window (0:
// none), and with the tensors rope_factors_long / _short.weight LongRoPE (the factors, rope.scaling.original_
// context_length, required, and rope.scaling.attn_factor, optional), written into `j` as Phi3Config says
// them; the rope_parameters dict, or null without the factors.
json phi3_rope(const Meta& m, const std::string& p, json& j, const GgufTensorInfo* long_factors,
               const GgufTensorInfo* short_factors, int64_t rope_dims, int64_t head_dim) {
  j["partial_rotary_factor"] = static_cast<double>(rope_dims) / static_cast<double>(head_dim);
  const int64_t window = m.integer(p + "attention.sliding_window", 0, 0);
  j["sliding_window"] = window > 0 ? json(window) : json(nullptr);
  if (!long_factors != !short_factors)
    throw Error(fmt::format("hf::gguf_config: '{}': tensor '{}' without '{}'", m.file.path(),
                            long_factors ? "rope_factors_long.weight" : "rope_factors_short.weight",
                            long_factors ? "rope_factors_short.weight" : "rope_factors_long.weight"));
  if (!long_factors) {
    if (m.file.find(p + "rope.scaling.attn_factor"))
      throw m.fail(p + "rope.scaling.attn_factor", "given without tensor 'rope_factors_long.weight'");
    return nullptr;
  }
  const int64_t L = m.integer(p + "rope.scaling.original_context_length", std::nullopt);
  j["original_max_position_embeddings"] = L;
  json r = {{"rope_type", "longrope"},
            {"rope_theta", j["rope_theta"]},
            {"original_max_position_embeddings", L},
            {"short_factor", factor_list(m.file, *short_factors, rope_dims / 2)},
            {"long_factor", factor_list(m.file, *long_factors, rope_dims / 2)}};
  if (m.file.find(p + "rope.scaling.attn_factor"))
    r["attention_factor"] = m.number(p + "rope.scaling.attn_factor", std::nullopt);
  return r;
}

// One row's "{arch}." keys read into the config.json its transformers model reads (`j`), beside the sizes
// every row states, which gguf_config read first. Each reader writes its row's keys under its config's names.
struct RowKeys {
  const Meta& m;
  const Row& row;
  std::string arch, p;  // p: "{arch}."
  int64_t hidden, heads, head_dim, rope_dims;

  bool has(const char* tensor) const { return m.file.tensor(tensor) != nullptr; }
  // the sizes every row states, under its config's names: hidden, layers, heads, context, feed-forward width
  void sizes(json& j, const char* hidden_key, const char* layers_key, const char* heads_key,
             const char* context_key, const char* ffn_key) const {
    j[hidden_key] = hidden;
    j[layers_key] = m.integer(p + "block_count", std::nullopt);
    j[heads_key] = heads;
    j[context_key] = m.integer(p + "context_length", std::nullopt);
    j[ffn_key] = m.integer(p + "feed_forward_length", std::nullopt);
  }

  // GPTNeoXConfig's names; Pythia's exact GELU, which the file does not say
  void neox(json& j) const {
    sizes(j, "hidden_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings",
          "intermediate_size");
    j["layer_norm_eps"] = m.number(p + "attention.layer_norm_epsilon", std::nullopt);
    j["rotary_pct"] = static_cast<double>(rope_dims) / static_cast<double>(head_dim);
    j["rotary_emb_base"] = 10000.0;
    j["use_parallel_residual"] = m.flag(p + "use_parallel_residual", true);
    j["hidden_act"] = "gelu";
    j["attention_bias"] = has("blk.0.attn_qkv.bias");
    j["tie_word_embeddings"] = !has("output.weight");
  }

  // StableLmConfig's names; the rope base 10000, which the file does not say
  void stablelm(json& j) const {
    sizes(j, "hidden_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings",
          "intermediate_size");
    j["num_key_value_heads"] = m.integer(p + "attention.head_count_kv", heads);
    j["layer_norm_eps"] = m.number(p + "attention.layer_norm_epsilon", std::nullopt);
    j["partial_rotary_factor"] = static_cast<double>(rope_dims) / static_cast<double>(head_dim);
    j["rope_theta"] = 10000.0;
    j["use_parallel_residual"] = m.flag(p + "use_parallel_residual", true);
    j["use_qkv_bias"] = has("blk.0.attn_q.bias");
    j["hidden_act"] = "silu";
    j["tie_word_embeddings"] = !has("output.weight");
  }

  // FalconConfig's names; parallel blocks, exact GELU, the rope base 10000
  void falcon(json& j) const {
    if (const std::string layout = m.string(p + "tensor_data_layout"); layout != "jploski")
      throw m.fail(p + "tensor_data_layout",
                   fmt::format("'{}' is not read ('jploski': q, k and v as blocks)", layout));
    const int64_t kv = m.integer(p + "attention.head_count_kv", 1);
    const bool two_norms = has("blk.0.attn_norm_2.weight");
    sizes(j, "hidden_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings",
          "ffn_hidden_size");
    // the converter writes 4 hidden whatever ffn_hidden_size is: the up projection's rows say it
    if (const GgufTensorInfo* up = m.file.tensor("blk.0.ffn_up.weight"); up && up->shape.size() == 2)
      j["ffn_hidden_size"] = up->shape[0];
    j["layer_norm_epsilon"] = m.number(p + "attention.layer_norm_epsilon", std::nullopt);
    j["new_decoder_architecture"] = two_norms || kv != 1;
    j["multi_query"] = kv == 1;
    j["num_kv_heads"] = kv;
    j["parallel_attn"] = true;
    j["num_ln_in_parallel_attn"] = two_norms || kv != 1 ? json(two_norms ? 2 : 1) : json(nullptr);
    j["bias"] = has("blk.0.attn_qkv.bias");
    j["alibi"] = false;
    j["activation"] = "gelu";
    j["tie_word_embeddings"] = !has("output.weight");
  }

  // GPT2Config's own names; GPT-2's MLP is gelu_new, which the file does not say
  void gpt2(json& j) const {
    sizes(j, "n_embd", "n_layer", "n_head", "n_positions", "n_inner");
    j["layer_norm_epsilon"] = m.number(p + "attention.layer_norm_epsilon", std::nullopt);
    j["activation_function"] = "gelu_new";
  }

  // The Llama family's rotary: the base (above 1, checked before Llama 3's factors are compared with its
  // frequencies) and one scaling, from Llama 3's rope_freqs.weight, Phi-3's factor tensors or the keys.
  void llama_rope(json& j) const {
    const double theta = m.number(p + "rope.freq_base", 10000.0);  // finite
    if (!(theta > 1))
      throw m.fail(p + "rope.freq_base", fmt::format("{} is not a finite rotary base above 1", theta));
    j["rope_theta"] = theta;
    const GgufTensorInfo* rope_freqs = m.file.tensor("rope_freqs.weight");
    const json keys = row.phi3 ? phi3_rope(m, p, j, m.file.tensor("rope_factors_long.weight"),
                                           m.file.tensor("rope_factors_short.weight"), rope_dims, head_dim)
                               : rope_scaling_keys(m, p, theta);
    if (rope_freqs && !keys.is_null())
      throw m.fail(p + "rope.scaling.type",
                   "given beside tensor 'rope_freqs.weight' (Llama 3's scaling): two rope scalings");
    if (rope_freqs)
      j["rope_scaling"] = llama3_scaling(m.file, *rope_freqs, head_dim, theta);
    else if (!keys.is_null())
      j["rope_scaling"] = keys;
  }

  // The sparse MLP's keys (a "llama" file with expert_count is a Mixtral's, `mixtral`): top-k weights as
  // llama.cpp's graphs take them, renormalised for Mixtral (always) and qwen3moe (Qwen3-MoE's published
  // configs say norm_topk_prob true), not for olmoe (OlmoeConfig's default) or qwen2moe (its graph; a shared
  // expert).
  void moe(json& j, bool mixtral) const {
    j[mixtral ? "num_local_experts" : "num_experts"] = m.integer(p + "expert_count", std::nullopt);
    j["num_experts_per_tok"] = m.integer(p + "expert_used_count", std::nullopt);
    if (arch == "qwen3moe" || arch == "qwen2moe") {
      j["moe_intermediate_size"] = m.integer(p + "expert_feed_forward_length", std::nullopt);
      j["norm_topk_prob"] = arch == "qwen3moe";
      if (arch == "qwen2moe") {
        j["shared_expert_intermediate_size"] =
            m.integer(p + "expert_shared_feed_forward_length", std::nullopt);
        j["mlp_only_layers"] = json::array();
        j["use_sliding_window"] = false;
      }
    } else {
      if (m.file.find(p + "expert_feed_forward_length"))
        throw m.fail(p + "expert_feed_forward_length",
                     fmt::format("not read for {} (its experts are feed_forward_length wide)",
                                 mixtral ? "a Mixtral" : "an OLMoE"));
      if (mixtral) j["sliding_window"] = nullptr;
      if (arch == "olmoe") j["norm_topk_prob"] = false;
    }
  }

  // Gemma 2's and 3's keys, as llama.cpp reads them where the converter writes none: the score scale
  // 1/sqrt(query_pre_attn_scalar) with query_pre_attn_scalar = head_dim, but hidden / heads for the 27B
  // models (46 layers: Gemma 2, 62: Gemma 3), as their configs say it; the sliding-window layers every layer
  // but each pattern-th (attention.sliding_window_pattern; 2 for Gemma 2, 6 for Gemma 3) with the window
  // (Gemma 2: 4096 without the key; Gemma 3: no window layers without it); the soft-capping of scores (Gemma
  // 2: 50 without the key) and of the logits (Gemma 2: 30; Gemma 3: none); Gemma 3's local rotary base
  // (rope.freq_base_swa, 10000).
  void gemma_sandwich(json& j) const {
    const bool gemma2 = arch == "gemma2";
    const int64_t layers = m.integer(p + "block_count", std::nullopt);
    j["query_pre_attn_scalar"] = layers == (gemma2 ? 46 : 62) ? hidden / heads : head_dim;
    const int64_t window = m.integer(p + "attention.sliding_window", gemma2 ? 4096 : 0, 0);
    j["sliding_window"] = window > 0 ? json(window) : json(nullptr);
    if (window > 0)
      j["sliding_window_pattern"] = m.integer(p + "attention.sliding_window_pattern", gemma2 ? 2 : 6);
    else
      j["layer_types"] = std::vector<std::string>(static_cast<size_t>(layers), "full_attention");
    if (gemma2) {
      j["attn_logit_softcapping"] = m.number(p + "attn_logit_softcapping", 50.0);
      j["final_logit_softcapping"] = m.number(p + "final_logit_softcapping", 30.0);
    } else {
      j["final_logit_softcapping"] = m.file.find(p + "final_logit_softcapping")
                                         ? json(m.number(p + "final_logit_softcapping", 0.0))
                                         : json(nullptr);
      j["rope_local_base_freq"] = m.number(p + "rope.freq_base_swa", 10000.0);
    }
  }

  // LlamaConfig's names, and each Llama-family row's own keys
  void llama(json& j, bool moe_layers, bool mixtral) const {
    sizes(j, "hidden_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings",
          "intermediate_size");
    j["num_key_value_heads"] = m.integer(p + "attention.head_count_kv", heads);
    j["head_dim"] = head_dim;
    j["rms_norm_eps"] = m.number(p + "attention.layer_norm_rms_epsilon", std::nullopt);
    llama_rope(j);
    if (row.sandwich)
      gemma_sandwich(j);
    else
      j["hidden_act"] = row.norm_plus_one ? "gelu_pytorch_tanh" : "silu";  // Gemma's GeGLU
    j["tie_word_embeddings"] = !has("output.weight");
    // the rows whose configs default a pad token: the file's, or none
    if (row.norm_plus_one || row.phi3 || arch == "olmo2" || arch == "olmoe" || arch == "smollm3") {
      const auto pad = m.maybe_integer("tokenizer.ggml.padding_token_id");
      j["pad_token_id"] = pad ? json(*pad) : json(nullptr);
    }
    if (arch == "qwen2moe") j["qkv_bias"] = has("blk.0.attn_q.bias");
    if (arch != "qwen2" && arch != "qwen2moe" && !row.phi3) {  // Qwen2's q, k, v biases are the row's own
      j["attention_bias"] = has("blk.0.attn_q.bias");
      if (arch == "llama" || arch == "granite" || arch == "smollm3") j["mlp_bias"] = has("blk.0.ffn_up.bias");
    }
    if (arch == "granite")  // GraniteConfig's multipliers, 1 where the converter wrote none
      for (const auto& [key, name] :
           {std::pair{"attention.scale", "attention_multiplier"},
            std::pair{"embedding_scale", "embedding_multiplier"},
            std::pair{"residual_scale", "residual_multiplier"}, std::pair{"logit_scale", "logits_scaling"}})
        j[name] = m.number(p + key, 1.0);
    // SmolLM3's layers without positions: every fourth, which llama.cpp takes and the file does not say
    if (arch == "smollm3") j["no_rope_layer_interval"] = 4;
    if (moe_layers) moe(j, mixtral);
  }
};

// Every "{arch}." key of the file is one the row reads: any other may change the computation.
void refuse_unread_keys(const Meta& m, const Row& row, const std::string& arch) {
  const std::string p = arch + ".";
  std::vector<std::string> read = row.gpt2       ? kGpt2ReadKeys
                                  : row.neox     ? kNeoxReadKeys
                                  : row.stablelm ? kStableLmReadKeys
                                  : row.falcon   ? kFalconReadKeys
                                                 : kReadKeys;
  if (row.phi3) read.insert(read.end(), kPhi3ReadKeys.begin(), kPhi3ReadKeys.end());
  if (arch == "granite") read.insert(read.end(), kGraniteReadKeys.begin(), kGraniteReadKeys.end());
  if (arch == "gemma2") read.insert(read.end(), kGemma2ReadKeys.begin(), kGemma2ReadKeys.end());
  if (arch == "gemma3") read.insert(read.end(), kGemma3ReadKeys.begin(), kGemma3ReadKeys.end());
  for (const auto& [key, value] : m.file.metadata())
    if (key.rfind(p, 0) == 0 && std::find(read.begin(), read.end(), key.substr(p.size())) == read.end())
      throw m.fail(
          key, fmt::format("not read for '{}', and it may change the computation (saccade reads {}.{})", arch,
                           arch, fmt::join(read, ", " + arch + ".")));
}

// The tensors that carry a config, in rows that do not read them: Llama 3's rope_freqs.weight outside
// "llama", Phi-3's rope_factors_long / _short.weight outside "phi3".
void refuse_unread_config_tensors(const GgufFile& file, const Row& row, const std::string& arch) {
  const GgufTensorInfo* rope_freqs = file.tensor("rope_freqs.weight");
  if (rope_freqs && arch != "llama")
    throw Error(fmt::format("hf::gguf_config: '{}': tensor 'rope_freqs.weight' is not read for '{}'",
                            file.path(), arch));
  const GgufTensorInfo *long_factors = file.tensor("rope_factors_long.weight"),
                       *short_factors = file.tensor("rope_factors_short.weight");
  if ((long_factors || short_factors) && !row.phi3)
    throw Error(fmt::format("hf::gguf_config: '{}': tensor '{}' is not read for '{}'", file.path(),
                            long_factors ? long_factors->name : short_factors->name, arch));
}

}  // namespace

std::vector<std::string> gguf_architectures() {
  std::vector<std::string> out;
  for (const Row& r : kRows) out.emplace_back(r.arch);
  return out;
}

Config gguf_config(const GgufFile& file) {
  const Meta m{file, "hf::gguf_config"};
  const std::string arch = m.string("general.architecture");
  const Row* row = find_row(arch);
  if (!row) {
    const auto known = gguf_architectures();
    throw m.fail("general.architecture",
                 fmt::format("'{}' is not read (saccade reads '{}')", arch, fmt::join(known, "', '")));
  }
  refuse_unread_keys(m, *row, arch);
  refuse_unread_config_tensors(file, *row, arch);
  const std::string p = arch + ".";
  // the head: its width, and the dims its rotary turns (all of them, but in Phi-3, GPT-NeoX and StableLM)
  const int64_t hidden = m.integer(p + "embedding_length", std::nullopt);
  const int64_t heads = m.integer(p + "attention.head_count", std::nullopt);
  const int64_t head_dim = m.integer(p + "attention.key_length", hidden / std::max<int64_t>(heads, 1));
  if (m.integer(p + "attention.value_length", head_dim) != head_dim)
    throw m.fail(p + "attention.value_length", fmt::format("differs from the key length {}", head_dim));
  const int64_t rope_dims = m.integer(p + "rope.dimension_count", head_dim);
  const bool partial_ok = row->phi3 || row->neox || row->stablelm;
  if (rope_dims > head_dim || rope_dims % 2 != 0 || (rope_dims != head_dim && !partial_ok))
    throw m.fail(
        p + "rope.dimension_count",
        fmt::format("{} of each head of {} ({})", rope_dims, head_dim,
                    partial_ok ? "need an even count, at most the head's"
                               : "partial rotation is read for 'phi3', 'gptneox' and 'stablelm' only"));
  const GgufTensorInfo* embed = file.tensor("token_embd.weight");
  if (!embed && !file.find(p + "vocab_size"))
    throw Error(fmt::format(
        "hf::gguf_config: '{}': neither key '{}vocab_size' nor tensor 'token_embd.weight'", file.path(), p));
  // experts: a "llama" file with them is a Mixtral's (the converter writes MixtralForCausalLM as "llama");
  // "qwen2moe", "qwen3moe" and "olmoe" need them; the other rows read none; a shared expert is Qwen2-MoE's
  const std::optional<int64_t> experts = m.maybe_integer(p + "expert_count");
  const bool mixtral = arch == "llama" && experts,
             moe_row = arch == "qwen2moe" || arch == "qwen3moe" || arch == "olmoe";
  if (experts && arch != "llama" && !moe_row)
    throw m.fail(p + "expert_count", fmt::format("not read for '{}' (a dense row)", arch));
  if (arch != "qwen2moe" && file.find(p + "expert_shared_feed_forward_length"))
    throw m.fail(p + "expert_shared_feed_forward_length",
                 fmt::format("not read for '{}' (no shared expert)", arch));
  for (const char* k : {"expert_used_count", "expert_feed_forward_length"})
    if (!experts && file.find(p + k)) throw m.fail(p + k, fmt::format("given without {}expert_count", p));
  json j;
  j["model_type"] = mixtral ? "mixtral" : row->model_type;
  j["architectures"] = {mixtral ? "MixtralForCausalLM" : row->architectures};
  // the dtype on disk, where general.file_type says one (llama_ftype: 0 all F32, 1 mostly F16, 32 mostly
  // BF16)
  if (const auto ft = m.maybe_integer("general.file_type"); ft && (*ft == 0 || *ft == 1 || *ft == 32))
    j["torch_dtype"] = *ft == 0 ? "float32" : *ft == 1 ? "float16" : "bfloat16";
  j["vocab_size"] = m.integer(p + "vocab_size", embed && embed->shape.size() == 2 ? embed->shape[0] : 0);
  const RowKeys keys{m, *row, arch, p, hidden, heads, head_dim, rope_dims};
  if (row->neox)
    keys.neox(j);
  else if (row->stablelm)
    keys.stablelm(j);
  else if (row->falcon)
    keys.falcon(j);
  else if (row->gpt2)
    keys.gpt2(j);
  else
    keys.llama(j, experts || moe_row, mixtral);
  for (const char* id : {"bos_token_id", "eos_token_id"})
    if (auto v = m.maybe_integer(std::string("tokenizer.ggml.") + id)) j[id] = *v;
  return parse_config(j.dump(), file.path() + " (its metadata, read as a config.json)");
}

// ---- GgufWeights ----

GgufWeights::GgufWeights(const GgufFile& file, const Config& config) : file_(file) {
  const std::string arch = file.find("general.architecture") ? file.find("general.architecture")->s : "";
  const Row* row = find_row(arch);
  SACCADE_CHECK(row, "hf::GgufWeights: '{}': general.architecture '{}' is not read", file.path(), arch);
  for (const GgufTensorInfo& t : file.tensors()) {
    if (t.name == "rope_freqs.weight" && config.rope_scaling.type == ops::RopeScaling::Type::Llama3)
      continue;  // gguf_config read it into the rope scaling
    if ((t.name == "rope_factors_long.weight" || t.name == "rope_factors_short.weight") && row->phi3 &&
        config.rope_scaling.type == ops::RopeScaling::Type::LongRope)
      continue;  // Phi-3's LongRoPE factors, likewise
    auto [name, heads, transposed, experts, minus_one, qkv_heads, qkv_kv_heads] =
        hf_name(t.name, *row, config);
    if (experts) {  // expert e: the e-th (out, in) block of the stack, contiguous in the file
      const int64_t E = t.shape.empty() ? 0 : t.shape[0];
      SACCADE_CHECK(t.shape.size() == 3 && E >= 1 && t.nbytes % static_cast<uint64_t>(E) == 0,
                    "hf::GgufWeights: '{}': tensor '{}' has shape {} (need a stack of expert matrices)",
                    file.path(), t.name, t.shape);
      SACCADE_CHECK(readable_type(t.type),
                    "hf::GgufWeights: '{}': tensor '{}' is {} (stacks of experts are read in F32, F16, BF16 "
                    "and Q8_0)",
                    file.path(), t.name, gguf_type_name(t.type));
      for (int64_t e = 0; e < E; ++e) {
        const uint64_t bytes = t.nbytes / static_cast<uint64_t>(E);
        slices_.push_back(GgufTensorInfo{fmt::format("{}[{}]", t.name, e), Shape({t.shape[1], t.shape[2]}),
                                         t.type, t.offset + static_cast<uint64_t>(e) * bytes, bytes});
        const std::string expert = fmt::format(fmt::runtime(name), e);
        index_.emplace_back(expert, entries_.size());
        names_.push_back(expert);
        entries_.push_back(Entry{expert, &slices_.back(), 0, false, false, 0, 0});
      }
      continue;
    }
    if (transposed && t.shape.size() != 2)
      throw Error(fmt::format("hf::GgufWeights: '{}': tensor '{}' has shape {} (need a matrix)", file.path(),
                              t.name, t.shape));
    if (heads > 0) {
      const int64_t rows = t.shape[0];
      SACCADE_CHECK(
          rows % heads == 0 && (rows / heads) % 2 == 0,
          "hf::GgufWeights: '{}': tensor '{}' has {} rows, not whole heads of an even width for {} heads",
          file.path(), t.name, rows, heads);
    }
    index_.emplace_back(name, entries_.size());
    names_.push_back(name);
    if (qkv_heads > 0)
      SACCADE_CHECK(
          qkv_kv_heads > 0 && t.shape.size() >= 1 && t.shape[0] % (qkv_heads + 2 * qkv_kv_heads) == 0,
          "hf::GgufWeights: '{}': tensor '{}' has shape {}, not q of {} heads and k and v of {}", file.path(),
          t.name, t.shape, qkv_heads, qkv_kv_heads);
    entries_.push_back(Entry{name, &t, heads, transposed, minus_one, qkv_heads, qkv_kv_heads});
  }
  std::sort(index_.begin(), index_.end());
  for (size_t i = 1; i < index_.size(); ++i)
    SACCADE_CHECK(index_[i].first != index_[i - 1].first, "hf::GgufWeights: '{}': two tensors are named '{}'",
                  file.path(), index_[i].first);
}

const GgufWeights::Entry& GgufWeights::entry(const std::string& name) const {
  auto it = std::lower_bound(index_.begin(), index_.end(), name,
                             [](const auto& item, const std::string& n) { return item.first < n; });
  if (it == index_.end() || it->first != name)
    throw Error(fmt::format("hf::GgufWeights: '{}': no tensor '{}' in the file", file_.path(), name));
  return entries_[it->second];
}

bool GgufWeights::contains(const std::string& name) const {
  auto it = std::lower_bound(index_.begin(), index_.end(), name,
                             [](const auto& item, const std::string& n) { return item.first < n; });
  return it != index_.end() && it->first == name;
}

Shape GgufWeights::shape(const std::string& name) const {
  const Entry& e = entry(name);
  return e.transposed ? Shape({e.info->shape[1], e.info->shape[0]}) : e.info->shape;
}

std::string GgufWeights::unreadable(const std::string& name) const {
  const GgufTensorInfo& t = *entry(name).info;
  return readable_type(t.type) ? std::string()
                               : fmt::format(
                                     "tensor '{}' ('{}' in the file) is {} (F32, F16, BF16 and Q8_0 "
                                     "are read)",
                                     name, t.name, gguf_type_name(t.type));
}

Tensor GgufWeights::read(const std::string& name) const {
  const GgufTensorInfo& t = *entry(name).info;
  const DType dtype = t.type == static_cast<uint32_t>(GgufType::F16)    ? DType::Float16
                      : t.type == static_cast<uint32_t>(GgufType::BF16) ? DType::BFloat16
                                                                        : DType::Float32;
  Tensor out = Tensor::empty(shape(name), dtype, Device::cpu(), "hf::GgufWeights::read");
  read_into(name, out);
  return out;
}

void GgufWeights::read_into(const std::string& name, const Tensor& dst) const {
  const Entry& e = entry(name);
  if (e.permuted_heads == 0 && !e.transposed && !e.minus_one && e.qkv_heads == 0)
    return file_.read_into(*e.info, dst);
  SACCADE_CHECK(dst.device().is_cpu() && dst.is_contiguous() && dst.numel() == e.info->shape.numel(),
                "hf::GgufWeights::read_into: '{}': tensor '{}' of shape {} into a destination of shape {}",
                file_.path(), name, shape(name), dst.shape());
  if (e.qkv_heads > 0) {  // q, k, v blocks back to transformers' rows, key/value group by group
    Tensor blocks = Tensor::empty(e.info->shape, dst.dtype(), Device::cpu(), "hf::GgufWeights::read_into");
    file_.read_into(*e.info, blocks);
    const int64_t d = e.info->shape[0] / (e.qkv_heads + 2 * e.qkv_kv_heads), q = e.qkv_heads * d,
                  kv = e.qkv_kv_heads * d;
    const Tensor w =
        interleave({blocks.narrow(0, 0, q), blocks.narrow(0, q, kv), blocks.narrow(0, q + kv, kv)}, 0,
                   e.qkv_kv_heads)
            .contiguous();
    std::memcpy(dst.raw_data(), w.raw_data(), static_cast<size_t>(w.numel()) * dtype_size(w.dtype()));
    return;
  }
  if (e.minus_one) {  // Gemma's norm: w = (1 + w) - 1, in float32
    Tensor stored = Tensor::empty(e.info->shape, DType::Float32, Device::cpu(), "hf::GgufWeights::read_into");
    file_.read_into(*e.info, stored);
    const Tensor w = ops::sub(stored, 1.0).to(dst.dtype()).contiguous();
    std::memcpy(dst.raw_data(), w.raw_data(), static_cast<size_t>(w.numel()) * dtype_size(w.dtype()));
    return;
  }
  Tensor rows = Tensor::empty(e.info->shape, dst.dtype(), Device::cpu(), "hf::GgufWeights::read_into");
  file_.read_into(*e.info, rows);  // (checks the dtype)
  if (e.transposed) {              // (out, in) in the file, a Conv1D's (in, out) here
    const Tensor t = rows.transpose(0, 1).contiguous();
    std::memcpy(dst.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
    return;
  }
  const int64_t n = e.info->shape[0];
  unpermute_rows(static_cast<unsigned char*>(dst.raw_data()),
                 static_cast<const unsigned char*>(rows.raw_data()), n,
                 static_cast<size_t>(rows.numel() / n) * dtype_size(rows.dtype()), e.permuted_heads);
}

Q8_0Matrix GgufWeights::q8_0(const std::string& name) const {
  const Entry& e = entry(name);
  if (e.info->type != static_cast<uint32_t>(GgufType::Q8_0) || e.info->shape.size() != 2 || e.transposed ||
      e.qkv_heads > 0)
    return {};
  Q8_0Matrix m = file_.q8_0(*e.info);
  if (e.permuted_heads == 0) return m;
  auto blocks = std::make_shared<std::vector<BlockQ8_0>>(m.blocks->size());
  unpermute_rows(reinterpret_cast<unsigned char*>(blocks->data()),
                 reinterpret_cast<const unsigned char*>(m.blocks->data()), m.rows,
                 static_cast<size_t>(m.blocks_per_row()) * sizeof(BlockQ8_0), e.permuted_heads);
  m.blocks = std::move(blocks);
  return m;
}

std::vector<Q8_0Matrix> GgufWeights::q8_0_parts(const std::string& name,
                                                const std::vector<int64_t>& rows) const {
  const Entry& e = entry(name);
  if (e.info->type != static_cast<uint32_t>(GgufType::Q8_0) || e.info->shape.size() != 2 || e.transposed ||
      e.permuted_heads > 0)
    return {};
  const Q8_0Matrix whole = file_.q8_0(*e.info);  // the file's rows: q, k, v (gate, up) blocks
  int64_t total = 0;
  for (const int64_t r : rows) total += r;
  SACCADE_CHECK(total == whole.rows && std::all_of(rows.begin(), rows.end(), [](int64_t r) { return r > 0; }),
                "hf::GgufWeights::q8_0_parts: '{}': tensor '{}' has {} rows, not the parts' {}", file_.path(),
                name, whole.rows, fmt::join(rows, " + "));
  std::vector<Q8_0Matrix> parts;
  const auto per_row = static_cast<size_t>(whole.blocks_per_row());
  size_t at = 0;
  for (const int64_t r : rows) {
    const size_t n = static_cast<size_t>(r) * per_row;
    parts.push_back({.rows = r,
                     .cols = whole.cols,
                     .blocks = std::make_shared<const std::vector<BlockQ8_0>>(
                         whole.blocks->begin() + static_cast<std::ptrdiff_t>(at),
                         whole.blocks->begin() + static_cast<std::ptrdiff_t>(at + n))});
    at += n;
  }
  return parts;
}

// ---- the tokenizer ----

namespace {

// tokenizer.ggml.pre -> the tokenizer.json pieces of Hugging Face's tokenizer it stands for (the
// pre-tokenizer, a normalizer, ignore_merges), as llama.cpp's llama-vocab.cpp reads each name.
struct PreRow {
  const char* name;
  const char* pre_tokenizer;  // JSON
  const char* normalizer;     // JSON
  bool ignore_merges;
};

constexpr const char* kGpt2Pre =
    R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})";
constexpr const char* kLlama3Pre =
    R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})";
constexpr const char* kQwen2Pre =
    R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]})";
constexpr const char* kSmolPre =
    R"({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]})";

constexpr PreRow kPreRows[] = {
    {"default", kGpt2Pre, "null", false},    {"gpt-2", kGpt2Pre, "null", false},
    {"llama-bpe", kLlama3Pre, "null", true}, {"qwen2", kQwen2Pre, R"({"type": "NFC"})", false},
    {"smollm", kSmolPre, "null", false},
};

// True when `s` is UTF-8 (the vocabulary goes through a tokenizer.json, which holds text only).
bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  const auto n = static_cast<utf8proc_ssize_t>(s.size());
  for (utf8proc_ssize_t i = 0; i < n;) {
    utf8proc_int32_t c;
    const utf8proc_ssize_t k = utf8proc_iterate(p + i, n - i, &c);
    if (k <= 0) return false;
    i += k;
  }
  return true;
}

// The vocabulary as tokenizer.json's pieces: "model.vocab" (token -> id) and "added_tokens" (CONTROL (3)
// tokens special, USER_DEFINED (4) ones not), the tokens checked to be UTF-8 and distinct.
struct Vocabulary {
  const std::vector<GgufValue>& tokens;
  json vocab = json::object(), added = json::array();
};

Vocabulary read_vocabulary(const Meta& m) {
  Vocabulary v{m.list("tokenizer.ggml.tokens", GgufValue::Kind::String)};
  const std::vector<GgufValue>* types = nullptr;
  if (m.file.find("tokenizer.ggml.token_type")) {
    types = &m.list("tokenizer.ggml.token_type", GgufValue::Kind::Int);
    if (types->size() != v.tokens.size())
      throw m.fail("tokenizer.ggml.token_type",
                   fmt::format("{} types for {} tokens", types->size(), v.tokens.size()));
  }
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const std::string& t = v.tokens[i].s;
    if (!valid_utf8(t)) throw m.fail(fmt::format("tokenizer.ggml.tokens[{}]", i), "not UTF-8");
    if (v.vocab.contains(t))
      throw m.fail(fmt::format("tokenizer.ggml.tokens[{}]", i),
                   fmt::format("the token '{}' is also id {}", t, v.vocab[t].get<int64_t>()));
    v.vocab[t] = i;
    const int64_t type = types ? (*types)[i].i : 1;
    if (type == 3 || type == 4)  // CONTROL, USER_DEFINED
      v.added.push_back({{"id", i}, {"content", t}, {"special", type == 3}, {"normalized", false}});
  }
  return v;
}

// The tokenizer of the tokenizer.json `j` (its model, normalizer, pre-tokenizer and decoder set), with the
// added tokens, the BOS / EOS template tokenizer.ggml.add_bos_token / add_eos_token ask for (`add_bos` when
// the file does not say), and the BOS and EOS themselves.
std::unique_ptr<Tokenizer> finish(json j, const Vocabulary& v, const Meta& m, bool add_bos) {
  json single = json::array(), special = json::object();
  auto special_token = [&](const char* key, const char* flag, bool fallback) {
    const std::optional<int64_t> id = m.maybe_integer(std::string("tokenizer.ggml.") + key);
    if (!id || !m.flag(std::string("tokenizer.ggml.") + flag, fallback)) return;
    if (*id < 0 || *id >= static_cast<int64_t>(v.tokens.size()))
      throw m.fail(std::string("tokenizer.ggml.") + key, fmt::format("{} is not a token id", *id));
    const std::string& t = v.tokens[static_cast<size_t>(*id)].s;
    single.push_back({{"SpecialToken", {{"id", t}, {"type_id", 0}}}});
    special[t] = {{"id", t}, {"ids", {*id}}, {"tokens", {t}}};
  };
  special_token("bos_token_id", "add_bos_token", add_bos);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  special_token("eos_token_id", "add_eos_token", false);
  j["added_tokens"] = v.added;
  j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", special}};
  const std::string name = m.file.path() + " (its tokenizer.ggml keys)";
  auto bpe = BPETokenizer::parse_tokenizer_json(j.dump(), name);
  // the BOS and EOS themselves (the template above puts them around a prompt only where the file says)
  json config = json::object();
  for (const char* key : {"bos_token", "eos_token"}) {
    const auto id = m.maybe_integer(fmt::format("tokenizer.ggml.{}_id", key));
    if (id && *id >= 0 && *id < static_cast<int64_t>(v.tokens.size()))
      config[key] = v.tokens[static_cast<size_t>(*id)].s;
  }
  bpe->parse_tokenizer_config(config.dump(), name);
  return bpe;
}

// tokenizer.ggml.model "gpt2": byte-level BPE with the file's merges and tokenizer.ggml.pre's pre-tokenizer.
std::unique_ptr<Tokenizer> byte_level_bpe(const Meta& m) {
  const std::string pre = m.file.find("tokenizer.ggml.pre") ? m.string("tokenizer.ggml.pre") : "default";
  const PreRow* row = nullptr;
  for (const PreRow& r : kPreRows)
    if (pre == r.name) row = &r;
  if (!row) {
    std::vector<std::string> known;
    for (const PreRow& r : kPreRows) known.emplace_back(r.name);
    throw m.fail("tokenizer.ggml.pre",
                 fmt::format("'{}' is not read (saccade reads '{}')", pre, fmt::join(known, "', '")));
  }
  const Vocabulary v = read_vocabulary(m);
  json merge_list = json::array();
  if (m.file.find("tokenizer.ggml.merges")) {
    const auto& merges = m.list("tokenizer.ggml.merges", GgufValue::Kind::String);
    for (size_t i = 0; i < merges.size(); ++i) {
      if (!valid_utf8(merges[i].s)) throw m.fail(fmt::format("tokenizer.ggml.merges[{}]", i), "not UTF-8");
      merge_list.push_back(merges[i].s);
    }
  }
  json j;
  j["model"] = {{"type", "BPE"},          {"vocab", v.vocab},
                {"merges", merge_list},   {"ignore_merges", row->ignore_merges},
                {"byte_fallback", false}, {"unk_token", nullptr}};
  j["normalizer"] = json::parse(row->normalizer);
  j["pre_tokenizer"] = json::parse(row->pre_tokenizer);
  j["decoder"] = {
      {"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  return finish(std::move(j), v, m, false);
}

// tokenizer.ggml.model "llama": SentencePiece's BPE vocabulary (pieces with "▁" for spaces, "<0xNN>" byte
// pieces, one score a piece, no merges) as transformers reads a GGUF's (integrations/ggml.py,
// GGUFTokenizerSkeleton and GGUFLlamaConverter): the merges made from the scores, every split of a piece
// into two pieces of the vocabulary, pieces in the order of their scores (highest first) and a piece's splits
// in the order of their parts' scores; BPE with byte fallback and fuse_unk; spaces as "▁" and one before the
// text (tokenizer.ggml.add_space_prefix, true by default as llama.cpp reads it); BOS added by default.
std::unique_ptr<Tokenizer> sentencepiece_bpe(const Meta& m) {
  const Vocabulary v = read_vocabulary(m);
  const auto& scores = m.list("tokenizer.ggml.scores", GgufValue::Kind::Float);
  if (scores.size() != v.tokens.size())
    throw m.fail("tokenizer.ggml.scores",
                 fmt::format("{} scores for {} tokens", scores.size(), v.tokens.size()));
  struct Merge {
    std::string left, right;
    double score, left_score, right_score;
  };
  std::vector<Merge> merges;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const std::string& t = v.tokens[i].s;
    std::vector<Merge> local;
    for (size_t k = 1; k < t.size(); ++k) {
      if ((static_cast<unsigned char>(t[k]) & 0xC0) == 0x80) continue;  // inside a character
      const std::string l = t.substr(0, k), r = t.substr(k);
      const auto il = v.vocab.find(l), ir = v.vocab.find(r);
      if (il == v.vocab.end() || ir == v.vocab.end()) continue;
      local.push_back({l, r, scores[i].f, scores[il->get<size_t>()].f, scores[ir->get<size_t>()].f});
    }
    std::stable_sort(local.begin(), local.end(), [](const Merge& a, const Merge& b) {
      return std::tie(a.left_score, a.right_score) > std::tie(b.left_score, b.right_score);
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [](const Merge& a, const Merge& b) { return a.score > b.score; });
  json merge_list = json::array();
  for (const Merge& mg : merges) merge_list.push_back({mg.left, mg.right});
  json unk = nullptr;
  if (const auto id = m.maybe_integer("tokenizer.ggml.unknown_token_id");
      id && *id >= 0 && *id < static_cast<int64_t>(v.tokens.size()))
    unk = v.tokens[static_cast<size_t>(*id)].s;
  const bool prefix = m.flag("tokenizer.ggml.add_space_prefix", true);
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
  json j;
  j["model"] = {{"type", "BPE"},    {"vocab", v.vocab}, {"merges", merge_list},
                {"unk_token", unk}, {"fuse_unk", true}, {"byte_fallback", true}};
  j["normalizer"] = prefix ? json{{"type", "Sequence"},
                                  {"normalizers", {{{"type", "Prepend"}, {"prepend", "\u2581"}}, replace}}}
                           : replace;
  j["pre_tokenizer"] = nullptr;
  json decoders = {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                   {{"type", "ByteFallback"}},
                   {{"type", "Fuse"}}};
  if (prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  j["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
  return finish(std::move(j), v, m, true);
}

}  // namespace

std::unique_ptr<Tokenizer> gguf_tokenizer(const GgufFile& file) {
  const Meta m{file, "hf::gguf_tokenizer"};
  const std::string model = m.string("tokenizer.ggml.model");
  if (model == "gpt2") return byte_level_bpe(m);
  if (model == "llama") return sentencepiece_bpe(m);
  throw m.fail(
      "tokenizer.ggml.model",
      fmt::format("'{}' is not read (saccade reads 'gpt2', byte-level BPE, and 'llama', SentencePiece's "
                  "BPE)",
                  model));
}

// ---- the model ----

std::shared_ptr<nn::LlamaForCausalLM> load_llama_gguf(const std::string& path, bool keep_q8_0, bool strict,
                                                      LoadReport* report) {
  return load_llama_gguf(GgufFile(path), keep_q8_0, strict, report);
}

std::shared_ptr<nn::LlamaForCausalLM> load_llama_gguf(const GgufFile& file, bool keep_q8_0, bool strict,
                                                      LoadReport* report) {
  return load_llama_gguf(file, gguf_config(file), keep_q8_0, strict, report);
}

std::shared_ptr<nn::LlamaForCausalLM> load_llama_gguf(const GgufFile& file, const Config& config,
                                                      bool keep_q8_0, bool strict, LoadReport* report) {
  SACCADE_CHECK(config.architecture == Architecture::Llama,
                "hf::load_llama_gguf: '{}' holds a '{}' model, not a Llama-family one", file.path(),
                config.model_type);
  const GgufWeights weights(file, config);
  std::shared_ptr<nn::LlamaForCausalLM> model = load_llama_weights(weights, config, strict, report);
  if (keep_q8_0) {
    // (a Linear under another name on disk, Mixtral's router, is F32 there: the converter never quantizes
    // one)
    std::map<std::string, nn::Linear*> linears;
    for (auto& [name, linear] : nn::named_linears(*model)) {
      linears[name + ".weight"] = linear;
      if (weights.contains(name + ".weight"))
        if (Q8_0Matrix q = weights.q8_0(name + ".weight"); q.defined()) linear->weight_q8_0 = std::move(q);
    }
    if (!model->lm_head) model->output_q8_0 = weights.q8_0("model.embed_tokens.weight");
    // a fused tensor (Phi-3's, GPT-NeoX's, Falcon's) cut into its Linears' rows, in the order the file holds
    for (const NameRule& rule : llama_name_table(*model)) {
      if (rule.ours.size() < 2 || rule.index >= 0 || !weights.contains(rule.hf)) continue;
      std::vector<nn::Linear*> parts;
      std::vector<int64_t> rows;
      for (const std::string& name : rule.ours)
        if (const auto it = linears.find(name); it != linears.end())
          parts.push_back(it->second), rows.push_back(it->second->out_features());
      if (parts.size() != rule.ours.size()) continue;  // (a fused bias: no Linear weight)
      std::vector<Q8_0Matrix> q = weights.q8_0_parts(rule.hf, rows);
      for (size_t i = 0; i < q.size(); ++i) parts[i]->weight_q8_0 = std::move(q[i]);
    }
  }
  return model;
}

bool is_gguf_path(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}

}  // namespace saccade::hf
