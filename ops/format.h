#pragma once
// Printing tensors the way PyTorch does: fmt::format("{}", t), and std::ostream << t.
#include <ostream>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "ops/tensor.h"

namespace saccade::ops {

/// The text of a tensor, after torch's repr (torch/_tensor_str.py with its default print options):
///
///     tensor([[ 1.0000, -2.5000],
///             [ 3.0000,  4.0000]], shape=[2, 2], dtype=float64, device=cpu)
///
/// - Values: nested brackets, one row of the last dim per line, continuation lines indented to line up under
///   the first element; rows of higher dims separated by blank lines (one per extra dim), as torch.
/// - Floats use `{:.4f}`; when, over the nonzero finite |values|, max > 1e8, min < 1e-4 or max / min > 1000,
///   all use `{:.4e}` (torch's sci_mode). nan, inf and -inf print as such. Unlike torch, integral floats
///   keep their decimals (`1.0000`, not `1.`). int64 prints as integers, bool as True / False.
/// - Every element is right-aligned to the width of the widest one printed. A row longer than 80 characters
///   wraps, as torch's linewidth=80.
/// - More than 1000 elements: each dim longer than 6 shows its first 3 and last 3 entries around `...`
///   (torch's threshold=1000, edgeitems=3); the widths come from the entries shown.
/// - 0-d: `tensor(3.5000, shape=[], ...)`; no elements: `tensor([], shape=[0, 3], ...)`.
/// - Always ends with `, shape=[...], dtype=..., device=...)`; `extra` (e.g. "requires_grad=true") is
///   appended as one more `, extra` before the closing parenthesis. An undefined tensor prints
///   `tensor(undefined)`.
/// Tensors on a GPU are copied to the CPU to be printed.
std::string format_tensor(const Tensor& t, std::string_view extra = {});

}  // namespace saccade::ops

namespace saccade {
/// Writes ops::format_tensor(t).
std::ostream& operator<<(std::ostream& os, const Tensor& t);
}  // namespace saccade

/// fmt::format("{}", tensor): ops::format_tensor(tensor). No format spec is accepted.
template <>
struct fmt::formatter<saccade::Tensor> {
  constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
  auto format(const saccade::Tensor& t, format_context& ctx) const {
    std::string s = saccade::ops::format_tensor(t);
    return std::copy(s.begin(), s.end(), ctx.out());
  }
};
