#include "nn/normalization.h"

#include "autograd/functions/elementwise.h"
#include "autograd/functions/nn.h"
#include "ops/creation.h"

namespace saccade::nn {

namespace {

// The constructors' checks, named after the module.
void check_options(const char* module, const Shape& normalized_shape, double eps) {
  SACCADE_CHECK(!normalized_shape.empty(), "{}: normalized_shape must have at least one dim", module);
  for (int64_t s : normalized_shape)
    SACCADE_CHECK(s > 0, "{}: normalized_shape must be positive, got {}", module, normalized_shape);
  SACCADE_CHECK(eps >= 0, "{}: expected eps >= 0, got {}", module, eps);
}

// forward's check: x is (*, normalized_shape)
void check_input(const char* module, const Variable& x, const Shape& normalized_shape) {
  SACCADE_CHECK(x.defined(), "{}: got an undefined input", module);
  int k = normalized_shape.size(), n = x.dim();
  bool ok = n >= k;
  for (int i = 0; ok && i < k; ++i) ok = x.size(n - k + i) == normalized_shape[i];
  SACCADE_CHECK(ok, "{}: expected input of shape (*, {}) (normalized_shape), got {}", module,
                fmt::join(normalized_shape.begin(), normalized_shape.end(), ", "), x.shape());
}

}  // namespace

LayerNorm::LayerNorm(const Shape& normalized_shape, double eps, bool elementwise_affine)
    : UnaryModule("LayerNorm"), normalized_shape_(normalized_shape), eps_(eps) {
  ErrorScope scope(name());
  check_options("LayerNorm", normalized_shape, eps);
  if (elementwise_affine) {
    weight = register_parameter("weight", ops::ones(normalized_shape));
    bias = register_parameter("bias", ops::zeros(normalized_shape));
  }
}

// x: (*, normalized_shape), weight, bias: (normalized_shape) -> x's shape
Variable LayerNorm::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  check_input("LayerNorm", x, normalized_shape_);
  return layer_norm(x, normalized_shape_, weight, bias, eps_);
}

RMSNorm::RMSNorm(const Shape& normalized_shape, std::optional<double> eps, bool elementwise_affine,
                 bool unit_offset)
    : UnaryModule("RMSNorm"), normalized_shape_(normalized_shape), eps_(eps), unit_offset_(unit_offset) {
  ErrorScope scope(name());
  check_options("RMSNorm", normalized_shape, eps.value_or(0));
  if (elementwise_affine)
    weight = register_parameter("weight",
                                unit_offset ? ops::zeros(normalized_shape) : ops::ones(normalized_shape));
}

// x: (*, normalized_shape), weight: (normalized_shape) -> x's shape
Variable RMSNorm::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  check_input("RMSNorm", x, normalized_shape_);
  if (!unit_offset_ || !weight.defined()) return rms_norm(x, normalized_shape_, weight, eps_);
  // Gemma: x̂ ⊙ (1 + w) in float32 (1 + w rounded to a 16-bit dtype would lose w's low bits), one rounding
  // back
  const bool half = x.dtype() == DType::BFloat16 || x.dtype() == DType::Float16;
  const Variable x32 = half ? x.to(DType::Float32) : x;
  const Variable y = rms_norm(x32, normalized_shape_, add(weight.to(x32.dtype()), 1.0), eps_);
  return half ? y.to(x.dtype()) : y;
}

}  // namespace saccade::nn
