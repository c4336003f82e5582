#pragma once
// Reductions over one or more dims (keepdim keeps them as size 1), or over everything (a 0-d result).
// Errors: saccade::Error naming the op for a dim out of range, a repeated dim, or an empty max/min.
#include "ops/tensor.h"

namespace saccade::ops {

/// Sum over all elements -> 0-d. Bool sums as int64.
Tensor sum(const Tensor& a);
/// Sum over `dims` (negative dims count from the end).
Tensor sum(const Tensor& a, const Shape& dims, bool keepdim = false);
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, const Shape& dims, bool keepdim = false);
Tensor prod(const Tensor& a, const Shape& dims, bool keepdim = false);
/// Largest / smallest element -> 0-d; throws for an empty tensor.
Tensor max(const Tensor& a);
Tensor min(const Tensor& a);
/// max / min over `dims` without indices (torch.amax / amin).
Tensor amax(const Tensor& a, const Shape& dims, bool keepdim = false);
Tensor amin(const Tensor& a, const Shape& dims, bool keepdim = false);

/// values and int64 indices along one dim (torch.max(a, dim)).
struct ValuesIndices {
  Tensor values, indices;
};
ValuesIndices max(const Tensor& a, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& a, int64_t dim, bool keepdim = false);
/// int64 index of the max / min along dim; without a dim, of the flattened tensor (0-d).
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& a);

/// Variance over `dims`, with Bessel's correction (divide by n - 1) when `unbiased`.
Tensor var(const Tensor& a, const Shape& dims, bool unbiased = true, bool keepdim = false);
Tensor var(const Tensor& a, bool unbiased = true);
/// log Σ exp(a) over `dims`, computed as m + log Σ exp(a - m) with m the max (stable; -inf rows give -inf).
Tensor logsumexp(const Tensor& a, const Shape& dims, bool keepdim = false);

/// Sums `a` down to `shape`, which `a`'s shape must be a broadcast of: the reverse of expand, used to
/// reduce gradients of broadcast operands. Returns `a` itself when the shapes already match.
Tensor sum_to(const Tensor& a, const Shape& shape);

}  // namespace saccade::ops
