// hf::save_adapter / load_adapter (hf/peft.h): PEFT's folder layout, round trips and refusals.
#include <catch2/catch.hpp>

#ifdef SACCADE_HAVE_HF
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "helpers.h"
#include "hf/llama.h"
#include "hf/peft.h"
#include "hf_fixture.h"
#include "nn/llama.h"
#include "nn/serialization.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "temp_dir.h"

using namespace saccade;
using saccade::testing::allclose;
namespace fs = std::filesystem;

namespace {

// A model adapted on `targets`, with random B so that the adapter changes the logits.
std::shared_ptr<nn::LlamaForCausalLM> adapted(const std::vector<std::string>& targets, nn::LoraConfig& cfg) {
  auto m = std::make_shared<nn::LlamaForCausalLM>(testing::tiny_llama_config(), 1);
  cfg.r = 4, cfg.lora_alpha = 16, cfg.target_modules = targets;
  Generator gen(2);
  nn::apply_lora(*m, cfg, &gen);
  for (auto& [name, lin] : nn::lora_layers(*m)) {
    Tensor b = lin->lora_B->weight.data();
    ops::copy_(b, ops::randn(b.shape(), DType::Float32, Device::cpu(), &gen));
  }
  return m;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

void write_json(const fs::path& p, const nlohmann::json& j) { std::ofstream(p) << j.dump(2); }

}  // namespace

TEST_CASE("hf PEFT: an adapter saved in PEFT's layout loads into a fresh base and gives the same logits",
          "[hf][lora]") {
  testing::TempDir tmp;
  nn::LoraConfig cfg;
  auto m = adapted({"all-linear"}, cfg);
  Generator gen(3);
  const Tensor idx = ops::randint(0, 40, {2, 7}, Device::cpu(), &gen);
  const Tensor want = m->forward(idx).data().clone();
  const fs::path dir = tmp.path / "adapter";
  hf::save_adapter(dir.string(), *m, cfg, "HuggingFaceTB/tiny-llama");

  const nlohmann::json j = read_json(dir / "adapter_config.json");
  CHECK(j["peft_type"] == "LORA");
  CHECK(j["r"] == 4);
  CHECK(j["lora_alpha"] == 16.0);
  CHECK(j["base_model_name_or_path"] == "HuggingFaceTB/tiny-llama");
  CHECK(j["target_modules"] ==
        nlohmann::json({"down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj",
                        "v_proj"}));  // all-linear saved expanded, as PEFT saves it
  const nn::Safetensors file = nn::load_safetensors((dir / "adapter_model.safetensors").string());
  CHECK(file.tensors.size() == 2 * 7 * 2);
  CHECK(file.tensors.at("base_model.model.model.layers.1.mlp.down_proj.lora_A.weight").shape() ==
        Shape{4, 24});
  CHECK(file.tensors.at("base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight").shape() ==
        Shape{8, 4});
  CHECK(file.metadata.at("format") == "pt");

  nn::LlamaForCausalLM fresh(testing::tiny_llama_config(), 1);  // same base weights (seed 1), no adapter
  CHECK_FALSE(allclose(fresh.forward(idx).data(), want, 1e-3, 1e-3));
  const hf::AdapterConfig read = hf::load_adapter(dir.string(), fresh, "/models/tiny-llama/");
  CHECK(read.lora.r == 4);
  CHECK(read.lora.scale() == 4.0);
  CHECK(allclose(fresh.forward(idx).data(), want, 1e-6, 1e-6));
  CHECK(nn::trainable_parameters(fresh).size() == 2 * 7 * 2);
}

TEST_CASE(
    "hf PEFT: an adapter PEFT saved gives transformers + PEFT's logits, and ten AdamW steps their losses",
    "[hf][lora]") {
  const nn::Safetensors e = nn::load_safetensors(testing::hf_data("hf_llama_lora_expected.safetensors"));
  auto model = hf::load_llama(testing::hf_data("hf_llama"));
  const hf::AdapterConfig a =
      hf::load_adapter(testing::hf_data("hf_llama_lora"), *model, testing::hf_data("hf_llama"));
  CHECK(a.lora.r == 4);
  CHECK(a.lora.scale() == 2.0);
  CHECK(nn::lora_layers(*model).size() == 2 * 3);
  // to 1e-5 of the largest logit (4.1: the random factors of std 0.3 move the logits far more than a trained
  // adapter would; the largest difference seen, 1.4e-5, is float32's rounding of that range)
  const Tensor& want = e.tensors.at("logits");
  const double range = ops::max(ops::abs(want)).item<float>();
  CHECK(allclose(model->forward(e.tensors.at("ids")).data(), want, 1e-5, 1e-5 * range));

  const std::vector<Variable> params = nn::trainable_parameters(*model);
  REQUIRE(params.size() == 2 * 2 * 3);
  testing::check_adamw_losses(*model, params, 1e-2, 0.01, e, model->config().vocab_size);
  // the trained factors, under PEFT's names, as PEFT's get_peft_model_state_dict gives them
  testing::TempDir tmp;
  nn::LoraConfig cfg = a.lora;
  hf::save_adapter(tmp.path.string(), *model, cfg, "hf_llama");
  testing::check_trained_factors(e, (tmp.path / "adapter_model.safetensors").string());
}

TEST_CASE(
    "hf PEFT: PEFT's adapter merged (merge_and_unload) and saved loads as a plain Llama with its logits",
    "[hf][lora]") {
  const nn::Safetensors e = nn::load_safetensors(testing::hf_data("hf_llama_lora_expected.safetensors"));
  auto model = hf::load_llama(testing::hf_data("hf_llama"));
  hf::load_adapter(testing::hf_data("hf_llama_lora"), *model, testing::hf_data("hf_llama"));
  CHECK(nn::merge_and_unload(*model) == 2 * 3);
  testing::TempDir tmp;
  hf::save_llama(*model, tmp.path.string());
  const nn::Safetensors saved = nn::load_safetensors((tmp.path / "model.safetensors").string());
  for (const auto& [name, t] : saved.tensors) CHECK(name.find("lora") == std::string::npos);
  auto merged = hf::load_llama(tmp.path.string());  // strict: the base's tensors, no more
  const Tensor& want = e.tensors.at("logits");
  const double range = ops::max(ops::abs(want)).item<float>();
  CHECK(allclose(merged->forward(e.tensors.at("ids")).data(), want, 1e-5, 1e-5 * range));
}

TEST_CASE("hf PEFT: refusals name the file and leave the model unchanged", "[hf][lora][robust]") {
  testing::TempDir tmp;
  nn::LoraConfig cfg;
  auto m = adapted({"q_proj", "v_proj"}, cfg);
  const fs::path dir = tmp.path / "adapter";
  hf::save_adapter(dir.string(), *m, cfg, "org/tiny-llama");
  auto unchanged = [](const nn::LlamaForCausalLM& x) {
    CHECK(nn::lora_layers(x).empty());
    for (const auto& p : x.parameters()) CHECK(p.requires_grad());
  };

  nn::LlamaForCausalLM base(testing::tiny_llama_config(), 1);
  CHECK_THROWS_WITH(hf::load_adapter(dir.string(), base, "/models/other-model"),
                    Catch::Contains("was trained on 'org/tiny-llama', not on '/models/other-model'"));
  unchanged(base);

  const nlohmann::json good = read_json(dir / "adapter_config.json");
  nlohmann::json j = good;
  j["r"] = 8;  // the file's factors have r = 4
  write_json(dir / "adapter_config.json", j);
  CHECK_THROWS_WITH(
      hf::load_adapter(dir.string(), base),
      Catch::Contains("model.layers.0.self_attn.q_proj.lora_A.weight' has shape [4, 16], the model "
                      "needs [8, 16]"));
  unchanged(base);

  j = good;
  j["target_modules"] = {"q_proj"};  // the file also holds v_proj's factors
  write_json(dir / "adapter_config.json", j);
  CHECK_THROWS_WITH(hf::load_adapter(dir.string(), base),
                    Catch::Contains("v_proj.lora_A.weight', which no module"));
  unchanged(base);

  j = good;
  j["target_modules"] = {"q_proj", "v_proj", "k_proj"};  // k_proj's factors are missing
  write_json(dir / "adapter_config.json", j);
  CHECK_THROWS_WITH(hf::load_adapter(dir.string(), base), Catch::Contains("has no tensor"));
  unchanged(base);

  for (auto [key, value, says] : std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
           {"use_dora", true, "\"use_dora\" is set"},
           {"bias", "all", "trains the base's biases"},
           {"peft_type", "IA3", "saccade reads LoRA adapters"},
           {"target_modules", ".*proj", "is a regular expression"},
           {"rank_pattern", {{"q_proj", 8}}, "\"rank_pattern\" is set"},
           // values of the wrong type or range: refused by name, not a JSON library's exception
           {"peft_type", 3, "peft_type is 3"},
           {"r", 0, "r is 0"},
           {"lora_alpha", -1, "lora_alpha is -1"},
           {"lora_dropout", "0.1", "lora_dropout is not a number"},
           {"lora_dropout", 1, "lora_dropout is 1"},
           {"use_rslora", "yes", "use_rslora is not true or false"},
           {"target_modules", {"q_proj", ""}, "other than module names"}}) {
    INFO(key);
    j = good;
    j[key] = value;
    write_json(dir / "adapter_config.json", j);
    CHECK_THROWS_WITH(hf::load_adapter(dir.string(), base),
                      Catch::Contains("hf::load_adapter_config") && Catch::Contains(says));
    unchanged(base);
  }
  std::ofstream(dir / "adapter_config.json") << "{ not json";
  CHECK_THROWS_WITH(hf::load_adapter(dir.string(), base), Catch::Contains("is not a JSON object"));
  CHECK_THROWS_WITH(hf::load_adapter((tmp.path / "none").string(), base),
                    Catch::Contains("is '") && Catch::Contains("a PEFT adapter folder?"));
  unchanged(base);
  nn::LlamaForCausalLM plain(testing::tiny_llama_config(), 1);
  CHECK_THROWS_WITH(hf::save_adapter((tmp.path / "x").string(), plain, cfg, ""),
                    Catch::Contains("no LoRA adapters"));
}

TEST_CASE(
    "hf PEFT: Phi-3's and GPT-NeoX's fused projections, one adapter over the Linears they split into, give "
    "PEFT's logits, ten AdamW steps and its trained factors",
    "[hf][lora]") {
  // tests/data/hf_phi3_lora, hf_gpt_neox_lora: PEFT's adapters on the fused modules (make_hf_peft.py)
  for (const std::string name : {"hf_phi3", "hf_gpt_neox"}) {
    CAPTURE(name);
    const nn::Safetensors want = nn::load_safetensors(testing::hf_data(name + "_lora_expected.safetensors"));
    auto model = hf::load_llama(testing::hf_data(name));
    const hf::AdapterLayout layout = hf::llama_adapter_layout(*model);
    const hf::AdapterConfig a = hf::load_adapter(testing::hf_data(name + "_lora"), *model, name, layout);
    const auto& attn = *model->model->layers[1]->self_attn;
    CHECK(attn.q_proj->lora_A == attn.v_proj->lora_A);  // one A for the fused q, k, v
    const Tensor& want_logits = want.tensors.at("logits");
    const double range = ops::max(ops::abs(want_logits)).item<float>();
    CHECK(allclose(model->forward(want.tensors.at("ids")).data(), want_logits, 1e-5, 1e-5 * range));
    // the adapter's B rows read in the order of the fused tensor: as one block each, GPT-NeoX's rows, which
    // go head by head, would give other logits
    if (name == "hf_gpt_neox") {
      hf::AdapterLayout blocks = layout;
      for (nn::LoraUnit& u : blocks.units) u.groups = 1;
      auto other = hf::load_llama(testing::hf_data(name));
      hf::load_adapter(testing::hf_data(name + "_lora"), *other, name, blocks);
      CHECK_FALSE(allclose(other->forward(want.tensors.at("ids")).data(), want_logits, 1e-3, 1e-3 * range));
    }
    // The shared A's gradient is the sum of its Linears' products, where PEFT forms one product of the fused
    // module: float32 sums in another order, which AdamW at lr 1e-2 amplifies where a gradient is near zero
    // (check_trained_factors' note). Seen: 1e-5 relative at the tenth loss, 1.1e-4 on a factor; the first
    // nine losses agree to 1e-5, and a wrong layout changes the first (the groups mutation above).
    testing::check_adamw_losses(*model, nn::trainable_parameters(*model), 1e-2, 0.01, want,
                                model->config().vocab_size, 3e-5);
    testing::TempDir tmp;
    hf::save_adapter(tmp.path.string(), *model, a.lora, name, layout);
    testing::check_trained_factors(want, (tmp.path / "adapter_model.safetensors").string(), 3e-4);
  }
}

#endif  // SACCADE_HAVE_HF
