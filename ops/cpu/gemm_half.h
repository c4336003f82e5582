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

}  // namespace saccade::cpu
