// SiLU and SwiGLU (issue 40): the one-pass kernels against their composed definitions, gradcheck and
// gradgradcheck, the 16-bit path as the float32 one rounded once, the modules, and bad input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "helpers.h"
#include "module_gradcheck.h"
#include "ops/cpu/simd.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;

namespace {
Variable leaf(const Tensor& t) { return Variable(t, true); }

// Whether two bfloat16 tensors of one shape hold the same bits everywhere (±0 told apart), NaN matching NaN.
bool same_bf16_bits(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const Tensor x = a.contiguous(), y = b.contiguous();
  const bfloat16 *p = x.data<bfloat16>(), *q = y.data<bfloat16>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool nan_p = (p[i].bits & 0x7fffu) > 0x7f80u, nan_q = (q[i].bits & 0x7fffu) > 0x7f80u;
    if (nan_p != nan_q || (!nan_p && p[i].bits != q[i].bits)) return false;
  }
  return true;
}
}  // namespace

TEST_CASE("silu and swiglu: one pass each, equal to their definitions", "[ops][elementwise][swiglu]") {
  // beyond exp's range on both sides too: silu(-800) = -0 (not NaN), silu(800) = 800
  Tensor x =
      ops::cat({ops::mul(rand64({1000}, 1), 8.0), ops::tensor({-800.0, 800.0, 0.0}, DType::Float64)}, 0);
  Tensor sx = ops::mul(x, ops::sigmoid(x));
  CHECK(allclose(ops::silu(x), sx, 1e-15, 1e-300));
  Tensor g = rand64({1003}, 2), up = rand64({1003}, 3);
  Tensor s = ops::sigmoid(x);
  Tensor dsilu = ops::mul(s, ops::add(ops::mul(x, ops::rsub(s, 1.0)), 1.0));
  CHECK(allclose(ops::silu_backward(g, x), ops::mul(g, dsilu), 1e-14, 1e-300));
  CHECK(allclose(ops::swiglu(x, up), ops::mul(sx, up), 1e-15, 1e-300));
  for (double v : ops::silu(x).to_vector<double>()) REQUIRE(std::isfinite(v));
  // float32, strided inputs (a transposed gate)
  Tensor gate32 = rand64({40, 30}, 4).to(DType::Float32).t(), up32 = rand64({30, 40}, 5).to(DType::Float32);
  Tensor ref = ops::mul(ops::mul(gate32.to(DType::Float64), ops::sigmoid(gate32.to(DType::Float64))),
                        up32.to(DType::Float64));
  CHECK(allclose(ops::swiglu(gate32, up32), ref, 1e-6, 1e-7));
}

TEST_CASE(
    "silu, silu_backward and swiglu in float32 (the vectorised sigmoid) against float64, edges included",
    "[ops][elementwise][swiglu]") {
  // x over [-100, 100] (past exp_nonpositive's -87 cut on both sides), then ±0, ±inf, NaN, the smallest
  // normal and denormal float: float32 within a few units of the last place of float64's definition, and
  // the edges exactly as the definition gives them
  std::vector<double> xs;
  for (int i = -40000; i <= 40000; ++i) xs.push_back(i * 0.0025);
  const double inf = INFINITY;
  const std::vector<double> edges = {0.0, -0.0, inf, -inf, NAN, 1.17549435e-38, -1.4e-45, 88.0, -88.0};
  xs.insert(xs.end(), edges.begin(), edges.end());
  const int64_t n = static_cast<int64_t>(xs.size());
  const Tensor x = ops::from_vector(xs, {n}).to(DType::Float32), x64 = x.to(DType::Float64);  // the same x
  const Tensor g64 = ops::full({n}, 0.75, DType::Float64), g = g64.to(DType::Float32);
  const Tensor s64 = ops::sigmoid(x64);
  const Tensor silu64 = ops::mul(x64, s64);
  const Tensor dsilu64 = ops::mul(g64, ops::mul(s64, ops::add(ops::mul(x64, ops::rsub(s64, 1.0)), 1.0)));
  const int64_t finite = 80001;  // the range's values; the edges follow
  auto range = [&](const Tensor& t) { return t.narrow(0, 0, finite).to(DType::Float64); };
  CHECK(allclose(range(ops::silu(x)), range(silu64), 4e-7, 1e-30));
  CHECK(allclose(range(ops::swiglu(x, g)), range(ops::mul(silu64, g64)), 4e-7, 1e-30));
  // silu' crosses 0 near x = -1.28 (1 + x (1 - σ) cancels there: absolute error on the scale of g), and
  // 1 - σ(x) keeps few bits for large x (x (1 - σ) ~ 1e-6 at x = 16): a few units of float's last place
  CHECK(allclose(range(ops::silu_backward(g, x)), range(dsilu64), 2e-6, 2e-7));
  const auto silu_edges = ops::silu(x).narrow(0, finite, 9).to_vector<double>();
  CHECK(silu_edges[0] == 0.0);
  CHECK(std::signbit(silu_edges[1]));
  CHECK(silu_edges[2] == inf);
  CHECK(std::isnan(silu_edges[3]));  // -inf · σ(-inf) = -inf · 0, as torch.nn.functional.silu gives
  CHECK(std::isnan(silu_edges[4]));
  CHECK(silu_edges[7] == 88.0f);
  CHECK(silu_edges[8] == 0.0);
  const auto d_edges = ops::silu_backward(g, x).narrow(0, finite, 9).to_vector<double>();
  CHECK(d_edges[0] == 0.75 * 0.5);
  CHECK(std::isnan(d_edges[4]));
}

TEST_CASE("swiglu_backward: the one-pass kernel equals the composed one it replaced, every float dtype",
          "[ops][elementwise][swiglu]") {
  // 300 x 1001: several threads' runs; the gate over [-24, 24] (both tails of the sigmoid)
  const Tensor gate = ops::mul(rand64({300, 1001}, 40), 24.0), up = rand64({300, 1001}, 41),
               g = rand64({300, 1001}, 42);
  // the readable reference: three elementwise passes (silu_backward(g ⊙ up, gate) and swiglu(gate, g)), as
  // the rule computed the gradients before, and as a backend without the fused kernel (CUDA) runs it
  auto composed = [](const Tensor& gg, const Tensor& x, const Tensor& u) {
    return ops::swiglu_backward_composed(gg, x, u);
  };
  for (DType dt : {DType::Float64, DType::Float32}) {
    INFO(dtype_name(dt));
    const Tensor x = gate.to(dt), u = up.to(dt), gg = g.to(dt);
    ops::SwigluGrads got = ops::swiglu_backward(gg, x, u), want = composed(gg, x, u);
    const double tol = dt == DType::Float64 ? 1e-15 : 1e-6;
    CHECK(allclose(got.dgate, want.dgate, tol, tol));
    CHECK(allclose(got.dup, want.dup, 0, 0));  // the same products in the same order
    // and against the definition in float64: d up = silu(gate) g, d gate = silu'(gate) g up
    const Tensor s = ops::sigmoid(gate);
    CHECK(allclose(got.dup, ops::mul(ops::mul(gate, s), g), 4 * tol, 4 * tol));
    CHECK(allclose(got.dgate,
                   ops::mul(ops::mul(g, up), ops::mul(s, ops::add(ops::mul(gate, ops::rsub(s, 1.0)), 1.0))),
                   4 * tol, 4 * tol));
  }
  // 16 bits: the float32 kernel on the widened values, each gradient rounded once; strided operands
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(dt));
    const Tensor x = gate.to(dt), u = up.t().contiguous().t().to(dt), gg = g.to(dt);
    ops::SwigluGrads got = ops::swiglu_backward(gg, x, u);
    ops::SwigluGrads twin =
        ops::swiglu_backward(gg.to(DType::Float32), x.to(DType::Float32), u.to(DType::Float32));
    REQUIRE(got.dgate.dtype() == dt);
    CHECK(allclose(got.dgate, twin.dgate.to(dt), 0, 0));
    CHECK(allclose(got.dup, twin.dup.to(dt), 0, 0));
  }
  CHECK(ops::swiglu_backward(rand64({0, 3}), rand64({0, 3}), rand64({0, 3})).dgate.shape() == Shape{0, 3});
  REQUIRE_THROWS_SACCADE(ops::swiglu_backward(rand64({3}), rand64({3}), rand64({4})),
                         "swiglu_backward: expected floating tensors of one shape");
  REQUIRE_THROWS_SACCADE(ops::swiglu_backward(rand64({2}), rand64({3}), rand64({3})), "swiglu_backward");
  REQUIRE_THROWS_SACCADE(ops::swiglu_backward(rand64({3}).to(DType::Float32), rand64({3}), rand64({3})),
                         "swiglu_backward: g (float32), gate (float64) and up (float64) must have one dtype");
  REQUIRE_THROWS_SACCADE(ops::swiglu_backward(Tensor(), rand64({3}), rand64({3})), "swiglu_backward");
}

TEST_CASE("silu and swiglu: gradcheck, gradgradcheck, and the rule's one-pass gradients",
          "[autograd][swiglu]") {
  CHECK(gradcheck([](const std::vector<Variable>& v) { return silu(v[0]); }, {leaf(rand64({3, 5}, 6))}));
  CHECK(gradgradcheck([](const std::vector<Variable>& v) { return silu(v[0]); }, {leaf(rand64({3, 5}, 7))}));
  auto f = [](const std::vector<Variable>& v) { return swiglu(v[0], v[1]); };
  CHECK(gradcheck(f, {leaf(rand64({4, 6}, 8)), leaf(rand64({4, 6}, 9))}));
  CHECK(gradcheck(f, {leaf(rand64({6, 4}, 10).t()), leaf(rand64({4, 6}, 11))}));  // a strided gate
  CHECK(gradgradcheck(f, {leaf(rand64({3, 4}, 12)), leaf(rand64({3, 4}, 13))}));
  // only one input requiring grad
  Variable fixed(rand64({4, 6}, 14));
  CHECK(gradcheck([&](const std::vector<Variable>& v) { return swiglu(v[0], fixed); },
                  {leaf(rand64({4, 6}, 15))}));
  CHECK(gradcheck([&](const std::vector<Variable>& v) { return swiglu(fixed, v[0]); },
                  {leaf(rand64({4, 6}, 16))}));
  // float32: the fused rule against the composed silu(gate) * up
  Tensor g0 = rand64({8, 16}, 17).to(DType::Float32), u0 = rand64({8, 16}, 18).to(DType::Float32);
  Variable g1(g0, true), u1(u0, true), g2(g0, true), u2(u0, true);
  Variable y1 = swiglu(g1, u1), y2 = mul(mul(g2, sigmoid(g2)), u2);
  CHECK(allclose(y1.data(), y2.data(), 1e-6, 1e-7));
  sum(mul(y1, y1)).backward();
  sum(mul(y2, y2)).backward();
  CHECK(allclose(g1.grad(), g2.grad(), 1e-5, 1e-6));
  CHECK(allclose(u1.grad(), u2.grad(), 1e-5, 1e-6));
}

TEST_CASE("silu and swiglu: 16-bit in and out, the float32 computation rounded once", "[half][swiglu]") {
  for (DType t : {DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(t));
    Tensor a = ops::mul(rand64({300}, 20), 6.0).to(t), b = rand64({300}, 21).to(t);
    const Tensor a32 = a.to(DType::Float32), b32 = b.to(DType::Float32);
    CHECK(ops::silu(a).dtype() == t);
    CHECK(allclose(ops::silu(a), ops::silu(a32).to(t), 0, 0));
    CHECK(allclose(ops::swiglu(a, b), ops::swiglu(a32, b32).to(t), 0, 0));
    CHECK(allclose(ops::silu_backward(b, a), ops::silu_backward(b32, a32).to(t), 0, 0));
    Variable va(a, true), vb(b, true);
    sum(swiglu(va, vb)).backward();
    CHECK(va.grad().dtype() == t);
    CHECK(vb.grad().dtype() == t);
    CHECK(allclose(vb.grad(), ops::silu(a32).to(t), 0, 0));  // d up = silu(gate) · 1
  }
}

TEST_CASE("SiLU and SwiGLU modules, and bad input", "[nn][swiglu][errors]") {
  Generator gen(3);
  nn::SwiGLU mlp(8, 20, false, &gen);
  std::vector<std::string> keys = mlp.state_dict().keys();
  std::sort(keys.begin(), keys.end());
  CHECK(keys == std::vector<std::string>{"down_proj.weight", "gate_proj.weight", "up_proj.weight"});
  CHECK(mlp.gate_proj->weight.shape() == Shape{20, 8});
  CHECK(mlp.down_proj->weight.shape() == Shape{8, 20});
  Variable x(rand64({2, 3, 8}, 30).to(DType::Float32));
  Variable y = mlp.forward(x);
  CHECK(y.shape() == Shape{2, 3, 8});
  Variable ref = mlp.down_proj->forward(mul(silu(mlp.gate_proj->forward(x)), mlp.up_proj->forward(x)));
  CHECK(allclose(y.data(), ref.data(), 1e-6, 1e-6));
  CHECK(nn::SwiGLU(4, 6, true).state_dict().keys().size() == 6);
  nn::SiLU act;
  CHECK(allclose(act.forward(x).data(), silu(x).data(), 0, 0));
  REQUIRE_THROWS_SACCADE(act.forward(Variable()), "SiLU: got an undefined input");
  REQUIRE_THROWS_SACCADE(ops::swiglu(rand64({3}), rand64({4})),
                         "swiglu: expected floating tensors of one shape");
  REQUIRE_THROWS_SACCADE(ops::swiglu(rand64({3}), Tensor()), "swiglu");
  REQUIRE_THROWS_SACCADE(ops::silu(ops::ones({3}, DType::Int64)), "silu: expected a floating tensor");
  REQUIRE_THROWS_SACCADE(ops::silu_backward(ops::ones({3}, DType::Int64), rand64({3})), "silu_backward");
  REQUIRE_THROWS_SACCADE(swiglu(Variable(rand64({3})), Variable(rand64({3}).to(DType::Float32))),
                         "swiglu: gate [3] (float64) and up [3] (float32) must have one dtype");
  REQUIRE_THROWS_SACCADE(swiglu(Variable(rand64({3})), Variable(rand64({2}))), "swiglu");
  REQUIRE_THROWS_SACCADE(mlp.forward(Variable(rand64({2, 5}).to(DType::Float32))), "SwiGLU");
  REQUIRE_THROWS_SACCADE(nn::SwiGLU(4, 6, false, nullptr, "relu"),
                         "SwiGLU: hidden_act 'relu' is not supported");
  REQUIRE_THROWS_SACCADE(nn::MLP(4, 6, true, nullptr, "relu"), "MLP: hidden_act 'relu' is not supported");
  REQUIRE_THROWS_SACCADE(nn::MoeExperts(2, 4, 6, "quick_gelu"),
                         "MoeExperts: hidden_act 'quick_gelu' is not supported");
}

TEST_CASE("SwiGLU's other gates: GeGLU with GELU's tanh form (Gemma's) and exact GELU, and their gradients",
          "[nn][swiglu]") {
  Generator gen(4);
  Variable x(rand64({2, 3, 8}, 34), true);
  for (const auto& [act, approximate] :
       {std::pair{"gelu_pytorch_tanh", "tanh"}, std::pair{"gelu_new", "tanh"}, std::pair{"gelu", "none"}}) {
    CAPTURE(act);
    nn::SwiGLU mlp(8, 12, true, &gen, act);
    mlp.to(DType::Float64);
    CHECK(mlp.hidden_act() == act);
    nn::GELU gelu(approximate);
    const Variable ref =
        mlp.down_proj->forward(mul(gelu.forward(mlp.gate_proj->forward(x)), mlp.up_proj->forward(x)));
    CHECK(allclose(mlp.forward(x).data(), ref.data(), 0, 0));
    // not the SiLU gate
    const Variable silu_ref =
        mlp.down_proj->forward(mul(silu(mlp.gate_proj->forward(x)), mlp.up_proj->forward(x)));
    CHECK_FALSE(allclose(mlp.forward(x).data(), silu_ref.data(), 1e-3, 1e-3));
    std::vector<Variable> wrt{x};
    for (auto& [name, p] : mlp.named_parameters()) wrt.push_back(p);
    CHECK(testing::module_gradcheck([&] { return mlp.forward(x); }, wrt));
  }
}

TEST_CASE(
    "silu_backward and swiglu in bfloat16 at 16 lanes: the bits of the per-element path and of the f32 "
    "twin rounded once, every length and edge",
    "[ops][elementwise][swiglu][half][isa]") {
  // the edges: ±0, ±inf, NaN, denormals, the sigmoid's -87 cut and beyond, bfloat16's largest, silu' near
  // its zero (-1.28), and gates where 1 - σ keeps few bits; then random gates over [-24, 24]
  std::vector<float> v = {0.0f,   -0.0f,   INFINITY, -INFINITY, NAN,     -NAN,   1e-40f, -1e-40f,
                          86.9f,  -86.9f,  87.0f,    -87.0f,    87.5f,   -87.5f, 88.0f,  -88.0f,
                          100.0f, -100.0f, 3e38f,    -3e38f,    1.0f,    -1.0f,  -1.28f, 16.0f,
                          -16.0f, 1e-3f,   -1e-3f,   1e-20f,    -1e-20f, 3e-19f};
  const std::vector<double> r = ops::mul(rand64({200}, 50), 8.0).to_vector<double>();
  for (double x : r) v.push_back(static_cast<float>(x));
  const int64_t nv = static_cast<int64_t>(v.size());
  // lengths around the 16 lanes (a masked tail or none), each starting at another edge so that every edge
  // lands in full vectors and in tails
  for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 47, 227, 1001}) {
    for (int64_t shift : {0, 5, 13}) {
      INFO("n " << n << ", shift " << shift);
      std::vector<float> gate(n), up(n), g(n);
      for (int64_t i = 0; i < n; ++i) {
        gate[i] = v[(i + shift) % nv];
        up[i] = v[(i * 7 + shift + 3) % nv];
        g[i] = v[(i * 11 + shift + 1) % nv];
      }
      const Tensor gate16 = ops::from_vector(gate, {n}).to(DType::BFloat16),
                   up16 = ops::from_vector(up, {n}).to(DType::BFloat16),
                   g16 = ops::from_vector(g, {n}).to(DType::BFloat16);
      // at the machine's width (16 lanes under AVX-512, rounded by VCVTNEPS2BF16 where the CPU has
      // AVX512-BF16), against the 16 lanes rounded by integer steps (any IsaGuard turns VCVTNEPS2BF16 off)
      // and the per-element lanes (AVX2: GCC's loop)
      const Tensor y = ops::swiglu(gate16, up16), ds = ops::silu_backward(g16, gate16);
      const ops::SwigluGrads d = ops::swiglu_backward(g16, gate16, up16);
      for (cpu::Isa isa : {cpu::Isa::Avx512, cpu::Isa::Avx2}) {
        INFO("IsaGuard " << cpu::vector_level_name(isa));
        cpu::IsaGuard narrow(std::min(cpu::cpu_isa(), isa));
        CHECK(same_bf16_bits(y, ops::swiglu(gate16, up16)));
        CHECK(same_bf16_bits(ds, ops::silu_backward(g16, gate16)));
        const ops::SwigluGrads d8 = ops::swiglu_backward(g16, gate16, up16);
        CHECK(same_bf16_bits(d.dgate, d8.dgate));
        CHECK(same_bf16_bits(d.dup, d8.dup));
      }
      // and the float32 twin on the same values, rounded once
      const Tensor gate32 = gate16.to(DType::Float32), up32 = up16.to(DType::Float32),
                   g32 = g16.to(DType::Float32);
      CHECK(same_bf16_bits(y, ops::swiglu(gate32, up32).to(DType::BFloat16)));
      CHECK(same_bf16_bits(ds, ops::silu_backward(g32, gate32).to(DType::BFloat16)));
      const ops::SwigluGrads d32 = ops::swiglu_backward(g32, gate32, up32);
      CHECK(same_bf16_bits(d.dgate, d32.dgate.to(DType::BFloat16)));
      CHECK(same_bf16_bits(d.dup, d32.dup.to(DType::BFloat16)));
    }
  }
}
