#include "nn/activation.h"

#include "autograd/functions/elementwise.h"

namespace saccade::nn {

Variable ReLU::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  SACCADE_CHECK(x.defined(), "ReLU: got an undefined input");
  return relu(x);
}

Variable GELU::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  SACCADE_CHECK(x.defined(), "GELU: got an undefined input");
  return gelu(x);
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
