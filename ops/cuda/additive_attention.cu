// CUDA kernels of the fused additive-attention scores (Bahdanau et al. 2015, eq. 6; d2l 11.3.2), the twin of
// ops/cpu/additive_attention.cpp (same math, same tanh: math::Tanh of ops/elementwise_math.h).
//
//   qp: (B, Tq, A)   kp: (B, L, A)   w_v: (A)   scores, gscores: (B, Tq, L)      (all contiguous)
//
// Forward:  scores[b, i, l] = Σ_a w_v[a] t[b, i, l, a],   t = tanh(qp[b, i, a] + kp[b, l, a])
// Backward: with u = g[b, i, l] w_v[a] (1 - t²):
//   gqp[b, i, a] = Σ_l u,   gkp[b, l, a] = Σ_i u,   gw_v[a] = Σ_{b,i,l} g t.
//
// Layout (no atomics: every output element is summed by one thread in a fixed order, so a run gives the
// same bits every time):
//  - forward: one block per query row (b, i); warp w of the block takes keys l = w, w + warps, ...; its 32
//    lanes split the A terms of the dot product (neighbouring lanes read neighbouring a: coalesced) and add
//    them with warp shuffles (warp_reduce, loop.cuh).
//  - backward, kernel 1: one block per query row (b, i), one thread per a (strided past blockDim): walks the
//    L keys, summing gqp[b, i, a] and this row's share of gw_v, gw_rows[b·Tq + i, a] = Σ_l g t.
//  - backward, kernel 2: one block per key row (b, l), one thread per a: walks the Tq queries, summing
//    gkp[b, l, a]. t is recomputed here a second time (twice the tanh of kernel 1, in exchange for no
//    atomics).
//  - backward, kernel 3: gw_v[a] = Σ_r gw_rows[r, a], one thread per a walking the B·Tq rows in order.
// Grids are 1-d and grid-strided over rows (at most kMaxBlocks blocks); indices are 64-bit.
#include <cstdint>

#include "ops/cuda/backend.h"
#include "ops/cuda/loop.cuh"
#include "ops/elementwise_math.h"

namespace saccade::cuda {

namespace {

constexpr int kScoreThreads = 256;  // 8 warps per query row in the forward

// scores (B·Tq, L): row r = b·Tq + i.
template <class T>
__global__ void additive_scores_kernel(const T* __restrict__ q, const T* __restrict__ k,
                                       const T* __restrict__ w, T* __restrict__ s, int64_t rows, int64_t Tq,
                                       int64_t L, int64_t A) {
  const math::Tanh<T> tanh_of;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* qr = q + r * A;
    const T* kb = k + (r / Tq) * L * A;
    for (int64_t l = warp; l < L; l += warps) {
      const T* kl = kb + l * A;
      T acc = 0;
      for (int64_t a = lane; a < A; a += 32) acc += w[a] * tanh_of(qr[a] + kl[a]);
      acc = warp_reduce(acc, Plus<T>{});
      if (lane == 0) s[r * L + l] = acc;
    }
  }
}

// Kernel 1: gq (B·Tq, A) and gw_rows (B·Tq, A), one block per query row r = b·Tq + i.
template <class T>
__global__ void additive_grad_q_kernel(const T* __restrict__ q, const T* __restrict__ k,
                                       const T* __restrict__ w, const T* __restrict__ g, T* __restrict__ gq,
                                       T* __restrict__ gw_rows, int64_t rows, int64_t Tq, int64_t L,
                                       int64_t A) {
  const math::Tanh<T> tanh_of;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* kb = k + (r / Tq) * L * A;
    const T* gr = g + r * L;
    for (int64_t a = threadIdx.x; a < A; a += blockDim.x) {
      const T qa = q[r * A + a], wa = w[a];
      T sum_u = 0, sum_gt = 0;
      for (int64_t l = 0; l < L; ++l) {
        const T t = tanh_of(qa + kb[l * A + a]), gl = gr[l];
        sum_u += gl * wa * (T(1) - t * t);
        sum_gt += gl * t;
      }
      gq[r * A + a] = sum_u;
      gw_rows[r * A + a] = sum_gt;
    }
  }
}

// Kernel 2: gk (B·L, A), one block per key row c = b·L + l.
template <class T>
__global__ void additive_grad_k_kernel(const T* __restrict__ q, const T* __restrict__ k,
                                       const T* __restrict__ w, const T* __restrict__ g, T* __restrict__ gk,
                                       int64_t krows, int64_t Tq, int64_t L, int64_t A) {
  const math::Tanh<T> tanh_of;
  for (int64_t c = blockIdx.x; c < krows; c += gridDim.x) {
    const int64_t b = c / L, l = c % L;
    const T* qb = q + b * Tq * A;
    const T* gb = g + b * Tq * L + l;  // g[b, i, l] = gb[i·L]
    for (int64_t a = threadIdx.x; a < A; a += blockDim.x) {
      const T ka = k[c * A + a], wa = w[a];
      T sum_u = 0;
      for (int64_t i = 0; i < Tq; ++i) {
        const T t = tanh_of(qb[i * A + a] + ka);
        sum_u += gb[i * L] * wa * (T(1) - t * t);
      }
      gk[c * A + a] = sum_u;
    }
  }
}

// Kernel 3: gw[a] = Σ_r gw_rows[r, a] (rows in order), one thread per a.
template <class T>
__global__ void additive_grad_w_kernel(const T* __restrict__ gw_rows, T* __restrict__ gw, int64_t rows,
                                       int64_t A) {
  for (int64_t a = first_index(); a < A; a += grid_stride()) {
    T sum = 0;
    for (int64_t r = 0; r < rows; ++r) sum += gw_rows[r * A + a];
    gw[a] = sum;
  }
}

// Threads per block for a loop over A: A rounded up to a warp, at most kThreads.
int threads_over(int64_t A) {
  const int64_t t = (A + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : (t > kThreads ? kThreads : t));
}

}  // namespace

void CudaBackend::additive_attention_scores(const Tensor& qp, const Tensor& kp, const Tensor& w_v,
                                            const Tensor& scores) {
  const int64_t B = qp.size(0), Tq = qp.size(1), L = kp.size(1), A = qp.size(2);
  if (B * Tq * L == 0) return;  // (A = 0 runs: every score is the empty sum, 0)
  dispatch_floating(qp.dtype(), "additive_attention_scores", [&]<class T>() {
    additive_scores_kernel<T><<<blocks_for(B * Tq, 1), kScoreThreads, 0, stream()>>>(
        qp.data<T>(), kp.data<T>(), w_v.data<T>(), scores.data<T>(), B * Tq, Tq, L, A);
    SACCADE_CUDA_CHECK_LAUNCH("additive_attention_scores");
  });
}

void CudaBackend::additive_attention_scores_backward(const Tensor& gscores, const Tensor& qp,
                                                     const Tensor& kp, const Tensor& w_v, const Tensor& gqp,
                                                     const Tensor& gkp, const Tensor& gw_v) {
  const char* op = "additive_attention_scores_backward";
  const int64_t B = qp.size(0), Tq = qp.size(1), L = kp.size(1), A = qp.size(2);
  // Empty sums are zeros: gqp when L = 0, gkp when Tq = 0, gw_v when B·Tq·L = 0.
  if (B * Tq * L == 0 || A == 0) {
    for (const Tensor* t : {&gqp, &gkp, &gw_v}) fill(*t, 0.0);
    return;
  }
  dispatch_floating(qp.dtype(), op, [&]<class T>() {
    const T *q = qp.data<T>(), *k = kp.data<T>(), *w = w_v.data<T>(), *g = gscores.data<T>();
    Tensor gw_rows = Tensor::empty({B * Tq, A}, qp.dtype(), qp.device());  // row r's share of gw_v
    const int threads = threads_over(A);
    cudaStream_t s = stream();
    additive_grad_q_kernel<T><<<blocks_for(B * Tq, 1), threads, 0, s>>>(q, k, w, g, gqp.data<T>(),
                                                                        gw_rows.data<T>(), B * Tq, Tq, L, A);
    SACCADE_CUDA_CHECK_LAUNCH(op);
    additive_grad_k_kernel<T>
        <<<blocks_for(B * L, 1), threads, 0, s>>>(q, k, w, g, gkp.data<T>(), B * L, Tq, L, A);
    SACCADE_CUDA_CHECK_LAUNCH(op);
    additive_grad_w_kernel<T>
        <<<blocks_for(A), kThreads, 0, s>>>(gw_rows.data<T>(), gw_v.data<T>(), B * Tq, A);
    SACCADE_CUDA_CHECK_LAUNCH(op);
  });
}

}  // namespace saccade::cuda
