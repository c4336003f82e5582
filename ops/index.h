#pragma once
// Indexing with int64 index tensors: index_select, gather, scatter_add, index_add, embedding (PyTorch
// semantics; scatter_add and index_add are out-of-place). Index bounds are checked on the host (the index is
// copied to the CPU for the check), so a bad index throws instead of reading or writing out of bounds.
// Errors: saccade::Error naming the op and the offending shapes, the index dtype, or the bad index value.
#include "ops/tensor.h"

namespace saccade::ops {

/// Entries of `t` at `index` along `dim` (as torch.index_select): t (.., n, ..), index int64 (m) or 0-d
/// -> (.., m, ..). Throws for an index that is not int64 or not 1-d, or a value outside [0, n).
Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index);
/// out[i][j][k] = t[i][index[i][j][k]][k] for dim 1, likewise for other dims (as torch.gather). index is
/// int64 with t's number of dims and index.size(d) <= t.size(d) for d != dim; the result has index's shape.
Tensor gather(const Tensor& t, int64_t dim, const Tensor& index);
/// t + the entries of `src` added at `index` along `dim` (out-of-place torch.Tensor.scatter_add):
/// out[i][index[i][j][k]][k] += src[i][j][k] for dim 1. index is int64 with t's number of dims,
/// index.size(d) <= src.size(d) for all d and <= t.size(d) for d != dim; src has t's dtype. Result: t's
/// shape.
Tensor scatter_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src);
/// t + src added at rows `index` along `dim` (out-of-place torch.Tensor.index_add): t (.., n, ..), index
/// int64 (m), src (.., m, ..) of t's dtype: out[.., index[j], ..] += src[.., j, ..]. Repeated indices
/// accumulate.
Tensor index_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src);
/// Rows of `weight` (V, D) picked by `indices` (int64, any shape, values in [0, V)) -> (*indices.shape, D)
/// (as torch.nn.functional.embedding).
Tensor embedding(const Tensor& weight, const Tensor& indices);

}  // namespace saccade::ops
