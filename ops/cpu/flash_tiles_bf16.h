#pragma once
// The flash-attention tile products whose operands are both bfloat16 tensors (ops/cpu/attention_half.cpp):
// the scores S = Q Kᵀ (forward and backward) and dP = dO Vᵀ (backward), on AVX512-BF16's VDPBF16PS. Each
// product of two bf16 values is exact in float32 and the sums are float32, so the result is the float32 tile
// product of the widened operands up to the order of the additions; the kernels skip widening Q and K (V, in
// the backward) to float32 for these products. The other products (P V, Pᵀ dO, dSᵀ Q, dS K) round P and dS to
// bfloat16 and go through gemm_bf16 (ops/cpu/attention_half.cpp says why).
#include <cstdint>

#include "ops/tensor.h"  // bfloat16

namespace saccade::cpu {

/// Whether dot_rows_bf16 can run here: a CPU with AVX512-BF16, no IsaGuard live (simd.h), `d` even.
bool dot_rows_bf16_available(int64_t d);

/// s[i · lds + j] = scale · Σ_p a[i · lda + p] b[j · ldb + p] for i < nr, j < nc (p < d), with a: nr rows and
/// b: nc rows of d bfloat16 each (row strides lda, ldb in elements), s float32. nc <= 64, d even and
/// dot_rows_bf16_available(d). `scratch` holds at least d / 2 · 64 words (b packed as pairs).
void dot_rows_bf16(int64_t nr, int64_t nc, int64_t d, float scale, const bfloat16* a, int64_t lda,
                   const bfloat16* b, int64_t ldb, float* s, int64_t lds, uint32_t* scratch);

}  // namespace saccade::cpu
