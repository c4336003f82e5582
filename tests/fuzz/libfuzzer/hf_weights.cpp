// libFuzzer target: the weights of a Hugging Face model folder (hf::Weights: model.safetensors, or
// model.safetensors.index.json and the shards it names) and hf::load_weights into a tiny module by a name
// table (a two-layer nn::LlamaForCausalLM, untied or tied, by the identity table; or GPT-2's layout in small,
// split and transposed Conv1D weights, into a float32 or a bfloat16 module).
// Input (fuzz_hf.h): a flags byte, then model.safetensors, or index JSON | shard 1 | shard 2 cut at
// fuzz::kShardSeparator, written to a scratch folder.
// Properties: a rejected folder raises saccade::Error naming it (or a file in it); an accepted one lists each
// tensor once, holds every tensor its index names, and reads each; a load that fails leaves the module
// unchanged; a load that succeeds puts each checkpoint tensor in the module (export_weights gives it back,
// converted to the module's dtype) and skips only what no row names (nothing when strict).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "hf/llama.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"
#include "tests/fuzz/libfuzzer/fuzz_hf.h"

using namespace saccade;
namespace fs = std::filesystem;

namespace {

// One module with its table, and a copy of its state taken when it last changed (a failed load compares
// the live tensors against it).
struct Target {
  std::shared_ptr<nn::Module> module;
  std::vector<hf::NameRule> table;
  std::vector<std::string> ignore;
  std::vector<std::pair<std::string, Tensor>> saved;

  Target(std::shared_ptr<nn::Module> m, std::vector<hf::NameRule> t, std::vector<std::string> i)
      : module(std::move(m)), table(std::move(t)), ignore(std::move(i)) {
    save();
  }
  void save() {
    saved.clear();
    for (const auto& [k, t] : module->state_dict()) saved.emplace_back(k, t.clone());
  }
  bool unchanged() const {
    const nn::StateDict now = module->state_dict();
    if (now.size() != saved.size()) return false;
    return std::all_of(saved.begin(), saved.end(), [&](const auto& s) {
      const Tensor* t = now.find(s.first);
      return t && fuzz::same_tensor(*t, s.second);
    });
  }
};

Target& target(int which) {
  static Target targets[4] = {
      [] {
        auto m = std::make_shared<nn::LlamaForCausalLM>(fuzz::tiny_llama_config(false), 1);
        return Target(m, hf::llama_name_table(*m), {});
      }(),
      [] {
        auto m = std::make_shared<nn::LlamaForCausalLM>(fuzz::tiny_llama_config(true), 2);
        return Target(m, hf::llama_name_table(*m), {"lm_head.weight"});
      }(),
      Target(std::make_shared<fuzz::Conv1DModel>(), fuzz::Conv1DModel::table(), fuzz::Conv1DModel::ignore()),
      [] {
        auto m = std::make_shared<fuzz::Conv1DModel>();
        m->to(DType::BFloat16);
        return Target(m, fuzz::Conv1DModel::table(), fuzz::Conv1DModel::ignore());
      }(),
  };
  return targets[which];
}

// `s` cut at each separator into at most `n` parts (the last one keeps the rest); absent parts are nullopt.
std::vector<std::optional<std::string>> parts(std::string_view s, size_t n) {
  std::vector<std::optional<std::string>> out;
  while (out.size() + 1 < n) {
    const size_t at = s.find(fuzz::kShardSeparator);
    if (at == std::string_view::npos) break;
    out.emplace_back(std::string(s.substr(0, at)));
    s.remove_prefix(at + fuzz::kShardSeparator.size());
  }
  out.emplace_back(std::string(s));
  out.resize(n);
  return out;
}

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  FUZZ_CHECK(out.good(), "cannot write {}", p.string());
}

// What an accepted folder must satisfy on its own.
void check_weights(const hf::Weights& w, const std::optional<std::string>& index) {
  std::set<std::string> names(w.names().begin(), w.names().end());
  FUZZ_CHECK(names.size() == w.names().size(), "a tensor listed twice");
  for (const std::string& name : w.names()) {
    FUZZ_CHECK(w.contains(name), "'{}' listed but not contained", name);
    const nn::SafetensorsEntry& e = w.entry(name);
    FUZZ_CHECK(e.end - e.begin == static_cast<uint64_t>(e.shape.numel()) * dtype_size(e.dtype),
               "'{}': {} bytes for shape {} of {}", name, e.end - e.begin, e.shape, dtype_name(e.dtype));
    const Tensor t = w.read(name);
    FUZZ_CHECK(t.shape() == e.shape && t.dtype() == e.dtype, "'{}' read as {} {}", name, t.shape(),
               dtype_name(t.dtype()));
  }
  if (!index) return;
  const auto j = nlohmann::json::parse(*index);  // Weights parsed it
  for (const auto& [name, file] : j["weight_map"].items())
    FUZZ_CHECK(w.contains(name), "the index names '{}' ({}), which Weights does not hold", name, file.dump());
}

// After a successful load: each row's checkpoint tensor, as the module's dtype, is what export gives back.
void check_loaded(const Target& t, const hf::Weights& w, const hf::LoadReport& report, bool strict) {
  const DType dtype = t.module->state_dict().begin()->second.dtype();
  const nn::StateDict out = hf::export_weights(*t.module, t.table, DType::Float32);
  for (const hf::NameRule& rule : t.table) {
    const Tensor want = w.read(rule.hf).to(dtype).to(DType::Float32);
    FUZZ_CHECK(fuzz::same_tensor(out.at(rule.hf), want), "'{}' was not loaded as the checkpoint holds it",
               rule.hf);
  }
  FUZZ_CHECK(!strict || report.skipped.empty(), "a strict load skipped {} tensor(s)", report.skipped.size());
  for (const std::string& s : report.skipped) {
    FUZZ_CHECK(w.contains(s), "skipped '{}', which the checkpoint lacks", s);
    FUZZ_CHECK(std::none_of(t.table.begin(), t.table.end(), [&](const hf::NameRule& r) { return r.hf == s; }),
               "skipped '{}', which the table names", s);
    FUZZ_CHECK(std::find(t.ignore.begin(), t.ignore.end(), s) == t.ignore.end(), "skipped ignored '{}'", s);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const bool indexed = flags & fuzz::kIndexed, strict = !(flags & fuzz::kNonStrict);
  Target& t = target((flags & fuzz::kModelMask) >> 1);
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);

  const fs::path dir = fuzz::scratch_dir() / "hf_weights";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::optional<std::string> index;
  if (indexed) {
    const auto p = parts(rest, 3);
    index = p[0];
    write(dir / "model.safetensors.index.json", *p[0]);
    for (size_t i = 0; i < 2; ++i)
      if (p[i + 1]) write(dir / fuzz::kShardNames[i], *p[i + 1]);
  } else {
    write(dir / "model.safetensors", std::string(rest));
  }

  std::unique_ptr<hf::Weights> w;
  try {
    w = std::make_unique<hf::Weights>(dir.string());
  } catch (const Error& e) {
    fuzz::check_rejection(e, dir.string());
    return 0;
  }
  check_weights(*w, index);
  hf::LoadReport report;
  try {
    report = hf::load_weights(*t.module, *w, t.table, strict, t.ignore);
  } catch (const Error& e) {
    fuzz::check_rejection(e, dir.string());
    FUZZ_CHECK(t.unchanged(), "a failed load changed the module: {}", e.what());
    return 0;
  }
  check_loaded(t, *w, report, strict);
  t.save();
  return 0;
}
