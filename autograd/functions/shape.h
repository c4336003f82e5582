#pragma once
// Differentiable views (reshape, permute, expand, slice, ...) and joins (cat, stack, split, repeat, ...).
// Views share the input's storage, as the Tensor views in ops/tensor.h do; each returns its gradient in the
// input's shape. Shapes, semantics and errors as in ops/tensor.h, ops/join.h and ops/creation.h (tril/triu).
#include <vector>

#include "autograd/op_info.h"
#include "autograd/variable.h"

namespace saccade {

// The rows of facts of this file's ops (autograd/op_info.h; autograd/op_table.h lists every row once).
namespace op_info {

inline constexpr OpInfo reshape = row("reshape", "shape.cpp");
inline constexpr OpInfo view = row("view", "shape.cpp");
inline constexpr OpInfo flatten = row("flatten", "shape.cpp");
inline constexpr OpInfo squeeze = row("squeeze", "shape.cpp");
inline constexpr OpInfo unsqueeze = row("unsqueeze", "shape.cpp");
inline constexpr OpInfo permute = row("permute", "shape.cpp");
inline constexpr OpInfo transpose = row("transpose", "shape.cpp");
inline constexpr OpInfo t = row("t", "shape.cpp");
inline constexpr OpInfo expand = row("expand", "shape.cpp");
inline constexpr OpInfo narrow = row("narrow", "shape.cpp");
inline constexpr OpInfo slice = row("slice", "shape.cpp");
inline constexpr OpInfo select = row("select", "shape.cpp");
inline constexpr OpInfo split = row("split", "shape.cpp");
inline constexpr OpInfo chunk = row("chunk", "shape.cpp");
inline constexpr OpInfo contiguous = row("contiguous", "shape.cpp");
inline constexpr OpInfo to = row("to", "shape.cpp");  // Variable::to, a dtype or device conversion
inline constexpr OpInfo cat = with_autocast(row("cat", "shape.cpp"), Promote, Promote);
inline constexpr OpInfo stack = with_autocast(row("stack", "shape.cpp"), Promote, Promote);
inline constexpr OpInfo repeat = row("repeat", "shape.cpp");
inline constexpr OpInfo repeat_interleave = row("repeat_interleave", "shape.cpp");
inline constexpr OpInfo tril = row("tril", "shape.cpp");
inline constexpr OpInfo triu = row("triu", "shape.cpp");

}  // namespace op_info

// ---- views: the gradient is reshaped, permuted back, summed (expand) or placed into zeros (slices) ----

/// a viewed (or copied, when the strides do not allow a view) as `shape`; one size may be -1 (torch.reshape).
Variable reshape(const Variable& a, const Shape& shape);
/// a viewed as `shape`; throws when a's strides cannot express it (torch.Tensor.view).
Variable view(const Variable& a, const Shape& shape);
/// Dims reordered: result dim i is a's dim dims[i] (torch.permute).
Variable permute(const Variable& a, const Shape& dims);
/// Dims d0 and d1 swapped (torch.transpose).
Variable transpose(const Variable& a, int64_t d0, int64_t d1);
/// 2-d transpose; 0-d and 1-d inputs are returned as they are (torch.t).
Variable t(const Variable& a);
/// All size-1 dims removed (torch.squeeze).
Variable squeeze(const Variable& a);
/// Dim `dim` removed when its size is 1, else a unchanged (torch.squeeze(a, dim)).
Variable squeeze(const Variable& a, int64_t dim);
/// A size-1 dim inserted at `dim` in [-(n+1), n] (torch.unsqueeze).
Variable unsqueeze(const Variable& a, int64_t dim);
/// a broadcast to `shape` (size-1 dims stretched, leading dims added; -1 keeps a size) (torch.expand).
/// Backward sums the gradient over the broadcast dims.
Variable expand(const Variable& a, const Shape& shape);
/// Dims start..end merged into one (torch.flatten).
Variable flatten(const Variable& a, int64_t start_dim = 0, int64_t end_dim = -1);
/// Elements [start, start + length) of dim `dim` (torch.narrow).
Variable narrow(const Variable& a, int64_t dim, int64_t start, int64_t length);
/// a[..., start:end:step, ...] on dim `dim`, Python's rules (torch slicing).
Variable slice(const Variable& a, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
/// Index `index` of dim `dim`, removing that dim (torch.select).
Variable select(const Variable& a, int64_t dim, int64_t index);
/// a if contiguous, else a contiguous copy (torch.Tensor.contiguous).
Variable contiguous(const Variable& a);

// ---- joins, splits, repeats, triangles ----

/// Concatenation along `dim` (torch.cat); each input's gradient is its slice of the output's gradient,
/// converted to that input's dtype.
Variable cat(const std::vector<Variable>& xs, int64_t dim);
/// Stacking along a new dim `dim` (torch.stack).
Variable stack(const std::vector<Variable>& xs, int64_t dim);
/// Pieces of `split_size` along `dim` (the last may be smaller) (torch.split).
std::vector<Variable> split(const Variable& a, int64_t split_size, int64_t dim = 0);
/// Pieces of the given sizes along `dim` (torch.split with a list of sizes).
std::vector<Variable> split(const Variable& a, const std::vector<int64_t>& sizes, int64_t dim = 0);
/// `chunks` (nearly) equal pieces along `dim` (torch.chunk).
std::vector<Variable> chunk(const Variable& a, int64_t chunks, int64_t dim = 0);
/// a tiled repeats[d] times along each dim (torch.Tensor.repeat).
Variable repeat(const Variable& a, const Shape& repeats);
/// Each element repeated `repeats` times along `dim` (torch.repeat_interleave).
Variable repeat_interleave(const Variable& a, int64_t repeats, int64_t dim);
/// Lower / upper triangle of the last two dims, the rest zero (torch.tril / torch.triu).
Variable tril(const Variable& a, int64_t k = 0);
Variable triu(const Variable& a, int64_t k = 0);

}  // namespace saccade
