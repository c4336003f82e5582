#include "hf/peft.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "hf/checkpoint.h"
#include "hf/llama.h"
#include "nn/serialization.h"
#include "ops/elementwise.h"
#include "ops/join.h"

namespace saccade::hf {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kPrefix =
    "base_model.model.";  // PEFT's names: the PeftModel's base_model.model is the model

std::string last_component(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

std::string folder_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return fs::path(path).filename().string();
}

}  // namespace

AdapterConfig load_adapter_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / "adapter_config.json").string();
  const std::string op = "hf::load_adapter_config";
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(fmt::format("{}: cannot open '{}' (is '{}' a PEFT adapter folder?)", op, path, dir));
  std::stringstream text;
  text << f.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw Error(fmt::format("{}: '{}' is not a JSON object", op, path));
  auto refuse = [&](const std::string& why) { throw Error(fmt::format("{}: '{}': {}", op, path, why)); };
  auto is_set = [&](const char* key) {  // present and neither null, false, nor empty
    if (!j.contains(key) || j[key].is_null()) return false;
    const json& v = j[key];
    return v.is_boolean() ? v.get<bool>() : !(v.is_object() || v.is_array() || v.is_string()) || !v.empty();
  };
  if (!j.contains("peft_type") || j["peft_type"] != "LORA")
    refuse(fmt::format("peft_type is {}, saccade reads LoRA adapters (\"LORA\")",
                       j.contains("peft_type") ? j["peft_type"].dump() : "missing"));
  if (!j.contains("r") || !j["r"].is_number_integer()) refuse("no integer \"r\"");
  if (!j.contains("lora_alpha") || !j["lora_alpha"].is_number()) refuse("no number \"lora_alpha\"");
  if (j.contains("bias") && j["bias"] != "none")
    refuse(
        fmt::format("bias {} trains the base's biases too; saccade's adapters have none", j["bias"].dump()));
  // fields that change what the adapter computes or which modules it covers (the others, such as
  // init_lora_weights or loftq_config, only shape its initialisation)
  for (const char* key :
       {"use_dora", "modules_to_save", "layers_to_transform", "rank_pattern", "alpha_pattern", "lora_bias",
        "exclude_modules", "target_parameters", "layer_replication", "trainable_token_indices",
        "alora_invocation_tokens", "use_qalora", "use_bdlora"})
    if (is_set(key))
      refuse(fmt::format("\"{}\" is set ({}), which saccade does not apply", key, j[key].dump()));

  AdapterConfig out;
  out.lora.r = j["r"].get<int64_t>();
  out.lora.lora_alpha = j["lora_alpha"].get<double>();
  if (out.lora.r < 1) refuse(fmt::format("r is {}; a rank is at least 1", out.lora.r));
  if (!(out.lora.lora_alpha > 0) || !std::isfinite(out.lora.lora_alpha))
    refuse(fmt::format("lora_alpha is {}; it must be positive", j["lora_alpha"].dump()));
  if (j.contains("lora_dropout") && !j["lora_dropout"].is_null()) {
    if (!j["lora_dropout"].is_number()) refuse("lora_dropout is not a number");
    out.lora.lora_dropout = j["lora_dropout"].get<double>();
    if (!(out.lora.lora_dropout >= 0 && out.lora.lora_dropout < 1))
      refuse(fmt::format("lora_dropout is {}; it must be in [0, 1)", j["lora_dropout"].dump()));
  }
  if (j.contains("use_rslora") && !j["use_rslora"].is_null()) {
    if (!j["use_rslora"].is_boolean()) refuse("use_rslora is not true or false");
    out.lora.use_rslora = j["use_rslora"].get<bool>();
  }
  const json& t = j.contains("target_modules") ? j["target_modules"] : json();
  if (t.is_string()) {
    if (t.get<std::string>() != "all-linear")
      refuse(
          fmt::format("target_modules {} is a regular expression; saccade reads a list of names or "
                      "\"all-linear\"",
                      t.dump()));
    out.lora.target_modules = {"all-linear"};
  } else if (t.is_array() && !t.empty()) {
    out.lora.target_modules.clear();
    for (const json& e : t) {
      if (!e.is_string() || e.get<std::string>().empty())
        refuse("target_modules holds something other than module names");
      out.lora.target_modules.push_back(e.get<std::string>());
    }
  } else {
    refuse("no \"target_modules\" list");
  }
  if (j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string())
    out.base_model_name_or_path = j["base_model_name_or_path"].get<std::string>();
  return out;
}

void save_adapter(const std::string& dir, const nn::Module& model, const nn::LoraConfig& config,
                  const std::string& base_model_name_or_path, const AdapterLayout& layout) {
  const std::string op = "hf::save_adapter";
  nn::StateDict tensors;
  std::set<std::string> targets;  // sorted, as PEFT's saved set reads
  const std::vector<nn::LoraUnit> units = nn::lora_units(model, layout.units);
  const std::vector<std::vector<nn::Linear*>> linears = nn::unit_linears(model, units);
  for (size_t u = 0; u < units.size(); ++u) {
    const nn::LoraUnit& unit = units[u];
    const std::vector<nn::Linear*>& lins = linears[u];
    if (!lins[0]->lora_A) continue;
    std::vector<Tensor> rows;
    for (nn::Linear* lin : lins) {
      if (!lin->lora_A || lin->lora_A != lins[0]->lora_A)
        throw Error(
            fmt::format("{}: the Linears of '{}' do not share one adapter (apply_lora with this "
                        "layout's units adds one)",
                        op, unit.name));
      rows.push_back(lin->lora_B->weight.data().to(DType::Float32));
    }
    tensors.insert(kPrefix + unit.name + ".lora_A.weight", lins[0]->lora_A->weight.data().to(DType::Float32));
    const Tensor b = rows.size() == 1  ? rows[0]
                     : unit.groups > 1 ? interleave(rows, 0, unit.groups)
                                       : ops::cat(rows, 0);
    tensors.insert(kPrefix + unit.name + ".lora_B.weight", b);
    targets.insert(last_component(unit.name));
  }
  if (targets.empty()) throw Error(op + ": the model has no LoRA adapters (apply_lora adds them)");
  json j = {{"peft_type", "LORA"},
            {"task_type", "CAUSAL_LM"},
            {"base_model_name_or_path", base_model_name_or_path},
            {"r", config.r},
            {"lora_alpha", config.lora_alpha},
            {"lora_dropout", config.lora_dropout},
            {"use_rslora", config.use_rslora},
            {"target_modules", std::vector<std::string>(targets.begin(), targets.end())},
            {"bias", "none"},
            {"fan_in_fan_out", layout.fan_in_fan_out},
            {"inference_mode", true},
            {"init_lora_weights", true},
            {"use_dora", false},
            {"modules_to_save", nullptr},
            {"layers_to_transform", nullptr},
            {"layers_pattern", nullptr},
            {"rank_pattern", json::object()},
            {"alpha_pattern", json::object()},
            {"revision", nullptr}};
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("{}: cannot make the folder '{}': {}", op, dir, ec.message()));
  nn::save_safetensors(tensors, (fs::path(dir) / "adapter_model.safetensors").string(), {{"format", "pt"}});
  write_file_atomic((fs::path(dir) / "adapter_config.json").string(), j.dump(2) + "\n", op);
}

AdapterLayout llama_adapter_layout(const nn::LlamaForCausalLM& model) {
  const std::string row = llama_hf_config(model.config()).model_type;
  if (row != "phi3" && row != "gpt_neox" && row != "falcon") return {};
  AdapterLayout layout;
  // "x.y.weight" -> "x.y"
  auto module_of = [](const std::string& weight) { return weight.substr(0, weight.size() - 7); };
  std::set<std::string> linears;
  for (const auto& [name, lin] : nn::named_linears(model)) linears.insert(name);
  for (const NameRule& rule : llama_name_table(model)) {
    if (!rule.hf.ends_with(".weight") || !linears.count(module_of(rule.ours[0]))) continue;
    nn::LoraUnit unit{module_of(rule.hf), {}, rule.groups};
    for (const std::string& w : rule.ours) unit.linears.push_back(module_of(w));
    if (unit.linears[0] == "lm_head") unit.name = "lm_head";  // GPT-NeoX's embed_out on disk
    layout.units.push_back(unit);
  }
  return layout;
}

AdapterConfig load_adapter(const std::string& dir, nn::Module& model, const std::string& base_dir,
                           const AdapterLayout& layout) {
  const std::string op = "hf::load_adapter";
  AdapterConfig config = load_adapter_config(dir);
  if (!base_dir.empty() && !config.base_model_name_or_path.empty() &&
      folder_name(config.base_model_name_or_path) != folder_name(base_dir))
    throw Error(fmt::format("{}: the adapter in '{}' was trained on '{}', not on '{}'", op, dir,
                            config.base_model_name_or_path, base_dir));
  const std::string path = (fs::path(dir) / "adapter_model.safetensors").string();
  if (!fs::exists(path)) throw Error(fmt::format("{}: '{}' is missing", op, path));
  const nn::Safetensors file = nn::load_safetensors(path);

  // Check every tensor against the modules the config selects before anything changes.
  const std::vector<nn::LoraUnit> units = nn::lora_targets(model, config.lora.target_modules, layout.units);
  const std::vector<std::vector<nn::Linear*>> linears = nn::unit_linears(model, units);
  std::set<std::string> expected;
  auto expect = [&](const std::string& key, const Shape& shape) {
    expected.insert(key);
    const Tensor* t = file.tensors.find(key);
    if (!t) throw Error(fmt::format("{}: '{}' has no tensor '{}' for the model's module", op, path, key));
    if (t->shape() != shape)
      throw Error(fmt::format("{}: '{}': tensor '{}' has shape {}, the model needs {} (r = {})", op, path,
                              key, t->shape(), shape, config.lora.r));
  };
  for (size_t u = 0; u < units.size(); ++u) {
    int64_t out = 0;
    for (const nn::Linear* lin : linears[u]) out += lin->out_features();
    expect(kPrefix + units[u].name + ".lora_A.weight", {config.lora.r, linears[u][0]->in_features()});
    expect(kPrefix + units[u].name + ".lora_B.weight", {out, config.lora.r});
  }
  for (const auto& [key, t] : file.tensors)
    if (!expected.count(key))
      throw Error(
          fmt::format("{}: '{}' holds '{}', which no module of the model selected by target_modules "
                      "takes",
                      op, path, key));

  nn::apply_lora(model, config.lora, nullptr, layout.units);
  for (size_t u = 0; u < units.size(); ++u) {  // the Linears are the same modules, now adapted
    const nn::LoraUnit& unit = units[u];
    const std::vector<nn::Linear*>& lins = linears[u];
    Tensor a = lins[0]->lora_A->weight.data();
    ops::copy_(a, file.tensors.at(kPrefix + unit.name + ".lora_A.weight"));
    const Tensor& b = file.tensors.at(kPrefix + unit.name + ".lora_B.weight");
    int64_t row = 0;
    for (nn::Linear* lin : lins) {  // each Linear's rows of the fused B
      Tensor mine = lin->lora_B->weight.data();
      const int64_t n = lin->out_features();
      ops::copy_(mine, unit.groups > 1 ? interleaved_part(b, 0, unit.groups, row, n) : b.narrow(0, row, n));
      row += lin->out_features();
    }
  }
  return config;
}

}  // namespace saccade::hf
