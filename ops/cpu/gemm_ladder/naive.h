#pragma once
// Step 1 of the bf16 GEMM ladder (README.md): the definition.
//   a: (m, k)  b: (k, n)  bfloat16 (ops/half.h), row-major;  c: (m, n) float32, row-major.
// c[i][j] = Σ_p a[i][p] · b[p][j]: each bf16 widened to float (exact: a bf16 is a float's high 16 bits), each
// product exact in float (8-bit significands), summed in float in the order of p.
// Won: nothing, it is the reference. b is read down a column (a stride of n), one cache line per product.
#include <cstdint>

#include "ops/half.h"

namespace saccade::ladder {

/// c = a b, the triple loop (shapes above).
inline void gemm_naive(const bfloat16* a, const bfloat16* b, float* c, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float s = 0;
      for (int64_t p = 0; p < k; ++p) s += float(a[i * k + p]) * float(b[p * n + j]);
      c[i * n + j] = s;
    }
}

}  // namespace saccade::ladder
