#pragma once
// LayerNorm (torch.nn.LayerNorm).
#include "nn/unary_module.h"

namespace saccade::nn {

/// Layer normalisation over the trailing dims `normalized_shape` (Ba et al. 2016, eq. 4; torch.nn.LayerNorm):
/// y = (x - E[x]) / √(Var[x] + eps) ⊙ weight + bias, mean and biased variance over normalized_shape.
///
/// Parameters (when `elementwise_affine`): `weight` (normalized_shape) initialised to ones, `bias`
/// (normalized_shape) to zeros, torch's names.
/// forward: x (*, normalized_shape...) float32/float64 -> x's shape.
/// Throws saccade::Error naming "LayerNorm" for an empty or non-positive normalized_shape, a negative eps,
/// an undefined input, or an input whose trailing dims differ from normalized_shape.
class LayerNorm : public UnaryModule {
 public:
  explicit LayerNorm(const Shape& normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  /// LayerNorm({d}, ...): normalisation over the last dim of size d.
  explicit LayerNorm(int64_t d, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNorm(Shape{d}, eps, elementwise_affine) {}
  Variable forward(const Variable& x) override;

  const Shape& normalized_shape() const { return normalized_shape_; }
  double eps() const { return eps_; }
  Variable weight, bias;  // undefined when !elementwise_affine

 private:
  Shape normalized_shape_;
  double eps_;
};

}  // namespace saccade::nn
