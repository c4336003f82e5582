#pragma once
// Weights kept quantized for inference: GGUF's Q8_0 (blocks of 32 int8 weights with one float16 scale,
// llama.cpp's format), made from any floating matrix, turned back into float32, and multiplied by float
// activations without widening the matrix into memory. No gradients: a quantized weight is read, never
// trained (nn::Linear::quantize_q8_0 uses it under NoGradGuard).
#include "ops/kernels/quant.h"
#include "ops/tensor.h"

namespace saccade::ops {

/// Q8_0 of a matrix w (rows, cols), any floating dtype and device (read as float32): for each row's block
/// of 32 weights x_i (the last zero-padded), d = max|x_i| / 127, qs_i = round(x_i / d) (half away from
/// zero; all 0 when d is 0), d stored as float16 — llama.cpp's quantize_row_q8_0_ref, so a checkpoint
/// quantized here and by llama.cpp's converter holds the same blocks. Each weight is then within d/2 of d16 ·
/// qs_i plus d's float16 rounding (|d - d16| · 127, at most 2^-11 of the block's max|x_i|). Throws
/// saccade::Error naming "quantize_q8_0" and the shape for a matrix that is not 2-d or not floating, or one
/// holding inf or NaN.
Q8_0Matrix quantize_q8_0(const Tensor& w);

/// The float32 matrix (rows, cols) on the CPU that `w` stands for: element (r, c) = d16 · qs of its block.
/// Throws saccade::Error naming "dequantize_q8_0" for an undefined matrix.
Tensor dequantize_q8_0(const Q8_0Matrix& w);

/// y (*, N) = x (*, K) · wᵀ for w (N, K) in Q8_0 (torch.nn.functional.linear without bias, with the weight
/// dequantized): x of any floating dtype, computed in float32, y in x's dtype (one rounding for 16 bits).
/// On a backend with the fused kernel (the CPU, ops/cpu/quant.cpp) the blocks are read as they are; on
/// another, linear_q8_0_composed. Throws saccade::Error naming "linear_q8_0" and both shapes for an undefined
/// matrix, a 0-d or non-floating x, or x whose last dim is not K.
Tensor linear_q8_0(const Tensor& x, const Q8_0Matrix& w);

/// The readable version, linear_q8_0's reference in tests: x · dequantize_q8_0(w)ᵀ with matmul, on x's
/// device. Same checks and errors (naming "linear_q8_0").
Tensor linear_q8_0_composed(const Tensor& x, const Q8_0Matrix& w);

}  // namespace saccade::ops
