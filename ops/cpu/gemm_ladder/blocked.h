#pragma once
// Step 2 of the bf16 GEMM ladder (README.md): loop order and cache blocks. Shapes as naive.h.
// The p loop moves outside the j loop, so the innermost loop runs along a row of b and a row of c
// (contiguous: the compiler vectorises it), and b is taken in blocks of KC rows × NC columns (256 × 512
// bf16, 256 KB: it stays in L2) over which every row of a passes before the next block.
// Each c[i][j] still sums its products in the order of p, so the result equals naive.h's bit for bit.
// Won: the j loop vectorised and b read from L2 (README.md's table has the speed, bench/matmul --ladder).
// Left: each bf16 is widened every time it is used, and c is loaded and stored once per product.
#include <algorithm>

#include "ops/cpu/gemm_ladder/naive.h"

namespace saccade::ladder {

/// c = a b, blocked (shapes as gemm_naive).
template <int64_t KC = 256, int64_t NC = 512>
void gemm_blocked(const bfloat16* a, const bfloat16* b, float* c, int64_t m, int64_t n, int64_t k) {
  std::fill(c, c + m * n, 0.0f);
  for (int64_t j0 = 0; j0 < n; j0 += NC)
    for (int64_t p0 = 0; p0 < k; p0 += KC) {
      const int64_t j1 = std::min(n, j0 + NC), p1 = std::min(k, p0 + KC);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t p = p0; p < p1; ++p) {
          const float aip = float(a[i * k + p]);
          for (int64_t j = j0; j < j1; ++j) c[i * n + j] += aip * float(b[p * n + j]);
        }
    }
}

}  // namespace saccade::ladder
