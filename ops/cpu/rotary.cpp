// CPU kernel of the rotary position embedding (ops/rotary.h), one pass over x: each (n, t) row's first R
// dims are rotated pair by pair with the angles of position t, the rest copied.
//
//   x, out: (N, T, D) contiguous, float32, float64, bfloat16 or float16   cos, sin: (T, R/2) contiguous,
//   compute_t of x (float32 for the 16-bit dtypes: loaded and stored as 16 bits, rotated in float32)
//   Half:        y[i] = x[i] c_i - x[i+R/2] s_i,   y[i+R/2] = x[i+R/2] c_i + x[i] s_i
//   Interleaved: y[2i] = x[2i] c_i - x[2i+1] s_i,  y[2i+1] = x[2i+1] c_i + x[2i] s_i
// with s negated for the inverse rotation (the backward). The Half loop reads four contiguous rows and
// vectorises at the machine's width; the Interleaved one reads pairs. A task takes a block of rows under one
// with_isa (a row is only D elements: a dispatch per row cost more than the rotation of D = 64).
#include <cstring>

#include "ops/cpu/backend.h"
#include "ops/cpu/bf16_lanes.h"
#include "ops/cpu/loop.h"
#include "ops/cpu/simd.h"

namespace saccade::cpu {

void CpuBackend::rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out,
                                  bool interleaved, bool inverse) {
  const int64_t N = x.size(0), T = x.size(1), D = x.size(2), half = cos.size(1), R = 2 * half;
  dispatch_floating_and_half(x.dtype(), "rotary_embedding", [&]<class S>() {
    using C = compute_t<S>;  // the tables' dtype, and the math's
    const S* px = x.data<S>();
    const C* pc = cos.data<C>();
    const C* ps = sin.data<C>();
    S* py = out.data<S>();
    const C sign = inverse ? C(-1) : C(1);
    parallel_for(0, N * T, (kGrain + D - 1) / D, [&](int64_t begin, int64_t end) {
      // NOTE: the lambda copies its arguments: loads through captured references keep GCC from vectorising
      with_isa([=] {
        for (int64_t row = begin; row < end; ++row) {
          const int64_t t = row % T;
          const C* __restrict c = pc + t * half;
          const C* __restrict s = ps + t * half;
          const S* __restrict xx = px + row * D;
          S* __restrict y = py + row * D;
          if (interleaved) {
            for (int64_t i = 0; i < half; ++i) {
              const C a = lane_load(xx[2 * i]), b = lane_load(xx[2 * i + 1]), si = sign * s[i];
              y[2 * i] = lane_store<S>(a * c[i] - b * si);
              y[2 * i + 1] = lane_store<S>(b * c[i] + a * si);
            }
          } else {
#pragma omp simd
            for (int64_t i = 0; i < half; ++i) {
              const C a = lane_load(xx[i]), b = lane_load(xx[i + half]), si = sign * s[i];
              y[i] = lane_store<S>(a * c[i] - b * si);
              y[i + half] = lane_store<S>(b * c[i] + a * si);
            }
          }
          if (R < D) std::memcpy(y + R, xx + R, static_cast<size_t>(D - R) * sizeof(S));
        }
      });
    });
  });
}

}  // namespace saccade::cpu
