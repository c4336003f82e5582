#include "nn/activation.h"

#include "autograd/functions/elementwise.h"

namespace saccade::nn {

Variable ReLU::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  SACCADE_CHECK(x.defined(), "ReLU: got an undefined input");
  return relu(x);
}

GELU::GELU(const std::string& approximate) : UnaryModule("GELU") { set_approximate(approximate); }

void GELU::set_approximate(const std::string& approximate) {
  SACCADE_CHECK(approximate == "none" || approximate == "tanh",
                "GELU: approximate must be 'none' or 'tanh', got '{}'", approximate);
  approximate_ = approximate;
}

Variable GELU::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  SACCADE_CHECK(x.defined(), "GELU: got an undefined input");
  if (approximate_ == "none") return gelu(x);
  // 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))
  const double k = 0.7978845608028654;  // √(2/π)
  const Variable inner = mul(add(x, mul(mul(mul(x, x), x), 0.044715)), k);
  return mul(mul(x, 0.5), add(tanh(inner), 1.0));
}

Variable SiLU::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  SACCADE_CHECK(x.defined(), "SiLU: got an undefined input");
  return silu(x);
}

Variable Tanh::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  SACCADE_CHECK(x.defined(), "Tanh: got an undefined input");
  return tanh(x);
}

Variable Sigmoid::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  SACCADE_CHECK(x.defined(), "Sigmoid: got an undefined input");
  return sigmoid(x);
}

}  // namespace saccade::nn
