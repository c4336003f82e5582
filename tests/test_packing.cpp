// Packed documents in attention (FlashAttention-2's variable-length batches, Dao 2023, given as a
// document-id vector): several documents share one row of the batch, and a query attends only to the keys of
// its own document. ops::with_documents turns the ids into two numbers a query (key_starts, valid_lens); the
// fused CPU kernel reads them (ops/cpu/attention_tiles.h's RowLimits), the composed path forms the
// block-diagonal keep-mask (ops::attention_keep_mask). Checked here: every document's rows equal that
// document attended alone, fused and composed, causal or not, over tiles; fused equals composed with a
// window, valid_lens, a Bool mask and dropout; gradcheck and gradgradcheck in float64; the key tiles of
// another document are never read (NaN there changes nothing); bad input.
#include <cmath>
#include <vector>

#include "attention_checks.h"
#include "helpers.h"
#include "nn/attention.h"
#include "ops/cpu/flash_tiles.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::AttentionRun;
using saccade::testing::check_attention_derivatives;
using saccade::testing::document_ids_of;
using saccade::testing::run_attention;
using saccade::testing::seeded_randn;

namespace {

using ops::AttentionMask;
using ops::CausalAlign;

AttentionMask packed(const Tensor& ids, const Tensor& m, const Shape& scores, CausalAlign causal,
                     int64_t window = 0) {
  return ops::with_documents(ops::attention_mask(m, scores, causal, Device::cpu(), "test", window), ids,
                             scores, Device::cpu(), "test");
}

}  // namespace

TEST_CASE("packed attention: each document's rows are that document attended alone", "[attention][packing]") {
  // H = 4 over H_kv = 2, T = 150 over three query tiles (64 a tile), documents inside one tile, across
  // tiles, of one token, and a row that is one document
  const std::vector<std::vector<int64_t>> lengths{{1, 63, 70, 16}, {40, 100, 10}, {150}};
  const int64_t B = 3, H = 4, Hkv = 2, T = 150, D = 9, Dv = 5;
  const Shape s{B, H, T, T};
  const Tensor ids = document_ids_of(lengths);
  for (cpu::TileProducts how : {cpu::TileProducts::Gemm, cpu::TileProducts::Loops, cpu::TileProducts::Avx512})
    for (DType dt : {DType::Float64, DType::Float32}) {
      cpu::TileProductsGuard guard(how);
      const double tol = dt == DType::Float64 ? 1e-10 : 1e-5;
      const Tensor q = seeded_randn({B, H, T, D}, dt, 1), k = seeded_randn({B, Hkv, T, D}, dt, 2),
                   v = seeded_randn({B, Hkv, T, Dv}, dt, 3);
      for (CausalAlign causal : {CausalAlign::None, CausalAlign::TopLeft}) {
        const AttentionMask mask = packed(ids, Tensor(), s, causal);
        const AttentionRun f = run_attention(true, q, k, v, mask, 0.0),
                           c = run_attention(false, q, k, v, mask, 0.0);
        for (auto [a, b] : {std::pair{f.out, c.out}, {f.gq, c.gq}, {f.gk, c.gk}, {f.gv, c.gv}})
          CHECK(allclose(a, b, tol, tol));
        for (int64_t b = 0; b < B; ++b) {
          int64_t a = 0;
          for (int64_t len : lengths[static_cast<size_t>(b)]) {
            INFO("row " << b << ", document [" << a << ", " << a + len << "), " << dt
                        << (causal == CausalAlign::None ? "" : ", causal") << ", products " << int(how));
            auto doc = [&](const Tensor& x) { return x.slice(0, b, b + 1).slice(2, a, a + len); };
            Variable dq(doc(q)), dk(doc(k)), dv(doc(v));
            const Tensor alone =
                nn::scaled_dot_product_attention(
                    dq, dk, dv, {.is_causal = causal != CausalAlign::None, .enable_gqa = true})
                    .output.data();
            CHECK(allclose(doc(f.out), alone, tol, tol));
            CHECK(allclose(doc(c.out), alone, tol, tol));
            a += len;
          }
        }
      }
    }
}

TEST_CASE("packed attention with a window, valid_lens, a Bool mask or dropout: fused equals composed",
          "[attention][packing]") {
  const std::vector<std::vector<int64_t>> lengths{{30, 70, 37}, {137}};
  const int64_t B = 2, H = 4, Hkv = 1, T = 137, D = 16, Dv = 16;
  const Shape s{B, H, T, T};
  const Tensor ids = document_ids_of(lengths);
  Generator lg(8);
  const Tensor lens_q = ops::randint(-3, T + 5, {B, T}, Device::cpu(), &lg);
  const Tensor keep = ops::gt(seeded_randn(s, DType::Float32, 4), -0.5);
  for (DType dt : {DType::Float64, DType::Float32}) {
    const double tol = dt == DType::Float64 ? 1e-10 : 1e-5;
    const Tensor q = seeded_randn({B, H, T, D}, dt, 1), k = seeded_randn({B, Hkv, T, D}, dt, 2),
                 v = seeded_randn({B, Hkv, T, Dv}, dt, 3);
    struct Case {
      const char* name;
      AttentionMask mask;
      double p;
    };
    for (const Case& c :
         {Case{"window 20", packed(ids, Tensor(), s, CausalAlign::TopLeft, 20), 0.0},
          Case{"valid_lens (B)", packed(ids, ops::tensor({90, 200}, DType::Int64), s, CausalAlign::None),
               0.0},
          Case{"valid_lens (B, Tq), causal", packed(ids, lens_q, s, CausalAlign::TopLeft), 0.0},
          Case{"Bool (B, H, Tq, Tk)", packed(ids, keep, s, CausalAlign::None), 0.0},
          Case{"dropout", packed(ids, Tensor(), s, CausalAlign::TopLeft), 0.3}}) {
      INFO(c.name << ", " << dt);
      const AttentionRun f = run_attention(true, q, k, v, c.mask, c.p),
                         r = run_attention(false, q, k, v, c.mask, c.p);
      for (auto [a, b] : {std::pair{f.out, r.out}, {f.gq, r.gq}, {f.gk, r.gk}, {f.gv, r.gv}})
        CHECK(allclose(a, b, tol, tol));
    }
  }
}

TEST_CASE("packed attention: the block-diagonal weights, and a document's valid_lens is the smaller end",
          "[attention][packing]") {
  const Tensor ids = ops::tensor({3, 3, 3, 8, 8}, {1, 5}, DType::Int64);
  const Shape s{1, 1, 5, 5};
  const AttentionMask m = packed(ids, ops::tensor({4}, DType::Int64), s, CausalAlign::None);
  CHECK(m.key_starts.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 3, 3});
  CHECK(m.valid_lens.to_vector<int64_t>() == std::vector<int64_t>{3, 3, 3, 4, 4});  // min(5, valid_len 4)
  // the composed path's weights are block-diagonal: zero across documents, rows summing to 1
  const Tensor q = seeded_randn({1, 1, 5, 3}, DType::Float64, 1),
               k = seeded_randn({1, 1, 5, 3}, DType::Float64, 2);
  auto r = nn::scaled_dot_product_attention(Variable(q), Variable(k), Variable(k), m, {.need_weights = true},
                                            "scaled_dot_product_attention");
  const std::vector<double> w = r.weights.data().to_vector<double>();
  for (int64_t i = 0; i < 5; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < 5; ++j) {
      const bool same = (i < 3) == (j < 3) && j < 4;
      INFO("weight (" << i << ", " << j << ")");
      if (!same) CHECK(w[static_cast<size_t>(i * 5 + j)] == 0.0);
      sum += w[static_cast<size_t>(i * 5 + j)];
    }
    CHECK(sum == Approx(1.0).epsilon(1e-12));
  }
}

TEST_CASE("packed attention gradcheck and gradgradcheck, fused and composed",
          "[attention][packing][gradcheck]") {
  const Tensor ids = ops::tensor({0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2}, {2, 7}, DType::Int64);
  const Shape s{2, 2, 7, 7};
  for (CausalAlign causal : {CausalAlign::None, CausalAlign::TopLeft}) {
    INFO((causal == CausalAlign::None ? "bidirectional" : "causal"));
    Variable q(saccade::testing::rand64({2, 2, 7, 3}, 1), true),
        k(saccade::testing::rand64({2, 1, 7, 3}, 2), true),
        v(saccade::testing::rand64({2, 1, 7, 2}, 3), true);
    check_attention_derivatives(q, k, v, packed(ids, Tensor(), s, causal));
  }
}

TEST_CASE("packed attention never reads the key tiles of another document", "[attention][packing]") {
  // two documents of 128 keys: with D = 8 a key tile is 64 keys, so the second document's queries have no
  // tile in common with the first's keys, and NaN there must not reach them, forward or backward
  const int64_t T = 256, D = 8;
  const Shape s{1, 2, T, T};
  const Tensor ids = document_ids_of({{128, 128}});
  Tensor q = seeded_randn({1, 2, T, D}, DType::Float32, 1), k = seeded_randn({1, 2, T, D}, DType::Float32, 2),
         v = seeded_randn({1, 2, T, D}, DType::Float32, 3);
  const Tensor clean = run_attention(true, q, k, v, packed(ids, Tensor(), s, CausalAlign::None), 0.0).out;
  for (const Tensor& x : {k, v}) {
    Tensor first = x.slice(2, 0, 128);
    ops::copy_(first, ops::full(first.shape(), NAN, x.dtype()));
  }
  for (CausalAlign causal : {CausalAlign::None, CausalAlign::TopLeft}) {
    const AttentionRun r = run_attention(true, q, k, v, packed(ids, Tensor(), s, causal), 0.0);
    CHECK(all_finite(r.out.slice(2, 128, T)));
    CHECK(all_finite(r.gq.slice(2, 128, T)));
    CHECK(all_finite(r.gk.slice(2, 128, T)));
    CHECK(all_finite(r.gv.slice(2, 128, T)));
    if (causal == CausalAlign::None) CHECK(allclose(r.out.slice(2, 128, T), clean.slice(2, 128, T), 0, 0));
  }
}

TEST_CASE("packed attention rejects bad document ids naming the op and the shapes", "[attention][packing]") {
  const Shape s{2, 1, 4, 4};
  const AttentionMask m = ops::attention_mask(Tensor(), s, CausalAlign::TopLeft, Device::cpu(), "sdpa");
  auto with = [&](const Tensor& ids, const Shape& x) {
    return ops::with_documents(m, ids, x, Device::cpu(), "sdpa");
  };
  const Tensor good = ops::tensor({0, 0, 1, 1, 5, 5, 5, 5}, {2, 4}, DType::Int64);
  CHECK_NOTHROW(with(good, s));
  CHECK_FALSE(with(Tensor(), s).key_starts.defined());  // no ids: the mask unchanged
  REQUIRE_THROWS_SACCADE(with(good.to(DType::Float32), s),
                         "sdpa: document_ids must be int64 (B, T) = [2, 4]");
  REQUIRE_THROWS_SACCADE(with(good.reshape({4, 2}), s), "sdpa: document_ids must be int64 (B, T) = [2, 4]");
  REQUIRE_THROWS_SACCADE(with(good, Shape{2, 1, 3, 4}), "self-attention scores (B, ..., T, T)");
  REQUIRE_THROWS_SACCADE(
      with(ops::tensor({0, 0, 1, 1, 5, 6, 5, 5}, {2, 4}, DType::Int64), s),
      "sdpa: document_ids must not decrease along T (each document one contiguous run): row 1 "
      "goes from 6 to 5 at position 2");
  // a hand-built mask's key_starts are checked by the fused op
  AttentionMask bad = m;
  bad.key_starts = ops::zeros({2, 3}, DType::Int64);
  Tensor q = seeded_randn({2, 1, 4, 3}, DType::Float32, 1);
  REQUIRE_THROWS_SACCADE(ops::flash_attention_forward(q, q, q, bad, 1.0), "flash_attention: key_starts");
}

TEST_CASE("scaled_dot_product_attention's document_ids: the packed mask by name, on both paths",
          "[attention][packing]") {
  const Tensor ids = document_ids_of({{3, 5, 2}, {10}});
  const Shape s{2, 2, 10, 10};
  const Tensor q = seeded_randn({2, 2, 10, 4}, DType::Float64, 1),
               k = seeded_randn({2, 2, 10, 4}, DType::Float64, 2),
               v = seeded_randn({2, 2, 10, 3}, DType::Float64, 3);
  const Tensor want = run_attention(false, q, k, v, packed(ids, Tensor(), s, CausalAlign::TopLeft), 0.0).out;
  for (bool need_weights : {false, true}) {
    auto r = nn::scaled_dot_product_attention(
        Variable(q), Variable(k), Variable(v),
        {.is_causal = true, .document_ids = ids, .need_weights = need_weights});
    CHECK(allclose(r.output.data(), want, 1e-12, 1e-12));
  }
  // attend_from_scores takes them too (the scores already scaled)
  Variable scores(ops::mul(ops::matmul(q, k.transpose(-2, -1)), 0.5));
  auto a = nn::attend_from_scores(scores, Variable(v), {.is_causal = true, .document_ids = ids});
  CHECK(allclose(a.output.data(),
                 nn::scaled_dot_product_attention(Variable(q), Variable(k), Variable(v),
                                                  {.is_causal = true, .document_ids = ids, .scale = 0.5})
                     .output.data(),
                 1e-12, 1e-12));
  // with a converted mask, the ids may not come twice
  REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(Variable(q), Variable(k), Variable(v),
                                                          packed(ids, Tensor(), s, CausalAlign::TopLeft),
                                                          {.document_ids = ids}, "sdpa"),
                         "sdpa: the mask is given twice");
  REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(Variable(q), Variable(k), Variable(v),
                                                          {.document_ids = ids.slice(1, 0, 9)}),
                         "scaled_dot_product_attention: document_ids must be int64 (B, T) = [2, 10]");
}
