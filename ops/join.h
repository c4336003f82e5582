#pragma once
// Joining and splitting tensors: cat, stack, split, chunk, repeat, repeat_interleave (PyTorch semantics).
// Splits return views that share the input's storage; joins and repeats return new contiguous tensors.
// Errors: saccade::Error naming the op and the offending shapes (dim out of range, mismatched shapes, an
// empty list, mixed devices, a bad split size or repeat count).
#include <vector>

#include "ops/tensor.h"

namespace saccade::ops {

/// Concatenates `ts` along `dim` (as torch.cat). All tensors have the same number of dims and the same sizes
/// except along `dim`; the result's dtype is the promotion of theirs. As torch, 1-d empty tensors (shape [0])
/// are skipped. Throws for an empty list, mixed devices, or mismatched shapes.
Tensor cat(const std::vector<Tensor>& ts, int64_t dim);
/// Stacks equally shaped tensors along a new dim `dim` in [-(n+1), n] (as torch.stack): (S...) -> (.., k,
/// ..).
Tensor stack(const std::vector<Tensor>& ts, int64_t dim);
/// Views of `t` along `dim`, each of `split_size` elements (the last may be smaller) (as torch.split).
/// split_size must be positive (or 0 for an empty dim).
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim = 0);
/// Views of `t` along `dim` with the given sizes, which must sum to t.size(dim) (as torch.split with a list).
std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim = 0);
/// `chunks` views of (nearly) equal size ceil(n / chunks) along `dim`; may return fewer (as torch.chunk).
std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim = 0);
/// Tiles `t` `repeats[d]` times along each dim (as torch.Tensor.repeat); repeats has at least t.dim()
/// entries, extra leading entries add leading dims: (S0.., Sd) -> (r0 * S0, ..., rd * Sd).
Tensor repeat(const Tensor& t, const Shape& repeats);
/// Repeats each element `repeats` times along `dim` (as torch.repeat_interleave with an int and a dim):
/// (.., n, ..) -> (.., n * repeats, ..).
Tensor repeat_interleave(const Tensor& t, int64_t repeats, int64_t dim);

}  // namespace saccade::ops
