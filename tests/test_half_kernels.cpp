// The 16-bit kernels (bfloat16, float16) against their float32 twins, within one rounding of the result
// (the bound: tests/kernel_checks.h). Softmax's 16-bit cases are in test_softmax.cpp and matmul's in
// test_linalg.cpp, beside the rest of those ops' tests.
#include <cmath>

#include "kernel_checks.h"
#include "nn/attention.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::check_close;
using saccade::testing::f32;
using saccade::testing::randn16;

namespace {

using Binary = Tensor (*)(const Tensor&, const Tensor&);
using Unary = Tensor (*)(const Tensor&);

}  // namespace

TEST_CASE("16-bit elementwise ops and comparisons match float32 within one rounding", "[half]") {
  for (DType t : {DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(t));
    Tensor a = randn16({5, 37}, t, 1), b = randn16({5, 37}, t, 2), row = randn16({37}, t, 3);
    for (Binary op : std::initializer_list<Binary>{ops::add, ops::sub, ops::mul, ops::div, ops::maximum})
      check_close(op(a, b), op(f32(a), f32(b)), t);
    check_close(ops::add(a, row), ops::add(f32(a), f32(row)), t);  // broadcast: a stride-0 operand
    check_close(ops::mul(a.t(), b.t()), ops::mul(f32(a).t(), f32(b).t()), t);  // strided
    check_close(ops::mul(a, 3.0), ops::mul(f32(a), 3.0), t);
    check_close(ops::gelu_backward(b, a), ops::gelu_backward(f32(b), f32(a)), t);  // GELU's fused backward
    for (Unary op : std::initializer_list<Unary>{ops::exp, ops::tanh, ops::sigmoid, ops::gelu, ops::neg,
                                                 ops::abs, ops::relu})
      check_close(op(a), op(f32(a)), t);
    for (Binary op : std::initializer_list<Binary>{ops::lt, ops::ge, ops::eq}) {
      Tensor c = op(a, b);
      REQUIRE(c.dtype() == DType::Bool);
      REQUIRE(allclose(c, op(f32(a), f32(b)), 0, 0));  // comparisons of exact values: exact
    }
    Tensor w = ops::where(ops::gt(a, 0.0), a, b);
    REQUIRE(w.dtype() == t);
    REQUIRE(allclose(f32(w), ops::where(ops::gt(f32(a), 0.0), f32(a), f32(b)), 0, 0));  // moves only
  }
}

TEST_CASE("16-bit promotion in ops, and nothing narrows silently", "[half]") {
  Tensor b = randn16({4}, DType::BFloat16, 1), h = randn16({4}, DType::Float16, 2);
  Tensor x = ops::randn({4});
  CHECK(ops::add(b, h).dtype() == DType::Float32);
  CHECK(ops::mul(b, x).dtype() == DType::Float32);
  CHECK(ops::add(b, ops::ones({4}, DType::Int64)).dtype() == DType::BFloat16);
  CHECK(ops::add(b, ops::ones({4}, DType::Float64)).dtype() == DType::Float64);
  CHECK(ops::mul(b, 2.5).dtype() == DType::BFloat16);  // a scalar takes the tensor's dtype, as PyTorch's
  REQUIRE_THROWS_SACCADE(ops::matmul(b.view({2, 2}), x.view({2, 2})), "matmul");
  REQUIRE_THROWS_SACCADE(ops::matmul(b.view({2, 2}), x.view({2, 2})), "bfloat16");
  REQUIRE_THROWS_SACCADE(ops::matmul(b.view({2, 2}), x.view({2, 2})), "float32");
}

TEST_CASE("16-bit reductions accumulate in float32", "[half]") {
  // a bfloat16 accumulator would stop at 256 (256 + 1 rounds to 256 with 8 significant bits); float32 sums
  // 10^6 ones exactly, and the result rounds once: 10^6 = 0x1.e848p19 -> 0x1.e8p19 = 999424 in bfloat16
  Tensor ones = ops::ones({1000000}, DType::BFloat16);
  CHECK(ops::sum(ones).item<double>() == 999424.0);
  CHECK(ops::sum(ones.view({1000, 1000}), {0}).to_vector<double>()[7] == 1000.0);  // column sums
  for (DType t : {DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(t));
    Tensor a = randn16({6, 300}, t, 4);
    // a sum's error is relative to Σ|x|, not to the (possibly cancelling) sum
    check_close(ops::sum(a, {1}), ops::sum(f32(a), {1}), t, ops::sum(ops::abs(f32(a)), {1}));
    check_close(ops::sum(a, {0}), ops::sum(f32(a), {0}), t, ops::sum(ops::abs(f32(a)), {0}));
    check_close(ops::mean(a, {1}), ops::mean(f32(a), {1}), t, ops::mean(ops::abs(f32(a)), {1}));
    REQUIRE(allclose(f32(ops::amax(a, {1})), ops::amax(f32(a), {1}), 0, 0));  // max, min: exact
    REQUIRE(allclose(f32(ops::amin(a, {0})), ops::amin(f32(a), {0}), 0, 0));
    REQUIRE(allclose(ops::argmax(a, 1), ops::argmax(f32(a), 1), 0, 0));
  }
}

TEST_CASE("16-bit layer_norm: 16 bits in and out, float32 inside", "[half]") {
  for (DType t : {DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(t));
    Tensor x = randn16({4, 3, 50}, t, 5), w = randn16({50}, t, 6), bias = randn16({50}, t, 7);
    ops::LayerNormForward ln = ops::layer_norm_forward(x, {50}, w, bias);
    ops::LayerNormForward ref = ops::layer_norm_forward(f32(x), {50}, f32(w), f32(bias));
    // the output's terms (x - μ) rstd w and b can cancel: relative to their magnitudes
    check_close(ln.out, ref.out, t, ops::add(ops::abs(ops::sub(ref.out, f32(bias))), ops::abs(f32(bias))));
    REQUIRE(ln.mean.dtype() == DType::Float32);  // statistics stay float32
    REQUIRE(allclose(ln.rstd, ref.rstd, 1e-6, 0));
  }
}

TEST_CASE("16-bit autograd: gradients come back in the input's dtype", "[half]") {
  Tensor a0 = randn16({3, 8}, DType::BFloat16, 11), b0 = randn16({8, 5}, DType::BFloat16, 12);
  Variable a(a0, true), b(b0, true), c(ops::randn({3, 5}), true);
  Variable y = sum(mul(add(matmul(a, b), c), c));  // bf16 @ bf16 -> bf16; + f32 -> f32
  REQUIRE(y.dtype() == DType::Float32);
  y.backward();
  REQUIRE(a.grad().dtype() == DType::BFloat16);
  REQUIRE(b.grad().dtype() == DType::BFloat16);
  REQUIRE(c.grad().dtype() == DType::Float32);
  // y = Σ (a b + c) ⊙ c: dL/d(ab) = c, so dL/da = c bᵀ (float32 on the widened b, rounded once)
  check_close(a.grad(), ops::matmul(c.data(), f32(b0).t()), DType::BFloat16,
              ops::matmul(ops::abs(c.data()), ops::abs(f32(b0)).t()));
}

TEST_CASE("16-bit embedding: the backward accumulates in float32", "[half]") {
  Variable w(ops::zeros({4, 3}, DType::BFloat16), true);
  Tensor idx = ops::zeros({1000}, DType::Int64);  // row 0, 1000 times
  Variable e = embedding(w, idx);
  REQUIRE(e.dtype() == DType::BFloat16);
  sum(e).backward();
  REQUIRE(w.grad().dtype() == DType::BFloat16);
  CHECK(w.grad().to_vector<double>()[0] == 1000.0);  // a bfloat16 accumulator would stop at 256
  CHECK(w.grad().to_vector<double>()[3] == 0.0);
}

TEST_CASE("16-bit dropout on the CPU: float32's numbers rounded once, block by block", "[half]") {
  // past one block of 4096 elements, on 1 and 2 threads, with NaN and inf among the inputs
  const int saved = get_num_threads();
  for (DType t : {DType::BFloat16, DType::Float16})
    for (int threads : {1, 2}) {
      INFO(dtype_name(t) << ", threads " << threads);
      set_num_threads(threads);
      Tensor x = ops::mul(randn16({3, 4500}, t, 17), 1e3);
      Tensor flat = x.view({-1});
      Tensor nan = flat.narrow(0, 17, 1), inf = flat.narrow(0, 4100, 1);
      ops::fill_(nan, NAN);
      ops::fill_(inf, INFINITY);
      Generator g1(9), g2(9);
      ops::DropoutResult d16 = ops::dropout(x, 0.3, true, &g1), d32 = ops::dropout(f32(x), 0.3, true, &g2);
      REQUIRE(d16.out.dtype() == t);
      // the bits of the widened route's results (NaN compared as NaN)
      CHECK(allclose(d16.out, d32.out.to(t), 0, 0));
      CHECK(allclose(d16.mask, d32.mask.to(t), 0, 0));
    }
  set_num_threads(saved);
}

TEST_CASE("16-bit dropout, cross_entropy and flash attention", "[half]") {
  for (DType t : {DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(t));
    Tensor x = randn16({8, 40}, t, 13);
    Generator g1(5), g2(5);
    ops::DropoutResult d16 = ops::dropout(x, 0.25, true, &g1), d32 = ops::dropout(f32(x), 0.25, true, &g2);
    REQUIRE(d16.out.dtype() == t);
    REQUIRE(allclose(ops::eq(d16.mask, 0.0), ops::eq(d32.mask, 0.0), 0, 0));  // the same draws
    check_close(d16.out, d32.out, t);

    Tensor target = ops::tensor({3, 0, 39, 7, 7, 1, 2, 5}, DType::Int64);
    Variable logits(x, true);
    Variable loss = cross_entropy(logits, target);
    REQUIRE(loss.dtype() == DType::Float32);  // the loss in float32
    REQUIRE(allclose(loss.data(), ops::cross_entropy(f32(x), target), 1e-6, 0));
    loss.backward();
    REQUIRE(logits.grad().dtype() == t);

    Tensor q = randn16({2, 2, 9, 16}, t, 14), k = randn16({2, 2, 11, 16}, t, 15),
           v = randn16({2, 2, 11, 8}, t, 16);
    Variable vq(q, true), vk(k, true), vv(v, true), rq(f32(q), true), rk(f32(k), true), rv(f32(v), true);
    ops::AttentionMask causal;
    causal.causal = ops::CausalAlign::TopLeft;
    Variable o = flash_attention(vq, vk, vv, causal, 0.25), r = flash_attention(rq, rk, rv, causal, 0.25);
    // out is a convex combination of v's rows: its error is relative to max |v|
    const double vmax = ops::max(ops::abs(f32(v))).item<double>();
    check_close(o.data(), r.data(), t, ops::full(r.data().shape(), vmax));
    Tensor go = randn16(o.shape(), t, 17);
    o.backward(go);
    r.backward(f32(go));
    REQUIRE(vq.grad().dtype() == t);
    // gradients: sums of products over Tk and D; bound relative to max |g| over the tensor (4 ulps: the
    // float32 twin receives the rounded out in its backward, ours computes out in float32)
    for (const auto& [g, ref] : std::vector<std::pair<Tensor, Tensor>>{
             {vq.grad(), rq.grad()}, {vk.grad(), rk.grad()}, {vv.grad(), rv.grad()}}) {
      const double gmax = ops::max(ops::abs(ref)).item<double>();
      check_close(g, ref, t, ops::full(ref.shape(), 4 * gmax));
    }
  }
}

TEST_CASE("16-bit autograd through a small transformer block: every gradient in 16 bits, near float32",
          "[half]") {
  // linear -> layer_norm -> gelu -> causal flash attention -> linear -> cross_entropy, all parameters and
  // activations bfloat16, against the same block in float32 from the same (rounded) parameters. Each
  // stored activation rounds (2^-9 relative) and the errors compound through six ops and their backward:
  // the bound is 3% of each gradient's largest magnitude, about 8 bfloat16 ulps; a rule that lost the
  // gradient or summed in 16 bits would miss it by far more.
  auto run = [](DType t) {
    Generator g(21);
    auto param = [&](const Shape& s) {
      return Variable(
          ops::mul(ops::randn(s, DType::Float32, Device::cpu(), &g), 0.3).to(DType::BFloat16).to(t), true);
    };
    std::vector<Variable> p{param({16, 16}), param({16}),     param({16}),
                            param({16}),     param({10, 16}), param({10})};
    Variable x(ops::randn({2, 6, 16}, DType::Float32, Device::cpu(), &g).to(DType::BFloat16).to(t));
    Tensor target = ops::tensor({1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2}, DType::Int64);
    Variable h = gelu(layer_norm(linear(x, p[0], p[1]), {16}, p[2], p[3]));
    Variable q = transpose(reshape(h, {2, 6, 2, 8}), 1, 2);  // (B, H, T, D)
    ops::AttentionMask causal;
    causal.causal = ops::CausalAlign::TopLeft;
    Variable a = reshape(transpose(flash_attention(q, q, q, causal, 0.35), 1, 2), {12, 16});
    Variable loss = cross_entropy(linear(a, p[4], p[5]), target);
    loss.backward();
    std::vector<Tensor> grads;
    for (const Variable& v : p) {
      REQUIRE(v.grad().dtype() == t);
      grads.push_back(v.grad());
    }
    return std::pair{loss.data(), grads};
  };
  auto [loss16, g16] = run(DType::BFloat16);
  auto [loss32, g32] = run(DType::Float32);
  REQUIRE(loss16.dtype() == DType::Float32);
  CHECK(std::abs(loss16.item<double>() - loss32.item<double>()) <= 0.03 * std::abs(loss32.item<double>()));
  for (size_t i = 0; i < g16.size(); ++i) {
    INFO("parameter " << i);
    const double gmax = ops::max(ops::abs(g32[i])).item<double>();
    REQUIRE(allclose(f32(g16[i]), g32[i], 0, 0.03 * gmax));
  }
}

TEST_CASE("16-bit conv2d and pooling: float32 inside, the results rounded once", "[half]") {
  // (image_caption --dtype bf16 runs its encoder's convolutions under autocast: they once threw "im2col")
  for (DType t : {DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(t));
    Tensor x = randn16({2, 3, 9, 9}, t, 1), w = randn16({4, 3, 3, 3}, t, 2), b = randn16({4}, t, 3);
    Tensor y = ops::conv2d(x, w, b, {1, 1}, {1, 1});
    Tensor y32 = ops::conv2d(f32(x), f32(w), f32(b), {1, 1}, {1, 1});
    // a sum of 27 products: bounded relative to the sum of their magnitudes
    Tensor mag = ops::conv2d(ops::abs(f32(x)), ops::abs(f32(w)), ops::abs(f32(b)), {1, 1}, {1, 1});
    check_close(y, y32, t, mag);
    Tensor g = randn16(y.shape(), t, 4);
    ops::Conv2dGrads r = ops::conv2d_backward(g, x, w, {1, 1}, {1, 1}, true, true, true);
    ops::Conv2dGrads r32 = ops::conv2d_backward(f32(g), f32(x), f32(w), {1, 1}, {1, 1}, true, true, true);
    check_close(
        r.grad_input, r32.grad_input, t,
        ops::conv2d_backward(ops::abs(f32(g)), f32(x), ops::abs(f32(w)), {1, 1}, {1, 1}, true, false, false)
            .grad_input);
    REQUIRE(r.grad_weight.dtype() == t);
    REQUIRE(r.grad_bias.dtype() == t);
    CHECK(allclose(f32(r.grad_weight), r32.grad_weight, 0x1p-7, 0x1p-4));
    CHECK(allclose(f32(r.grad_bias), r32.grad_bias, 0x1p-7, 0x1p-4));

    ops::ValuesIndices m = ops::max_pool2d(x, {2, 2}), m32 = ops::max_pool2d(f32(x), {2, 2});
    check_close(m.values, m32.values, t);  // exact: the max is one of the inputs
    CHECK(allclose(m.indices, m32.indices, 0, 0));
    Tensor gm = randn16(m.values.shape(), t, 5);
    check_close(ops::max_pool2d_backward(gm, m.indices, x.shape()),
                ops::max_pool2d_backward(f32(gm), m.indices, x.shape()), t);
    check_close(ops::avg_pool2d(x, {3, 3}), ops::avg_pool2d(f32(x), {3, 3}), t,
                ops::avg_pool2d(ops::abs(f32(x)), {3, 3}));
    Tensor ga = randn16({2, 3, 3, 3}, t, 6);
    check_close(ops::avg_pool2d_backward(ga, x.shape(), {3, 3}),
                ops::avg_pool2d_backward(f32(ga), x.shape(), {3, 3}), t);
  }
}

TEST_CASE("16-bit GRU gates and additive attention scores: float32 inside", "[half]") {
  // (the sat captioner under autocast: 16-bit gate projections beside a float32 state, 16-bit projected
  // queries and keys; both ops once refused them)
  for (DType t : {DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(t));
    Tensor gi = randn16({4, 15}, t, 1), gh = randn16({4, 15}, t, 2);
    Tensor h = randn16({4, 5}, t, 3).to(DType::Float32);  // a float32 state, exactly representable
    ops::GruGates r = ops::gru_gates(gi, gh, h), r32 = ops::gru_gates(f32(gi), f32(gh), h);
    REQUIRE(r.h.dtype() == DType::Float32);  // 16-bit with float32 promotes to float32
    CHECK(allclose(r.h, r32.h, 0, 0));       // widening is exact: the same float32 arithmetic
    Tensor gy = randn16({4, 5}, t, 4).to(DType::Float32);
    ops::GruGatesGrads g = ops::gru_gates_backward(gy, gh, h, r.saved);
    ops::GruGatesGrads g32 = ops::gru_gates_backward(gy, f32(gh), h, r32.saved);
    CHECK(allclose(g.ggi, g32.ggi, 0, 0));
    CHECK(allclose(g.gh, g32.gh, 0, 0));
    // all 16-bit: the new state in 16 bits, rounded once
    check_close(ops::gru_gates(gi, gh, h.to(t)).h, ops::gru_gates(f32(gi), f32(gh), f32(h.to(t))).h, t);

    Tensor qp = randn16({2, 3, 8}, t, 5), kp = randn16({2, 6, 8}, t, 6), wv = randn16({8}, t, 7);
    Tensor s = ops::additive_attention_scores(qp, kp, wv);
    Tensor s32 = ops::additive_attention_scores(f32(qp), f32(kp), f32(wv));
    Tensor mag = ops::mul(ops::full(s32.shape(), 1.0), ops::sum(ops::abs(f32(wv))));  // |Σ w tanh| <= Σ |w|
    check_close(s, s32, t, mag);
    Tensor gs = randn16(s.shape(), t, 8);
    ops::AdditiveScoresGrads a = ops::additive_attention_scores_backward(gs, qp, kp, wv);
    ops::AdditiveScoresGrads a32 =
        ops::additive_attention_scores_backward(f32(gs), f32(qp), f32(kp), f32(wv));
    REQUIRE(a.gqp.dtype() == t);
    CHECK(allclose(f32(a.gqp), a32.gqp, 0x1p-7, 0x1p-5));
    CHECK(allclose(f32(a.gkp), a32.gkp, 0x1p-7, 0x1p-5));
    CHECK(allclose(f32(a.gw_v), a32.gw_v, 0x1p-7, 0x1p-5));
  }
}

TEST_CASE("bfloat16 flash attention with every product on VDPBF16PS: within P's and dS's rounding of float32",
          "[half][flash]") {
  // With AVX512-BF16, the CPU kernels round P (forward and backward) and dS (backward) to bfloat16 before the
  // products P V, Pᵀ dO, dSᵀ Q and dS K (ops/cpu/attention_half.cpp, as PyTorch's CPU flash attention). Each
  // rounded factor is off by at most 2^-9 of itself, so against the float32 kernel on the same (widened)
  // inputs each result may differ by 2^-9 of the sum of its terms' magnitudes, plus its own rounding: the
  // bound is ulp · (|float32 result| + Σ |terms|) with ulp = 2^-8 (twice that). Several key tiles (131 keys,
  // an odd last tile), each mask kind and dropout; without AVX512-BF16 the same test runs the widened route.
  const DType bf = DType::BFloat16;
  Tensor q = randn16({2, 2, 70, 32}, bf, 31), k = randn16({2, 2, 131, 32}, bf, 32),
         v = randn16({2, 2, 131, 32}, bf, 33), go = randn16({2, 2, 70, 32}, bf, 34);
  const Shape scores{2, 2, 70, 131};
  const double scale = 1.0 / std::sqrt(32.0);
  Generator g(35);
  const Tensor keep = ops::gt(ops::rand({2, 1, 70, 131}, DType::Float32, Device::cpu(), &g), 0.2);
  const Tensor lens = ops::tensor({100, 131}, DType::Int64);
  struct Case {
    const char* name;
    Tensor mask;
    ops::CausalAlign causal;
    double p;
  };
  for (const Case& c :
       {Case{"none", Tensor(), ops::CausalAlign::None, 0.0},
        Case{"valid_lens + dropout", lens, ops::CausalAlign::None, 0.2},
        Case{"keep mask", keep, ops::CausalAlign::None, 0.0},
        Case{"causal bottom-right + dropout", Tensor(), ops::CausalAlign::BottomRight, 0.2}}) {
    INFO(c.name);
    const ops::AttentionMask mask = ops::attention_mask(c.mask, scores, c.causal, Device::cpu(), "test");
    const ops::AttentionDropout drop{c.p, 7, 1000, Tensor()};
    ops::FlashAttentionForward f16 = ops::flash_attention_forward(q, k, v, mask, scale, drop);
    ops::FlashAttentionForward f32r = ops::flash_attention_forward(f32(q), f32(k), f32(v), mask, scale, drop);
    const double vmax = ops::max(ops::abs(f32(v))).item<double>();
    check_close(f16.out, f32r.out, bf, ops::full(f32r.out.shape(), vmax / (1 - c.p)));
    // the scores are the same float32 sums of exact products: lse agrees to float32 rounding
    REQUIRE(allclose(f16.lse, f32r.lse, 1e-5, 1e-5));

    // backward, both from the same out and lse
    ops::FlashAttentionGrads g16 =
        ops::flash_attention_backward(go, q, k, v, f16.out, f16.lse, mask, scale, drop);
    ops::FlashAttentionGrads g32 = ops::flash_attention_backward(f32(go), f32(q), f32(k), f32(v),
                                                                 f32(f16.out), f16.lse, mask, scale, drop);
    // the terms' magnitudes, composed in float32: P = exp(S - lse) masked, Z the dropout multipliers,
    // dS = P ⊙ (Z ⊙ dO Vᵀ - rowsum(dO ⊙ O))
    Tensor s = ops::mul(ops::matmul(f32(q), f32(k).transpose(2, 3)), scale);
    Tensor p = ops::exp(ops::sub(s, f16.lse.unsqueeze(3)));
    const Tensor kept = ops::attention_keep_mask(mask, scores, Device::cpu());
    if (kept.defined()) p = ops::masked_fill(p, ops::logical_not(kept), 0.0);
    Tensor z = c.p > 0 ? ops::attention_dropout_mask(drop, scores, DType::Float32, Device::cpu())
                       : ops::ones(scores, DType::Float32);
    Tensor delta = ops::sum(ops::mul(f32(go), f32(f16.out)), {3}, true);
    Tensor ds = ops::mul(p, ops::sub(ops::mul(z, ops::matmul(f32(go), f32(v).transpose(2, 3))), delta));
    auto mag = [](const Tensor& a, const Tensor& b) { return ops::matmul(ops::abs(a), ops::abs(b)); };
    check_close(g16.gv, g32.gv, bf, mag(ops::mul(p, z).transpose(2, 3), f32(go)));
    check_close(g16.gk, g32.gk, bf, ops::mul(mag(ds.transpose(2, 3), f32(q)), scale));
    check_close(g16.gq, g32.gq, bf, ops::mul(mag(ds, f32(k)), scale));
  }
}
