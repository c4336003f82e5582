#pragma once
// saccade's own bfloat16 GEMM on the CPU, accumulating in float32 (Debian's OpenBLAS 0.3.21 declares
// cblas_sbgemm but does not export it). The readable steps that lead to it are in gemm_ladder/ (README).
//
//   C (m, n) = alpha * op(A) (m, k) * op(B) (k, n) + beta * C
//
// A and B are bfloat16 (ops/half.h), C is float32 (or bfloat16, rounded once at the end); all row-major with
// the leading dimensions given, and op(X) = X, or Xᵀ when trans_x (X then stored (k, m) or (n, k)): the
// calling convention of cblas_sgemm with CblasRowMajor, as ops/cpu/linalg.cpp takes MatrixLayout
// (ops/backend.h).
//
// How (Goto and van de Geijn, "Anatomy of High-Performance Matrix Multiplication", TOMS 2008; BLIS's loop
// order): op(B) is packed once into column panels of kNR, with each pair of consecutive k of a column side
// by side in 32 bits (the layout VDPBF16PS reads); op(A) is packed a block of kMC rows × kKC k at a time
// (it stays in L2) into row panels of kMR, the pairs likewise, except where VDPBF16PS can broadcast a row's
// pairs from A itself (a row-major op(A), full panels, even k: no packing). A bfloat16 C with one k block is
// rounded from the tile's registers; with more, each block's float32 sums are rounded once at the end. A
// register-tiled micro-kernel keeps a kMR × kNR float tile in 24 zmm registers and, per pair of k, broadcasts
// a row's pair against the panel's two vectors: `_mm512_dpbf16_ps` does two multiply-adds per float lane, the
// products of two bf16 exact in float. Blocks of rows (and of columns, when the rows are few) are shared over
// saccade's thread pool. Where the CPU has AMX (Sapphire Rapids on), 32 × 32 blocks of C (at least one) are
// summed in AMX tiles instead (TDPBF16PS, gemm_ladder/amx.h: 8192 multiply-adds an instruction), with A's
// rows and every tile's k zero-padded, the same exact products summed in float32 in another order (an AmxOff
// guard, ops/cpu/simd.h, turns it off). Without AVX512-BF16 (or under an IsaGuard, ops/cpu/simd.h) the same
// packed tiles are widened to float and multiplied with FMA at the widest width with_isa offers: since each
// product is exact, every width rounds the same sums in the same order (VDPBF16PS alone flushes denormal
// inputs and results to zero).
#include <cstdint>

#include "ops/tensor.h"  // bfloat16 (ops/half.h); the layering rule allows the tensor, not half.h

namespace saccade::cpu {

/// C = alpha * op(A) * op(B) + beta * C for bfloat16 A, B and float32 C, summed in float32 (in
/// blocks of 512 k, each added to C). op(A) is (m, k), op(B) is (k, n): A is stored row-major (m, k) with
/// leading dimension lda >= k, or (k, m) with lda >= m when trans_a; B likewise (k, n) / (n, k) with ldb; C
/// is (m, n) with ldc >= n. beta == 0 writes C without reading it (as BLAS: NaN in C does not survive). Error
/// bound: each element is within about k · 2⁻²⁴ · Σ_p |a_ip b_pj| of the exact sum of the bf16 products.
/// Threads: saccade's pool. Throws saccade::Error naming "gemm_bf16" for negative sizes or too small leading
/// dimensions.
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a,
               int64_t lda, const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc);

/// As above with a bfloat16 C: the float32 result alpha · op(A) op(B) + beta · C is rounded to bfloat16
/// (nearest even) once, at the end. The CPU's bfloat16 matmul/bmm reach it through gemm_half (gemm_half.h).
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a,
               int64_t lda, const bfloat16* b, int64_t ldb, float beta, bfloat16* c, int64_t ldc);

/// The matrix-vector product of batch-1 decoding: y (n) float32 = W (n, k) x (k), with W's rows (row stride
/// ldw >= k) and x bfloat16 and contiguous, each y_j a float32 sum of the exact bf16 products. VDPBF16PS with
/// kGemvRows rows of W in flight (their loads overlap: the product is bound by reading W once) and the k
/// past the last 32 loaded under a mask. Returns false, writing nothing, where VDPBF16PS may not run
/// (kernel_avx512_bf16(), ops/cpu/simd.h): the caller then uses gemv_half's widening loop (gemm_half.h).
/// Like the GEMM, VDPBF16PS flushes denormal inputs and results to zero. No threads: linalg.cpp splits n.
bool gemv_bf16(int64_t n, int64_t k, const bfloat16* x, const bfloat16* w, int64_t ldw, float* y);

}  // namespace saccade::cpu
