#pragma once
// What the tests of one op's kernels share, so that each op's tests live in one file (test_softmax.cpp,
// test_linalg.cpp) beside the families' (test_half_kernels.cpp, test_isa_dispatch.cpp):
//  - the 16-bit twin bound. A 16-bit kernel (bfloat16, float16) is checked against its float32 twin run on
//    the 16-bit inputs widened to float32 (exact), so the only difference allowed is the rounding of the
//    result to 16 bits: half an ulp, 2^-9 relative for bfloat16 (8 significant bits) and 2^-12 for float16
//    (11 bits). check_close allows one ulp (2^-8, 2^-11 relative), leaving room for a float32 result that
//    itself differs in its last bits (another summation order), and, where a result can cancel (sums,
//    products, GEMMs), a bound relative to the sum of the magnitudes of the terms rather than to the result;
//  - the vector widths this machine runs (ops/cpu/simd.h), for checking a kernel at each of them.
#include <algorithm>
#include <cmath>
#include <vector>

#include "helpers.h"
#include "ops/cpu/simd.h"

namespace saccade::testing {

/// One ulp of a 16-bit dtype, relative: 2^-8 for bfloat16, 2^-11 for float16.
inline double ulp(DType t) { return t == DType::BFloat16 ? 0x1p-8 : 0x1p-11; }

/// A standard-normal float32 tensor of `shape` from generator `seed`, rounded to the 16-bit dtype t.
inline Tensor randn16(const Shape& shape, DType t, uint64_t seed) {
  Generator g(seed);
  return ops::randn(shape, DType::Float32, Device::cpu(), &g).to(t);
}
/// t as float32 (exact for a 16-bit t).
inline Tensor f32(const Tensor& t) { return t.to(DType::Float32); }

/// Requires |got - want| <= ulp(t) · (|want| + scale) elementwise, got of dtype t and want's shape (scale
/// undefined: 0); a NaN in want must be a NaN in got.
inline void check_close(const Tensor& got, const Tensor& want, DType t, const Tensor& scale = Tensor()) {
  REQUIRE(got.dtype() == t);
  REQUIRE(got.shape() == want.shape());
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  std::vector<double> s = scale.defined() ? scale.to_vector<double>() : std::vector<double>(w.size(), 0.0);
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) {
      REQUIRE(std::isnan(g[i]));
      continue;
    }
    INFO("element " << i << ": got " << g[i] << ", float32 twin " << w[i]);
    REQUIRE(std::abs(g[i] - w[i]) <= ulp(t) * (std::abs(w[i]) + s[i]) + 1e-30);
  }
}

/// The vector widths this machine runs, narrowest first.
inline std::vector<cpu::Isa> widths() {
  std::vector<cpu::Isa> w;
  for (cpu::Isa i : {cpu::Isa::Baseline, cpu::Isa::Avx2, cpu::Isa::Avx512})
    if (i <= cpu::cpu_isa()) w.push_back(i);
  return w;
}

/// The largest |got - want| / (|want| + 1) over two equal-length vectors.
inline double max_err(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double e = 0;
  for (size_t i = 0; i < got.size(); ++i)
    e = std::max(e, std::abs(got[i] - want[i]) / (std::abs(want[i]) + 1));
  return e;
}

}  // namespace saccade::testing
