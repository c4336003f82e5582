// CPU GEMM through OpenBLAS. a: (B, M, K), b: (B, K, N), out: (B, M, N) contiguous. bfloat16 / float16
// go through gemm_half (gemm_half.h: float32 inside); float16 is split across threads as below, bfloat16
// (our own GEMM, gemm_bf16.h) threads itself, one call a matrix.
// a and b are passed with their strides: row-major matrices as CblasNoTrans with ld = stride(-2),
// column-major ones (transposed views such as w.t()) as CblasTrans with ld = stride(-1); ops/linalg.cpp
// copied any other.
//
// Threads. OpenBLAS is kept at one thread (ops/cpu/thread_pool.cpp): its pthread pool spins after every
// threaded call, which on a shared machine takes cores from our own threads. Instead the B*M rows of the
// output are split across saccade's pool, each piece one single-threaded GEMM: whole matrices of a batch, or
// slabs of rows of one large matrix (each slab re-packs b, a cost of 1/rows of the slab's work). A piece is
// at least kGemmGrain multiply-adds (OpenBLAS's own threshold for going parallel), so small products stay on
// one thread. A single product with fewer rows than columns (an RNN step: (128, 256) @ (256, 768), and
// g @ W in its backward) is split by columns instead: each piece then packs its own share of b, not all of
// it, and the smaller a is packed twice.
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "ops/cpu/backend.h"
#include "ops/cpu/blas_check.h"
#include "ops/cpu/gemm_half.h"
#include "ops/cpu/thread_pool.h"

namespace saccade::cpu {

namespace {

constexpr int64_t kGemmGrain = 4 * 64 * 64 * 64;
// A one-row product (batch-1 decoding) reads each weight once and does one multiply-add with it: memory
// bound, so a second thread pays off for much smaller products than a GEMM's (a Llama's 576 x 576 q_proj,
// 0.3 M multiply-adds, ran on one thread under kGemmGrain: bench/RESULTS.md, "where a decoded token's time
// goes").
constexpr int64_t kGemvGrain = 2 * 64 * 1024;

void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const float* a,
          int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f, c, static_cast<int>(ldc));
}

void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const double* a,
          int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), 0.0, c, static_cast<int>(ldc));
}

// One output row: c (1, n) = op(a) row (k, stride inc_a) @ op(b) (k, n), as a matrix-vector product. sgemm
// with m = 1 would pack (copy) all of op(b) per call, which doubles the bytes a batch-1 decoding step
// reads; gemv streams b once. b not transposed: c = bᵀ a over b's n columns; transposed (stored (n, k)): c =
// b a.
void gemv(bool trans_b, int64_t n, int64_t k, const float* a, int64_t inc_a, const float* b, int64_t ldb,
          float* c) {
  if (trans_b)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(n), static_cast<int>(k), 1.0f, b,
                static_cast<int>(ldb), a, static_cast<int>(inc_a), 0.0f, c, 1);
  else
    cblas_sgemv(CblasRowMajor, CblasTrans, static_cast<int>(k), static_cast<int>(n), 1.0f, b,
                static_cast<int>(ldb), a, static_cast<int>(inc_a), 0.0f, c, 1);
}

void gemv(bool trans_b, int64_t n, int64_t k, const double* a, int64_t inc_a, const double* b, int64_t ldb,
          double* c) {
  if (trans_b)
    cblas_dgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(n), static_cast<int>(k), 1.0, b,
                static_cast<int>(ldb), a, static_cast<int>(inc_a), 0.0, c, 1);
  else
    cblas_dgemv(CblasRowMajor, CblasTrans, static_cast<int>(k), static_cast<int>(n), 1.0, b,
                static_cast<int>(ldb), a, static_cast<int>(inc_a), 0.0, c, 1);
}

// bfloat16 and float16: float32 inside, one rounding per output (gemm_half.h)
template <class T>
requires(std::is_same_v<T, bfloat16> ||
         std::is_same_v<T, float16>) void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n,
                                               int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
                                               T* c, int64_t ldc) {
  gemm_half(ta == CblasTrans, tb == CblasTrans, m, n, k, a, lda, b, ldb, c, ldc);
}

}  // namespace

void CpuBackend::bmm(const Tensor& a, const Tensor& b, const Tensor& out) {
  blas_first_use();
  const MatrixLayout la = matrix_layout(a), lb = matrix_layout(b);
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  const int64_t sa = a.size(0) == 1 ? 0 : a.stride(0), sb = b.size(0) == 1 ? 0 : b.stride(0);
  const CBLAS_TRANSPOSE ta = la.trans ? CblasTrans : CblasNoTrans, tb = lb.trans ? CblasTrans : CblasNoTrans;
  dispatch_floating_and_half(a.dtype(), "bmm", [&]<class T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = out.data<T>();
    // One b for the whole batch and a's rows evenly spaced across batches: a single (B*M, K) @ (K, N) GEMM.
    const bool one_gemm = batch > 1 && sb == 0 && !la.trans && sa == m * la.ld;
    const int64_t mats = one_gemm ? 1 : batch, rows = one_gemm ? batch * m : m;
    const int64_t a_row = la.trans ? 1 : la.ld;  // element step between rows of op(a)
    // Rows [begin, end) of the (mats * rows) stacked outputs, one GEMM per matrix they touch.
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end;) {
        const int64_t i = r / rows, r0 = r % rows, r1 = std::min(rows, r0 + (end - r));
        gemm(ta, tb, r1 - r0, n, k, pa + i * sa + r0 * a_row, la.ld, pb + i * sb, lb.ld,
             pc + (i * rows + r0) * n, n);
        r += r1 - r0;
      }
    };
    if (mats == 1 && rows == 1) {  // one output row (batch-1 decoding): gemv over column blocks
      constexpr int64_t kColBlock = 64;
      const int64_t blocks = (n + kColBlock - 1) / kColBlock,
                    block_cost = std::max<int64_t>(1, kColBlock * k);
      const int64_t inc_a = la.trans ? la.ld : 1;
      parallel_for(0, blocks, (kGemvGrain + block_cost - 1) / block_cost, [&](int64_t b0, int64_t b1) {
        const int64_t j0 = b0 * kColBlock, j1 = std::min(n, b1 * kColBlock);
        const T* pb0 = pb + (lb.trans ? j0 * lb.ld : j0);
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
          gemv(lb.trans, j1 - j0, k, pa, inc_a, pb0, lb.ld, pc + j0);
        else
          gemv_half(lb.trans, j1 - j0, k, pa, inc_a, pb0, lb.ld, pc + j0);
      });
      return;
    }
    if constexpr (std::is_same_v<T, bfloat16>) {
      // Our bf16 GEMM threads itself (gemm_bf16.cpp: B packed once by all threads, then row blocks × column
      // groups): one call a matrix. Pieces of rows, as OpenBLAS's sgemm gets below, would each repack all of
      // op(B) into bf16 pairs on one thread: at the GPT's dW shape (256 × 4096) @ (4096 × 128) that made 2
      // threads slower than 1.
      run(0, mats * rows);
      return;
    }
    if (mats == 1 && rows < n) {  // column blocks of kColBlock (a multiple of every vector width)
      constexpr int64_t kColBlock = 64;
      const int64_t blocks = (n + kColBlock - 1) / kColBlock,
                    block_cost = std::max<int64_t>(1, kColBlock * rows * k);
      parallel_for(0, blocks, (kGemmGrain + block_cost - 1) / block_cost, [&](int64_t b0, int64_t b1) {
        const int64_t j0 = b0 * kColBlock, j1 = std::min(n, b1 * kColBlock);
        gemm(ta, tb, rows, j1 - j0, k, pa, la.ld, pb + (lb.trans ? j0 * lb.ld : j0), lb.ld, pc + j0, n);
      });
      return;
    }
    const int64_t row_cost = std::max<int64_t>(1, n * k);
    parallel_for(0, mats * rows, (kGemmGrain + row_cost - 1) / row_cost, run);
  });
}

}  // namespace saccade::cpu
