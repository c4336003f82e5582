#include "nn/linear.h"

#include "autograd/autocast.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/shape.h"
#include "nn/init.h"
#include "nn/lora.h"
#include "ops/creation.h"

namespace saccade::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, Generator* gen)
    : UnaryModule("Linear"), in_features_(in_features), out_features_(out_features) {
  ErrorScope scope(name());
  SACCADE_CHECK(in_features >= 0 && out_features >= 0,
                "Linear: expected non-negative sizes, got in_features = {}, out_features = {}", in_features,
                out_features);
  Tensor w = Tensor::empty({out_features, in_features});
  Tensor b = with_bias ? Tensor::empty({out_features}) : Tensor();
  init::linear_default_init_(w, b, gen);
  weight = register_parameter("weight", w);
  if (with_bias) bias = register_parameter("bias", b);
}

// x: (*, in), weight: (out, in), bias: (out) -> (*, out)
Variable Linear::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  SACCADE_CHECK(x.defined(), "Linear: got an undefined input");
  SACCADE_CHECK(x.dim() >= 1 && x.size(-1) == in_features_,
                "Linear: expected input of shape (*, {}) (in_features = {}), got {}", in_features_,
                in_features_, x.shape());
  SACCADE_CHECK(x.dtype() == weight.dtype() || autocast_enabled(),  // autocast casts both (linear's policy)
                "Linear: expected a {} input (the weight's dtype), got {}", weight.dtype(), x.dtype());
  Variable y = linear(x, weight, bias);
  if (lora_A && !lora_merged) y = y + lora_delta(*this, x);
  return y;
}

Flatten::Flatten(int64_t start_dim, int64_t end_dim)
    : UnaryModule("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}

Variable Flatten::forward(const Variable& x) {
  ErrorScope scope(name());
  SACCADE_CHECK(x.defined(), "Flatten: got an undefined input");
  int n = x.dim();
  auto in_range = [n](int64_t d) { return d >= -std::max(n, 1) && d < std::max(n, 1); };
  SACCADE_CHECK(in_range(start_dim_) && in_range(end_dim_),
                "Flatten: dims ({}, {}) out of range for an input of shape {}", start_dim_, end_dim_,
                x.shape());
  return flatten(x, start_dim_, end_dim_);
}

}  // namespace saccade::nn
