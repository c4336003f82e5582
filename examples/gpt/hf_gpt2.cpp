#include "examples/gpt/hf_gpt2.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "hf/llama.h"
#include "hf/pretokenizer.h"
#include "nn/init.h"

namespace saccade::examples {

std::vector<hf::NameRule> gpt2_name_table(int64_t n_layer, const std::string& prefix) {
  const std::string p = prefix;
  std::vector<hf::NameRule> t = {{p + "wte.weight", {"wte.weight"}}, {p + "wpe.weight", {"wpe.weight"}}};
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string theirs = fmt::format("{}h.{}.", p, i), ours = fmt::format("h.{}.", i);
    auto qkv = [&](const char* what) {
      std::vector<std::string> v;
      for (const char* w : {"W_q", "W_k", "W_v"}) v.push_back(fmt::format("{}attn.{}.{}", ours, w, what));
      return v;
    };
    for (const char* ln : {"ln_1", "ln_2"})
      for (const char* w : {"weight", "bias"})
        t.push_back({fmt::format("{}{}.{}", theirs, ln, w), {fmt::format("{}{}.{}", ours, ln, w)}});
    t.push_back({theirs + "attn.c_attn.weight", qkv("weight"), /*transpose=*/true, /*split_dim=*/1});
    t.push_back({theirs + "attn.c_attn.bias", qkv("bias"), false, 0});
    t.push_back({theirs + "attn.c_proj.weight", {ours + "attn.W_o.weight"}, true});
    t.push_back({theirs + "attn.c_proj.bias", {ours + "attn.W_o.bias"}});
    for (const char* lin : {"c_fc", "c_proj"}) {
      t.push_back(
          {fmt::format("{}mlp.{}.weight", theirs, lin), {fmt::format("{}mlp.{}.weight", ours, lin)}, true});
      t.push_back({fmt::format("{}mlp.{}.bias", theirs, lin), {fmt::format("{}mlp.{}.bias", ours, lin)}});
    }
  }
  t.push_back({p + "ln_f.weight", {"ln_f.weight"}});
  t.push_back({p + "ln_f.bias", {"ln_f.bias"}});
  return t;
}

hf::AdapterLayout gpt2_adapter_layout(int64_t n_layer) {
  hf::AdapterLayout layout;
  layout.fan_in_fan_out = true;
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string theirs = fmt::format("transformer.h.{}.", i), ours = fmt::format("h.{}.", i);
    layout.units.push_back(
        {theirs + "attn.c_attn", {ours + "attn.W_q", ours + "attn.W_k", ours + "attn.W_v"}});
    layout.units.push_back({theirs + "attn.c_proj", {ours + "attn.W_o"}});
    layout.units.push_back({theirs + "mlp.c_fc", {ours + "mlp.c_fc"}});
    layout.units.push_back({theirs + "mlp.c_proj", {ours + "mlp.c_proj"}});
  }
  return layout;
}

GPTConfig hf_gpt2_config(const hf::Config& c) {
  auto refuse = [&](const std::string& what) {
    return Error(fmt::format("hf_gpt2_config: this GPT cannot hold {}", what));
  };
  if (c.architecture != hf::Architecture::GPT2) throw refuse(fmt::format("a '{}' model", c.model_type));
  if (!c.tie_word_embeddings) throw refuse("untied input and output embeddings (tie_word_embeddings false)");
  if (c.intermediate_size != 4 * c.hidden_size)
    throw refuse(fmt::format("an MLP of width {} (n_inner; it has 4 n_embd = {})", c.intermediate_size,
                             4 * c.hidden_size));
  if (c.norm_eps != 1e-5) throw refuse(fmt::format("layer_norm_epsilon {} (it has 1e-5)", c.norm_eps));
  if (c.hidden_act == "relu") throw refuse("a relu MLP (activation_function 'relu')");
  GPTConfig g;
  g.vocab_size = c.vocab_size;
  g.context = c.max_position_embeddings;
  g.n_layer = c.num_hidden_layers;
  g.n_head = c.num_attention_heads;
  g.d_model = c.hidden_size;
  g.dropout = 0.0;
  g.activation = c.hidden_act;  // "gelu_new" or "gelu"
  g.tokenizer = "hf";
  return g;
}

hf::Config gpt2_hf_config(const GPTConfig& g, int64_t eos_id) {
  hf::Config c;
  c.architecture = hf::Architecture::GPT2;
  c.model_type = "gpt2";
  c.vocab_size = g.vocab_size;
  c.hidden_size = g.d_model;
  c.num_hidden_layers = g.n_layer;
  c.num_attention_heads = c.num_key_value_heads = g.n_head;
  c.head_dim = g.d_model / g.n_head;
  c.intermediate_size = 4 * g.d_model;
  c.max_position_embeddings = g.context;
  c.norm_eps = 1e-5;
  c.tie_word_embeddings = true;
  c.hidden_act = g.activation;
  c.attention_bias = c.mlp_bias = true;
  if (eos_id >= 0) c.bos_token_id = c.eos_token_id = {eos_id};
  c.torch_dtype = "float32";
  return c;
}

namespace {

// A new GPT of `g`, filled from `weights` by the table that `table_of` makes for it, in eval mode.
std::shared_ptr<GPT> filled(const GPTConfig& g, const hf::TensorSource& weights,
                            const std::function<std::vector<hf::NameRule>(const GPT&)>& table_of,
                            const std::vector<std::string>& ignore, bool strict, hf::LoadReport* report) {
  std::shared_ptr<GPT> model;
  {
    nn::init::SkipInitGuard skip;  // every parameter is loaded below (or the load throws)
    model = std::make_shared<GPT>(g);
  }
  hf::LoadReport r = hf::load_weights(*model, weights, table_of(*model), strict, ignore);
  if (report) *report = std::move(r);
  model->eval();
  return model;
}

}  // namespace

std::shared_ptr<GPT> load_hf_gpt2(const std::string& dir, bool strict, hf::LoadReport* report) {
  return load_hf_gpt2(dir, hf::load_config(dir + "/config.json"), strict, report);
}

std::shared_ptr<GPT> load_hf_gpt2(const std::string& dir, const hf::Config& config, bool strict,
                                  hf::LoadReport* report) {
  return load_hf_gpt2(hf::Weights(dir), config, strict, report);
}

std::shared_ptr<GPT> load_hf_gpt2(const hf::TensorSource& weights, const hf::Config& config, bool strict,
                                  hf::LoadReport* report) {
  const GPTConfig g = hf_gpt2_config(config);
  const std::string prefix = weights.contains("transformer.wte.weight") ? "transformer." : "";
  // lm_head.weight is wte.weight (tied); the causal-mask buffers are not parameters
  std::vector<std::string> ignore = {"lm_head.weight"};
  for (int64_t i = 0; i < g.n_layer; ++i)
    for (const char* b : {"attn.bias", "attn.masked_bias"})
      ignore.push_back(fmt::format("{}h.{}.{}", prefix, i, b));
  return filled(
      g, weights, [&](const GPT&) { return gpt2_name_table(g.n_layer, prefix); }, ignore, strict, report);
}

void save_hf_gpt2(const GPT& model, const std::string& dir, DType dtype, int64_t eos_id) {
  hf::Config c = gpt2_hf_config(model.config(), eos_id);
  c.torch_dtype = std::string(dtype_name(dtype));
  hf::save_pretrained(dir, c, hf::export_weights(model, gpt2_name_table(model.config().n_layer), dtype));
}

namespace {

// A GPT's name (an arch but gpt2) as LlamaForCausalLM's (to_llama), or back: wte <-> model.embed_tokens,
// h.N <-> model.layers.N, ln_f <-> model.norm; lm_head is lm_head
std::string llama_name(const std::string& name, bool to_llama) {
  static const std::pair<std::string, std::string> kPrefixes[] = {
      {"wte.", "model.embed_tokens."}, {"h.", "model.layers."}, {"ln_f.", "model.norm."}};
  for (const auto& [gpt, llama] : kPrefixes) {
    const std::string& from = to_llama ? gpt : llama;
    if (name.starts_with(from)) return (to_llama ? llama : gpt) + name.substr(from.size());
  }
  return name;
}

}  // namespace

std::vector<hf::NameRule> llama_gpt_name_table(const GPT& model) {
  nn::StateDict dict;
  for (const auto& [name, t] : model.state_dict()) dict.insert(llama_name(name, true), t);
  std::vector<hf::NameRule> table = hf::llama_name_table(model.llama_config(), dict);
  for (hf::NameRule& rule : table)
    for (std::string& ours : rule.ours) ours = llama_name(ours, false);
  return table;
}

GPTConfig hf_llama_gpt_config(const hf::Config& c) {
  if (c.architecture != hf::Architecture::Llama)
    throw Error(
        fmt::format("hf_llama_gpt_config: a '{}' model is not of the Llama architecture", c.model_type));
  const nn::LlamaConfig lc = hf::llama_config(c);
  GPTConfig g;
  g.arch = c.model_type;
  g.hf_config = hf::config_json(c);
  g.vocab_size = lc.vocab_size;
  g.context = lc.context();
  g.n_layer = lc.num_hidden_layers;
  g.n_head = lc.num_attention_heads;
  g.n_kv_head = lc.num_key_value_heads;
  g.d_model = lc.hidden_size;
  g.intermediate = lc.intermediate_size;
  g.rope_theta = lc.rope_theta;
  g.norm_eps = lc.rms_norm_eps;
  g.tie = lc.tie_word_embeddings;
  g.window = lc.sliding_window;
  g.dropout = 0.0;
  g.tokenizer = "hf";
  return g;
}

namespace {

// The config.json of a fresh model of row g.arch: its config class's defaults but for g's sizes (each under
// the row's own key), no pad, bos or eos token, no window unless g's (Gemma 2/3's local layers: the row's);
// a MoE row with 8 experts of intermediate width, top-2
nlohmann::ordered_json row_json(const GPTConfig& g) {
  const std::string& row = g.arch;
  const int64_t f = g.ffn_hidden();
  nlohmann::ordered_json j = {{"model_type", row},
                              {"vocab_size", g.vocab_size},
                              {"hidden_size", g.d_model},
                              {"num_hidden_layers", g.n_layer},
                              {"num_attention_heads", g.n_head},
                              {"intermediate_size", f},
                              {"max_position_embeddings", g.context},
                              {"rope_theta", g.rope_theta},
                              {"tie_word_embeddings", g.tie},
                              {"pad_token_id", nullptr},
                              {"bos_token_id", nullptr},
                              {"eos_token_id", nullptr}};
  if (row == "falcon") {  // Falcon 40B's layout: num_kv_heads, two norms a parallel layer
    j["new_decoder_architecture"] = true;
    j["num_kv_heads"] = g.kv_heads();
    j["ffn_hidden_size"] = f;
    j["layer_norm_epsilon"] = g.norm_eps;
  } else {
    j["num_key_value_heads"] = g.kv_heads();
    j["head_dim"] = g.d_model / g.n_head;
    j[row == "gpt_neox" || row == "stablelm" ? "layer_norm_eps" : "rms_norm_eps"] = g.norm_eps;
  }
  if (row == "gemma2" || row == "gemma3_text") j["query_pre_attn_scalar"] = g.d_model / g.n_head;
  if (row == "mixtral" || row == "qwen2_moe" || row == "qwen3_moe" || row == "olmoe") {
    j[row == "mixtral" ? "num_local_experts" : "num_experts"] = 8;
    j["num_experts_per_tok"] = 2;
    if (row != "mixtral" && row != "olmoe") j["moe_intermediate_size"] = f;
    if (row == "qwen2_moe") j["shared_expert_intermediate_size"] = f;
  }
  if (g.window > 0)
    j["sliding_window"] = g.window;
  else if (row != "gemma2" && row != "gemma3_text")  // their local layers keep the family's window
    j["sliding_window"] = nullptr;
  return j;
}

}  // namespace

nn::LlamaConfig hf_row_llama_config(const GPTConfig& g) {
  const std::string where = fmt::format("the config.json of a '{}' GPT", g.arch);
  const bool fresh = g.hf_config.empty();
  const nn::LlamaConfig c =
      hf::llama_config(hf::parse_config(fresh ? row_json(g).dump() : g.hf_config, where));
  const std::string row = c.model_type.empty() ? "llama" : c.model_type;
  SACCADE_CHECK(row == g.arch, "GPTConfig: {} is of model_type '{}'", where, row);
  if (!fresh) {  // the fields describe the model: they must be the config's (context: at most its own)
    SACCADE_CHECK(
        g.d_model == c.hidden_size && g.n_layer == c.num_hidden_layers && g.n_head == c.num_attention_heads &&
            g.kv_heads() == c.num_key_value_heads && g.vocab_size == c.vocab_size && g.context <= c.context(),
        "GPTConfig: {} says hidden {}, {} layers, {} heads ({} key/value), vocab {}, context {}, but "
        "the GPT's fields d_model {}, {} layers, {} heads ({} key/value), vocab {}, context {}",
        where, c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.vocab_size,
        c.context(), g.d_model, g.n_layer, g.n_head, g.kv_heads(), g.vocab_size, g.context);
    return c;
  }
  auto same = [&](const char* what, auto want, auto got) {
    SACCADE_CHECK(want == got, "GPTConfig: a '{}' cannot hold {} {} (its config reads {})", g.arch, what,
                  want, got);
  };
  same("hidden size", g.d_model, c.hidden_size);
  same("layers", g.n_layer, c.num_hidden_layers);
  same("heads", g.n_head, c.num_attention_heads);
  same("key/value heads", g.kv_heads(), c.num_key_value_heads);
  same("head size", g.d_model / g.n_head, c.head_dim);
  same("intermediate size", g.ffn_hidden(),
       c.moe_intermediate_size > 0 ? c.moe_intermediate_size : c.intermediate_size);
  same("vocabulary", g.vocab_size, c.vocab_size);
  same("context", g.context, c.max_position_embeddings);
  same("rope_theta", g.rope_theta, c.rope_theta);
  same("norm eps", g.norm_eps, c.rms_norm_eps);
  same("tied output", g.tie, c.tie_word_embeddings);
  if (g.window > 0)
    SACCADE_CHECK(
        c.sliding_window == g.window && c.layer_types.empty(),
        "GPTConfig: a '{}' cannot window every layer by {} (--window: give --arch mistral or llama)", g.arch,
        g.window);
  return c;
}

std::string hf_row_config_json(const GPTConfig& g) {
  return hf::config_json(hf::llama_hf_config(hf_row_llama_config(g)));
}

std::shared_ptr<GPT> load_hf_gpt(const std::string& dir, bool strict, hf::LoadReport* report) {
  return load_hf_gpt(dir, hf::load_config(dir + "/config.json"), strict, report);
}

std::shared_ptr<GPT> load_hf_gpt(const std::string& dir, const hf::Config& config, bool strict,
                                 hf::LoadReport* report) {
  if (config.architecture == hf::Architecture::GPT2) return load_hf_gpt2(dir, config, strict, report);
  const GPTConfig g = hf_llama_gpt_config(config);
  hf::Weights weights(dir);
  return filled(g, weights, llama_gpt_name_table, hf::llama_ignored_tensors(config, weights), strict, report);
}

void save_hf_gpt(const GPT& model, const std::string& dir, DType dtype, int64_t eos_id,
                 const hf::Config* source, int64_t bos_id) {
  const GPTConfig& g = model.config();
  const bool gpt2 = g.arch == "gpt2";
  hf::Config c = gpt2 ? gpt2_hf_config(g, eos_id) : hf::llama_hf_config(model.llama_config());
  if (!gpt2 && eos_id >= 0) c.eos_token_id = {eos_id};
  if (!gpt2 && bos_id >= 0) c.bos_token_id = {bos_id};
  if (source) {  // the ids of the model it was initialised from, as that config.json has them
    if (!source->bos_token_id.empty()) c.bos_token_id = source->bos_token_id;
    if (!source->eos_token_id.empty()) c.eos_token_id = source->eos_token_id;
  }
  c.torch_dtype = std::string(dtype_name(dtype));
  hf::save_pretrained(
      dir, c,
      hf::export_weights(model, gpt2 ? gpt2_name_table(g.n_layer) : llama_gpt_name_table(model), dtype));
}

void write_byte_tokenizer_json(const std::string& path) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (int b = 0; b < 256; ++b) vocab[hf::byte_to_unicode()[static_cast<size_t>(b)]] = b;
  const nlohmann::ordered_json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  const nlohmann::ordered_json j = {{"version", "1.0"},
                                    {"truncation", nullptr},
                                    {"padding", nullptr},
                                    {"added_tokens", nlohmann::ordered_json::array()},
                                    {"normalizer", nullptr},
                                    {"pre_tokenizer", byte_level},
                                    {"post_processor", nullptr},
                                    {"decoder", byte_level},
                                    {"model",
                                     {{"type", "BPE"},
                                      {"dropout", nullptr},
                                      {"unk_token", nullptr},
                                      {"continuing_subword_prefix", nullptr},
                                      {"end_of_word_suffix", nullptr},
                                      {"fuse_unk", false},
                                      {"byte_fallback", false},
                                      {"ignore_merges", false},
                                      {"vocab", vocab},
                                      {"merges", nlohmann::ordered_json::array()}}}};
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << j.dump(2) << "\n";
    f.flush();
    SACCADE_CHECK(f.good(), "write_byte_tokenizer_json: cannot write '{}'", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  SACCADE_CHECK(!ec, "write_byte_tokenizer_json: cannot rename '{}' to '{}': {}", tmp, path, ec.message());
}

}  // namespace saccade::examples
