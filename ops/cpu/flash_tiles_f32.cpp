// AVX-512F tile products of the CPU flash attention, float32 (flash_tiles_f32.h says which and why).
//
//   op(A): (m, k)   B: (k, n) rows of stride ldb   C: (m, n) rows of stride ldc
//
// C is built 64 columns at a time (the last chunk 16, 32, 48 or 64 wide, its last vector masked), 4 rows at
// a time: acc[r][c] += op(A)[i0 + r, p] · B[p, j0 + 16c .. + 16] for p < k, then C = alpha acc + beta C.
// Rows past m repeat row m - 1 (computed, not stored), so every row block runs the same unrolled code.
#include "ops/cpu/flash_tiles_f32.h"

#include <algorithm>

#include "ops/cpu/simd.h"
#include "core/error.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define SACCADE_FLASH_F32 1
#endif

namespace saccade::cpu {

bool tile_gemm_f32_available() {
#if SACCADE_FLASH_F32
  return kernel_isa() == Isa::Avx512;
#else
  return false;
#endif
}

#if SACCADE_FLASH_F32
namespace {

constexpr int kRows = 4;  // rows of C a register tile

// Rows [i0, i0 + 4) of C over columns [0, 16 NV) of the pointers given (b, c at the chunk's first column);
// `last`: the lanes of the last vector inside C.
template <bool TA, int NV>
[[gnu::target("avx512f,fma")]] void rows4(int64_t i0, int64_t m, int64_t k, float alpha, const float* a,
                                          int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                                          int64_t ldc, __mmask16 last) {
  const float* ar[kRows];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = std::min<int64_t>(i0 + r, m - 1);
    ar[r] = TA ? a + i : a + i * lda;
  }
  __m512 acc[kRows][NV];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV - 1; ++v) bv[v] = _mm512_loadu_ps(bp + 16 * v);
    bv[NV - 1] = _mm512_maskz_loadu_ps(last, bp + 16 * (NV - 1));
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const __m512 av = _mm512_set1_ps(TA ? ar[r][p * lda] : ar[r][p]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  // (unrolled with constant indices, the row test inside: a loop GCC keeps rolled addresses acc in memory,
  // and then stores every accumulator on each step of the p loop)
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
    if (i0 + r >= m) break;
    float* cr = c + (i0 + r) * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __mmask16 lanes = v == NV - 1 ? last : __mmask16(0xFFFF);
      __m512 x = _mm512_mul_ps(va, acc[r][v]);
      // NOTE: beta = 0 ignores C (it may be uninitialised), as BLAS does
      if (beta != 0.0f) x = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(lanes, cr + 16 * v), x);
      _mm512_mask_storeu_ps(cr + 16 * v, lanes, x);
    }
  }
}

using RowsFn = void (*)(int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float,
                        float*, int64_t, __mmask16);

// rows4<ta, nv> for nv in 1..4
RowsFn rows_fn(bool ta, int64_t nv) {
  static constexpr RowsFn fns[2][4] = {{rows4<false, 1>, rows4<false, 2>, rows4<false, 3>, rows4<false, 4>},
                                       {rows4<true, 1>, rows4<true, 2>, rows4<true, 3>, rows4<true, 4>}};
  return fns[ta ? 1 : 0][nv - 1];
}

}  // namespace

void tile_gemm_f32(bool ta, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                   const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (!tile_gemm_f32_available()) throw Error("tile_gemm_f32: this CPU (or an IsaGuard) has no AVX-512");
  if (m <= 0 || n <= 0) return;
  for (int64_t j0 = 0; j0 < n; j0 += 64) {
    const int64_t w = std::min<int64_t>(64, n - j0), nv = (w + 15) / 16, tail = w - 16 * (nv - 1);
    const auto last = static_cast<__mmask16>(tail == 16 ? 0xFFFFu : (1u << tail) - 1);
    const RowsFn rows = rows_fn(ta, nv);
    for (int64_t i0 = 0; i0 < m; i0 += kRows)
      rows(i0, m, k, alpha, a, lda, b + j0, ldb, beta, c + j0, ldc, last);
  }
}
#else
void tile_gemm_f32(bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                   float, float*, int64_t) {
  throw Error("tile_gemm_f32: built without AVX-512 intrinsics");
}
#endif

const float* TransposedTiles::get(const float* b, int64_t ldb, int64_t n, int64_t k) {
  for (const Entry& e : entries_)
    if (e.b == b && e.ldb == ldb && e.n == n && e.k == k) return arena_.data() + e.offset;
  const int64_t ldt = ld(n), size = k * ldt;
  if (used_ + size > std::max(budget_, size)) forget();
  if (static_cast<int64_t>(arena_.size()) < used_ + size) arena_.resize(static_cast<size_t>(used_ + size));
  float* bt = arena_.data() + used_;
  // bt[p, j] = b[j, p]
  for (int64_t j = 0; j < n; ++j)
    for (int64_t p = 0; p < k; ++p) bt[p * ldt + j] = b[j * ldb + p];
  entries_.push_back({b, ldb, n, k, used_});
  used_ += size;
  return bt;
}

}  // namespace saccade::cpu
