#pragma once
// Dropout (torch.nn.Dropout).
#include "nn/unary_module.h"
#include "ops/random.h"

namespace saccade::nn {

/// Inverted dropout (Srivastava et al. 2014; torch.nn.Dropout): in training mode each element is zeroed with
/// probability p and the others are scaled by 1/(1-p); in eval mode (module.eval()) the input is returned
/// unchanged. The random numbers come from `gen` (the default generator when null; the Generator must outlive
/// the module), so a seed makes the masks reproducible.
/// forward: x of any shape, float32/float64 -> x's shape. Throws saccade::Error naming "Dropout" for p
/// outside [0, 1) or an undefined input.
class Dropout : public UnaryModule {
 public:
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  Variable forward(const Variable& x) override;
  double p() const { return p_; }

 private:
  double p_;
  Generator* gen_;
};

}  // namespace saccade::nn
