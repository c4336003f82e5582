#pragma once
// Elementwise activations as modules (torch.nn.ReLU / GELU / Tanh / Sigmoid), for Sequential. No parameters;
// any input shape, float32/float64; the result has the input's shape. An undefined input throws
// saccade::Error naming the module.
#include <string>

#include "nn/unary_module.h"

namespace saccade::nn {

/// max(x, 0) (torch.nn.ReLU).
class ReLU : public UnaryModule {
 public:
  ReLU() : UnaryModule("ReLU") {}
  Variable forward(const Variable& x) override;
};

/// GELU x Φ(x), Φ the standard normal CDF (Hendrycks & Gimpel 2016, eq. 1; torch.nn.GELU). With
/// approximate = "tanh", their tanh approximation 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))), which GPT-2
/// uses (transformers' "gelu_new"), composed from tanh, mul and add (its gradient by the chain rule); with
/// "none" (the default) the exact one, one fused kernel. forward: any floating x -> x's shape. The
/// constructor throws saccade::Error naming "GELU" for another `approximate`.
class GELU : public UnaryModule {
 public:
  explicit GELU(const std::string& approximate = "none");
  Variable forward(const Variable& x) override;
  /// "none" or "tanh" (torch's attribute); set it only through the constructor or set_approximate.
  const std::string& approximate() const { return approximate_; }
  void set_approximate(const std::string& approximate);

 private:
  std::string approximate_;
};

/// SiLU (swish) x σ(x) (Elfwing et al. 2018; torch.nn.SiLU). forward: any floating x -> x's shape.
class SiLU : public UnaryModule {
 public:
  SiLU() : UnaryModule("SiLU") {}
  Variable forward(const Variable& x) override;
};

/// tanh(x) (torch.nn.Tanh).
class Tanh : public UnaryModule {
 public:
  Tanh() : UnaryModule("Tanh") {}
  Variable forward(const Variable& x) override;
};

/// 1 / (1 + exp(-x)) (torch.nn.Sigmoid).
class Sigmoid : public UnaryModule {
 public:
  Sigmoid() : UnaryModule("Sigmoid") {}
  Variable forward(const Variable& x) override;
};

}  // namespace saccade::nn
