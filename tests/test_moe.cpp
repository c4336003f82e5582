// Mixture of experts: ops::topk, grouped_mm (against one mm per group, gradchecked in both cases), the
// experts' grouped forward against its composed twin, SparseMoeBlock against a token-by-token reference, its
// FLOPs against k and E, and the load-balancing loss.
#include <algorithm>
#include <cmath>
#include <limits>

#include "helpers.h"
#include "profiler/profiler.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;
using saccade::testing::randn32;

namespace {

// the readable twin of grouped_mm: one mm per group, joined
Tensor grouped_reference(const Tensor& a, const Tensor& b, const std::vector<int64_t>& offs) {
  const bool rows = b.dim() == 3;
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (size_t g = 0; g < offs.size(); ++g) {
    const int64_t len = offs[g] - start;
    if (rows) {
      if (len > 0) parts.push_back(ops::mm(a.narrow(0, start, len), b.select(0, static_cast<int64_t>(g))));
    } else {
      parts.push_back(len > 0 ? ops::mm(a.narrow(1, start, len), b.narrow(0, start, len)).unsqueeze(0)
                              : ops::zeros({1, a.size(0), b.size(1)}, a.dtype()));
    }
    start = offs[g];
  }
  return ops::cat(parts, 0);
}

}  // namespace

TEST_CASE("topk: the k largest along a dim, ties by index, NaN first, as torch.topk", "[moe][reduce]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor a = ops::tensor({3, 1, 3, nan, 2, 5, 5, 0}, {2, 4}, DType::Float64);
  const ops::ValuesIndices top = ops::topk(a, 2);
  CHECK(top.indices.to_vector<int64_t>() == std::vector<int64_t>{3, 0, 1, 2});
  const std::vector<double> v = top.values.to_vector<double>();
  CHECK(std::isnan(v[0]));
  CHECK(v[1] == 3);
  CHECK(v[2] == 5);
  CHECK(v[3] == 5);
  // along dim 0, in bfloat16 (the values are a's entries, exactly)
  const Tensor b = randn32({5, 3}, 1).to(DType::BFloat16);
  const ops::ValuesIndices col = ops::topk(b, 3, 0);
  CHECK(col.values.shape() == Shape{3, 3});
  CHECK(col.values.dtype() == DType::BFloat16);
  // each column's three largest, from the largest down
  const std::vector<double> bv = b.to_vector<double>(), cv = col.values.to_vector<double>();
  for (int64_t j = 0; j < 3; ++j) {
    std::vector<double> column;
    for (int64_t i = 0; i < 5; ++i) column.push_back(bv[static_cast<size_t>(i * 3 + j)]);
    std::sort(column.rbegin(), column.rend());
    for (int64_t i = 0; i < 3; ++i)
      CHECK(cv[static_cast<size_t>(i * 3 + j)] == column[static_cast<size_t>(i)]);
  }
  CHECK(allclose(ops::gather(b, 0, col.indices), col.values, 0, 0));
  CHECK(ops::topk(b, 0, 0).values.shape() == Shape{0, 3});
  CHECK_THROWS_WITH(ops::topk(b, 6, 0), Catch::Contains("topk") && Catch::Contains("[5, 3]"));
  CHECK_THROWS_WITH(ops::topk(ops::ones({2}, DType::Bool), 1), Catch::Contains("topk"));
}

TEST_CASE("grouped_mm: each group one product, against one mm per group, empty groups included",
          "[moe][linalg]") {
  const std::vector<int64_t> offs{3, 3, 7, 9};  // group 1 is empty
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
    INFO(dt);
    const Tensor a = randn32({9, 5}, 1).to(dt), w = randn32({4, 6, 5}, 2).to(dt);
    // rows: a (M, K) @ b (G, K, N), b a weight (G, out, in) transposed (a strided view)
    const Tensor b = w.transpose(1, 2);
    const double tol = dt == DType::BFloat16 ? 1e-2 : 1e-5;
    CHECK(allclose(ops::grouped_mm(a, b, offs), grouped_reference(a, b, offs), tol, tol));
    // the groups along the contracted dim: a (K, M) @ c (M, N) -> (G, K, N), zeros for the empty group
    const Tensor c = randn32({9, 6}, 3).to(dt);
    const Tensor per = ops::grouped_mm(a.t(), c, offs);
    CHECK(per.shape() == Shape{4, 5, 6});
    CHECK(allclose(per, grouped_reference(a.t(), c, offs), tol, tol));
    CHECK(ops::sum(ops::abs(per.select(0, 1).to(DType::Float32))).item<double>() == 0);
  }
  const Tensor a = randn32({9, 5}, 1), b = randn32({4, 5, 6}, 2);
  CHECK_THROWS_WITH(ops::grouped_mm(a, b, {3, 2, 7, 9}),
                    Catch::Contains("grouped_mm") && Catch::Contains("non-decreasing"));
  CHECK_THROWS_WITH(ops::grouped_mm(a, b, {3, 3, 7, 8}),
                    Catch::Contains("grouped_mm") && Catch::Contains("[9, 5]"));
  CHECK_THROWS_WITH(ops::grouped_mm(a, b, {9}), Catch::Contains("grouped_mm") && Catch::Contains("1 groups"));
  CHECK_THROWS_WITH(ops::grouped_mm(a, randn32({4, 6, 6}, 2), offs), Catch::Contains("grouped_mm"));
}

TEST_CASE("grouped_mm: gradients and second derivatives in both cases", "[moe][linalg][gradcheck]") {
  const std::vector<int64_t> offs{2, 2, 5};
  Variable a(rand64({5, 3}, 1), true), b(rand64({3, 3, 4}, 2), true), c(rand64({5, 4}, 3), true);
  auto rows = [&](const std::vector<Variable>& in) { return grouped_mm(in[0], in[1], offs); };
  auto contracted = [&](const std::vector<Variable>& in) { return grouped_mm(t(in[0]), in[1], offs); };
  CHECK(gradcheck(rows, {a, b}));
  CHECK(gradgradcheck(rows, {a, b}));
  CHECK(gradcheck(contracted, {a, c}));
  CHECK(gradgradcheck(contracted, {a, c}));
}

TEST_CASE("MoeExperts: the grouped forward equals its composed twin, values and gradients", "[moe][nn]") {
  Generator gen(4);
  nn::MoeExperts experts(4, 6, 5, "silu", &gen);
  experts.to(DType::Float64);
  const std::vector<int64_t> offs{2, 5, 5, 8};
  Variable x(rand64({8, 6}, 5), true);
  const Variable fast = experts.forward(x, offs), slow = experts.forward_composed(x, offs);
  CHECK(allclose(fast.data(), slow.data(), 1e-12, 1e-12));
  const Tensor r = rand64({8, 6}, 6);
  const std::vector<Variable> wrt{x, experts.gate_proj, experts.up_proj, experts.down_proj};
  const std::vector<Variable> gf = grad({sum(mul(fast, Variable(r)))}, wrt);
  const std::vector<Variable> gs = grad({sum(mul(slow, Variable(r)))}, wrt);
  for (size_t i = 0; i < wrt.size(); ++i) CHECK(allclose(gf[i].data(), gs[i].data(), 1e-12, 1e-12));
  // expert 2 has no rows: no gradient reaches its weights
  CHECK(ops::sum(ops::abs(gf[1].data().select(0, 2))).item<double>() == 0);
  // GeGLU experts (Gemma-style activations) against the twin too
  nn::MoeExperts geglu(4, 6, 5, "gelu_pytorch_tanh", &gen);
  geglu.to(DType::Float64);
  CHECK(allclose(geglu.forward(x, offs).data(), geglu.forward_composed(x, offs).data(), 1e-12, 1e-12));
  CHECK_THROWS_WITH(nn::MoeExperts(0, 6, 5), Catch::Contains("MoeExperts"));
  CHECK_THROWS_WITH(experts.forward(Variable(rand64({8, 5}, 1)), offs),
                    Catch::Contains("MoeExperts") && Catch::Contains("[8, 5]"));
}

TEST_CASE(
    "SparseMoeBlock: each token through its top-k experts, weighted, against a token-by-token reference",
    "[moe][nn]") {
  for (const bool norm : {true, false}) {
    for (const int64_t shared : {int64_t{0}, int64_t{7}}) {
      INFO("norm_topk_prob " << norm << ", shared expert " << shared);
      Generator gen(7);
      nn::MoeOptions o;
      o.num_experts = 5;
      o.num_experts_per_tok = 2;
      o.intermediate_size = 4;
      o.norm_topk_prob = norm;
      o.shared_expert_intermediate_size = shared;
      nn::SparseMoeBlock moe(6, o, &gen);
      moe.to(DType::Float64);
      Tensor router = moe.gate->weight.data();
      ops::mul_(router, 20.0);  // routing far from ties
      const Tensor x = rand64({2, 3, 6}, 8);
      const Tensor y = moe.forward(Variable(x)).data();
      CHECK(y.shape() == Shape{2, 3, 6});
      // the reference: every token alone, its probabilities, its top-2 experts by hand
      const Tensor flat = x.reshape({6, 6});
      for (int64_t n = 0; n < 6; ++n) {
        const Tensor xn = flat.select(0, n);
        const Tensor p = ops::softmax(ops::matmul(moe.gate->weight.data(), xn), 0);
        const std::vector<double> pv = p.to_vector<double>();
        int64_t e0 = 0;
        for (int64_t e = 1; e < 5; ++e)
          if (pv[e] > pv[e0]) e0 = e;
        int64_t e1 = e0 == 0 ? 1 : 0;
        for (int64_t e = 0; e < 5; ++e)
          if (e != e0 && pv[e] > pv[e1]) e1 = e;
        const double s = norm ? pv[e0] + pv[e1] : 1.0;
        Tensor want = ops::zeros({6}, DType::Float64);
        for (const auto& [e, w] : {std::pair{e0, pv[e0] / s}, std::pair{e1, pv[e1] / s}}) {
          const Tensor g = ops::matmul(moe.experts->gate_proj.data().select(0, e), xn);
          const Tensor u = ops::matmul(moe.experts->up_proj.data().select(0, e), xn);
          const Tensor h = ops::mul(ops::mul(g, ops::sigmoid(g)), u);
          want = ops::add(want, ops::mul(ops::matmul(moe.experts->down_proj.data().select(0, e), h), w));
        }
        if (shared > 0) {
          const Tensor sg = ops::sigmoid(ops::matmul(moe.shared_expert_gate->weight.data(), xn));
          want = ops::add(want, ops::mul(moe.shared_expert->forward(Variable(xn)).data(), sg));
        }
        CHECK(allclose(y.reshape({6, 6}).select(0, n), want, 1e-10, 1e-12));
      }
      CHECK(moe.router_logits.shape() == Shape{6, 5});
      // differentiable in x, the router and the experts (the routing held where it is)
      Variable xv(x, true);
      auto f = [&](const std::vector<Variable>& in) {  // gradcheck's copies of the parameters, put in place
        moe.gate->weight = in[1];
        moe.experts->gate_proj = in[2];
        moe.experts->down_proj = in[3];
        return moe.forward(in[0]);
      };
      CHECK(gradcheck(f, {xv, moe.gate->weight, moe.experts->gate_proj, moe.experts->down_proj}));
    }
  }
  nn::MoeOptions bad;
  bad.num_experts = 4;
  bad.num_experts_per_tok = 5;
  bad.intermediate_size = 3;
  CHECK_THROWS_WITH(nn::SparseMoeBlock(6, bad), Catch::Contains("SparseMoeBlock") && Catch::Contains("5"));
}

TEST_CASE("SparseMoeBlock: the expert products' FLOPs grow with k, not with the number of experts",
          "[moe][nn][profiler]") {
  // the profiler's grouped_mm FLOPs of one forward: 3 products of N·k rows, whatever E
  auto expert_flops = [](int64_t experts, int64_t k) {
    Generator gen(1);
    nn::MoeOptions o;
    o.num_experts = experts;
    o.num_experts_per_tok = k;
    o.intermediate_size = 16;
    nn::SparseMoeBlock moe(8, o, &gen);
    const Variable x(randn32({4, 8, 8}, 2));
    profiler::Profile prof({.with_flops = true});
    moe.forward(x);
    prof.stop();
    int64_t flops = 0;
    for (const profiler::Event& e : prof.events())
      if (std::string(e.name) == "grouped_mm") flops += e.flops;
    return flops;
  };
  const int64_t routes = 4 * 8;
  CHECK(expert_flops(4, 2) == 3 * 2 * (routes * 2) * 8 * 16);
  CHECK(expert_flops(16, 2) == expert_flops(4, 2));
  CHECK(expert_flops(16, 4) == 2 * expert_flops(16, 2));
}

TEST_CASE("load_balancing_loss: E · Σ f_e P_e, as transformers' load_balancing_loss_func", "[moe][nn]") {
  // uniform routers: P_e = 1/E and the shares f_e sum to k, so the loss is k
  const Variable uniform(ops::zeros({6, 4}, DType::Float64));
  CHECK(nn::load_balancing_loss({uniform, uniform}, 4, 2).item<double>() == Approx(2.0));
  // by hand on two layers' logits
  const Tensor l0 = rand64({5, 4}, 1), l1 = rand64({3, 4}, 2);
  const Tensor p = ops::softmax(ops::cat({l0, l1}, 0), -1);
  const Tensor idx = ops::topk(p, 2, -1).indices;
  std::vector<double> f(4, 0.0);
  for (int64_t v : idx.to_vector<int64_t>()) f[static_cast<size_t>(v)] += 1.0 / 8.0;
  const std::vector<double> pm = ops::mean(p, {0}).to_vector<double>();
  double want = 0;
  for (size_t e = 0; e < 4; ++e) want += f[e] * pm[e];
  Variable v0(l0, true), v1(l1, true);
  CHECK(nn::load_balancing_loss({v0, v1}, 4, 2).item<double>() == Approx(4 * want).epsilon(1e-12));
  CHECK(
      gradcheck([](const std::vector<Variable>& in) { return nn::load_balancing_loss(in, 4, 2); }, {v0, v1}));
  CHECK_THROWS_WITH(nn::load_balancing_loss({v0}, 5, 2), Catch::Contains("load_balancing_loss"));
  CHECK_THROWS_WITH(nn::load_balancing_loss({}, 4, 2), Catch::Contains("load_balancing_loss"));
}
