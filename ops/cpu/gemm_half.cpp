// The 16-bit CPU GEMM, widening to float32 (see gemm_half.h).
#include "ops/cpu/gemm_half.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

namespace saccade::cpu {

namespace {
constexpr int64_t kRowBlock =
    64;  // rows of op(a) widened at a time: the float32 copies stay in L2 for k ~ 1k
}  // namespace

template <class T>
void gemm_half(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
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

template void gemm_half(bool, bool, int64_t, int64_t, int64_t, const bfloat16*, int64_t, const bfloat16*,
                        int64_t, bfloat16*, int64_t);
template void gemm_half(bool, bool, int64_t, int64_t, int64_t, const float16*, int64_t, const float16*,
                        int64_t, float16*, int64_t);

}  // namespace saccade::cpu
