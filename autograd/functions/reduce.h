#pragma once
// Differentiable reductions. Shapes and errors as in ops/reduce.h.
#include "autograd/op_info.h"
#include "autograd/variable.h"
#include "ops/reduce.h"

namespace saccade {

// The rows of facts of this file's ops (autograd/op_info.h; autograd/op_table.h lists every row once).
namespace op_info {

inline constexpr OpInfo sum = with_autocast(row("sum", "reduce.cpp"), Float32, Keep);
inline constexpr OpInfo mean = with_half(row("mean", "reduce.cpp"), Widened, Widened);
inline constexpr OpInfo max = row("max", "reduce.cpp");
inline constexpr OpInfo min = row("min", "reduce.cpp");
inline constexpr OpInfo amax = row("amax", "reduce.cpp");
inline constexpr OpInfo amin = row("amin", "reduce.cpp");
inline constexpr OpInfo var = as_composite(row("var", "reduce.cpp"));
inline constexpr OpInfo logsumexp =
    with_half(with_autocast(row("logsumexp", "reduce.cpp"), Float32, Keep), Widened, Widened);
inline constexpr OpInfo sum_to = row("sum_to", "reduce.cpp");

}  // namespace op_info

Variable sum(const Variable& a);
Variable sum(const Variable& a, const Shape& dims, bool keepdim = false);
Variable mean(const Variable& a);
Variable mean(const Variable& a, const Shape& dims, bool keepdim = false);
/// Full max / min: the gradient is split evenly among tied maxima (as PyTorch's amax).
Variable max(const Variable& a);
Variable min(const Variable& a);
Variable amax(const Variable& a, const Shape& dims, bool keepdim = false);
Variable amin(const Variable& a, const Shape& dims, bool keepdim = false);

/// values (differentiable; the gradient goes to the returned index) and int64 indices along `dim`.
struct VariableIndices {
  Variable values;
  Tensor indices;
};
VariableIndices max(const Variable& a, int64_t dim, bool keepdim = false);
VariableIndices min(const Variable& a, int64_t dim, bool keepdim = false);

Variable var(const Variable& a, const Shape& dims, bool unbiased = true, bool keepdim = false);
/// Sums a (broadcast from `shape`) back to `shape` (ops::sum_to): the gradient of a broadcast input. Returns
/// `a` itself when it already has that shape. Throws saccade::Error when `shape` does not broadcast to a's.
Variable sum_to(const Variable& a, const Shape& shape);
Variable logsumexp(const Variable& a, const Shape& dims, bool keepdim = false);

}  // namespace saccade
