#pragma once
// Step 3 of the bf16 GEMM ladder (README.md): packing and a register tile. Shapes as naive.h.
// For each block of KC k, b's rows are widened once into float panels of NR columns (panel-major: the NR
// values of one p side by side) and a's rows into panels of MR rows; then each MR × NR tile of c is summed
// over the block in a local array that the compiler keeps in vector registers, and added to c once per
// block (README.md's table has what it won). Each bf16 is widened once per block
// instead of once per product, the panels are read in order (the prefetcher's best case), and c is touched
// once per block instead of once per product. This is the structure of every fast GEMM (Goto & van de Geijn,
// TOMS 2008) and of gemm_bf16's path without AVX512-BF16. Sums: per block, then added to c, so not naive.h's
// order (within f32 rounding). Requires m % MR == 0 and n % NR == 0 (the library's kernel pads the edges
// instead).
#include <algorithm>
#include <vector>

#include "ops/cpu/gemm_ladder/naive.h"

namespace saccade::ladder {

/// c = a b, packed (shapes as gemm_naive; m a multiple of MR, n of NR).
template <int64_t MR = 8, int64_t NR = 32, int64_t KC = 256>
void gemm_packed(const bfloat16* a, const bfloat16* b, float* c, int64_t m, int64_t n, int64_t k) {
  std::fill(c, c + m * n, 0.0f);
  std::vector<float> ap(m * KC), bp(KC * n);
  for (int64_t p0 = 0; p0 < k; p0 += KC) {
    const int64_t kc = std::min(KC, k - p0);
    for (int64_t j0 = 0; j0 < n; j0 += NR)  // panel j0: kc rows of NR floats
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t j = 0; j < NR; ++j) bp[j0 * kc + p * NR + j] = float(b[(p0 + p) * n + j0 + j]);
    for (int64_t i0 = 0; i0 < m; i0 += MR)  // panel i0: kc columns of MR floats
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t r = 0; r < MR; ++r) ap[i0 * kc + p * MR + r] = float(a[(i0 + r) * k + p0 + p]);
    for (int64_t j0 = 0; j0 < n; j0 += NR)
      for (int64_t i0 = 0; i0 < m; i0 += MR) {
        float acc[MR][NR] = {};
        const float *pa = &ap[i0 * kc], *pb = &bp[j0 * kc];
        for (int64_t p = 0; p < kc; ++p, pa += MR, pb += NR)
          for (int64_t r = 0; r < MR; ++r)
            for (int64_t j = 0; j < NR; ++j) acc[r][j] += pa[r] * pb[j];
        for (int64_t r = 0; r < MR; ++r)
          for (int64_t j = 0; j < NR; ++j) c[(i0 + r) * n + j0 + j] += acc[r][j];
      }
  }
}

}  // namespace saccade::ladder
