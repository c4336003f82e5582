// CPU kernel of the rotary position embedding (ops/rotary.h), one pass over x: each (n, t) row's first R
// dims are rotated pair by pair with the angles of position t, the rest copied.
//
//   x, out: (N, T, D) contiguous   cos, sin: (T, R/2) contiguous   (float32 or float64)
//   Half:        y[i] = x[i] c_i - x[i+R/2] s_i,   y[i+R/2] = x[i+R/2] c_i + x[i] s_i
//   Interleaved: y[2i] = x[2i] c_i - x[2i+1] s_i,  y[2i+1] = x[2i+1] c_i + x[2i] s_i
// with s negated for the inverse rotation (the backward). The Half loop reads four contiguous rows and
// vectorises at the machine's width; the Interleaved one reads pairs.
#include <cstring>

#include "ops/cpu/backend.h"
#include "ops/cpu/loop.h"
#include "ops/cpu/simd.h"

namespace saccade::cpu {

void CpuBackend::rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out,
                                  bool interleaved, bool inverse) {
  const int64_t N = x.size(0), T = x.size(1), D = x.size(2), half = cos.size(1), R = 2 * half;
  dispatch_floating(x.dtype(), "rotary_embedding", [&]<class T_>() {
    if constexpr (std::is_same_v<T_, float> || std::is_same_v<T_, double>) {
      const T_* px = x.data<T_>();
      const T_* pc = cos.data<T_>();
      const T_* ps = sin.data<T_>();
      T_* py = out.data<T_>();
      const T_ sign = inverse ? T_(-1) : T_(1);
      parallel_rows(N * T, D, [&](int64_t row) {
        with_isa([=, t = row % T, xr = px + row * D, yr = py + row * D] {
          const T_* __restrict c = pc + t * half;
          const T_* __restrict s = ps + t * half;
          const T_* __restrict xx = xr;
          T_* __restrict y = yr;
          if (interleaved) {
            for (int64_t i = 0; i < half; ++i) {
              const T_ a = xx[2 * i], b = xx[2 * i + 1], si = sign * s[i];
              y[2 * i] = a * c[i] - b * si;
              y[2 * i + 1] = b * c[i] + a * si;
            }
          } else {
#pragma omp simd
            for (int64_t i = 0; i < half; ++i) {
              const T_ a = xx[i], b = xx[i + half], si = sign * s[i];
              y[i] = a * c[i] - b * si;
              y[i + half] = b * c[i] + a * si;
            }
          }
          if (R < D) std::memcpy(y + R, xx + R, static_cast<size_t>(D - R) * sizeof(T_));
        });
      });
    }
  });
}

}  // namespace saccade::cpu
