// Fused additive-attention scores (ops::additive_attention_scores, ops/cpu/additive_attention.cpp,
// saccade::additive_attention_scores) against the composed reference (nn::additive_scores_composed): scores
// and every gradient, float64 and float32, Tq = 1 and Tq > 1, odd sizes, strided inputs, the threaded path;
// nn::AdditiveAttention fused against composed with every mask kind; a gradcheck; bad input.
#include <cmath>

#include "helpers.h"
#include "nn/attention.h"
#include "nn/bahdanau.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;

namespace {

Tensor randn(const Shape& s, DType dt, uint64_t seed) {
  Generator g(seed);
  return ops::randn(s, dt, Device::cpu(), &g);
}

struct Scores {
  Tensor s, gq, gk, gw;
};

// The scores and the gradients of sum(scores ⊙ R) through either path; inputs used as given (any strides).
Scores scores_of(bool fused, const Tensor& q, const Tensor& k, const Tensor& w) {
  Variable vq(q, true), vk(k, true), vw(w, true);
  Variable s = fused ? additive_attention_scores(vq, vk, vw) : nn::additive_scores_composed(vq, vk, vw);
  Tensor R = randn(s.shape(), DType::Float64, 99).to(q.dtype());  // the same numbers in either dtype
  s.backward(R);
  return {s.data(), vq.grad(), vk.grad(), vw.grad()};
}

void agree(const Tensor& q, const Tensor& k, const Tensor& w, double tol) {
  Scores a = scores_of(true, q, k, w), b = scores_of(false, q, k, w);
  REQUIRE(a.s.shape() == Shape({q.size(0), q.size(1), k.size(1)}));
  CHECK(allclose(a.s, b.s, tol, tol));
  CHECK(allclose(a.gq, b.gq, tol, tol));
  CHECK(allclose(a.gk, b.gk, tol, tol));
  CHECK(allclose(a.gw, b.gw, tol, tol));
}

Tensor i64(std::initializer_list<double> v, const Shape& s) { return ops::tensor(v, s, DType::Int64); }

}  // namespace

TEST_CASE("fused additive scores equal the composed path, values and gradients", "[attention][additive]") {
  for (DType dt : {DType::Float64, DType::Float32}) {
    const double tol = dt == DType::Float64 ? 1e-10 : 1e-5;
    // (B, Tq, L, A): one query per decoder step, several queries, odd sizes, single elements
    for (Shape s : {Shape{3, 1, 7, 5}, Shape{2, 4, 9, 13}, Shape{1, 3, 1, 1}, Shape{5, 2, 49, 37}}) {
      const int64_t B = s[0], Tq = s[1], L = s[2], A = s[3];
      Tensor q = randn({B, Tq, A}, dt, 1), k = randn({B, L, A}, dt, 2), w = randn({A}, dt, 3);
      agree(q, k, w, tol);
    }
    {  // strided inputs (a plain block: a SECTION inside the dtype loop ran for float64 only)
      // q as a transposed view, k as a slice of a wider tensor, w with stride 2
      Tensor q = randn({2, 6, 3}, dt, 4).transpose(1, 2);  // (2, 3, 6)
      Tensor k = randn({2, 5, 9}, dt, 5).narrow(2, 1, 6);  // (2, 5, 6)
      Tensor w = randn({12}, dt, 6).view({6, 2}).select(1, 0);
      REQUIRE_FALSE(q.is_contiguous());
      REQUIRE_FALSE(k.is_contiguous());
      REQUIRE_FALSE(w.is_contiguous());
      agree(q, k, w, tol);
    }
  }
}

TEST_CASE("fused additive scores split across threads give the one-thread result",
          "[attention][additive][threads]") {
  // B·Tq·L·A large enough for several grains in forward and backward
  const int before = get_num_threads();
  Tensor q = randn({16, 3, 64}, DType::Float32, 7), k = randn({16, 49, 64}, DType::Float32, 8),
         w = randn({64}, DType::Float32, 9);
  set_num_threads(1);
  Scores one = scores_of(true, q, k, w);
  set_num_threads(2);
  Scores two = scores_of(true, q, k, w);
  set_num_threads(before);
  // each element is computed by one thread in a fixed order: bit-identical
  CHECK(allclose(one.s, two.s, 0, 0));
  CHECK(allclose(one.gq, two.gq, 0, 0));
  CHECK(allclose(one.gk, two.gk, 0, 0));
  CHECK(allclose(one.gw, two.gw, 0, 0));
  // and right: against the composed path in float64. (Against the composed path in float32 the two roundings
  // differ by more than 1e-5 in gw, a sum of 2,352 products, when OpenBLAS runs its SkylakeX/Cooperlake
  // kernels: the bound is then the composed path's, not the fused kernel's.)
  Scores ref = scores_of(false, q.to(DType::Float64), k.to(DType::Float64), w.to(DType::Float64));
  CHECK(allclose(one.s, ref.s, 1e-5, 1e-5));
  CHECK(allclose(one.gq, ref.gq, 1e-5, 1e-5));
  CHECK(allclose(one.gk, ref.gk, 1e-5, 1e-5));
  CHECK(allclose(one.gw, ref.gw, 1e-5, 1e-5));
}

TEST_CASE("fused additive scores gradcheck", "[attention][additive][gradcheck]") {
  std::vector<Variable> in{Variable(rand64({2, 3, 4}, 11), true), Variable(rand64({2, 5, 4}, 12), true),
                           Variable(rand64({4}, 13), true)};
  REQUIRE(gradcheck(
      [](const std::vector<Variable>& x) { return additive_attention_scores(x[0], x[1], x[2]); }, in));
}

TEST_CASE("fused additive scores reject bad input naming the shapes", "[attention][additive][errors]") {
  Tensor q = rand64({2, 3, 4}), k = rand64({2, 5, 4}), w = rand64({4});
  REQUIRE_THROWS_SACCADE(ops::additive_attention_scores(q, rand64({3, 5, 4}), w), "[3, 5, 4]");
  REQUIRE_THROWS_SACCADE(ops::additive_attention_scores(q, rand64({2, 5, 3}), w),
                         "additive_attention_scores");
  REQUIRE_THROWS_SACCADE(ops::additive_attention_scores(q, k, rand64({5})), "[5]");
  REQUIRE_THROWS_SACCADE(ops::additive_attention_scores(rand64({2, 4}), k, w), "[2, 4]");
  REQUIRE_THROWS_SACCADE(ops::additive_attention_scores(q, k.to(DType::Float32), w), "float32");
  REQUIRE_THROWS_SACCADE(
      ops::additive_attention_scores(q.to(DType::Int64), k.to(DType::Int64), w.to(DType::Int64)),
      "float dtype");
  REQUIRE_THROWS_SACCADE(ops::additive_attention_scores(q, k, Tensor()), "undefined");
  REQUIRE_THROWS_SACCADE(ops::additive_attention_scores_backward(rand64({2, 3, 4}), q, k, w), "[2, 3, 4]");
  REQUIRE_THROWS_SACCADE(nn::additive_scores_composed(Variable(q), Variable(k), Variable(rand64({5}))),
                         "additive_scores_composed");
}

TEST_CASE("AdditiveAttention fused equals composed for every mask kind, Tq = 1 and Tq > 1",
          "[attention][additive]") {
  for (DType dt : {DType::Float64, DType::Float32}) {
    const double tol = dt == DType::Float64 ? 1e-10 : 1e-5;
    for (int64_t Tq : {1, 4}) {
      const int64_t B = 2, L = 7;
      Generator g(21);
      nn::AdditiveAttention att(3, 5, 6, 0.0, &g);
      att.to(dt);
      Tensor q = randn({B, Tq, 5}, dt, 22), k = randn({B, L, 3}, dt, 23), v = randn({B, L, 2}, dt, 24);
      Tensor keep = ops::gt(randn({B, Tq, L}, DType::Float32, 25), -0.3);
      Generator lg(27);
      Tensor lens_q = ops::randint(0, L + 2, {B, Tq}, Device::cpu(), &lg);  // (B, Tq), some rows empty
      // masks are applied to the scores after the fused op, as in the composed path
      for (Tensor mask : {Tensor(), i64({5, 0}, {2}), lens_q, keep}) {
        std::vector<Tensor> out, grads;
        for (bool fused : {true, false}) {
          att.use_fused = fused;
          att.zero_grad();
          Variable vq(q, true), vk(k, true), vv(v, true);
          nn::AttentionOutput r = att.forward_with_weights(vq, vk, vv, mask);
          r.output.backward(randn(r.output.shape(), dt, 26));
          out.push_back(r.output.data());
          out.push_back(r.weights.data());
          for (Tensor t : {vq.grad(), vk.grad(), vv.grad(), att.W_q->weight.grad(), att.W_k->weight.grad(),
                           att.w_v->weight.grad()})
            grads.push_back(t);
        }
        for (size_t i = 0; i < 2; ++i) CHECK(allclose(out[i], out[i + 2], tol, tol));
        for (size_t i = 0; i < 6; ++i) CHECK(allclose(grads[i], grads[i + 6], tol, tol));
      }
    }
  }
}
