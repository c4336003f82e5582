#pragma once
// Differentiable index ops. Index tensors are int64 Tensors (never differentiated). Shapes, semantics and
// errors as in ops/index.h.
#include <optional>

#include "autograd/op_info.h"
#include "autograd/variable.h"

namespace saccade {

// The rows of facts of this file's ops (autograd/op_info.h; autograd/op_table.h lists every row once).
namespace op_info {

inline constexpr OpInfo index_select = row("index_select", "index.cpp");
inline constexpr OpInfo gather = row("gather", "index.cpp");
inline constexpr OpInfo scatter_add = with_half(row("scatter_add", "index.cpp"), Widened, Widened);
inline constexpr OpInfo index_add = with_kernel16(row("index_add", "index.cpp"), Kernel16::IndexAdd);
inline constexpr OpInfo embedding = row("embedding", "index.cpp");

}  // namespace op_info

/// Entries of `a` at `index` along `dim` (torch.index_select): a (.., n, ..), index int64 (m) -> (.., m, ..).
/// Backward adds the gradient rows back at `index` (repeated indices accumulate).
Variable index_select(const Variable& a, int64_t dim, const Tensor& index);
/// torch.gather: out has index's shape, out[..j..] = a[..index[..j..]..] along dim.
Variable gather(const Variable& a, int64_t dim, const Tensor& index);
/// a + src scattered at index along dim (out-of-place torch.scatter_add); differentiable in a and src.
Variable scatter_add(const Variable& a, int64_t dim, const Tensor& index, const Variable& src);
/// a + src added at rows `index` along dim (out-of-place torch.index_add); differentiable in a and src.
Variable index_add(const Variable& a, int64_t dim, const Tensor& index, const Variable& src);
/// Rows of `weight` (V, D) picked by int64 `indices` of any shape -> (*indices.shape, D)
/// (torch.nn.functional.embedding). Rows equal to `padding_idx` (in [-V, V); negative counts from the end)
/// receive no gradient, as torch. Throws for an out-of-range padding_idx or index.
Variable embedding(const Variable& weight, const Tensor& indices,
                   std::optional<int64_t> padding_idx = std::nullopt);

}  // namespace saccade
