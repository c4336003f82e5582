// CPU kernels of the fused additive-attention scores (Bahdanau et al. 2015, eq. 6; d2l 11.3.2).
//
//   qp: (B, Tq, A)   kp: (B, L, A)   w_v: (A)   scores, gscores: (B, Tq, L)      (all contiguous)
//
// Forward:  scores[b, i, l] = Σ_a w_v[a] t[b, i, l, a],   t = tanh(qp[b, i, a] + kp[b, l, a])
// Backward: with u = g[b, i, l] w_v[a] (1 - t²)  (d tanh(x)/dx = 1 - tanh²(x)):
//   gw_v[a] = Σ_{b,i,l} g t,   gqp[b, i, a] = Σ_l u,   gkp[b, l, a] = Σ_i u.
// Each is one pass over (B, Tq, L, A) with the inner loop over A (unit stride in qp, kp, w_v), t recomputed
// from qp and kp rather than stored: the composed path (nn::additive_scores_composed) keeps the
// (B, Tq, L, A) sum and its tanh for backward at every decoder step; this keeps nothing.
// Threads: forward over the B·Tq rows of scores; backward over B (gkp[b] sums over i, so one task owns a b;
// gw_v sums over everything, so each b writes a partial row and the rows are added in a fixed order).
#include <vector>

#include "ops/cpu/backend.h"
#include "ops/cpu/loop.h"
#include "ops/cpu/simd.h"
#include "ops/elementwise_math.h"

namespace saccade::cpu {

namespace {

// tanh's cost in simple elementwise operations (the float rational polynomial of tanh_float, a division
// included): scales the thread grain of loop.h, which counts elements of a simple kernel.
constexpr int64_t kTanhCost = 8;

// One row of scores: s[l] = Σ_a w[a] tanh(q[a] + k[l·A + a]), l < L.
template <class T>
[[gnu::always_inline]] inline void score_row(const T* __restrict q, const T* __restrict k,
                                             const T* __restrict w, T* __restrict s, int64_t L, int64_t A) {
  const math::Tanh<T> tanh_of;
  for (int64_t l = 0; l < L; ++l) {
    const T* kl = k + l * A;
    T acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t a = 0; a < A; ++a) acc += w[a] * tanh_of(q[a] + kl[a]);
    s[l] = acc;
  }
}

// One query row's share of the backward: g (L) the row of gscores; adds into gq (A), gk (L, A), gw (A).
template <class T>
[[gnu::always_inline]] inline void backward_row(const T* __restrict q, const T* __restrict k,
                                                const T* __restrict w, const T* __restrict g,
                                                T* __restrict gq, T* __restrict gk, T* __restrict gw,
                                                int64_t L, int64_t A) {
  const math::Tanh<T> tanh_of;
  for (int64_t l = 0; l < L; ++l) {
    const T* kl = k + l * A;
    T* gkl = gk + l * A;
    const T gl = g[l];
#pragma omp simd
    for (int64_t a = 0; a < A; ++a) {
      const T t = tanh_of(q[a] + kl[a]);
      const T u = gl * w[a] * (T(1) - t * t);
      gw[a] += gl * t;
      gq[a] += u;
      gkl[a] += u;
    }
  }
}

// The rows at the machine's vector width (simd.h).
template <class T>
void score_row_any(const T* q, const T* k, const T* w, T* s, int64_t L, int64_t A) {
  with_isa([&] { score_row(q, k, w, s, L, A); });
}
template <class T>
void backward_row_any(const T* q, const T* k, const T* w, const T* g, T* gq, T* gk, T* gw, int64_t L,
                      int64_t A) {
  with_isa([&] { backward_row(q, k, w, g, gq, gk, gw, L, A); });
}

}  // namespace

void CpuBackend::additive_attention_scores(const Tensor& qp, const Tensor& kp, const Tensor& w_v,
                                           const Tensor& scores) {
  const int64_t B = qp.size(0), Tq = qp.size(1), L = kp.size(1), A = qp.size(2);
  dispatch_floating(qp.dtype(), "additive_attention_scores", [&]<class T>() {
    const T *q = qp.data<T>(), *k = kp.data<T>(), *w = w_v.data<T>();
    T* s = scores.data<T>();
    // row r = b·Tq + i
    parallel_rows(B * Tq, L * A * kTanhCost,
                 [&](int64_t r) { score_row_any<T>(q + r * A, k + (r / Tq) * L * A, w, s + r * L, L, A); });
  });
}

void CpuBackend::additive_attention_scores_backward(const Tensor& gscores, const Tensor& qp, const Tensor& kp,
                                                    const Tensor& w_v, const Tensor& gqp, const Tensor& gkp,
                                                    const Tensor& gw_v) {
  const int64_t B = qp.size(0), Tq = qp.size(1), L = kp.size(1), A = qp.size(2);
  dispatch_floating(qp.dtype(), "additive_attention_scores_backward", [&]<class T>() {
    const T *q = qp.data<T>(), *k = kp.data<T>(), *w = w_v.data<T>(), *g = gscores.data<T>();
    T *gq = gqp.data<T>(), *gk = gkp.data<T>();
    std::vector<T> gw_rows(static_cast<size_t>(B * A), T(0));  // gw_rows[b] = batch row b's share of gw_v
    parallel_rows(B, Tq * L * A * 2 * kTanhCost, [&](int64_t b) {
      T* gkb = gk + b * L * A;
      std::fill(gkb, gkb + L * A, T(0));
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t r = b * Tq + i;
        T* gqr = gq + r * A;
        std::fill(gqr, gqr + A, T(0));
        backward_row_any<T>(q + r * A, k + b * L * A, w, g + r * L, gqr, gkb, gw_rows.data() + b * A, L, A);
      }
    });
    T* gw = gw_v.data<T>();
    std::fill(gw, gw + A, T(0));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t a = 0; a < A; ++a) gw[a] += gw_rows[static_cast<size_t>(b * A + a)];
  });
}

}  // namespace saccade::cpu
