#pragma once
// Reductions over one or more dims (keepdim keeps them as size 1), or over everything (a 0-d result), as
// torch.sum / mean / prod / amax / amin / max / argmax / var / logsumexp. `dims` may be negative (counting
// from the end) and in any order; an empty `dims` means all dims.
// Errors: saccade::Error naming the op for an undefined tensor, a dim out of range, a repeated dim, an empty
// max / min / argmax, or a dtype the op does not take.
#include "ops/kernels/reduce.h"
#include "ops/tensor.h"

namespace saccade::ops {

/// Sum over all elements -> 0-d. Same dtype, except bool, which sums as int64. An empty sum is 0.
Tensor sum(const Tensor& a);
/// Sum over `dims`.
Tensor sum(const Tensor& a, const Shape& dims, bool keepdim = false);
/// Mean (float dtypes only; others throw). An empty mean is NaN.
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, const Shape& dims, bool keepdim = false);
/// Product over `dims` (bool as int64). An empty product is 1.
Tensor prod(const Tensor& a, const Shape& dims, bool keepdim = false);
/// Largest / smallest element -> 0-d; NaN propagates; throws for an empty tensor. Bool gives int64.
Tensor max(const Tensor& a);
Tensor min(const Tensor& a);
/// max / min over `dims` without indices (torch.amax / amin); NaN propagates; throws when a reduced dim is
/// empty.
Tensor amax(const Tensor& a, const Shape& dims, bool keepdim = false);
Tensor amin(const Tensor& a, const Shape& dims, bool keepdim = false);

/// values and int64 indices along one dim (torch.max(a, dim)): ties give the first index, a NaN wins (its
/// index is returned). Throws for bool, or an empty dim.
struct ValuesIndices {
  Tensor values, indices;
};
ValuesIndices max(const Tensor& a, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& a, int64_t dim, bool keepdim = false);
/// The k largest entries along `dim` and their int64 indices (torch.topk(a, k, dim), largest and sorted):
/// a (.., n, ..) -> values and indices (.., k, ..), each row's entries from the largest down; ties in the
/// order of their indices, a NaN above every number (as torch). Every dtype but bool, on any device (the
/// indices are chosen on the host; the values are then ops::gather's, exactly a's entries). Throws
/// saccade::Error naming "topk" and the shape for k < 0 or k > n, or a bool tensor.
ValuesIndices topk(const Tensor& a, int64_t k, int64_t dim = -1);
/// int64 index of the max / min along dim; without a dim, of the flattened tensor (0-d).
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& a);

/// Variance over `dims` (float dtypes), with Bessel's correction (divide by n - 1) when `unbiased`;
/// n <= 1 with the correction gives NaN (as torch).
Tensor var(const Tensor& a, const Shape& dims, bool unbiased = true, bool keepdim = false);
Tensor var(const Tensor& a, bool unbiased = true);
/// log Σ exp(a) over `dims` (float dtypes), computed as m + log Σ exp(a - m) with m the max: stable for large
/// values; rows of all -inf give -inf (not NaN), a +inf gives +inf, an empty reduction -inf (as torch).
Tensor logsumexp(const Tensor& a, const Shape& dims, bool keepdim = false);

/// Sums `a` down to `shape`, which `a`'s shape must be a broadcast of: the reverse of expand, used to
/// reduce gradients of broadcast operands. Returns `a` itself when the shapes already match.
Tensor sum_to(const Tensor& a, const Shape& shape);

}  // namespace saccade::ops
