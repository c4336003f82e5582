#pragma once
// Differentiable matrix products and the linear layer's function. Shapes, dtypes and errors as in
// ops/linalg.h.
#include "autograd/variable.h"

namespace saccade {

/// torch.matmul on Variables: 1-d, 2-d and batched operands, batch dims broadcast (their gradients are summed
/// back to each operand's shape). Shapes and errors as ops::matmul.
Variable matmul(const Variable& a, const Variable& b);

/// (B, M, K) @ (B, K, N) -> (B, M, N) (as torch.bmm). Errors as ops::bmm.
Variable bmm(const Variable& a, const Variable& b);

/// (M, K) @ (K, N) -> (M, N) (as torch.mm). Errors as ops::mm.
Variable mm(const Variable& a, const Variable& b);

/// y = x W^T + b: x (*, in) (also 1-d (in)), weight (out, in), bias (out) or undefined -> (*, out); as
/// torch.nn.functional.linear. Multiplies by weight.t() without copying it. Throws saccade::Error naming
/// "linear" and the shapes when weight is not 2-d, x's last dim is not `in`, or bias is not (out); dtype
/// errors as ops::matmul.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias = Variable());

}  // namespace saccade
