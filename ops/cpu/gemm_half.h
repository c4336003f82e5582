#pragma once
// The CPU GEMM of the 16-bit dtypes (bfloat16, float16): the readable version, widening to float32.
#include <cstdint>

#include "ops/tensor.h"  // bfloat16 (ops/half.h); the layering rule allows the tensor, not half.h

namespace saccade::cpu {

/// c (m, n) = op(a) (m, k) · op(b) (k, n), all row-major with leading dimensions lda, ldb, ldc; op(x) is x,
/// or xᵀ when trans_x (x then stored (k, m) / (n, k)). T = bfloat16 or float16.
///
/// Precision: products and sums in float32 (cblas_sgemm), one rounding to T per output element (to nearest
/// even): the 16-bit inputs widen exactly, so this is the float32 GEMM of the rounded inputs.
///
/// THE one place 16-bit matmul/bmm goes through on the CPU: bfloat16 runs saccade's own bf16 GEMM
/// (gemm_bf16.h: VDPBF16PS where the CPU has AVX512-BF16, float32 sums, one rounding), float16
/// gemm_half_reference.
template <class T>
void gemm_half(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
               const T* b, int64_t ldb, T* c, int64_t ldc);

/// The readable version, and gemm_bf16's reference in tests/test_gemm_bf16.cpp: it widens op(b) once and
/// op(a) a block of rows at a time to float32, runs cblas_sgemm, and rounds the block into c.
template <class T>
void gemm_half_reference(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                         const T* b, int64_t ldb, T* c, int64_t ldc);

/// One output row, the product of batch-1 decoding: c (n) = op(b) (k, n)ᵀ · a (k), a's elements inc_a apart,
/// b row-major with leading dimension ldb, op(b) = b, or bᵀ when trans_b (b then stored (n, k): linear's
/// weight). T = bfloat16 or float16. Float32 products (exact: two 16-bit significands) and sums, one
/// rounding per output, as gemm_half; b is read once, in its 16 bits (what a decoding step is bound by).
/// bfloat16 with b (n, k) runs gemv_bf16 (gemm_bf16.h, VDPBF16PS) where it may, else (no AVX512-BF16, or
/// under an IsaGuard) a loop that widens four rows of b in registers (AVX2 or AVX-512 by with_isa); the rest
/// (float16, b (k, n)) gemv_half_reference. No threads (ops/cpu/linalg.cpp splits n); sizes are the caller's
/// (linalg.cpp) to check.
template <class T>
void gemv_half(bool trans_b, int64_t n, int64_t k, const T* a, int64_t inc_a, const T* b, int64_t ldb, T* c);

/// The readable one-row product, gemv_half's reference (tests/test_linalg.cpp): each row of b widened to
/// float32, then OpenBLAS's sdot (trans_b) or saxpy of each row into float32 sums.
template <class T>
void gemv_half_reference(bool trans_b, int64_t n, int64_t k, const T* a, int64_t inc_a, const T* b,
                         int64_t ldb, T* c);

}  // namespace saccade::cpu
