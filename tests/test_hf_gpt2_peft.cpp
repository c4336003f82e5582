// LoRA on the GPT example's GPT-2 in PEFT's layout (issue 52): the fused c_attn, held split as W_q, W_k and
// W_v, reads and writes as PEFT's one lora_A and (3 d, r) lora_B (examples::gpt2_adapter_layout). The
// fixtures tests/data/hf_gpt2_lora (PEFT's save_pretrained) and hf_gpt2_lora_expected.safetensors (what
// transformers + PEFT compute with it) come from tests/fixtures/make_hf_peft.py.
#if defined(SACCADE_HAVE_GPT) && defined(SACCADE_HAVE_HF)
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "examples/gpt/hf_gpt2.h"
#include "helpers.h"
#include "hf/peft.h"
#include "hf_fixture.h"
#include "nn/lora.h"
#include "nn/serialization.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "temp_dir.h"

using namespace saccade;
using namespace saccade::examples;
using saccade::testing::allclose;
using saccade::testing::hf_data;
using saccade::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const nn::Safetensors& expected() {
  static const nn::Safetensors e = nn::load_safetensors(hf_data("hf_gpt2_lora_expected.safetensors"));
  return e;
}

// The base GPT-2 with PEFT's adapter applied.
std::shared_ptr<GPT> adapted_gpt2(hf::AdapterConfig* read = nullptr) {
  auto model = load_hf_gpt2(hf_data("hf_gpt2"));
  const hf::AdapterConfig a = hf::load_adapter(hf_data("hf_gpt2_lora"), *model, hf_data("hf_gpt2"),
                                               gpt2_adapter_layout(model->config().n_layer));
  if (read) *read = a;
  return model;
}

void check_logits(GPT& model) {
  const Tensor& want = expected().tensors.at("logits");
  const double range = ops::max(ops::abs(want)).item<float>();
  CHECK(allclose(model.forward(expected().tensors.at("ids")).data(), want, 1e-5, 1e-5 * range));
}

}  // namespace

TEST_CASE(
    "hf GPT-2 PEFT: PEFT's c_attn, c_proj and c_fc adapter gives its logits and ten AdamW steps' losses",
    "[hf][gpt][lora]") {
  hf::AdapterConfig a;
  auto model = adapted_gpt2(&a);
  CHECK(a.lora.r == 4);
  CHECK(a.lora.scale() == 2.0);
  // 2 blocks × (W_q, W_k, W_v, W_o, c_fc, c_proj); one A for the three of c_attn
  CHECK(nn::lora_layers(*model).size() == 2 * 6);
  CHECK(model->h[0]->attn->W_q->lora_A == model->h[0]->attn->W_v->lora_A);
  const nn::Safetensors file = nn::load_safetensors(hf_data("hf_gpt2_lora/adapter_model.safetensors"));
  const Tensor& fused_B = file.tensors.at("base_model.model.transformer.h.1.attn.c_attn.lora_B.weight");
  CHECK(allclose(model->h[1]->attn->W_k->lora_B->weight.data(), fused_B.narrow(0, 32, 32), 0, 0));
  check_logits(*model);

  const std::vector<Variable> params = nn::trainable_parameters(*model);
  REQUIRE(params.size() == 2 * (1 + 3 + 2 + 2 + 2));  // c_attn: A and three B; c_proj, c_fc, mlp c_proj: A, B
  testing::check_adamw_losses(*model, params, 1e-2, 0.01, expected(), model->config().vocab_size);

  // the trained factors, saved under PEFT's names with c_attn's B joined again, are PEFT's trained factors
  TempDir tmp;
  hf::save_adapter(tmp.path.string(), *model, a.lora, "hf_gpt2",
                   gpt2_adapter_layout(model->config().n_layer));
  testing::check_trained_factors(expected(), (tmp.path / "adapter_model.safetensors").string());
  std::ifstream f(tmp.path / "adapter_config.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  CHECK(j["fan_in_fan_out"] == true);  // as PEFT writes it for GPT-2's Conv1D
  CHECK(j["target_modules"] == nlohmann::json({"c_attn", "c_fc", "c_proj"}));
}

TEST_CASE("hf GPT-2 PEFT: the adapter merged and saved loads as a plain GPT-2 with the same logits",
          "[hf][gpt][lora]") {
  auto model = adapted_gpt2();
  CHECK(nn::merge_and_unload(*model) == 2 * 6);
  TempDir tmp;
  save_hf_gpt2(*model, tmp.path.string());
  for (const auto& [name, t] : nn::load_safetensors((tmp.path / "model.safetensors").string()).tensors)
    CHECK(name.find("lora") == std::string::npos);
  auto merged = load_hf_gpt2(tmp.path.string());  // strict: the base's tensors, no more
  check_logits(*merged);
}

TEST_CASE("hf GPT-2 PEFT: an adapter trained here round-trips, and a misshapen fused B is refused",
          "[hf][gpt][lora][robust]") {
  auto model = load_hf_gpt2(hf_data("hf_gpt2"));
  const hf::AdapterLayout layout = gpt2_adapter_layout(model->config().n_layer);
  nn::LoraConfig cfg;
  cfg.r = 3, cfg.lora_alpha = 5, cfg.target_modules = {"all-linear"};
  Generator gen(4);
  CHECK(nn::apply_lora(*model, cfg, &gen, layout.units).size() == 2 * 4);
  for (auto& [name, lin] : nn::lora_layers(*model)) {
    Tensor b = lin->lora_B->weight.data();
    ops::copy_(b, ops::randn(b.shape(), DType::Float32, Device::cpu(), &gen));
  }
  const Tensor idx = expected().tensors.at("ids");
  const Tensor want = model->forward(idx).data().clone();
  TempDir tmp;
  const fs::path dir = tmp.path / "adapter";
  hf::save_adapter(dir.string(), *model, cfg, "openai-community/hf_gpt2", layout);
  const nn::Safetensors file = nn::load_safetensors((dir / "adapter_model.safetensors").string());
  CHECK(file.tensors.size() == 2 * 4 * 2);
  CHECK(file.tensors.at("base_model.model.transformer.h.0.attn.c_attn.lora_B.weight").shape() ==
        Shape{96, 3});
  CHECK(file.tensors.at("base_model.model.transformer.h.1.mlp.c_proj.lora_A.weight").shape() ==
        Shape{3, 128});

  auto fresh = load_hf_gpt2(hf_data("hf_gpt2"));
  CHECK_FALSE(allclose(fresh->forward(idx).data(), want, 1e-3, 1e-3));
  hf::load_adapter(dir.string(), *fresh, hf_data("hf_gpt2"), layout);
  CHECK(allclose(fresh->forward(idx).data(), want, 1e-6, 1e-6));

  // c_attn's B with the rows of two projections only: refused by name, nothing applied
  nn::StateDict t = file.tensors;
  const std::string key = "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight";
  t.insert_or_assign(key, t.at(key).narrow(0, 0, 64).contiguous());
  nn::save_safetensors(t, (dir / "adapter_model.safetensors").string(), {{"format", "pt"}});
  auto other = load_hf_gpt2(hf_data("hf_gpt2"));
  CHECK_THROWS_WITH(hf::load_adapter(dir.string(), *other, "", layout),
                    Catch::Contains("tensor '" + key + "' has shape [64, 3], the model needs [96, 3]"));
  CHECK(nn::lora_layers(*other).empty());
  // without the GPT-2 layout the file's names fit no Linear of this GPT
  CHECK_THROWS_WITH(hf::load_adapter(hf_data("hf_gpt2_lora"), *other),
                    Catch::Contains("'c_attn' matches no Linear module"));
}

#endif
