// CPU random kernels over Philox: element i is made from block offset + i, so threads need no coordination.
// The uniform draws (rand, dropout) run at the machine's vector width (simd.h): the ten Philox rounds of a
// scalar loop were the cost of dropout, in attention above all (bench/gpt_step's profile).
//
// Shapes: out (n) contiguous float32 or float64; element i uses Philox counter offset + i.
#include "ops/cpu/random.h"

#include <cmath>
#include <type_traits>

#include "ops/cpu/backend.h"
#include "ops/cpu/loop.h"
#include "ops/cpu/simd.h"
#include "ops/philox.h"

namespace saccade::cpu {

namespace {

// [0, 1) from one Philox word, as ops::rand draws it for T.
template <class T>
inline T uniform_of(uint32_t w) {
  if constexpr (std::is_same_v<T, float>)
    return uniform_float(w);
  else
    return uniform_double(w);
}

}  // namespace

template <class T>
void dropout_multipliers(uint64_t seed, uint64_t counter, int64_t n, T p, T scale, T* m) {
  // NOTE: the lambda copies its arguments: loads through captured references keep GCC from vectorising
  with_isa([=] {
    T* __restrict out = m;
#pragma omp simd
    for (int64_t c = 0; c < n; ++c)
      out[c] =
          uniform_of<T>(philox4x32_10(seed, counter + static_cast<uint64_t>(c)).w[0]) >= p ? scale : T(0);
  });
}
template void dropout_multipliers<float>(uint64_t, uint64_t, int64_t, float, float, float*);
template void dropout_multipliers<double>(uint64_t, uint64_t, int64_t, double, double, double*);

void CpuBackend::uniform(const Tensor& out, uint64_t seed, uint64_t offset, double low, double high) {
  dispatch_floating(out.dtype(), "uniform", [&]<class T>() {
    T* o = out.data<T>();
    parallel_for(0, out.numel(), kGrain / 16, [&](int64_t b, int64_t e) {
      with_isa([=] {
        T* __restrict dst = o;
#pragma omp simd
        for (int64_t i = b; i < e; ++i) {
          const double u = uniform_of<T>(philox4x32_10(seed, offset + static_cast<uint64_t>(i)).w[0]);
          dst[i] = static_cast<T>(low + (high - low) * u);
        }
      });
    });
  });
}

void CpuBackend::normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std) {
  dispatch_floating(out.dtype(), "normal", [&]<class T>() {
    T* o = out.data<T>();
    parallel_for(out.numel(), 16, [&](int64_t i) {
      Philox4 r = philox4x32_10(seed, offset + static_cast<uint64_t>(i));
      // Box-Muller: sqrt(-2 ln u1) cos(2 pi u2) ~ N(0, 1)
      double z =
          std::sqrt(-2.0 * std::log(uniform_open0(r.w[0]))) * std::cos(2.0 * M_PI * uniform_double(r.w[1]));
      o[i] = static_cast<T>(mean + std * z);
    });
  });
}

}  // namespace saccade::cpu
