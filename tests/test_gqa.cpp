// Grouped-query attention (GQA, Ainslie et al. 2023; multi-query attention when H_kv = 1): q (B, H, Tq, D)
// against k (B, H_kv, Tk, D), v (B, H_kv, Tk, Dv), H = G·H_kv, query head h reading key/value head h / G.
// The fused kernel (ops/cpu/attention.cpp, attention_half.cpp) against the composed path
// (nn::scaled_dot_product_attention with enable_gqa, need_weights = true: the reference), and the composed
// path against multi-head attention on K and V repeated per query head (a copy the library never makes);
// forward and every gradient over the mask kinds, dropout, both kinds of tile products; gradcheck and
// gradgradcheck in float64; G = 1 is multi-head attention bit for bit; bfloat16 within its rounding; bad
// input.
#include <cmath>
#include <memory>

#include "attention_checks.h"
#include "helpers.h"
#include "nn/attention.h"
#include "ops/cpu/attention_loop.h"
#include "ops/cpu/flash_tiles.h"
#include "ops/cpu/simd.h"

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

AttentionMask mask_of(const Tensor& m, const Shape& scores, CausalAlign causal = CausalAlign::None) {
  return ops::attention_mask(m, scores, causal, Device::cpu(), "test");
}

// x (B, H_kv, T, D) -> (B, H_kv·G, T, D) with head h = head h / G of x: the copy GQA never makes.
Tensor repeat_heads(const Tensor& x, int64_t G) {
  const Shape e{x.size(0), x.size(1), G, x.size(2), x.size(3)};
  return x.unsqueeze(2).expand(e).contiguous().reshape({x.size(0), x.size(1) * G, x.size(2), x.size(3)});
}

// g (B, H_kv·G, T, D) -> (B, H_kv, T, D): the sum over each group, g_0 + g_1 + ... in that order.
Tensor sum_groups(const Tensor& g, int64_t G) {
  Tensor s = g.reshape({g.size(0), g.size(1) / G, G, g.size(2), g.size(3)});
  Tensor acc = s.select(2, 0).contiguous();
  for (int64_t i = 1; i < G; ++i) acc = ops::add(acc, s.select(2, i));
  return acc;
}

}  // namespace

TEST_CASE("grouped-query attention: fused equals composed, composed equals repeated heads",
          "[attention][flash][gqa]") {
  // G = 3 (H = 6, H_kv = 2) and multi-query (H_kv = 1); sizes that divide no tile, D != Dv
  const int64_t B = 2, H = 6, Tq = 70, Tk = 133, D = 9, Dv = 5;
  const Shape s{B, H, Tq, Tk};
  Generator lg(8);
  const Tensor lens_q = ops::randint(-3, Tk + 5, {B, Tq}, Device::cpu(), &lg);
  const Tensor keep = ops::gt(seeded_randn(s, DType::Float32, 4), -0.5);
  for (int64_t Hkv : {int64_t(2), int64_t(1)})
    for (DType dt : {DType::Float64, DType::Float32}) {
      const double tol = dt == DType::Float64 ? 1e-10 : 1e-5;
      const int64_t G = H / Hkv;
      Tensor q = seeded_randn({B, H, Tq, D}, dt, 1), k = seeded_randn({B, Hkv, Tk, D}, dt, 2),
             v = seeded_randn({B, Hkv, Tk, Dv}, dt, 3);
      struct Case {
        const char* name;
        AttentionMask mask;
        double p;
      };
      for (const Case& c :
           {Case{"no mask", mask_of(Tensor(), s), 0.0},
            Case{"valid_lens (B, Tq), causal bottom-right", mask_of(lens_q, s, CausalAlign::BottomRight),
                 0.0},
            Case{"Bool (B, H, Tq, Tk)", mask_of(keep, s), 0.0},
            Case{"causal top-left + dropout", mask_of(Tensor(), s, CausalAlign::TopLeft), 0.3},
            Case{"valid_lens (B) + dropout", mask_of(ops::tensor({0, 77}, DType::Int64), s), 0.5}}) {
        INFO(c.name << ", H_kv " << Hkv << ", " << dt);
        AttentionRun f = run_attention(true, q, k, v, c.mask, c.p),
                     r = run_attention(false, q, k, v, c.mask, c.p);
        CHECK(f.gk.shape() == k.shape());
        CHECK(f.gv.shape() == v.shape());
        for (auto [a, b] : {std::pair{f.out, r.out}, {f.gq, r.gq}, {f.gk, r.gk}, {f.gv, r.gv}})
          CHECK(allclose(a, b, tol, tol));
        // the composed path = multi-head attention on repeated K and V, the gradients summed over each group
        AttentionRun m = run_attention(false, q, repeat_heads(k, G), repeat_heads(v, G), c.mask, c.p, false);
        CHECK(allclose(r.out, m.out, tol, tol));
        CHECK(allclose(r.gq, m.gq, tol, tol));
        CHECK(allclose(r.gk, sum_groups(m.gk, G), tol, tol));
        CHECK(allclose(r.gv, sum_groups(m.gv, G), tol, tol));
      }
    }
}

TEST_CASE("grouped-query attention: the fused kernel is multi-head attention on shared heads, bit for bit",
          "[attention][flash][gqa]") {
  // Each query head computes what it would against its own copy of K and V; dK and dV are the group's
  // per-head gradients summed in head order. So the fused GQA kernel equals the fused MHA kernel on repeated
  // heads exactly (float32 and float64, both kinds of tile products, non-contiguous heads), and with G = 1 it
  // is the MHA kernel.
  const int64_t B = 2, H = 4, Hkv = 2, G = 2, Tq = 67, Tk = 75;
  const Shape s{B, H, Tq, Tk};
  for (cpu::TileProducts how :
       {cpu::TileProducts::Gemm, cpu::TileProducts::Loops, cpu::TileProducts::Avx512}) {
    cpu::TileProductsGuard guard(how);
    for (DType dt : {DType::Float64, DType::Float32})
      for (auto [D, Dv] : {std::pair<int64_t, int64_t>{9, 5}, {64, 64}}) {
        INFO(dt << ", D " << D << ", Dv " << Dv);
        // heads split out of (B, T, H·D) as nn's split_heads does
        Tensor q = seeded_randn({B, Tq, H, D}, dt, 11).permute({0, 2, 1, 3}),
               k = seeded_randn({B, Hkv, Tk, D}, dt, 12),
               v = seeded_randn({B, Tk, Hkv, Dv}, dt, 13).permute({0, 2, 1, 3}),
               go = seeded_randn({B, H, Tq, Dv}, dt, 14);
        for (const AttentionMask& mask : {mask_of(Tensor(), s), mask_of(ops::tensor({30, 75}, DType::Int64),
                                                                        s, CausalAlign::BottomRight)})
          for (double p : {0.0, 0.2}) {
            const ops::AttentionDropout drop{p, 3, 100, Tensor()};
            ops::FlashAttentionForward a = ops::flash_attention_forward(q, k, v, mask, 0.3, drop),
                                       b = ops::flash_attention_forward(q, repeat_heads(k, G),
                                                                        repeat_heads(v, G), mask, 0.3, drop);
            CHECK(allclose(a.out, b.out, 0, 0));
            CHECK(allclose(a.lse, b.lse, 0, 0));
            ops::AttentionDropout da = drop, db = drop;
            da.kept = a.kept, db.kept = b.kept;
            ops::FlashAttentionGrads ga = ops::flash_attention_backward(go, q, k, v, a.out, a.lse, mask, 0.3,
                                                                        da),
                                     gb = ops::flash_attention_backward(go, q, repeat_heads(k, G),
                                                                        repeat_heads(v, G), b.out, b.lse,
                                                                        mask, 0.3, db);
            CHECK(allclose(ga.gq, gb.gq, 0, 0));
            CHECK(allclose(ga.gk, sum_groups(gb.gk, G), 0, 0));
            CHECK(allclose(ga.gv, sum_groups(gb.gv, G), 0, 0));
          }
      }
  }
  SECTION("G = 1: enable_gqa changes nothing") {
    Tensor q = rand64({2, 3, 10, 4}, 21), k = rand64({2, 3, 12, 4}, 22), v = rand64({2, 3, 12, 3}, 23);
    const AttentionMask mask = mask_of(Tensor(), {2, 3, 10, 12}, CausalAlign::BottomRight);
    for (bool fused : {true, false}) {
      AttentionRun a = run_attention(fused, q, k, v, mask, 0.3, true),
                   b = run_attention(fused, q, k, v, mask, 0.3, false);
      for (auto [x, y] : {std::pair{a.out, b.out}, {a.gq, b.gq}, {a.gk, b.gk}, {a.gv, b.gv}})
        CHECK(allclose(x, y, 0, 0));
    }
  }
}

TEST_CASE("grouped-query attention gradcheck and gradgradcheck, fused and composed",
          "[attention][flash][gqa][gradcheck]") {
  // H = 4, H_kv = 2, and a rank-5 (B, 2, H, T, D) input whose heads dim (-3) is the grouped one
  const Shape s{2, 4, 5, 7};
  const AttentionMask causal = mask_of(ops::tensor({6, 3}, DType::Int64), s, CausalAlign::BottomRight);
  Variable q(rand64({2, 4, 5, 3}, 1), true), k(rand64({2, 2, 7, 3}, 2), true),
      v(rand64({2, 2, 7, 2}, 3), true);
  check_attention_derivatives(q, k, v, causal);
  Variable q5(rand64({1, 2, 4, 3, 2}, 4), true), k5(rand64({1, 2, 1, 4, 2}, 5), true),
      v5(rand64({1, 2, 1, 4, 3}, 6), true);
  REQUIRE(gradcheck(
      [](const std::vector<Variable>& x) { return flash_attention(x[0], x[1], x[2], AttentionMask{}, 0.9); },
      {q5, k5, v5}));
}

TEST_CASE("grouped-query attention in bfloat16: within one rounding of the float32 kernel",
          "[attention][flash][gqa][half]") {
  // The forward of each query head is the multi-head kernel's on its key/value head, so bfloat16 GQA equals
  // bfloat16 MHA on repeated heads bit for bit (out, lse, dQ); dK and dV sum the group in float32 and round
  // once, so they lie within one bfloat16 rounding (2^-8 relative, with the per-head roundings of the MHA
  // side) of the repeated heads' gradients summed. On VDPBF16PS where the CPU has it, then widened.
  const DType bf = DType::BFloat16;
  const int64_t B = 2, H = 4, Hkv = 1, G = 4, Tq = 70, Tk = 131, D = 32;
  const Shape s{B, H, Tq, Tk};
  Tensor q = seeded_randn({B, H, Tq, D}, bf, 31), k = seeded_randn({B, Hkv, Tk, D}, bf, 32),
         v = seeded_randn({B, Hkv, Tk, D}, bf, 33), go = seeded_randn({B, H, Tq, D}, bf, 34);
  for (bool capped : {false, true}) {
    std::unique_ptr<cpu::IsaGuard> narrow;
    if (capped) narrow = std::make_unique<cpu::IsaGuard>(cpu::Isa::Avx2);
    const AttentionMask mask = mask_of(Tensor(), s, CausalAlign::BottomRight);
    const ops::AttentionDropout drop{0.2, 7, 1000, Tensor()};
    ops::FlashAttentionForward a = ops::flash_attention_forward(q, k, v, mask, 0.2, drop),
                               b = ops::flash_attention_forward(q, repeat_heads(k, G), repeat_heads(v, G),
                                                                mask, 0.2, drop);
    CHECK(allclose(a.out, b.out, 0, 0));
    CHECK(allclose(a.lse, b.lse, 0, 0));
    ops::AttentionDropout da = drop, db = drop;
    da.kept = a.kept, db.kept = b.kept;
    ops::FlashAttentionGrads ga = ops::flash_attention_backward(go, q, k, v, a.out, a.lse, mask, 0.2, da),
                             gb = ops::flash_attention_backward(go, q, repeat_heads(k, G), repeat_heads(v, G),
                                                                b.out, b.lse, mask, 0.2, db);
    CHECK(allclose(ga.gq, gb.gq, 0, 0));
    for (auto [x, y] : {std::pair{ga.gk, gb.gk}, {ga.gv, gb.gv}}) {
      const Tensor y32 = y.to(DType::Float32);
      const Tensor sum = sum_groups(y32, G), mag = sum_groups(ops::abs(y32), G);
      const Tensor err = ops::abs(ops::sub(x.to(DType::Float32), sum));
      const Tensor bound = ops::add(ops::mul(mag, 0x1p-7), 1e-30);
      CHECK(ops::max(ops::sub(err, bound)).item<double>() <= 0);
    }
  }
}

TEST_CASE("multi-query attention backward at batch 1: the group's query heads split across the threads",
          "[attention][flash][gqa]") {
  // B·H_kv = 1 key/value head on 2 or 3 threads: the backward cuts the G = 6 query heads into one run per
  // thread (Call::kv_slices), each with its own dK and dV, added in run order after. Against the composed
  // path in float64 and float32 (masks, dropout); the same bits on every run; dQ bit for bit the one-thread
  // kernel's (a query head's work does not change), dK and dV within float rounding of it (the order of the
  // sums over the group does); bfloat16 within its rounding of the one-thread kernel.
  struct Threads {
    int before = get_num_threads();
    ~Threads() { set_num_threads(before); }
  } restore;
  const int64_t B = 1, H = 6, Hkv = 1, Tq = 70, Tk = 133, D = 16;
  const Shape s{B, H, Tq, Tk};
  const ops::AttentionDropout no_drop{};
  for (DType dt : {DType::Float64, DType::Float32, DType::BFloat16}) {
    const double tol = dt == DType::Float64 ? 1e-10 : dt == DType::Float32 ? 1e-5 : 0x1p-6;
    const Tensor q = seeded_randn({B, H, Tq, D}, dt, 41), k = seeded_randn({B, Hkv, Tk, D}, dt, 42),
                 v = seeded_randn({B, Hkv, Tk, D}, dt, 43);
    for (double p : {0.0, 0.3}) {
      const AttentionMask mask = mask_of(Tensor(), s, p > 0 ? CausalAlign::BottomRight : CausalAlign::None);
      set_num_threads(1);
      REQUIRE(cpu::flash::Call(q, k, v, mask, 1.0, no_drop).kv_slices() == 1);
      const AttentionRun one = run_attention(true, q, k, v, mask, p);
      for (int threads : {2, 3}) {
        INFO(dt << ", dropout " << p << ", " << threads << " threads");
        set_num_threads(threads);
        REQUIRE(cpu::flash::Call(q, k, v, mask, 1.0, no_drop).kv_slices() == threads);
        const AttentionRun f = run_attention(true, q, k, v, mask, p),
                           again = run_attention(true, q, k, v, mask, p);
        for (auto [a, b] :
             {std::pair{f.out, again.out}, {f.gq, again.gq}, {f.gk, again.gk}, {f.gv, again.gv}})
          CHECK(allclose(a, b, 0, 0));
        CHECK(allclose(f.gq, one.gq, 0, 0));
        CHECK(allclose(f.gk, one.gk, tol, tol));
        CHECK(allclose(f.gv, one.gv, tol, tol));
        if (dt == DType::BFloat16) continue;  // (the composed path runs bfloat16 ops, a rounding per op)
        const AttentionRun r = run_attention(false, q, k, v, mask, p);
        for (auto [a, b] : {std::pair{f.out, r.out}, {f.gq, r.gq}, {f.gk, r.gk}, {f.gv, r.gv}})
          CHECK(allclose(a, b, tol, tol));
      }
    }
  }
  // while the key/value heads give every thread one, a task is a whole group
  set_num_threads(2);
  const Tensor q = seeded_randn({2, H, Tq, D}, DType::Float32, 1),
               k = seeded_randn({2, Hkv, Tk, D}, DType::Float32, 2);
  const AttentionMask mask = mask_of(Tensor(), {2, H, Tq, Tk});
  CHECK(cpu::flash::Call(q, k, k, mask, 1.0, no_drop).kv_slices() == 1);
}

TEST_CASE("grouped-query attention rejects bad input naming the op and the shapes",
          "[attention][flash][gqa][errors]") {
  Variable q(rand64({2, 6, 3, 4}, 1)), k4(rand64({2, 4, 5, 4}, 2)), v4(rand64({2, 4, 5, 2}, 3)),
      k2(rand64({2, 2, 5, 4}, 4)), v3(rand64({2, 3, 5, 2}, 5)), v2(rand64({2, 2, 5, 2}, 6));
  // 6 query heads over 4 key/value heads: not a multiple
  REQUIRE_THROWS_SACCADE(flash_attention(q, k4, v4, AttentionMask{}, 1.0), "flash_attention: q [2, 6, 3, 4]");
  REQUIRE_THROWS_SACCADE(flash_attention(q, k4, v4, AttentionMask{}, 1.0), "not a multiple");
  // no query heads over two key/value heads (G = 0)
  REQUIRE_THROWS_SACCADE(flash_attention(Variable(rand64({2, 0, 3, 4}, 7)), k2, v2, AttentionMask{}, 1.0),
                         "not a multiple");
  // k and v with different numbers of heads
  REQUIRE_THROWS_SACCADE(flash_attention(q, k2, v3, AttentionMask{}, 1.0), "flash_attention");
  // the backward checks the same
  ops::FlashAttentionForward f =
      ops::flash_attention_forward(q.data(), k2.data(), v2.data(), AttentionMask{}, 1.0);
  REQUIRE_THROWS_SACCADE(ops::flash_attention_backward(f.out, q.data(), k4.data(), v4.data(), f.out, f.lse,
                                                       AttentionMask{}, 1.0),
                         "flash_attention_backward");
  // scaled_dot_product_attention refuses fewer key/value heads unless enable_gqa, as torch's
  REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(q, k2, v2), "enable_gqa");
  REQUIRE_NOTHROW(nn::scaled_dot_product_attention(q, k2, v2, {.enable_gqa = true}));
  REQUIRE_THROWS_SACCADE(
      nn::scaled_dot_product_attention(q, k4, v4, {.enable_gqa = true, .need_weights = true}),
      "not a multiple");
}
