// VDPBF16PS tile products of the CPU flash attention (flash_tiles_bf16.h says which and why).
//
//   a: (nr, d) rows, b: (nc, d) rows, bfloat16, row strides lda, ldb; s: (nr, nc) float32, row stride lds
//
// b is packed once per call as pairs: word (q, j) = the 32 bits (b[j, 2q], b[j, 2q + 1]), keys side by side,
// the layout VDPBF16PS reads; a row's pair q is broadcast straight from a. A register tile of 4 rows × 64
// keys (16 zmm) takes 16 VDPBF16PS per pair of d.
#include "ops/cpu/flash_tiles_bf16.h"

#include <algorithm>
#include <cstring>

#include "ops/cpu/simd.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define SACCADE_FLASH_BF16 1
#endif

namespace saccade::cpu {

bool dot_rows_bf16_available(int64_t d) {
#if SACCADE_FLASH_BF16
  return d % 2 == 0 && kernel_avx512_bf16();
#else
  (void)d;
  return false;
#endif
}

#if SACCADE_FLASH_BF16
namespace {

inline uint32_t pair_at(const uint16_t* row, int64_t q) {
  uint32_t w;
  std::memcpy(&w, row + 2 * q, 4);
  return w;
}

// Rows [i0, i0 + 4) of s (rows past nr repeat row nr - 1 and are not stored), NCH chunks of 16 keys.
template <int NCH>
[[gnu::target("avx512f,avx512bf16,avx512bw,avx512vl")]] inline void rows4(int64_t i0, int64_t nr, int64_t nc,
                                                                          int64_t pairs, float scale,
                                                                          const uint16_t* a, int64_t lda,
                                                                          const uint32_t* bp, float* s,
                                                                          int64_t lds) {
  const uint16_t* row[4];
  for (int r = 0; r < 4; ++r) row[r] = a + std::min<int64_t>(i0 + r, nr - 1) * lda;
  __m512 acc[4][NCH];
  for (auto& rr : acc)
    for (auto& v : rr) v = _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; ++q) {
    __m512bh bv[NCH];
    for (int c = 0; c < NCH; ++c) bv[c] = (__m512bh)_mm512_loadu_si512(bp + q * 64 + 16 * c);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair_at(row[r], q)));
      for (int c = 0; c < NCH; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], ar, bv[c]);
    }
  }
  const __m512 vs = _mm512_set1_ps(scale);
  for (int r = 0; r < 4 && i0 + r < nr; ++r)
    for (int c = 0; c < NCH; ++c) {
      const int64_t left = nc - 16 * c;
      const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
      _mm512_mask_storeu_ps(s + (i0 + r) * lds + 16 * c, m, _mm512_mul_ps(vs, acc[r][c]));
    }
}

}  // namespace

void dot_rows_bf16(int64_t nr, int64_t nc, int64_t d, float scale, const bfloat16* a16, int64_t lda,
                   const bfloat16* b16, int64_t ldb, float* s, int64_t lds, uint32_t* bp) {
  const uint16_t* a = &a16->bits;
  const uint16_t* b = &b16->bits;
  if (nr <= 0 || nc <= 0) return;
  const int64_t pairs = d / 2, nch = (nc + 15) / 16;
  // bp[q · 64 + j] = pair q of key j (zero past nc)
  for (int64_t q = 0; q < pairs; ++q)
    for (int64_t j = 0; j < 16 * nch; ++j) bp[q * 64 + j] = j < nc ? pair_at(b + j * ldb, q) : 0u;
  for (int64_t i0 = 0; i0 < nr; i0 += 4) {
    switch (nch) {
      case 1:
        rows4<1>(i0, nr, nc, pairs, scale, a, lda, bp, s, lds);
        break;
      case 2:
        rows4<2>(i0, nr, nc, pairs, scale, a, lda, bp, s, lds);
        break;
      case 3:
        rows4<3>(i0, nr, nc, pairs, scale, a, lda, bp, s, lds);
        break;
      default:
        rows4<4>(i0, nr, nc, pairs, scale, a, lda, bp, s, lds);
        break;
    }
  }
}
#else
void dot_rows_bf16(int64_t, int64_t, int64_t, float, const bfloat16*, int64_t, const bfloat16*, int64_t,
                   float*, int64_t, uint32_t*) {
  throw Error("dot_rows_bf16: built without AVX512-BF16 intrinsics");
}
#endif

}  // namespace saccade::cpu
