#pragma once
// module_gradcheck: a float64 finite-difference check of a module's gradients with respect to its inputs AND
// its parameters. saccade::gradcheck re-wraps its inputs as fresh leaves, which a module's own parameter
// handles cannot be swapped for; this check perturbs the given leaves' data in place instead, with the same
// rule as gradcheck: L = Σ R ⊙ f(), |analytic - numeric| <= atol + rtol |numeric|, central differences.
#include <cmath>
#include <functional>
#include <vector>

#include "helpers.h"

namespace saccade::testing {

/// Checks d(Σ R ⊙ f())/d(leaf) for every leaf in `wrt` (float64 CPU leaves that require grad: the inputs and
/// the module's parameters). Throws saccade::Error naming the leaf and element at the first mismatch.
inline bool module_gradcheck(const std::function<Variable()>& f, const std::vector<Variable>& wrt,
                             double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3) {
  for (const Variable& v : wrt) {
    SACCADE_CHECK(v.requires_grad() && v.is_leaf() && v.dtype() == DType::Float64,
                  "module_gradcheck: every leaf must be a float64 leaf that requires grad");
    Variable handle = v;
    handle.zero_grad();
  }
  Variable out = f();
  Generator gen(7);
  Tensor r = ops::randn(out.shape(), DType::Float64, Device::cpu(), &gen);
  out.backward(r);
  auto objective = [&]() {
    NoGradGuard ng;
    return ops::sum(ops::mul(f().data(), r)).item<double>();
  };
  for (size_t i = 0; i < wrt.size(); ++i) {
    Tensor x = wrt[i].data();
    std::vector<double> analytic =
        wrt[i].grad().defined() ? wrt[i].grad().to_vector<double>() : std::vector<double>(x.numel(), 0.0);
    for (int64_t j = 0; j < x.numel(); ++j) {
      double* p = static_cast<double*>(x.storage()->data()) + x.offset();
      for (int64_t d = x.dim() - 1, k = j; d >= 0; --d) {
        p += (k % x.shape()[d]) * x.strides()[d];
        k /= x.shape()[d];
      }
      const double v = *p;
      *p = v + eps;
      double lp = objective();
      *p = v - eps;
      double lm = objective();
      *p = v;
      double numeric = (lp - lm) / (2 * eps), a = analytic[static_cast<size_t>(j)];
      SACCADE_CHECK(std::abs(a - numeric) <= atol + rtol * std::abs(numeric),
                    "module_gradcheck: leaf {} (shape {}), element {}: analytic {} but numeric {}", i,
                    x.shape(), j, a, numeric);
    }
  }
  return true;
}

/// The module's parameters followed by `inputs`: the leaves module_gradcheck checks.
inline std::vector<Variable> leaves(const nn::Module& m, std::vector<Variable> inputs) {
  std::vector<Variable> out = m.parameters();
  out.insert(out.end(), inputs.begin(), inputs.end());
  return out;
}

/// A float64 leaf that requires grad, from rand64.
inline Variable leaf64(const Shape& shape, uint64_t seed) { return Variable(rand64(shape, seed), true); }

}  // namespace saccade::testing
