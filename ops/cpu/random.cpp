// CPU random kernels over Philox: element i is made from block offset + i, so threads need no coordination.
//
// Shapes: out (n) contiguous float32 or float64; element i uses Philox counter offset + i.
#include <cmath>

#include "ops/cpu/backend.h"
#include "ops/cpu/loop.h"
#include "ops/philox.h"

namespace saccade::cpu {

void CpuBackend::uniform(const Tensor& out, uint64_t seed, uint64_t offset, double low, double high) {
  dispatch_floating(out.dtype(), "uniform", [&]<class T>() {
    T* o = out.data<T>();
    parallel_for(out.numel(), 16, [&](int64_t i) {
      uint32_t w = philox4x32_10(seed, offset + static_cast<uint64_t>(i)).w[0];
      double u = std::is_same_v<T, float> ? uniform_float(w) : uniform_double(w);
      o[i] = static_cast<T>(low + (high - low) * u);
    });
  });
}

void CpuBackend::normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std) {
  dispatch_floating(out.dtype(), "normal", [&]<class T>() {
    T* o = out.data<T>();
    parallel_for(out.numel(), 16, [&](int64_t i) {
      Philox4 r = philox4x32_10(seed, offset + static_cast<uint64_t>(i));
      // Box-Muller: sqrt(-2 ln u1) cos(2 pi u2) ~ N(0, 1)
      double z = std::sqrt(-2.0 * std::log(uniform_open0(r.w[0]))) * std::cos(2.0 * M_PI * uniform_double(r.w[1]));
      o[i] = static_cast<T>(mean + std * z);
    });
  });
}

}  // namespace saccade::cpu
