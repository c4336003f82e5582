#pragma once
// Printing Variables: the tensor's text (ops/format.h) plus its autograd state.
#include <ostream>
#include <string>

#include <fmt/format.h>

#include "autograd/variable.h"
#include "ops/format.h"

namespace saccade {

/// The text of a Variable: ops::format_tensor of its data, with `requires_grad=true` appended for a leaf that
/// requires grad and `grad_fn=<name>` (the recording op's name, e.g. `grad_fn=<mul>`) for a non-leaf, as
/// torch's `tensor([2., 4.], grad_fn=<MulBackward0>)`:
///
///     tensor([2.0000, 4.0000], shape=[2], dtype=float64, device=cpu, grad_fn=<mul>)
///
/// An undefined Variable prints `Variable(undefined)`.
std::string format_variable(const Variable& v);

/// Writes format_variable(v).
std::ostream& operator<<(std::ostream& os, const Variable& v);

}  // namespace saccade

/// fmt::format("{}", variable): saccade::format_variable(variable).
template <>
struct fmt::formatter<saccade::Variable> {
  constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
  auto format(const saccade::Variable& v, format_context& ctx) const {
    std::string s = saccade::format_variable(v);
    return std::copy(s.begin(), s.end(), ctx.out());
  }
};
