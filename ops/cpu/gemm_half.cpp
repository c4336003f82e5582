// The 16-bit CPU GEMM, widening to float32 (see gemm_half.h).
#include "ops/cpu/gemm_half.h"

#include <cblas.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "ops/cpu/bf16_lanes.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/simd.h"

namespace saccade::cpu {

namespace {
constexpr int64_t kRowBlock =
    64;  // rows of op(a) widened at a time: the float32 copies stay in L2 for k ~ 1k

// y (R) = the R bfloat16 rows of w (leading dimension ldw) · x (k) float32: each weight widened in a register
// on its way to the product (a bfloat16 is the top half of a float32: bf16_widen shifts it left by 16 bits),
// so w streams from memory once and nothing is written back. L float32 sums per row, in vector lanes (the
// inner loop over l is what GCC vectorises; a `#pragma omp simd reduction` over the four rows' sums was left
// scalar), added up at the end, then the k tail.
template <int R>
void dot_rows(int64_t k, const float* x, const bfloat16* w, int64_t ldw, float* y) {
  constexpr int L = 16;
  float acc[R][L] = {};
  int64_t p = 0;
  for (; p + L <= k; p += L)
    for (int r = 0; r < R; ++r)
      for (int l = 0; l < L; ++l) acc[r][l] += x[p + l] * bf16_widen(w[r * ldw + p + l].bits);
  for (int r = 0; r < R; ++r) {
    float s = 0;
    for (int l = 0; l < L; ++l) s += acc[r][l];
    for (int64_t q = p; q < k; ++q) s += x[q] * bf16_widen(w[r * ldw + q].bits);
    y[r] = s;
  }
}

// y (n) = w (n, k) · x (k) for bfloat16 rows of w and a float32 x, four rows at a time (dot_rows), compiled
// by with_isa for AVX2 and AVX-512. For CPUs without VDPBF16PS (gemv_bf16); the readable twin is
// gemv_half_reference (widen a row into a buffer, then sdot), tested against it.
void gemv_widened_rows(int64_t n, int64_t k, const float* x, const bfloat16* w, int64_t ldw, float* y) {
  with_isa([=] {
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) dot_rows<4>(k, x, w + j * ldw, ldw, y + j);
    for (; j < n; ++j) dot_rows<1>(k, x, w + j * ldw, ldw, y + j);
  });
}

}  // namespace

template <class T>
void gemm_half(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
               const T* b, int64_t ldb, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, bfloat16>)
    gemm_bf16(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  else
    gemm_half_reference(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
}

template <class T>
void gemm_half_reference(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                         const T* b, int64_t ldb, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  // op(b) as a row-major (k, n) float32 matrix
  std::vector<float> bf(static_cast<size_t>(k * n));
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) bf[p * n + j] = trans_b ? b[j * ldb + p] : b[p * ldb + j];
  std::vector<float> af(static_cast<size_t>(std::min(m, kRowBlock) * k)),
      cf(static_cast<size_t>(std::min(m, kRowBlock) * n));
  for (int64_t i0 = 0; i0 < m; i0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, m - i0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t p = 0; p < k; ++p) af[i * k + p] = trans_a ? a[p * lda + i0 + i] : a[(i0 + i) * lda + p];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(n),
                static_cast<int>(k), 1.0f, af.data(), static_cast<int>(std::max<int64_t>(k, 1)), bf.data(),
                static_cast<int>(n), 0.0f, cf.data(), static_cast<int>(n));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j) c[(i0 + i) * ldc + j] = static_cast<T>(cf[i * n + j]);
  }
}

template <class T>
void gemv_half(bool trans_b, int64_t n, int64_t k, const T* a, int64_t inc_a, const T* b, int64_t ldb, T* c) {
  if constexpr (std::is_same_v<T, bfloat16>) {  // VDPBF16PS reads x as contiguous bf16
    if (!trans_b) return gemv_half_reference(trans_b, n, k, a, inc_a, b, ldb, c);
    constexpr int64_t kBlock = 64;  // outputs summed in float32 before their rounding
    float y[kBlock];
    thread_local std::vector<bfloat16> gathered;
    const bfloat16* x = a;
    if (inc_a != 1) {
      gathered.resize(static_cast<size_t>(k));
      for (int64_t i = 0; i < k; ++i) gathered[static_cast<size_t>(i)] = a[i * inc_a];
      x = gathered.data();
    }
    bool done = true;
    for (int64_t j0 = 0; j0 < n && done; j0 += kBlock) {
      const int64_t rows = std::min(kBlock, n - j0);
      done = gemv_bf16(rows, k, x, b + j0 * ldb, ldb, y);
      if (done) round_rows(y, rows, &c[j0].bits, rows, 1, rows);
    }
    if (done) return;
    // no VDPBF16PS: x widened once, the rows of b widened in registers
    thread_local std::vector<float> xf;
    xf.resize(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) xf[static_cast<size_t>(i)] = bf16_widen(a[i * inc_a].bits);
    for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
      const int64_t rows = std::min(kBlock, n - j0);
      gemv_widened_rows(rows, k, xf.data(), b + j0 * ldb, ldb, y);
      round_rows(y, rows, &c[j0].bits, rows, 1, rows);
    }
    return;
  }
  // float16: the readable loop (a fused loop that widened 4 rows in 16 float lanes each decoded f16 more
  // slowly: bench/RESULTS.md, "the bf16 gemv")
  gemv_half_reference(trans_b, n, k, a, inc_a, b, ldb, c);
}

template <class T>
void gemv_half_reference(bool trans_b, int64_t n, int64_t k, const T* a, int64_t inc_a, const T* b,
                         int64_t ldb, T* c) {
  std::vector<float> x(static_cast<size_t>(k)), w(static_cast<size_t>(trans_b ? k : n));
  for (int64_t i = 0; i < k; ++i) x[static_cast<size_t>(i)] = static_cast<float>(a[i * inc_a]);
  const float* px = x.data();
  float* pw = w.data();
  // a row of b widened into pw (bf16_lanes.h's branch-free lane_load: a plain loop the vectoriser takes),
  // then float32 BLAS on it
  auto widen_row = [&](const T* row, int64_t len) {
    with_isa([=] {
#pragma omp simd
      for (int64_t i = 0; i < len; ++i) pw[i] = lane_load(row[i]);
    });
  };
  if (trans_b) {  // b (n, k): one dot product per output
    for (int64_t j = 0; j < n; ++j) {
      widen_row(b + j * ldb, k);
      c[j] = T(cblas_sdot(static_cast<int>(k), px, 1, pw, 1));
    }
    return;
  }
  std::vector<float> y(static_cast<size_t>(n), 0.0f);  // b (k, n): axpy of each row into float32 sums
  for (int64_t i = 0; i < k; ++i) {
    widen_row(b + i * ldb, n);
    cblas_saxpy(static_cast<int>(n), px[i], pw, 1, y.data(), 1);
  }
  for (int64_t j = 0; j < n; ++j) c[j] = T(y[static_cast<size_t>(j)]);
}

template void gemm_half(bool, bool, int64_t, int64_t, int64_t, const bfloat16*, int64_t, const bfloat16*,
                        int64_t, bfloat16*, int64_t);
template void gemm_half(bool, bool, int64_t, int64_t, int64_t, const float16*, int64_t, const float16*,
                        int64_t, float16*, int64_t);
template void gemm_half_reference(bool, bool, int64_t, int64_t, int64_t, const bfloat16*, int64_t,
                                  const bfloat16*, int64_t, bfloat16*, int64_t);
template void gemm_half_reference(bool, bool, int64_t, int64_t, int64_t, const float16*, int64_t,
                                  const float16*, int64_t, float16*, int64_t);

template void gemv_half(bool, int64_t, int64_t, const bfloat16*, int64_t, const bfloat16*, int64_t,
                        bfloat16*);
template void gemv_half(bool, int64_t, int64_t, const float16*, int64_t, const float16*, int64_t, float16*);
template void gemv_half_reference(bool, int64_t, int64_t, const bfloat16*, int64_t, const bfloat16*, int64_t,
                                  bfloat16*);
template void gemv_half_reference(bool, int64_t, int64_t, const float16*, int64_t, const float16*, int64_t,
                                  float16*);

}  // namespace saccade::cpu
