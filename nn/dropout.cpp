#include "nn/dropout.h"

#include "autograd/functions/nn.h"

namespace saccade::nn {

Dropout::Dropout(double p, Generator* gen) : UnaryModule("Dropout"), p_(p), gen_(gen) {
  ErrorScope scope(name());
  SACCADE_CHECK(p >= 0 && p < 1, "Dropout: expected a probability p in [0, 1), got {}", p);
}

Variable Dropout::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  SACCADE_CHECK(x.defined(), "Dropout: got an undefined input");
  return dropout(x, p_, is_training(), gen_);
}

}  // namespace saccade::nn
