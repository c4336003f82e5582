// nn::apply_lora and its adapters (nn/lora.h): the update against a readable formula, the frozen base,
// merging, the target rules and the refusals.
#include <cmath>

#include "autograd/autocast.h"
#include "autograd/gradcheck.h"
#include "helpers.h"
#include "nn/llama.h"
#include "nn/lora.h"

using namespace saccade;
using saccade::testing::allclose;

namespace {

Tensor ids(int64_t B, int64_t T, uint64_t seed) {
  Generator gen(seed);
  return ops::randint(0, 40, {B, T}, Device::cpu(), &gen);
}

// Random B for every adapter, so that the update is not zero.
void randomise_B(nn::Module& model, uint64_t seed) {
  Generator gen(seed);
  for (auto& [name, p] : model.named_parameters())
    if (name.ends_with("lora_B.weight")) {
      Tensor w = p.data();
      ops::copy_(w, ops::randn(p.shape(), DType::Float32, Device::cpu(), &gen));
    }
}

nn::Linear& linear_at(nn::LlamaForCausalLM& m, int layer, const std::string& which) {
  auto& a = *m.model->layers[layer]->self_attn;
  return which == "q_proj" ? *a.q_proj : which == "v_proj" ? *a.v_proj : *a.o_proj;
}

}  // namespace

TEST_CASE("LoRA: a new adapter changes nothing, and with B set, the update is scale * B A x", "[lora]") {
  nn::LlamaForCausalLM model(testing::tiny_llama_config(), 1);
  const Tensor idx = ids(2, 5, 2);
  const Tensor before = model.forward(idx).data().clone();
  Generator gen(3);
  nn::LoraConfig cfg;
  cfg.r = 4, cfg.lora_alpha = 8;
  const auto names = nn::apply_lora(model, cfg, &gen);
  REQUIRE(names ==
          std::vector<std::string>{"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj",
                                   "model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.v_proj"});
  CHECK(allclose(model.forward(idx).data(), before, 0, 0));  // B = 0: exactly the base
  // PEFT's names for the factors
  const nn::StateDict sd = model.state_dict();
  CHECK(sd.at("model.layers.0.self_attn.q_proj.lora_A.weight").shape() == Shape{4, 16});
  CHECK(sd.at("model.layers.1.self_attn.v_proj.lora_B.weight").shape() ==
        Shape{8, 4});  // H_kv · head_dim = 8

  randomise_B(model, 4);
  nn::Linear& q = linear_at(model, 0, "q_proj");
  const Tensor x = ops::randn({3, 16});
  // the readable formula: x W0ᵀ + b + (alpha / r) x Aᵀ Bᵀ
  const Tensor want = ops::add(
      ops::matmul(x, q.weight.data().t()),
      ops::mul(ops::matmul(ops::matmul(x, q.lora_A->weight.data().t()), q.lora_B->weight.data().t()), 2.0));
  CHECK(allclose(q.forward(Variable(x)).data(), want, 1e-5, 1e-5));
  CHECK_FALSE(allclose(model.forward(idx).data(), before, 1e-3, 1e-3));
}

TEST_CASE("LoRA: the base is frozen, only A and B get gradients, and they match finite differences",
          "[lora]") {
  nn::LlamaForCausalLM model(testing::tiny_llama_config(), 1);
  nn::LoraConfig cfg;
  cfg.r = 2, cfg.target_modules = {"all-linear"};
  Generator gen(5);
  const auto names = nn::apply_lora(model, cfg, &gen);
  CHECK(names.size() == 2 * 7);  // q k v o gate up down per layer; lm_head left out
  for (const auto& n : names) CHECK(n.find("lm_head") == std::string::npos);
  randomise_B(model, 6);
  const auto trainable = nn::trainable_parameters(model);
  CHECK(trainable.size() == 2 * names.size());
  Variable loss = sum(model.forward(ids(2, 5, 7)));
  loss.backward();
  for (const auto& [name, p] : model.named_parameters()) {
    INFO(name);
    const bool adapter = name.find(".lora_") != std::string::npos;
    CHECK(p.requires_grad() == adapter);
    CHECK(p.grad().defined() == adapter);  // no dW buffer for a frozen weight
  }

  // d/dA, d/dB and d/dx through the module itself, in float64: gradcheck passes fresh leaves that share the
  // data of the handles it is given, so f puts them into the adapter before the forward
  nn::Linear& v = linear_at(model, 1, "v_proj");
  v.to(DType::Float64);
  const Variable x(testing::rand64({3, 16}, 8), true);
  CHECK(gradcheck(
      [&](const std::vector<Variable>& in) {
        v.lora_A->weight = in[0], v.lora_B->weight = in[1];
        return v.forward(in[2]);
      },
      {v.lora_A->weight, v.lora_B->weight, x}));
}

TEST_CASE("LoRA: merge folds the update into W0 and unmerge takes it out", "[lora]") {
  nn::LlamaForCausalLM model(testing::tiny_llama_config(), 1);
  const Tensor w0 = model.model->layers[0]->self_attn->q_proj->weight.data().clone();
  nn::LoraConfig cfg;
  cfg.r = 3, cfg.lora_alpha = 6, cfg.use_rslora = true;
  CHECK(cfg.scale() == Approx(6 / std::sqrt(3.0)));
  Generator gen(9);
  nn::apply_lora(model, cfg, &gen);
  randomise_B(model, 10);
  const Tensor idx = ids(2, 6, 11);
  const Tensor adapted = model.forward(idx).data().clone();
  CHECK(nn::merge_lora(model) == 4);
  CHECK(nn::merge_lora(model) == 0);  // already merged
  nn::Linear& q = linear_at(model, 0, "q_proj");
  CHECK_FALSE(allclose(q.weight.data(), w0, 1e-3, 1e-3));
  CHECK(allclose(model.forward(idx).data(), adapted, 1e-4, 1e-5));  // the base alone now gives the adapted
  CHECK(nn::unmerge_lora(model) == 4);
  CHECK(allclose(q.weight.data(), w0, 1e-5, 1e-6));
  CHECK(allclose(model.forward(idx).data(), adapted, 1e-4, 1e-5));
}

TEST_CASE("LoRA: merge_and_unload leaves the plain model, with the adapted logits and the base's names",
          "[lora]") {
  nn::LlamaForCausalLM model(testing::tiny_llama_config(), 1);
  const nn::StateDict base = model.state_dict();
  std::vector<std::string> base_names;
  for (const auto& [name, t] : base) base_names.push_back(name);
  nn::LoraConfig cfg;
  cfg.r = 2, cfg.target_modules = {"all-linear"};
  Generator gen(12);
  nn::apply_lora(model, cfg, &gen);
  randomise_B(model, 13);
  const Tensor idx = ids(2, 6, 14);
  const Tensor adapted = model.forward(idx).data().clone();
  CHECK(nn::merge_and_unload(model) == 14);
  CHECK(nn::lora_layers(model).empty());
  std::vector<std::string> names;
  for (const auto& [name, t] : model.state_dict()) names.push_back(name);
  CHECK(names == base_names);  // no lora_A / lora_B left
  CHECK(allclose(model.forward(idx).data(), adapted, 1e-4, 1e-5));
  CHECK(nn::merge_and_unload(model) == 0);
  // a fresh adapter can be added again where the old one was
  CHECK(nn::apply_lora(model, cfg, &gen).size() == 14);
}

TEST_CASE("Module: unregister_module removes a child and refuses a name it does not have", "[lora][module]") {
  nn::Linear lin(3, 2);
  lin.register_module("extra", std::make_shared<nn::Linear>(2, 2));
  CHECK(lin.parameters().size() == 4);
  CHECK(lin.unregister_module("extra") != nullptr);
  CHECK(lin.parameters().size() == 2);
  CHECK_THROWS_WITH(lin.unregister_module("extra"), Catch::Contains("has no child 'extra'"));
}

TEST_CASE("LoRA: a bfloat16 base with float32 adapters", "[lora]") {
  nn::LlamaForCausalLM model(testing::tiny_llama_config(), 1);
  model.to(DType::BFloat16);
  nn::LoraConfig cfg;
  cfg.r = 2, cfg.target_modules = {"o_proj"};
  Generator gen(12);
  nn::apply_lora(model, cfg, &gen);
  randomise_B(model, 13);
  nn::Linear& o = linear_at(model, 0, "o_proj");
  CHECK(o.weight.dtype() == DType::BFloat16);
  CHECK(o.lora_A->weight.dtype() == DType::Float32);
  const Tensor x = ops::randn({4, 16});
  const Variable y = o.forward(Variable(x.to(DType::BFloat16)));
  CHECK(y.dtype() == DType::BFloat16);
  const Tensor delta =
      ops::mul(ops::matmul(ops::matmul(x.to(DType::BFloat16).to(DType::Float32), o.lora_A->weight.data().t()),
                           o.lora_B->weight.data().t()),
               cfg.scale());
  const Tensor base =
      ops::matmul(x.to(DType::BFloat16).to(DType::Float32), o.weight.data().to(DType::Float32).t());
  CHECK(allclose(y.data().to(DType::Float32), ops::add(base, delta), 2e-2, 2e-2));
  sum(model.forward(ids(1, 4, 14)).to(DType::Float32)).backward();
  CHECK(o.lora_A->weight.grad().dtype() == DType::Float32);  // float32 gradients for float32 adapters
  CHECK_FALSE(o.weight.grad().defined());
}

TEST_CASE("LoRA: dropout on the adapter's input in training mode only", "[lora]") {
  nn::LlamaForCausalLM model(testing::tiny_llama_config(), 1);
  nn::LoraConfig cfg;
  cfg.r = 4, cfg.lora_dropout = 0.5, cfg.target_modules = {"model.layers.0.self_attn.q_proj"};
  Generator gen(15);
  CHECK(nn::apply_lora(model, cfg, &gen).size() == 1);
  randomise_B(model, 16);
  nn::Linear& q = linear_at(model, 0, "q_proj");
  const Variable x(ops::randn({8, 16}));
  model.eval();
  const Tensor e1 = q.forward(x).data().clone(), e2 = q.forward(x).data().clone();
  CHECK(allclose(e1, e2, 0, 0));
  model.train();
  CHECK_FALSE(allclose(q.forward(x).data(), e1, 1e-3, 1e-3));
}

TEST_CASE("LoRA: refusals name the target and the choices, and leave the model unchanged", "[lora][robust]") {
  nn::LlamaForCausalLM model(testing::tiny_llama_config(), 1);
  nn::LoraConfig cfg;
  cfg.target_modules = {"q_proj", "qkv_proj"};
  try {
    nn::apply_lora(model, cfg);
    FAIL("no error");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.find("apply_lora") != std::string::npos);
    CHECK(m.find("'qkv_proj' matches no Linear") != std::string::npos);
    CHECK(m.find("down_proj, gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, v_proj") !=
          std::string::npos);
  }
  for (const auto& p : model.parameters()) CHECK(p.requires_grad());  // nothing frozen
  CHECK_FALSE(model.model->layers[0]->self_attn->q_proj->lora_A);
  cfg.target_modules = {"q_proj"};
  cfg.r = 0;
  CHECK_THROWS_WITH(nn::apply_lora(model, cfg), Catch::Contains("r must be at least 1"));
  cfg.r = 2, cfg.lora_dropout = 1.0;
  CHECK_THROWS_WITH(nn::apply_lora(model, cfg), Catch::Contains("lora_dropout must be in [0, 1)"));
  cfg.lora_dropout = 0;
  nn::apply_lora(model, cfg);
  CHECK_THROWS_WITH(nn::apply_lora(model, cfg), Catch::Contains("already has a LoRA adapter"));
  CHECK_THROWS_WITH(nn::lora_targets(model, {"proj"}),
                    Catch::Contains("'proj' matches no Linear"));  // not a suffix of a component
}

namespace {

// Three projections of one input held split, as the GPT example holds GPT-2's fused c_attn, and one more.
struct SplitQKV : nn::Module {
  std::shared_ptr<nn::Linear> W_q, W_k, W_v, other;
  SplitQKV() : Module("SplitQKV") {
    W_q = register_module("W_q", std::make_shared<nn::Linear>(6, 5));
    W_k = register_module("W_k", std::make_shared<nn::Linear>(6, 3));
    W_v = register_module("W_v", std::make_shared<nn::Linear>(6, 4));
    other = register_module("other", std::make_shared<nn::Linear>(7, 6));
  }
};

}  // namespace

TEST_CASE("LoRA: a unit of split Linears shares one A and is the fused module's adapter", "[lora]") {
  SplitQKV m;
  m.to(DType::Float64);
  const std::vector<nn::LoraUnit> units = {{"attn.c_attn", {"W_q", "W_k", "W_v"}}, {"attn.proj", {"other"}}};
  nn::LoraConfig cfg;
  cfg.r = 2, cfg.lora_alpha = 3, cfg.target_modules = {"c_attn"};
  Generator gen(5);
  REQUIRE(nn::apply_lora(m, cfg, &gen, units) == std::vector<std::string>{"attn.c_attn"});
  CHECK(m.W_q->lora_A == m.W_k->lora_A);
  CHECK(m.W_k->lora_A == m.W_v->lora_A);
  CHECK(m.W_q->lora_dropout == m.W_v->lora_dropout);
  CHECK(m.W_q->lora_B != m.W_k->lora_B);
  CHECK_FALSE(m.other->lora_A);
  CHECK(m.W_k->lora_B->weight.shape() == Shape{3, 2});
  CHECK(nn::trainable_parameters(m).size() == 4);  // one A, three B: the shared A counted once
  for (nn::Linear* l : {m.W_q.get(), m.W_k.get(), m.W_v.get()}) {
    l->lora_A->to(DType::Float64), l->lora_B->to(DType::Float64);
    Tensor b = l->lora_B->weight.data();
    ops::copy_(b, testing::rand64(b.shape(), 9 + b.size(0)));
  }

  // the readable fused module: [W_q; W_k; W_v] x + b + scale [B_q; B_k; B_v] A x
  const Tensor x = testing::rand64({4, 6}, 11);
  const Tensor W = ops::cat({m.W_q->weight.data(), m.W_k->weight.data(), m.W_v->weight.data()}, 0);
  const Tensor bias = ops::cat({m.W_q->bias.data(), m.W_k->bias.data(), m.W_v->bias.data()}, 0);
  const Tensor B =
      ops::cat({m.W_q->lora_B->weight.data(), m.W_k->lora_B->weight.data(), m.W_v->lora_B->weight.data()}, 0);
  const Tensor A = m.W_q->lora_A->weight.data();
  const Tensor want = ops::add(ops::add(ops::matmul(x, W.t()), bias),
                               ops::mul(ops::matmul(ops::matmul(x, A.t()), B.t()), 1.5));
  const Tensor got = ops::cat({m.W_q->forward(Variable(x)).data(), m.W_k->forward(Variable(x)).data(),
                               m.W_v->forward(Variable(x)).data()},
                              1);
  CHECK(allclose(got, want, 1e-12, 1e-12));

  // the shared A's gradient sums the three paths: finite differences through all three outputs
  CHECK(gradcheck(
      [&](const std::vector<Variable>& in) {
        for (nn::Linear* l : {m.W_q.get(), m.W_k.get(), m.W_v.get()}) l->lora_A->weight = in[0];
        m.W_k->lora_B->weight = in[1];
        return cat({m.W_q->forward(in[2]), m.W_k->forward(in[2]), m.W_v->forward(in[2])}, 1);
      },
      {m.W_q->lora_A->weight, m.W_k->lora_B->weight, Variable(x, true)}));

  // merged, each Linear holds its rows of the fused update
  const Tensor before = got.clone();
  CHECK(nn::merge_and_unload(m) == 3);
  CHECK_FALSE(m.W_k->lora_A);
  const Tensor merged = ops::cat({m.W_q->forward(Variable(x)).data(), m.W_k->forward(Variable(x)).data(),
                                  m.W_v->forward(Variable(x)).data()},
                                 1);
  CHECK(allclose(merged, before, 1e-12, 1e-12));
}

TEST_CASE("LoRA: units that cannot be one module are refused by name", "[lora][robust]") {
  SplitQKV m;
  nn::LoraConfig cfg;
  cfg.target_modules = {"all-linear"};
  CHECK_THROWS_WITH(nn::apply_lora(m, cfg, nullptr, {{"c_attn", {"W_q", "W_x"}}}),
                    Catch::Contains("the unit 'c_attn' names 'W_x', which is not a Linear of the model"));
  CHECK_THROWS_WITH(nn::apply_lora(m, cfg, nullptr, {{"a", {"W_q"}}, {"b", {"W_q", "W_k"}}}),
                    Catch::Contains("the Linear 'W_q' is in two units"));
  CHECK_THROWS_WITH(nn::apply_lora(m, cfg, nullptr, {{"c", {"W_q", "other"}}}),
                    Catch::Contains("joins Linears of 6 and 7 input features"));
  CHECK_THROWS_WITH(nn::apply_lora(m, cfg, nullptr, {{"c", {}}}), Catch::Contains("names no Linear"));
  cfg.target_modules = {"W_q"};  // the units' names, not the Linears'
  CHECK_THROWS_WITH(nn::apply_lora(m, cfg, nullptr, {{"attn.c_attn", {"W_q", "W_k", "W_v"}}}),
                    Catch::Contains("'W_q' matches no Linear module; the model's Linear modules are named "
                                    "c_attn"));
  for (const auto& p : m.parameters()) CHECK(p.requires_grad());  // nothing frozen
  CHECK_FALSE(m.W_q->lora_A);
}
