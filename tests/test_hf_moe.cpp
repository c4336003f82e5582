// The mixture-of-experts rows of the family table (issue 51): tests/data/hf_mixtral, hf_qwen2_moe,
// hf_qwen3_moe and hf_olmoe were written by transformers (tests/fixtures/make_hf_families.py), with what it
// computes with them; each expert is its own tensor on disk and one entry of a batched weight here.
#ifdef SACCADE_HAVE_HF
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "helpers.h"
#include "hf/llama.h"
#include "hf_family.h"
#include "hf_fixture.h"
#include "nn/serialization.h"
#include "temp_dir.h"

using namespace saccade;
using saccade::testing::check_family_fixture;
using saccade::testing::check_written_as;
using saccade::testing::file_bytes;
using saccade::testing::hf_data;
using saccade::testing::replaced;
using saccade::testing::TempDir;

namespace {

// the sparse MLP of `layer`
nn::SparseMoeBlock& moe_of(nn::LlamaForCausalLM& model, size_t layer) {
  REQUIRE(model.model->layers[layer]->moe);
  return *model.model->layers[layer]->moe;
}

}  // namespace

TEST_CASE(
    "hf Mixtral: sparse MoE layers, transformers' logits, greedy continuations, ten AdamW steps, export",
    "[hf][moe]") {
  const hf::Config c = hf::load_config(hf_data("hf_mixtral/config.json"));
  CHECK(c.model_type == "mixtral");
  CHECK(c.num_experts == 4);
  CHECK(c.num_experts_per_tok == 2);
  CHECK(c.norm_topk_prob);
  CHECK(c.sliding_window == 0);
  CHECK(c.router_aux_loss_coef == 0.001);
  // without its top-k renormalisation the logits differ
  check_family_fixture("hf_mixtral", "mixtral", "MixtralForCausalLM",
                       [](nn::LlamaForCausalLM& model) { moe_of(model, 1).options.norm_topk_prob = false; });
  // on disk: one tensor per expert under Mixtral's names
  const std::vector<hf::NameRule> table = hf::llama_name_table(*hf::load_llama(hf_data("hf_mixtral")));
  auto row = [&](const std::string& hf) {
    for (const hf::NameRule& r : table)
      if (r.hf == hf) return r;
    FAIL("no row " << hf);
    return hf::NameRule{};
  };
  CHECK(row("model.layers.1.block_sparse_moe.experts.3.w3.weight").ours ==
        std::vector<std::string>{"model.layers.1.mlp.experts.up_proj"});
  CHECK(row("model.layers.1.block_sparse_moe.experts.3.w3.weight").index == 3);
  CHECK(row("model.layers.0.block_sparse_moe.gate.weight").ours ==
        std::vector<std::string>{"model.layers.0.mlp.gate.weight"});

  const std::string text = file_bytes(hf_data("hf_mixtral/config.json"));
  CHECK_THROWS_WITH(
      hf::parse_config(replaced(text, R"("router_jitter_noise": 0.0)", R"("router_jitter_noise": 0.1)")),
      Catch::Contains("router_jitter_noise"));
  CHECK_THROWS_WITH(
      hf::parse_config(replaced(text, R"("num_experts_per_tok": 2)", R"("num_experts_per_tok": 5)")),
      Catch::Contains("num_experts_per_tok") && Catch::Contains("num_local_experts"));
  // MixtralConfig's defaults: 8 experts, 2 a token
  CHECK(hf::parse_config(replaced(text, R"("num_local_experts": 4,)", "")).num_experts == 8);
}

TEST_CASE("hf Qwen2-MoE: a gated shared expert beside the experts, a dense first layer", "[hf][moe]") {
  const hf::Config c = hf::load_config(hf_data("hf_qwen2_moe/config.json"));
  CHECK(c.model_type == "qwen2_moe");
  CHECK(c.shared_expert_intermediate_size == 24);
  CHECK(c.moe_intermediate_size == 16);
  CHECK_FALSE(c.norm_topk_prob);
  CHECK(c.mlp_only_layers == std::vector<int64_t>{0});
  CHECK(c.qkv_bias);
  // the shared expert's gate at 0 (σ = 1/2) changes the logits
  check_family_fixture("hf_qwen2_moe", "qwen2_moe", "Qwen2MoeForCausalLM", [](nn::LlamaForCausalLM& model) {
    Tensor w = moe_of(model, 1).shared_expert_gate->weight.data();
    ops::fill_(w, 0.0);
  });
  auto model = hf::load_llama(hf_data("hf_qwen2_moe"));
  CHECK(model->model->layers[0]->mlp);  // mlp_only_layers: a dense SwiGLU of intermediate_size
  CHECK_FALSE(model->model->layers[0]->moe);
  CHECK(model->model->layers[0]->mlp->gate_proj->weight.shape() == Shape{48, 32});
  CHECK(moe_of(*model, 1).experts->gate_proj.shape() == Shape{4, 16, 32});
  check_written_as(*model, "qwen2_moe", "Qwen2MoeForCausalLM");
}

TEST_CASE("hf Qwen3-MoE: per-head q and k norms and sparse layers, against transformers", "[hf][moe]") {
  const hf::Config c = hf::load_config(hf_data("hf_qwen3_moe/config.json"));
  CHECK(c.model_type == "qwen3_moe");
  CHECK(c.qk_norm);
  CHECK(c.norm_topk_prob);
  CHECK(c.head_dim == 16);
  // with one expert a token, not two, the logits differ
  check_family_fixture("hf_qwen3_moe", "qwen3_moe", "Qwen3MoeForCausalLM",
                       [](nn::LlamaForCausalLM& model) { moe_of(model, 0).options.num_experts_per_tok = 1; });
  const std::string text = file_bytes(hf_data("hf_qwen3_moe/config.json"));
  // Qwen3MoeConfig's defaults: 128 experts of 768, 8 a token, head_dim hidden / heads
  const hf::Config d = hf::parse_config(
      replaced(replaced(replaced(text, R"("num_local_experts": 4,)", ""), R"("num_experts_per_tok": 2,)", ""),
               R"("moe_intermediate_size": 16,)", ""));
  CHECK(d.num_experts == 128);
  CHECK(d.num_experts_per_tok == 8);
  CHECK(d.moe_intermediate_size == 768);
  CHECK(hf::parse_config(replaced(text, R"("head_dim": 16,)", "")).head_dim == 8);
  // transformers 5 writes num_local_experts (Qwen3MoeConfig's attribute_map); the published files say
  // num_experts; both mean the same, and two that disagree are refused
  CHECK(hf::parse_config(replaced(text, R"("num_local_experts": 4,)", R"("num_experts": 3,)")).num_experts ==
        3);
  CHECK_THROWS_WITH(hf::parse_config(replaced(text, R"("num_local_experts": 4,)",
                                              R"("num_local_experts": 4, "num_experts": 3,)")),
                    Catch::Contains("num_local_experts") && Catch::Contains("disagrees"));
  CHECK_THROWS_WITH(
      hf::parse_config(replaced(text, R"("mlp_only_layers": [],)", R"("mlp_only_layers": [2],)")),
      Catch::Contains("mlp_only_layers"));
}

TEST_CASE("hf OLMoE: full-width q and k norms in pre-norm blocks, experts not renormalised", "[hf][moe]") {
  const hf::Config c = hf::load_config(hf_data("hf_olmoe/config.json"));
  CHECK(c.model_type == "olmoe");
  CHECK(c.qk_norm_full_width);
  CHECK(c.norm_placement == "pre");
  CHECK_FALSE(c.norm_topk_prob);
  CHECK(c.router_aux_loss_coef == 0.01);
  check_family_fixture("hf_olmoe", "olmoe", "OlmoeForCausalLM",
                       [](nn::LlamaForCausalLM& model) { moe_of(model, 1).options.norm_topk_prob = true; });
  const std::string text = file_bytes(hf_data("hf_olmoe/config.json"));
  CHECK_THROWS_WITH(hf::parse_config(replaced(text, R"("clip_qkv": null)", R"("clip_qkv": 8.0)")),
                    Catch::Contains("clip_qkv"));
}

TEST_CASE("hf MoE: an expert missing on disk, or of another shape, is refused by name, nothing loaded",
          "[hf][moe]") {
  TempDir dir("hf_moe_missing");
  auto model = hf::load_llama(hf_data("hf_qwen3_moe"));
  hf::save_llama(*model, dir.path.string());
  const std::string file = dir.file("model.safetensors");
  nn::StateDict tensors = nn::load_safetensors(file).tensors;
  nn::StateDict without;
  for (const auto& [k, v] : tensors)
    if (k != "model.layers.1.mlp.experts.2.up_proj.weight") without.insert(k, v);
  nn::save_safetensors(without, file);
  CHECK_THROWS_WITH(hf::load_llama(dir.path.string()),
                    Catch::Contains("model.layers.1.mlp.experts.2.up_proj.weight"));
  // another shape
  nn::StateDict bad;
  for (const auto& [k, v] : tensors)
    bad.insert(k, k == "model.layers.0.mlp.experts.1.down_proj.weight" ? v.narrow(1, 0, 8).contiguous() : v);
  nn::save_safetensors(bad, file);
  CHECK_THROWS_WITH(
      hf::load_llama(dir.path.string()),
      Catch::Contains("model.layers.0.mlp.experts.1.down_proj.weight") && Catch::Contains("entry 1"));
}

TEST_CASE("hf MoE: a model built here is written as the row its switches need, and reads back", "[hf][moe]") {
  nn::LlamaConfig l = saccade::testing::tiny_llama_config();
  l.num_experts = 4;
  l.num_experts_per_tok = 2;
  l.norm_topk_prob = true;
  CHECK(hf::llama_hf_config(l).model_type == "mixtral");
  l.shared_expert_intermediate_size = 8;
  l.norm_topk_prob = false;
  CHECK(hf::llama_hf_config(l).model_type == "qwen2_moe");
  l.shared_expert_intermediate_size = 0;
  l.qk_norm = true;
  CHECK(hf::llama_hf_config(l).model_type == "qwen3_moe");
  nn::LlamaForCausalLM model(l);
  check_written_as(model, "qwen3_moe", "Qwen3MoeForCausalLM");
  TempDir dir("hf_moe_roundtrip");
  hf::save_llama(model, dir.path.string());
  const Tensor ids = ops::from_vector(std::vector<int64_t>{1, 5, 2, 7}, {1, 4});
  NoGradGuard no_grad;
  CHECK(saccade::testing::allclose(hf::load_llama(dir.path.string())->forward(ids).data(),
                                   model.forward(ids).data(), 1e-6, 1e-6));
  // a MoE that no transformers row holds (no renormalisation, no q/k norms, no shared expert)
  l.qk_norm = false;
  CHECK_THROWS_WITH(hf::config_json(hf::llama_hf_config(l)), Catch::Contains("qwen3_moe"));
}

TEST_CASE("hf MoE: LoRA's all-linear leaves the router out, as PEFT on transformers 5's TopKRouter",
          "[hf][moe][lora]") {
  auto model = hf::load_llama(hf_data("hf_qwen2_moe"));
  nn::LoraConfig lc;
  lc.target_modules = {"all-linear"};
  const std::vector<std::string> adapted = nn::apply_lora(*model, lc);
  auto has = [&](const std::string& name) {
    return std::find(adapted.begin(), adapted.end(), name) != adapted.end();
  };
  CHECK_FALSE(has("model.layers.1.mlp.gate"));
  CHECK(has("model.layers.1.mlp.shared_expert.up_proj"));
  CHECK(has("model.layers.1.mlp.shared_expert_gate"));
  CHECK(has("model.layers.0.mlp.down_proj"));
  CHECK_FALSE(model->model->layers[1]->moe->gate->lora_A);
}

#endif  // SACCADE_HAVE_HF
