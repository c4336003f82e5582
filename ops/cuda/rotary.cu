// CUDA kernel of the rotary position embedding (ops/rotary.h; Su et al. 2021, RoFormer, eq. 34), one thread
// per output element, the twin of ops/cpu/rotary.cpp:
//
//   x, out: (N, T, D) contiguous, float32, float64, bfloat16 or float16   cos, sin: (T, R/2) contiguous,
//   x's dtype (float32 for 16-bit x: the angles are not rounded to 16 bits)
//   Half:        y[i] = x[i] c_i - x[i+R/2] s_i,   y[i+R/2] = x[i+R/2] c_i + x[i] s_i
//   Interleaved: y[2i] = x[2i] c_i - x[2i+1] s_i,  y[2i+1] = x[2i+1] c_i + x[2i] s_i
// with s negated for the inverse rotation (the backward) and dims R..D-1 copied. 16-bit elements are loaded,
// rotated in float32 (compute_t) and rounded once on the store.
#include "ops/cuda/backend.h"
#include "ops/cuda/loop.cuh"

namespace saccade::cuda {

namespace {

template <class T, class C>
__global__ void rotary_kernel(const T* x, const C* cos, const C* sin, T* out, int64_t n, int64_t T_,
                              int64_t D, int64_t half, bool interleaved, C sign) {
  for (int64_t e = first_index(); e < n; e += grid_stride()) {
    const int64_t d = e % D, t = (e / D) % T_;
    const T* row = x + (e - d);
    if (d >= 2 * half) {  // past the rotated dims: copied
      out[e] = row[d];
      continue;
    }
    // pair i of the row: elements a (the first of the pair) and b; is d the first?
    const bool first = interleaved ? d % 2 == 0 : d < half;
    const int64_t i = interleaved ? d / 2 : (first ? d : d - half);
    const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
    const C c = cos[t * half + i], s = sign * sin[t * half + i];
    const C xa = static_cast<C>(row[a]), xb = static_cast<C>(row[b]);
    out[e] = static_cast<T>(first ? xa * c - xb * s : xb * c + xa * s);
  }
}

}  // namespace

void CudaBackend::rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out,
                                   bool interleaved, bool inverse) {
  const int64_t n = x.numel(), T = x.size(1), D = x.size(2), half = cos.size(1);
  if (n == 0) return;
  dispatch_floating_and_half(x.dtype(), "rotary_embedding", [&]<class X>() {
    using C = compute_t<X>;
    rotary_kernel<X, C><<<blocks_for(n), kThreads, 0, stream()>>>(x.data<X>(), cos.data<C>(), sin.data<C>(),
                                                                  out.data<X>(), n, T, D, half, interleaved,
                                                                  inverse ? C(-1) : C(1));
    SACCADE_CUDA_CHECK_LAUNCH("rotary_embedding");
  });
}

}  // namespace saccade::cuda
