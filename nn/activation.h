#pragma once
// Elementwise activations as modules (torch.nn.ReLU / GELU / Tanh / Sigmoid), for Sequential. No parameters;
// any input shape, float32/float64; the result has the input's shape. An undefined input throws
// saccade::Error naming the module.
#include "nn/unary_module.h"

namespace saccade::nn {

/// max(x, 0) (torch.nn.ReLU).
class ReLU : public UnaryModule {
 public:
  ReLU() : UnaryModule("ReLU") {}
  Variable forward(const Variable& x) override;
};

/// Exact GELU x Φ(x), Φ the standard normal CDF (Hendrycks & Gimpel 2016; torch.nn.GELU(approximate='none')).
class GELU : public UnaryModule {
 public:
  GELU() : UnaryModule("GELU") {}
  Variable forward(const Variable& x) override;
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
