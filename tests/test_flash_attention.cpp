// Fused attention (ops/attention.h, ops/cpu/attention.cpp, autograd/functions/attention.cpp) against the
// composed reference path (nn::scaled_dot_product_attention with need_weights = true): forward and every
// gradient over every mask kind, both causal alignments, dropout, odd sizes, non-contiguous inputs; a
// gradcheck of the fused op; fully masked rows; bad input; and the reader's ladder
// (ops/cpu/attention_ladder/).
#include <cmath>
#include <functional>
#include <memory>

#include "helpers.h"
#include "nn/attention.h"
#include "nn/multihead.h"
#include "ops/cpu/attention_ladder/naive.h"
#include "ops/cpu/attention_ladder/online.h"
#include "ops/cpu/attention_ladder/tiled.h"
#include "ops/cpu/flash_tiles.h"
#include "ops/cpu/simd.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;

namespace {

using ops::AttentionMask;
using ops::CausalAlign;

struct Run {
  Tensor out, gq, gk, gv;
};

// out and the gradients of sum(out ⊙ R) through either path; q, k, v are used as given (any strides).
Run run(bool fused, const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
        double p = 0, uint64_t seed = 0) {
  Variable vq(q, true), vk(k, true), vv(v, true);
  Generator gen(seed);
  auto r = nn::scaled_dot_product_attention(vq, vk, vv, mask,
                                            {.dropout_p = p, .generator = &gen, .need_weights = !fused},
                                            "scaled_dot_product_attention");
  REQUIRE(r.weights.defined() == !fused);
  Generator rg(1234);
  Tensor R = ops::randn(r.output.shape(), q.dtype(), Device::cpu(), &rg);
  r.output.backward(R);
  return {r.output.data(), vq.grad(), vk.grad(), vv.grad()};
}

// Both paths agree on out and all gradients to rtol = atol = tol.
void agree(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask, double tol,
           double p = 0) {
  Run a = run(true, q, k, v, mask, p, 7), b = run(false, q, k, v, mask, p, 7);
  CHECK(allclose(a.out, b.out, tol, tol));
  CHECK(allclose(a.gq, b.gq, tol, tol));
  CHECK(allclose(a.gk, b.gk, tol, tol));
  CHECK(allclose(a.gv, b.gv, tol, tol));
  for (const Tensor& t : {a.out, a.gq, a.gk, a.gv})
    for (double x : t.to_vector<double>()) REQUIRE(std::isfinite(x));
}

Tensor randn(const Shape& s, DType dt, uint64_t seed) {
  Generator g(seed);
  return ops::randn(s, dt, Device::cpu(), &g);
}

Tensor i64(std::initializer_list<double> v, const Shape& s) { return ops::tensor(v, s, DType::Int64); }

AttentionMask mask_of(const Tensor& m, const Shape& scores, CausalAlign causal = CausalAlign::None) {
  return ops::attention_mask(m, scores, causal, Device::cpu(), "test");
}

}  // namespace

TEST_CASE("fused attention equals the composed path for every mask kind", "[attention][flash]") {
  // Tq != Tk, sizes that divide no tile (64 queries; 64 or 32 keys), D != Dv
  const int64_t B = 2, H = 3, Tq = 70, Tk = 133, D = 9, Dv = 5;
  const Shape s{B, H, Tq, Tk};
  for (DType dt : {DType::Float64, DType::Float32}) {
    const double tol = dt == DType::Float64 ? 1e-10 : 1e-5;
    Tensor q = randn({B, H, Tq, D}, dt, 1), k = randn({B, H, Tk, D}, dt, 2), v = randn({B, H, Tk, Dv}, dt, 3);
    Generator lg(8);
    Tensor lens_q = ops::randint(-3, Tk + 5, {B, Tq}, Device::cpu(), &lg);  // negative (= 0), 0, beyond Tk
    Tensor keep_full = ops::gt(randn({B, H, Tq, Tk}, DType::Float32, 4), -0.5);
    Tensor key_padding =
        ops::lt(ops::arange(0, Tk).view({1, 1, 1, Tk}), i64({100, 7}, {2}).view({B, 1, 1, 1}));
    Tensor square = ops::gt(randn({Tq, Tk}, DType::Float32, 5), 0.0);
    SECTION("no mask") { agree(q, k, v, mask_of(Tensor(), s), tol); }
    SECTION("valid_lens (B)") { agree(q, k, v, mask_of(i64({0, 77}, {2}), s), tol); }
    SECTION("valid_lens (B, Tq)") { agree(q, k, v, mask_of(lens_q, s), tol); }
    SECTION("Bool (B, H, Tq, Tk)") { agree(q, k, v, mask_of(keep_full, s), tol); }
    SECTION("Bool key padding (B, 1, 1, Tk)") { agree(q, k, v, mask_of(key_padding, s), tol); }
    SECTION("Bool (Tq, Tk)") { agree(q, k, v, mask_of(square, s), tol); }
    SECTION("causal, both alignments, with and without other masks") {
      for (CausalAlign c : {CausalAlign::TopLeft, CausalAlign::BottomRight}) {
        agree(q, k, v, mask_of(Tensor(), s, c), tol);
        agree(q, k, v, mask_of(lens_q, s, c), tol);
        agree(q, k, v, mask_of(key_padding, s, c), tol);
        // Tq > Tk: bottom-right leaves the first Tq - Tk rows with nothing to see
        agree(k, q, randn({B, H, Tq, Dv}, dt, 6), mask_of(Tensor(), {B, H, Tk, Tq}, c), tol);
      }
    }
    SECTION("dropout: the same seed gives the same numbers") {
      agree(q, k, v, mask_of(lens_q, s, CausalAlign::BottomRight), tol, 0.3);
      agree(q, k, v, mask_of(Tensor(), s), tol, 0.6);
    }
  }
}

TEST_CASE("fused attention with either kind of tile products equals the composed path",
          "[attention][flash][tiles]") {
  // odd sizes that divide no tile, D != Dv, D above the loops' 64-float (32-double) register row, masks,
  // causal, dropout, non-contiguous heads
  for (cpu::TileProducts how :
       {cpu::TileProducts::Loops, cpu::TileProducts::Gemm, cpu::TileProducts::Avx512}) {
    cpu::TileProductsGuard guard(how);
    REQUIRE(cpu::tile_products(64) == how);
    for (DType dt : {DType::Float64, DType::Float32}) {
      const double tol = dt == DType::Float64 ? 1e-10 : 1e-5;
      for (auto [D, Dv] : {std::pair<int64_t, int64_t>{9, 5}, {33, 70}, {128, 128}}) {
        const int64_t B = 2, H = 2, Tq = 67, Tk = 75;
        const Shape s{B, H, Tq, Tk};
        Tensor q = randn({B, H, Tq, D}, dt, 41), k = randn({B, H, Tk, D}, dt, 42),
               v = randn({B, Tk, H, Dv}, dt, 43).permute({0, 2, 1, 3});
        agree(q, k, v, mask_of(Tensor(), s), tol);
        agree(q, k, v, mask_of(i64({30, 75}, {2}), s, CausalAlign::BottomRight), tol, 0.2);
      }
    }
  }
  REQUIRE(cpu::tile_products(64) != cpu::TileProducts::Auto);  // the guard is gone: the default per head dim
}

TEST_CASE("fused attention takes non-contiguous inputs and any rank >= 3", "[attention][flash]") {
  const int64_t B = 2, H = 2, T = 67, D = 8;
  const double tol = 1e-10;
  // heads split out of (B, T, H·D), as nn's split_heads does: strides (T·H·D, D, H·D, 1)
  Tensor x = rand64({B, T, H * D}, 11);
  Tensor heads = x.view({B, T, H, D}).permute({0, 2, 1, 3});
  Tensor kt = rand64({B, H, D, T}, 12).transpose(2, 3);  // unit stride along T, not D
  Tensor lens = i64({50, 3}, {2});
  agree(heads, kt, heads, mask_of(lens, {B, H, T, T}, CausalAlign::TopLeft), tol);
  // rank 3 (B, T, D) and rank 5 (B, 2, 2, T, D)
  Tensor q3 = rand64({B, T, D}, 13), k3 = rand64({B, 40, D}, 14), v3 = rand64({B, 40, 3}, 15);
  agree(q3, k3, v3, mask_of(i64({17, 40}, {2}), {B, T, 40}), tol);
  Tensor q5 = rand64({B, 2, 2, 9, D}, 16), k5 = rand64({B, 2, 2, 11, D}, 17),
         v5 = rand64({B, 2, 2, 11, 4}, 18);
  Tensor keep5 = ops::gt(rand64({B, 2, 1, 9, 11}, 19), -0.3);
  agree(q5, k5, v5, mask_of(keep5, {B, 2, 2, 9, 11}, CausalAlign::BottomRight), tol, 0.25);
}

TEST_CASE("fused attention gradcheck", "[attention][flash][gradcheck]") {
  Variable q(rand64({2, 2, 5, 3}, 21), true), k(rand64({2, 2, 7, 3}, 22), true),
      v(rand64({2, 2, 7, 2}, 23), true);
  const Shape s{2, 2, 5, 7};
  Tensor keep = ops::gt(rand64({2, 1, 5, 7}, 24), -1.0);
  for (auto mask : {mask_of(i64({4, 1, 0, 7, 2, 5, 6, 3, 3, 7}, {2, 5}), s, CausalAlign::TopLeft),
                    mask_of(keep, s, CausalAlign::BottomRight)})
    for (double p : {0.0, 0.3}) {
      // a fresh generator per call: the same dropout mask at every evaluation
      REQUIRE(gradcheck(
          [&](const std::vector<Variable>& x) {
            Generator g(5);
            return flash_attention(x[0], x[1], x[2], mask, 0.7, p, true, &g);
          },
          {q, k, v}));
    }
}

TEST_CASE("fused attention: fully masked rows give zeros and zero gradients", "[attention][flash]") {
  Variable q(rand64({2, 4, 3}, 31), true), k(rand64({2, 6, 3}, 32), true), v(rand64({2, 6, 2}, 33), true);
  // batch row 0: valid_len 0; batch row 1: a Bool mask hides every key from query 2
  Tensor keep = ops::ones({2, 4, 6}, DType::Bool);
  Tensor hidden = keep.select(0, 1).select(0, 2);
  ops::fill_(hidden, 0.0);
  AttentionMask m = mask_of(keep, {2, 4, 6});
  m.valid_lens = i64({0, 6}, {2});
  Variable out = flash_attention(q, k, v, m, 0.5);
  sum(out).backward();
  for (double x : out.data().select(0, 0).to_vector<double>()) REQUIRE(x == 0.0);
  for (double x : out.data().select(0, 1).select(0, 2).to_vector<double>()) REQUIRE(x == 0.0);
  for (double x : q.grad().select(0, 0).to_vector<double>()) REQUIRE(x == 0.0);
  for (double x : q.grad().select(0, 1).select(0, 2).to_vector<double>()) REQUIRE(x == 0.0);
  for (double x : k.grad().select(0, 0).to_vector<double>()) REQUIRE(x == 0.0);
  REQUIRE_FALSE(allclose(q.grad().select(0, 1).select(0, 1), ops::zeros({3}, DType::Float64)));
}

TEST_CASE("fused attention rejects bad input naming the op", "[attention][flash][errors]") {
  Variable q(rand64({2, 3, 4}, 1)), k(rand64({2, 5, 4}, 2)), v(rand64({2, 5, 2}, 3));
  const Shape s{2, 3, 5};
  REQUIRE_THROWS_SACCADE(flash_attention(q, Variable(rand64({2, 5, 3}, 4)), v, AttentionMask{}, 1.0),
                         "flash_attention");
  REQUIRE_THROWS_SACCADE(flash_attention(q, k, Variable(rand64({2, 4, 2}, 5)), AttentionMask{}, 1.0),
                         "flash_attention");
  REQUIRE_THROWS_SACCADE(flash_attention(q, k, Variable(v.data().to(DType::Float32)), AttentionMask{}, 1.0),
                         "flash_attention");
  REQUIRE_THROWS_SACCADE(flash_attention(q, k, v, AttentionMask{}, 1.0, 1.0, true), "dropout_p");
  REQUIRE_THROWS_SACCADE(mask_of(i64({1, 2, 3}, {3}), s), "valid_lens");
  REQUIRE_THROWS_SACCADE(mask_of(ops::ones({3, 4}, DType::Bool), s), "does not broadcast");
  REQUIRE_THROWS_SACCADE(mask_of(ops::ones({3, 5}), s), "bool mask");
  REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(q, k, v, {.attn_mask = i64({1}, {1})}),
                         "scaled_dot_product_attention");
}

TEST_CASE("fused attention's dropout keep flags: the forward records what it drew, the backward reads it",
          "[attention][flash][dropout]") {
  // every mask kind that leaves rows (or their first key tiles) with nothing to see, Tk over two key tiles
  const int64_t B = 2, H = 2, Tq = 70, Tk = 133, D = 8;
  const Shape s{B, H, Tq, Tk};
  Tensor keep = ops::gt(randn(s, DType::Float32, 61), 0.3);
  // row i of batch 1 sees no key before key 70: whole key tiles of a row with nothing in them yet
  Tensor late = ops::ge(ops::arange(0, Tk).view({1, 1, 1, Tk}), i64({0, 70}, {2}).view({B, 1, 1, 1}));
  // AVX-512's flag compare and masked move (where the CPU has it), then the scalar loops under a guard
  for (bool capped : {false, true})
    for (DType dt : {DType::Float32, DType::BFloat16})
      for (const AttentionMask& mask :
           {mask_of(Tensor(), s, CausalAlign::TopLeft), mask_of(keep, s),
            mask_of(late, s, CausalAlign::BottomRight), mask_of(i64({0, 50}, {2}), s)}) {
        // Dv where the flags (3 words = 24 bytes a query row) fit in out's row (float32: 4 Dv bytes, bf16: 2
        // Dv)
        const int64_t Dv = dt == DType::Float32 ? 6 : 12;
        Tensor q = randn({B, H, Tq, D}, DType::Float32, 62).to(dt),
               k = randn({B, H, Tk, D}, DType::Float32, 63).to(dt),
               v = randn({B, H, Tk, Dv}, DType::Float32, 64).to(dt),
               go = randn({B, H, Tq, Dv}, DType::Float32, 65).to(dt);
        const ops::AttentionDropout drop{0.3, 9, 4000, Tensor()};
        std::unique_ptr<cpu::IsaGuard> narrow;
        if (capped) narrow = std::make_unique<cpu::IsaGuard>(cpu::Isa::Baseline);
        INFO("dtype " << dt << ", ISA capped " << capped);
        ops::FlashAttentionForward f = ops::flash_attention_forward(q, k, v, mask, 0.4, drop);
        REQUIRE(f.kept.defined());
        REQUIRE(f.kept.shape() == Shape({B * H * Tq, 3}));
        // the flags are the composed path's dropout mask on every weight the row sees
        const Tensor z = ops::attention_dropout_mask(drop, s, DType::Float32, Device::cpu());
        const Tensor seen = ops::attention_keep_mask(mask, s, Device::cpu());
        const std::vector<float> zv = z.to_vector<float>();
        const std::vector<int64_t> words = f.kept.to_vector<int64_t>();
        const std::vector<double> sv =
            seen.defined() ? seen.expand(s).to(DType::Float64).contiguous().to_vector<double>()
                           : std::vector<double>();
        int64_t checked = 0, differ = 0;
        for (int64_t r = 0; r < B * H * Tq; ++r)
          for (int64_t j = 0; j < Tk; ++j) {
            const size_t e = static_cast<size_t>(r * Tk + j);
            if (!sv.empty() && sv[e] == 0) continue;  // a masked weight: P = 0, its flag is never needed
            const bool bit =
                (static_cast<uint64_t>(words[static_cast<size_t>(r * 3 + j / 64)]) >> (j % 64)) & 1;
            differ += bit != (zv[e] != 0);
            ++checked;
          }
        CHECK(checked > 0);
        CHECK(differ == 0);
        // the backward reading the flags = the backward drawing the numbers again, bit for bit
        ops::AttentionDropout with = drop;
        with.kept = f.kept;
        ops::FlashAttentionGrads a = ops::flash_attention_backward(go, q, k, v, f.out, f.lse, mask, 0.4,
                                                                   with),
                                 b = ops::flash_attention_backward(go, q, k, v, f.out, f.lse, mask, 0.4,
                                                                   drop);
        for (auto [x, y] : {std::pair{a.gq, b.gq}, {a.gk, b.gk}, {a.gv, b.gv}})
          CHECK(allclose(x.to(DType::Float64), y.to(DType::Float64), 0, 0));
      }
  SECTION("the flags are kept only where they fit in out's memory, and checked") {
    const ops::AttentionDropout drop{0.3, 9, 0, Tensor()};
    Tensor q = randn({1, 1, 4, 8}, DType::Float32, 1), k = randn({1, 1, 200, 8}, DType::Float32, 2);
    // 4 words (32 bytes) a row: Dv = 8 float32 (32 bytes) keeps them, Dv = 7 does not; none without dropout
    CHECK(ops::flash_attention_forward(q, k, randn({1, 1, 200, 8}, DType::Float32, 3), AttentionMask{}, 1.0,
                                       drop)
              .kept.defined());
    CHECK(!ops::flash_attention_forward(q, k, randn({1, 1, 200, 7}, DType::Float32, 3), AttentionMask{}, 1.0,
                                        drop)
               .kept.defined());
    CHECK(!ops::flash_attention_forward(q, k, randn({1, 1, 200, 8}, DType::Float32, 3), AttentionMask{}, 1.0)
               .kept.defined());
    Tensor v = randn({1, 1, 200, 8}, DType::Float32, 3);
    ops::FlashAttentionForward f = ops::flash_attention_forward(q, k, v, AttentionMask{}, 1.0, drop);
    ops::AttentionDropout bad = drop;
    bad.kept = ops::zeros({4, 3}, DType::Int64);
    REQUIRE_THROWS_SACCADE(
        ops::flash_attention_backward(f.out, q, k, v, f.out, f.lse, AttentionMask{}, 1.0, bad),
        "flash_attention_backward: dropout keep flags [4, 3]");
    bad.kept = ops::zeros({4, 4});
    REQUIRE_THROWS_SACCADE(
        ops::flash_attention_backward(f.out, q, k, v, f.out, f.lse, AttentionMask{}, 1.0, bad),
        "flash_attention_backward: dropout keep flags");
  }
}

TEST_CASE("modules take the fused path unless the weights are kept", "[attention][flash]") {
  Generator g(41);
  nn::MultiHeadAttention mha(12, 3, {.bias = true, .generator = &g});
  mha.to(DType::Float64);
  Tensor X = rand64({2, 9, 12}, 42), lens = i64({9, 4}, {2});
  mha.train();                                       // need_weights unset: training keeps no weights (fused)
  REQUIRE_FALSE(mha.attention_weights().defined());  // before the first forward
  Tensor fused = mha.forward(X, X, X, lens, true).data();
  // the fused kernel formed no weights: asking for them says why and how (not an undefined tensor)
  REQUIRE_THROWS_WITH(mha.attention_weights(), Catch::Contains("MultiHeadAttention::attention_weights") &&
                                                   Catch::Contains("eval()") &&
                                                   Catch::Contains("need_weights = true"));
  mha.eval();  // eval keeps them for plotting (composed)
  Tensor composed = mha.forward(X, X, X, lens, true).data();
  REQUIRE(mha.attention_weights().shape() == Shape({2, 3, 9, 9}));
  REQUIRE(allclose(fused, composed, 1e-12, 1e-12));
  mha.need_weights = false;
  REQUIRE(allclose(mha.forward(X, X, X, lens, true).data(), composed, 1e-12, 1e-12));
  REQUIRE_THROWS_AS(mha.attention_weights(), saccade::Error);
  // the same trap in DotProductAttention, and its two ways out
  nn::DotProductAttention dpa;
  Tensor q = rand64({2, 5, 4}, 43);
  dpa.train();
  dpa.forward(q, q, q);
  REQUIRE_THROWS_WITH(dpa.attention_weights(),
                      Catch::Contains("DotProductAttention::attention_weights") && Catch::Contains("eval()"));
  dpa.need_weights = true;
  dpa.forward(q, q, q);
  REQUIRE(dpa.attention_weights().shape() == Shape({2, 5, 5}));
  dpa.need_weights.reset();
  dpa.eval();
  dpa.forward(q, q, q);
  REQUIRE(dpa.attention_weights().shape() == Shape({2, 5, 5}));
}

// ---- the reader's ladder ----

TEST_CASE("each step of the attention ladder equals the composed reference", "[attention][flash][ladder]") {
  const int64_t Tq = 37, Tk = 53, D = 6, Dv = 4;
  const double scale = 1 / std::sqrt(double(D));
  Tensor q = rand64({Tq, D}, 51), k = rand64({Tk, D}, 52), v = rand64({Tk, Dv}, 53);
  Tensor lens = ops::full({1, Tq}, 40, DType::Int64);
  Tensor empty_rows = lens.narrow(1, 3, 2);
  ops::fill_(empty_rows, 0.0);  // two rows with nothing to see
  const auto l = lens.to_vector<int64_t>();
  // causal bottom-right and valid_lens: key j visible to query i iff j <= i + Tk - Tq and j < len_i
  auto keep = [&](int64_t i, int64_t j) { return j <= i + Tk - Tq && j < l[size_t(i)]; };
  auto key_end = [&](int64_t i0, int64_t nr) { return i0 + nr + Tk - Tq; };
  AttentionMask m = mask_of(lens, {1, Tq, Tk}, CausalAlign::BottomRight);
  Tensor ref = run(false, q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), m).out.squeeze(0);
  const double *pq = q.data<double>(), *pk = k.data<double>(), *pv = v.data<double>();
  Tensor a = ops::empty({Tq, Dv}, DType::Float64), b = ops::empty({Tq, Dv}, DType::Float64),
         c = ops::empty({Tq, Dv}, DType::Float64), lse = ops::empty({Tq}, DType::Float64);
  ladder::attention_naive(pq, pk, pv, Tq, Tk, D, Dv, scale, keep, a.data<double>());
  ladder::attention_tiled(pq, pk, pv, Tq, Tk, D, Dv, scale, keep, b.data<double>());
  ladder::attention_online(pq, pk, pv, Tq, Tk, D, Dv, scale, keep, key_end, c.data<double>(),
                           lse.data<double>());
  CHECK(allclose(a, ref, 1e-12, 1e-12));
  CHECK(allclose(b, ref, 1e-12, 1e-12));
  CHECK(allclose(c, ref, 1e-12, 1e-12));
  // the final step's lse is the online step's
  ops::FlashAttentionForward f =
      ops::flash_attention_forward(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), m, scale);
  CHECK(allclose(f.out.squeeze(0), ref, 1e-12, 1e-12));
  // (rows with nothing to see have lse = -inf in both)
  auto a_lse = f.lse.to_vector<double>(), b_lse = lse.to_vector<double>();
  for (size_t i = 0; i < a_lse.size(); ++i)
    CHECK((a_lse[i] == b_lse[i] || std::abs(a_lse[i] - b_lse[i]) <= 1e-12 * (1 + std::abs(b_lse[i]))));
  CHECK(b_lse[3] == -INFINITY);
}
