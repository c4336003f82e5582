// CPU GEMM through OpenBLAS. a: (B, M, K), b: (B, K, N), out: (B, M, N) contiguous.
// a and b are passed with their strides: row-major matrices as CblasNoTrans with ld = stride(-2),
// column-major ones (transposed views such as w.t()) as CblasTrans with ld = stride(-1); ops/linalg.cpp
// copied any other.
//
// Threads. Debian's OpenBLAS is the pthread build, which runs a GEMM on one thread when M*N*K is at most
// 65536 * GEMM_MULTITHREAD_THRESHOLD (= 4) = 64^3, and on its own thread pool above that. So:
// - a batch of small matrices (M*N*K <= 64^3) is split across OpenMP threads, one single-threaded GEMM each:
//   no oversubscription, and OpenBLAS never enters its pool from inside an OpenMP region (which it warns
//   about and can hang on);
// - larger matrices are multiplied one after another, each threaded by OpenBLAS.
#include <cblas.h>
#include "ops/cpu/backend.h"
#include "ops/cpu/loop.h"

namespace saccade::cpu {

namespace {

constexpr int64_t kBlasSingleThreadMNK = 64 * 64 * 64;

void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const float* a,
          int64_t lda, const float* b, int64_t ldb, float* c) {
  cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f, c, static_cast<int>(n));
}

void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const double* a,
          int64_t lda, const double* b, int64_t ldb, double* c) {
  cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), 0.0, c, static_cast<int>(n));
}

}  // namespace

void CpuBackend::bmm(const Tensor& a, const Tensor& b, const Tensor& out) {
  const MatrixLayout la = matrix_layout(a), lb = matrix_layout(b);
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  const int64_t sa = a.size(0) == 1 ? 0 : a.stride(0), sb = b.size(0) == 1 ? 0 : b.stride(0);
  const CBLAS_TRANSPOSE ta = la.trans ? CblasTrans : CblasNoTrans, tb = lb.trans ? CblasTrans : CblasNoTrans;
  dispatch_floating(a.dtype(), "bmm", [&]<class T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = out.data<T>();
    // One b for the whole batch and a's rows evenly spaced across batches: a single (B*M, K) @ (K, N) GEMM.
    if (batch > 1 && sb == 0 && !la.trans && sa == m * la.ld) {
      gemm(ta, tb, batch * m, n, k, pa, la.ld, pb, lb.ld, pc);
      return;
    }
    auto one = [&](int64_t i) {
      gemm(ta, tb, m, n, k, pa + i * sa, la.ld, pb + i * sb, lb.ld, pc + i * m * n);
    };
    if (m * n * k <= kBlasSingleThreadMNK) {
      parallel_for(batch, m * n * k, one);  // serial below kGrain multiply-adds in all
    } else {
      for (int64_t i = 0; i < batch; ++i) one(i);
    }
  });
}

}  // namespace saccade::cpu
