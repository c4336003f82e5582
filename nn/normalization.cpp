#include "nn/normalization.h"

#include "autograd/functions/nn.h"
#include "ops/creation.h"

namespace saccade::nn {

LayerNorm::LayerNorm(const Shape& normalized_shape, double eps, bool elementwise_affine)
    : UnaryModule("LayerNorm"), normalized_shape_(normalized_shape), eps_(eps) {
  ErrorScope scope(name());
  SACCADE_CHECK(!normalized_shape.empty(), "LayerNorm: normalized_shape must have at least one dim");
  for (int64_t s : normalized_shape)
    SACCADE_CHECK(s > 0, "LayerNorm: normalized_shape must be positive, got {}", normalized_shape);
  SACCADE_CHECK(eps >= 0, "LayerNorm: expected eps >= 0, got {}", eps);
  if (elementwise_affine) {
    weight = register_parameter("weight", ops::ones(normalized_shape));
    bias = register_parameter("bias", ops::zeros(normalized_shape));
  }
}

// x: (*, normalized_shape), weight, bias: (normalized_shape) -> x's shape
Variable LayerNorm::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  SACCADE_CHECK(x.defined(), "LayerNorm: got an undefined input");
  int k = normalized_shape_.size(), n = x.dim();
  bool ok = n >= k;
  for (int i = 0; ok && i < k; ++i) ok = x.size(n - k + i) == normalized_shape_[i];
  SACCADE_CHECK(ok, "LayerNorm: expected input of shape (*, {}) (normalized_shape), got {}",
                fmt::join(normalized_shape_.begin(), normalized_shape_.end(), ", "), x.shape());
  return layer_norm(x, normalized_shape_, weight, bias, eps_);
}

}  // namespace saccade::nn
