#pragma once
// Differentiable matrix products and the linear layer's function. Shapes, dtypes and errors as in
// ops/linalg.h.
#include <vector>

#include "autograd/op_info.h"
#include "autograd/variable.h"

namespace saccade {

// The rows of facts of this file's ops (autograd/op_info.h; autograd/op_table.h lists every row once).
namespace op_info {

inline constexpr OpInfo matmul =
    with_cost(with_autocast(row("matmul", "linalg.cpp"), Lower, Lower), cost::kGemm);
inline constexpr OpInfo bmm = with_cost(with_autocast(row("bmm", "linalg.cpp"), Lower, Lower), cost::kGemm);
inline constexpr OpInfo mm = with_cost(with_autocast(row("mm", "linalg.cpp"), Lower, Lower), cost::kGemm);
inline constexpr OpInfo grouped_mm =
    with_cost(with_autocast(row("grouped_mm", "linalg.cpp"), Lower, Lower), cost::kGroupedGemm);
inline constexpr OpInfo linear =
    with_cost(with_autocast(row("linear", "linalg.cpp"), Lower, Lower), cost::kLinear);

}  // namespace op_info

/// torch.matmul on Variables: 1-d, 2-d and batched operands, batch dims broadcast (their gradients are summed
/// back to each operand's shape). Shapes and errors as ops::matmul.
Variable matmul(const Variable& a, const Variable& b);

/// (B, M, K) @ (B, K, N) -> (B, M, N) (as torch.bmm). Errors as ops::bmm.
Variable bmm(const Variable& a, const Variable& b);

/// (M, K) @ (K, N) -> (M, N) (as torch.mm). Errors as ops::mm.
Variable mm(const Variable& a, const Variable& b);

/// Grouped products (ops::grouped_mm: torch._grouped_mm with host offsets), differentiable in both operands:
/// a (M, K) @ b (G, K, N) -> (M, N), row group g times b[g]; or a (K, M) @ b (M, N) -> (G, K, N), the groups
/// along the contracted dim. The backward of each case is grouped_mm of the other (hence any order of
/// derivatives): for y = a @ b per group, da = ȳ bᵀ and db = aᵀ ȳ group by group. Shapes, dtypes and errors
/// as ops::grouped_mm.
Variable grouped_mm(const Variable& a, const Variable& b, const std::vector<int64_t>& offs);

/// y = x W^T + b: x (*, in) (also 1-d (in)), weight (out, in), bias (out) or undefined -> (*, out); as
/// torch.nn.functional.linear. Multiplies by weight.t() without copying it. Throws saccade::Error naming
/// "linear" and the shapes when weight is not 2-d, x's last dim is not `in`, or bias is not (out); dtype
/// errors as ops::matmul.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias = Variable());

}  // namespace saccade
