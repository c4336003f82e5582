#pragma once
// Step 4 of the bf16 GEMM ladder (README.md): bf16 packs and VDPBF16PS. Shapes as naive.h.
// The packs stay bf16 (half packed.h's bytes) with each pair of consecutive p side by side in 32 bits: in b's
// panels (b[p][j], b[p+1][j]) for each of 32 columns, in a's panels (a[i][p], a[i][p+1]) for each of 12 rows.
// One `_mm512_dpbf16_ps(acc, a_pair × 16, b_pairs)` then does 32 multiply-adds (two per float lane): per pair
// of p, two loads of b, one broadcast per row and 24 instructions on a 12 × 32 tile held in 24 of the 32 zmm
// registers (won: half the bytes packed, two products per lane per instruction; README.md's table has the
// speed). VDPBF16PS flushes denormals to zero;
// otherwise each product is exact, as before. Needs a CPU with AVX512-BF16 (the caller checks
// cpu::cpu_has_avx512_bf16()) and m, n, k multiples of 12, 32 and 2. ../gemm_bf16.cpp is this step (its
// micro-kernel is dot_tile, below) with edges, transposes, alpha and beta, threads and the fallback; it is
// the one library file that includes this header.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/half.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define SACCADE_LADDER_MICROKERNEL 1

namespace saccade::ladder {

/// The micro-kernel (gemm_bf16.cpp's too): acc (12 rows × 2 zmm of 16 floats) = Σ over `pairs` pairs of k
/// of a's panel (12 pairs a step) times b's panel (32 pairs a step), two products per float lane.
[[gnu::target("avx512f,avx512bf16"), gnu::always_inline]] inline void dot_tile(int64_t pairs,
                                                                               const uint32_t* pa,
                                                                               const uint32_t* pb,
                                                                               __m512 (&acc)[12][2]) {
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; ++q, pa += 12, pb += 32) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(pb), b1 = (__m512bh)_mm512_loadu_si512(pb + 16);
#pragma GCC unroll 12
    for (int r = 0; r < 12; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(pa[r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
    }
  }
}

/// c = a b with VDPBF16PS (shapes as gemm_naive; m a multiple of 12, n of 32, k even).
[[gnu::target("avx512f,avx512bf16")]] inline void gemm_microkernel(const bfloat16* a, const bfloat16* b,
                                                                   float* c, int64_t m, int64_t n,
                                                                   int64_t k) {
  constexpr int64_t MR = 12, NR = 32, KC = 256;
  std::fill(c, c + m * n, 0.0f);
  std::vector<uint32_t> ap(m * KC / 2), bp(KC / 2 * n);
  for (int64_t p0 = 0; p0 < k; p0 += KC) {
    const int64_t pairs = std::min(KC, k - p0) / 2;
    for (int64_t j0 = 0; j0 < n; j0 += NR)
      for (int64_t q = 0; q < pairs; ++q)
        for (int64_t j = 0; j < NR; ++j)
          bp[j0 * pairs + q * NR + j] = b[(p0 + 2 * q) * n + j0 + j].bits |
                                        static_cast<uint32_t>(b[(p0 + 2 * q + 1) * n + j0 + j].bits) << 16;
    for (int64_t i0 = 0; i0 < m; i0 += MR)
      for (int64_t q = 0; q < pairs; ++q)
        for (int64_t r = 0; r < MR; ++r)
          std::memcpy(&ap[i0 * pairs + q * MR + r], &a[(i0 + r) * k + p0 + 2 * q], 4);
    for (int64_t j0 = 0; j0 < n; j0 += NR)
      for (int64_t i0 = 0; i0 < m; i0 += MR) {
        __m512 acc[MR][2];
        dot_tile(pairs, &ap[i0 * pairs], &bp[j0 * pairs], acc);
        for (int64_t r = 0; r < MR; ++r)
          for (int h = 0; h < 2; ++h) {
            float* cr = c + (i0 + r) * n + j0 + 16 * h;
            _mm512_storeu_ps(cr, _mm512_add_ps(_mm512_loadu_ps(cr), acc[r][h]));
          }
      }
  }
}

}  // namespace saccade::ladder
#endif
