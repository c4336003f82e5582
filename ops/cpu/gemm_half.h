#pragma once
// The CPU GEMM of the 16-bit dtypes (bfloat16, float16): the readable version, widening to float32.
#include <cstdint>

#include "ops/half.h"

namespace saccade::cpu {

/// c (m, n) = op(a) (m, k) · op(b) (k, n), all row-major with leading dimensions lda, ldb, ldc; op(x) is x,
/// or xᵀ when trans_x (x then stored (k, m) / (n, k)). T = bfloat16 or float16.
///
/// Precision: products and sums in float32 (cblas_sgemm), one rounding to T per output element (to nearest
/// even): the 16-bit inputs widen exactly, so this is the float32 GEMM of the rounded inputs.
///
/// The readable version: it widens op(b) once and op(a) a block of rows at a time to float32, runs
/// cblas_sgemm, and rounds the block into c. NOTE: this is THE one place 16-bit matmul/bmm goes through on
/// the CPU; the `gemm` work (issue 26 item 4) replaces the bfloat16 path by a VDPBF16PS kernel behind
/// with_isa and keeps this one as its reference.
template <class T>
void gemm_half(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
               const T* b, int64_t ldb, T* c, int64_t ldc);

}  // namespace saccade::cpu
