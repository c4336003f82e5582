// Sliding-window (local) causal attention (Beltagy et al. 2020, Longformer; Jiang et al. 2023, Mistral):
// window = W, query i sees keys c - W < j <= c, c = i + (Tk - Tq) (bottom-right) or i (top-left). The fused
// CPU kernel (ops/cpu/attention_loop.h) against the composed path (nn::scaled_dot_product_attention with
// need_weights: the reference) and both against a plain loop; with valid_lens, Bool masks, dropout,
// grouped-query heads, Tq != Tk (a KV cache), both kinds of tile products; key tiles outside every window
// are never read (NaN there changes nothing); gradcheck and gradgradcheck in float64; 16-bit within one
// rounding of float32; window >= Tk is causal attention, window = 1 each query's own value; bad input.
#include <cmath>
#include <limits>

#include "attention_checks.h"
#include "helpers.h"
#include "nn/attention.h"
#include "nn/multihead.h"
#include "ops/cpu/flash_tiles.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::AttentionRun;
using saccade::testing::check_attention_derivatives;
using saccade::testing::rand64;
using saccade::testing::run_attention;
using saccade::testing::seeded_randn;

namespace {

using ops::AttentionMask;
using ops::CausalAlign;

AttentionMask mask_of(const Tensor& m, const Shape& scores, CausalAlign causal, int64_t window) {
  return ops::attention_mask(m, scores, causal, Device::cpu(), "test", window);
}

// The loop reference: q (B, H, Tq, D), k (B, Hkv, Tk, D), v (B, Hkv, Tk, Dv), lens (B, Tq) or undefined ->
// out (B, H, Tq, Dv) float64, softmax over the keys j < lens[b, i], c - W < j <= c (zeros where none).
Tensor loop_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lens,
                      CausalAlign causal, int64_t W, double scale) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3), Hkv = k.size(1), Tk = k.size(2),
                Dv = v.size(3), G = H / Hkv;
  const auto Q = q.contiguous().to_vector<double>(), K = k.contiguous().to_vector<double>(),
             V = v.contiguous().to_vector<double>();
  const auto L = lens.defined() ? lens.contiguous().to_vector<int64_t>() : std::vector<int64_t>();
  std::vector<double> out(static_cast<size_t>(B * H * Tq * Dv), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t c = i + (causal == CausalAlign::BottomRight ? Tk - Tq : 0);
        const int64_t len = L.empty() ? Tk : L[static_cast<size_t>(b * Tq + i)];
        std::vector<double> s(static_cast<size_t>(Tk), -std::numeric_limits<double>::infinity());
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < Tk; ++j) {
          if (j >= len || j > c || j <= c - W) continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += Q[static_cast<size_t>(((b * H + h) * Tq + i) * D + d)] *
                   K[static_cast<size_t>(((b * Hkv + h / G) * Tk + j) * D + d)];
          s[static_cast<size_t>(j)] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        if (mx == -std::numeric_limits<double>::infinity()) continue;
        double sum = 0;
        for (double& x : s) sum += x = std::exp(x - mx);
        for (int64_t j = 0; j < Tk; ++j)
          for (int64_t d = 0; d < Dv; ++d)
            out[static_cast<size_t>(((b * H + h) * Tq + i) * Dv + d)] +=
                s[static_cast<size_t>(j)] / sum *
                V[static_cast<size_t>(((b * Hkv + h / G) * Tk + j) * Dv + d)];
      }
  return ops::from_vector(out, {B, H, Tq, Dv});
}

// Sets x[..., a:b, ...] (along dim d) to `value`, in place.
void fill_slice(const Tensor& x, int64_t d, int64_t a, int64_t b, double value) {
  Tensor dst = x.slice(d, a, b);
  ops::copy_(dst, ops::full(dst.shape(), value, x.dtype()));
}

bool has_nan(const Tensor& x) {
  for (double e : x.to_vector<double>())
    if (std::isnan(e)) return true;
  return false;
}

}  // namespace

TEST_CASE("sliding-window attention: fused equals composed equals a loop", "[attention][window]") {
  // H = 4 over H_kv = 2 (grouped-query), Tq != Tk (the queries are the last Tq of the keys), sizes that
  // divide no tile (Bc = 64 keys, 64 queries a tile), windows inside one tile, across tiles, and past Tk
  const int64_t B = 2, H = 4, Hkv = 2, Tq = 150, Tk = 200, D = 9, Dv = 5;
  const Shape s{B, H, Tq, Tk};
  Generator lg(8);
  const Tensor lens_q = ops::randint(-3, Tk + 5, {B, Tq}, Device::cpu(), &lg);
  const Tensor keep = ops::gt(seeded_randn(s, DType::Float32, 4), -0.5);
  for (cpu::TileProducts how : {cpu::TileProducts::Gemm, cpu::TileProducts::Loops, cpu::TileProducts::Avx512})
    for (DType dt : {DType::Float64, DType::Float32}) {
      cpu::TileProductsGuard guard(how);
      const double tol = dt == DType::Float64 ? 1e-10 : 1e-5;
      Tensor q = seeded_randn({B, H, Tq, D}, dt, 1), k = seeded_randn({B, Hkv, Tk, D}, dt, 2),
             v = seeded_randn({B, Hkv, Tk, Dv}, dt, 3);
      for (int64_t W : {int64_t(1), int64_t(7), int64_t(71), int64_t(130), int64_t(250)}) {
        struct Case {
          const char* name;
          AttentionMask mask;
          double p;
          Tensor lens;
        };
        for (const Case& c :
             {Case{"bottom-right", mask_of(Tensor(), s, CausalAlign::BottomRight, W), 0.0, Tensor()},
              Case{"top-left", mask_of(Tensor(), s, CausalAlign::TopLeft, W), 0.0, Tensor()},
              Case{"valid_lens (B, Tq)", mask_of(lens_q, s, CausalAlign::BottomRight, W), 0.0, lens_q},
              Case{"Bool (B, H, Tq, Tk)", mask_of(keep, s, CausalAlign::BottomRight, W), 0.0, Tensor()},
              Case{"dropout", mask_of(ops::tensor({0, 177}, DType::Int64), s, CausalAlign::TopLeft, W), 0.3,
                   Tensor()}}) {
          INFO(c.name << ", window " << W << ", " << dt
                      << (how == cpu::TileProducts::Loops    ? ", loops"
                          : how == cpu::TileProducts::Avx512 ? ", avx512"
                                                             : ""));
          AttentionRun f = run_attention(true, q, k, v, c.mask, c.p),
                       r = run_attention(false, q, k, v, c.mask, c.p);
          for (auto [a, b] : {std::pair{f.out, r.out}, {f.gq, r.gq}, {f.gk, r.gk}, {f.gv, r.gv}})
            CHECK(allclose(a, b, tol, tol));
          if (c.p == 0 && !c.mask.keep.defined() && how == cpu::TileProducts::Gemm) {
            const Tensor ref =
                loop_reference(q.to(DType::Float64), k.to(DType::Float64), v.to(DType::Float64), c.lens,
                               c.mask.causal, W, 1.0 / std::sqrt(double(D)));
            CHECK(allclose(f.out.to(DType::Float64), ref, tol, tol));
            CHECK(allclose(r.out.to(DType::Float64), ref, tol, tol));
          }
        }
      }
    }
}

TEST_CASE("sliding-window attention: window >= Tk is causal attention, window = 1 the own value",
          "[attention][window]") {
  const int64_t B = 2, H = 3, Tq = 90, Tk = 130, D = 8;
  const Shape s{B, H, Tq, Tk};
  Tensor q = seeded_randn({B, H, Tq, D}, DType::Float32, 1),
         k = seeded_randn({B, H, Tk, D}, DType::Float32, 2),
         v = seeded_randn({B, H, Tk, D}, DType::Float32, 3);
  const Tensor lens = ops::tensor({100, 130}, DType::Int64);
  for (bool fused : {true, false}) {
    INFO((fused ? "fused" : "composed"));
    // window >= Tk: the causal rule alone, bit for bit (the same tiles, the same sums)
    for (int64_t W : {Tk, Tk + 1, int64_t(1) << 40}) {
      AttentionRun a = run_attention(fused, q, k, v, mask_of(lens, s, CausalAlign::BottomRight, W), 0.0),
                   b = run_attention(fused, q, k, v, mask_of(lens, s, CausalAlign::BottomRight, 0), 0.0);
      for (auto [x, y] : {std::pair{a.out, b.out}, {a.gq, b.gq}, {a.gk, b.gk}, {a.gv, b.gv}})
        CHECK(allclose(x, y, 0, 0));
    }
    // window = 1: query i attends to key i + (Tk - Tq) only, so out = that value (zeros past valid_lens)
    AttentionRun one = run_attention(fused, q, k, v, mask_of(lens, s, CausalAlign::BottomRight, 1), 0.0);
    Tensor want = v.slice(2, Tk - Tq, Tk).contiguous();
    fill_slice(want.slice(0, 0, 1), 2, 100 - (Tk - Tq), Tq, 0.0);  // batch row 0: keys >= 100 masked
    CHECK(allclose(one.out, want, 1e-6, 1e-6));
    CHECK(allclose(one.gq, ops::zeros_like(q), 0, 1e-6));  // one key: the weights do not depend on q
  }
}

TEST_CASE("sliding-window attention never reads the key tiles outside every window", "[attention][window]") {
  // One query tile (Tq = 64) at the end of Tk = 512 keys, window 16: its queries see keys 433 .. 511, so the
  // key tiles below 384 are skipped, forward and backward; NaN there must not reach any result, and the
  // result equals attention over the last 128 keys alone (the same window, bottom-right).
  const int64_t B = 1, H = 2, Tq = 64, Tk = 512, D = 16, W = 16;
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    INFO(dt);
    Tensor q = seeded_randn({B, H, Tq, D}, dt, 1), k = seeded_randn({B, H, Tk, D}, dt, 2),
           v = seeded_randn({B, H, Tk, D}, dt, 3);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    fill_slice(k, 2, 0, 384, nan), fill_slice(v, 2, 0, 384, nan);
    AttentionRun f =
        run_attention(true, q, k, v, mask_of(Tensor(), {B, H, Tq, Tk}, CausalAlign::BottomRight, W), 0.2);
    Tensor ks = k.slice(2, 384, Tk).contiguous(), vs = v.slice(2, 384, Tk).contiguous();
    AttentionRun r = run_attention(true, q, ks, vs,
                                   mask_of(Tensor(), {B, H, Tq, Tk - 384}, CausalAlign::BottomRight, W), 0.0);
    AttentionRun f0 =
        run_attention(true, q, k, v, mask_of(Tensor(), {B, H, Tq, Tk}, CausalAlign::BottomRight, W), 0.0);
    CHECK(!has_nan(f.out));
    CHECK(!has_nan(f.gq));
    CHECK(allclose(f0.out, r.out, 0, 0));
    CHECK(allclose(f0.gq, r.gq, 0, 0));
    CHECK(allclose(f0.gk.slice(2, 384, Tk), r.gk, 0, 0));
    CHECK(allclose(f0.gv.slice(2, 384, Tk), r.gv, 0, 0));
    CHECK(ops::max(ops::abs(f0.gk.slice(2, 0, 384).to(DType::Float32))).item<double>() == 0);
    CHECK(ops::max(ops::abs(f0.gv.slice(2, 0, 384).to(DType::Float32))).item<double>() == 0);
  }
}

TEST_CASE("sliding-window attention gradcheck and gradgradcheck, fused and composed",
          "[attention][window][gradcheck]") {
  // H = 4 over H_kv = 2, Tq = 5 < Tk = 7, valid_lens, window 3
  const Shape s{2, 4, 5, 7};
  const AttentionMask mask = mask_of(ops::tensor({6, 4}, DType::Int64), s, CausalAlign::BottomRight, 3);
  Variable q(rand64({2, 4, 5, 3}, 1), true), k(rand64({2, 2, 7, 3}, 2), true),
      v(rand64({2, 2, 7, 2}, 3), true);
  check_attention_derivatives(q, k, v, mask);
}

TEST_CASE("sliding-window attention in 16 bits: within one rounding of float32",
          "[attention][window][half]") {
  // The same bounds as the causal 16-bit kernel's test (test_half_kernels.cpp): out relative to max |v|,
  // the gradients to 4 ulps of their largest magnitude.
  for (DType t : {DType::BFloat16, DType::Float16}) {
    INFO(t);
    const double ulp = t == DType::BFloat16 ? 0x1p-8 : 0x1p-11;
    const Shape s{2, 4, 100, 140};
    const AttentionMask mask = mask_of(ops::tensor({140, 90}, DType::Int64), s, CausalAlign::BottomRight, 37);
    Tensor q = seeded_randn({2, 4, 100, 32}, t, 14), k = seeded_randn({2, 2, 140, 32}, t, 15),
           v = seeded_randn({2, 2, 140, 32}, t, 16);
    auto f32 = [](const Tensor& x) { return x.to(DType::Float32); };
    AttentionRun h = run_attention(true, q, k, v, mask, 0.0),
                 r = run_attention(true, f32(q), f32(k), f32(v), mask, 0.0);
    REQUIRE(h.out.dtype() == t);
    const double vmax = ops::max(ops::abs(f32(v))).item<double>();
    CHECK(allclose(f32(h.out), r.out, ulp, ulp * vmax));
    for (auto [g, ref] : {std::pair{h.gq, r.gq}, {h.gk, r.gk}, {h.gv, r.gv}}) {
      const double gmax = ops::max(ops::abs(ref)).item<double>();
      CHECK(allclose(f32(g), ref, ulp, 4 * ulp * gmax));
    }
  }
}

TEST_CASE("sliding-window attention with a KV cache: each step equals the full sequence's rows",
          "[attention][window]") {
  // MultiHeadAttention::window: decoding one position at a time (Tq = 1 against the t + 1 cached keys,
  // bottom-right) gives the rows of the full causal forward, fused and composed
  Generator gen(3);
  nn::MultiHeadAttention mha(16, 4, {.bias = true, .generator = &gen});
  mha.window = 5;
  Tensor x = seeded_randn({2, 12, 16}, DType::Float64, 9);
  mha.to(DType::Float64);
  for (bool fused : {true, false}) {
    INFO((fused ? "fused" : "composed"));
    mha.need_weights = !fused;
    NoGradGuard no_grad;
    Variable xv(x);
    const Tensor full = mha.forward(xv, xv, xv, Tensor(), true).data();
    nn::KVCache cache;
    for (int64_t t = 0; t < 12; ++t) {
      Variable xt(x.slice(1, t, t + 1));
      const Tensor row = mha.forward_cached(xt, xt, xt, cache).data();
      CHECK(allclose(row, full.slice(1, t, t + 1), 1e-12, 1e-12));
    }
    // and the window matters: plain causal attention differs from row 5 on
    mha.window = 0;
    CHECK(!allclose(mha.forward(xv, xv, xv, Tensor(), true).data().slice(1, 5, 12), full.slice(1, 5, 12),
                    1e-6, 1e-6));
    mha.window = 5;
  }
}

TEST_CASE("sliding-window attention rejects bad input naming the op and the shapes",
          "[attention][window][errors]") {
  Variable q(rand64({2, 3, 4, 5}, 1)), k(rand64({2, 3, 6, 5}, 2)), v(rand64({2, 3, 6, 2}, 3));
  for (bool need_weights : {true, false}) {
    REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(
                               q, k, v, {.is_causal = true, .window = -1, .need_weights = need_weights}),
                           "scaled_dot_product_attention: window must be >= 1");
    REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(
                               q, k, v, {.is_causal = true, .window = -2, .need_weights = need_weights}),
                           "[2, 3, 4, 6]");
    REQUIRE_THROWS_SACCADE(
        nn::scaled_dot_product_attention(q, k, v, {.window = 3, .need_weights = need_weights}),
        "needs causal attention");
  }
  // a hand-built mask reaches the kernel checked all the same
  AttentionMask bad;
  bad.window = 2;
  REQUIRE_THROWS_SACCADE(flash_attention(q, k, v, bad, 1.0), "flash_attention: window 2 needs causal");
  bad.causal = CausalAlign::TopLeft, bad.window = -1;
  REQUIRE_THROWS_SACCADE(ops::flash_attention_forward(q.data(), k.data(), v.data(), bad, 1.0),
                         "flash_attention: window must be >= 1");
  bad.window = 0;
  ops::FlashAttentionForward f = ops::flash_attention_forward(q.data(), k.data(), v.data(), bad, 1.0);
  bad.window = -3;
  REQUIRE_THROWS_SACCADE(
      ops::flash_attention_backward(f.out, q.data(), k.data(), v.data(), f.out, f.lse, bad, 1.0),
      "flash_attention_backward: window must be >= 1");
  // the module names itself
  Generator gen(1);
  nn::MultiHeadAttention mha(10, 2, {.generator = &gen});
  mha.window = 4;
  Variable x(seeded_randn({1, 3, 10}, DType::Float32, 2));
  REQUIRE_THROWS_SACCADE(mha.forward(x, x, x), "MultiHeadAttention: window 4 needs causal attention");
  mha.window = -1;
  REQUIRE_THROWS_SACCADE(mha.forward(x, x, x, Tensor(), true), "MultiHeadAttention: window must be >= 1");
}

TEST_CASE(
    "logit soft-capping (Gemma 2's): softcap tanh(scores / softcap) before the mask, grouped heads and a "
    "window, its gradients, and bad input",
    "[attention][window]") {
  // a loop over the formula in float64: query i, key j <= i within the window of 3, head h reading key/value
  // head h / 2
  const int64_t B = 1, H = 4, Hkv = 2, T = 6, D = 8;
  const double cap = 0.7, scale = 0.9;
  Variable q(rand64({B, H, T, D}, 61), true), k(rand64({B, Hkv, T, D}, 62), true),
      v(rand64({B, Hkv, T, D}, 63), true);
  const ops::AttentionMask mask = ops::attention_mask(
      Tensor(), Shape{B, H, T, T}, ops::CausalAlign::BottomRight, Device::cpu(), "test", 3);
  nn::AttentionOptions options{
      .is_causal = true, .window = 3, .scale = scale, .enable_gqa = true, .softcap = cap};
  const nn::AttentionOutput got = nn::scaled_dot_product_attention(q, k, v, options);
  CHECK_FALSE(got.weights.defined());  // need_weights false: none, though the path is composed
  Tensor want = ops::zeros({B, H, T, D}, DType::Float64);
  const double *qd = q.data().data<double>(), *kd = k.data().data<double>(), *vd = v.data().data<double>();
  double* wd = want.data<double>();
  // element (head, position, dim) of a contiguous (1, heads, T, D) tensor
  auto at = [&](int64_t head, int64_t pos, int64_t d) { return (head * T + pos) * D + d; };
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> s;
      for (int64_t j = std::max<int64_t>(0, i - 2); j <= i; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += qd[at(h, i, d)] * kd[at(h / 2, j, d)];
        s.push_back(cap * std::tanh(dot * scale / cap));
      }
      double m = *std::max_element(s.begin(), s.end()), z = 0;
      for (double& x : s) z += (x = std::exp(x - m));
      for (int64_t d = 0; d < D; ++d) {
        double o = 0;
        for (int64_t j = std::max<int64_t>(0, i - 2), n = 0; j <= i; ++j, ++n)
          o += s[static_cast<size_t>(n)] / z * vd[at(h / 2, j, d)];
        wd[at(h, i, d)] = o;
      }
    }
  CHECK(allclose(got.output.data(), want, 1e-12, 1e-12));
  // without the cap the output differs; with need_weights the weights come back
  options.softcap.reset();
  CHECK_FALSE(allclose(nn::scaled_dot_product_attention(q, k, v, options).output.data(), want, 1e-3, 1e-3));
  options.softcap = cap;
  options.need_weights = true;
  CHECK(nn::scaled_dot_product_attention(q, k, v, options).weights.defined());
  options.need_weights = false;
  CHECK(gradcheck(
      [&](const std::vector<Variable>& in) {
        return nn::scaled_dot_product_attention(in[0], in[1], in[2], options).output;
      },
      {q, k, v}));
  options.softcap = 0.0;
  REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(q, k, v, options), "softcap must be positive");
}
