// Variable printing: the tensor text plus requires_grad / grad_fn.
#include "autograd/format.h"

namespace saccade {

std::string format_variable(const Variable& v) {
  if (!v.defined()) return "Variable(undefined)";
  std::string extra;
  if (v.grad_fn()) {
    extra = fmt::format("grad_fn=<{}>", v.grad_fn()->name());
  } else if (v.requires_grad()) {
    extra = "requires_grad=true";
  }
  return ops::format_tensor(v.data(), extra);
}

std::ostream& operator<<(std::ostream& os, const Variable& v) { return os << format_variable(v); }

}  // namespace saccade
