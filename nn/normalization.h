#pragma once
// LayerNorm and RMSNorm (torch.nn.LayerNorm, torch.nn.RMSNorm).
#include <optional>

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

/// Root-mean-square normalisation over the trailing dims `normalized_shape` (Zhang & Sennrich 2019, eq. 4;
/// torch.nn.RMSNorm, Hugging Face's LlamaRMSNorm): y = x / √(mean(x²) + eps) ⊙ weight.
///
/// Parameter (when `elementwise_affine`): `weight` (normalized_shape) initialised to ones, torch's name.
/// With `unit_offset` (Gemma's GemmaRMSNorm; Gemma Team 2024) the weight is stored as an offset from one,
/// initialised to zeros: y = x / √(mean(x²) + eps) ⊙ (1 + weight), computed in float32 whatever x's dtype and
/// rounded to it once, as transformers does.
/// eps unset: the machine epsilon of the input's dtype, as torch.nn.RMSNorm(eps=None).
/// forward: x (*, normalized_shape...) of any floating dtype -> x's shape (autograd/functions/nn.h rms_norm).
/// Throws saccade::Error naming "RMSNorm" for an empty or non-positive normalized_shape, a negative eps, an
/// undefined input, or an input whose trailing dims differ from normalized_shape.
class RMSNorm : public UnaryModule {
 public:
  explicit RMSNorm(const Shape& normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true, bool unit_offset = false);
  /// RMSNorm({d}, ...): normalisation over the last dim of size d.
  explicit RMSNorm(int64_t d, std::optional<double> eps = std::nullopt, bool elementwise_affine = true,
                   bool unit_offset = false)
      : RMSNorm(Shape{d}, eps, elementwise_affine, unit_offset) {}
  Variable forward(const Variable& x) override;

  const Shape& normalized_shape() const { return normalized_shape_; }
  std::optional<double> eps() const { return eps_; }
  bool unit_offset() const { return unit_offset_; }
  Variable weight;  // undefined when !elementwise_affine

 private:
  Shape normalized_shape_;
  std::optional<double> eps_;
  bool unit_offset_;
};

}  // namespace saccade::nn
