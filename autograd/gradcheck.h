#pragma once
// gradcheck: compares the gradients backward computes with float64 central finite differences.
#include <functional>
#include <vector>

#include "autograd/variable.h"

namespace saccade {

struct GradcheckOptions {
  double eps = 1e-6;   // finite-difference step
  double atol = 1e-5;  // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-3;
  uint64_t seed = 0;  // for the random projection of the output
};

/// Checks f's derivative rules at `inputs` (torch.autograd.gradcheck).
///
/// f maps the inputs to one Variable of any shape. With a fixed random R of f's output shape, the analytic
/// gradient of L = Σ R ⊙ f(inputs) comes from backward, and the numeric one from central differences
/// (L(x + eps e_j) - L(x - eps e_j)) / 2eps for every element j of every input that requires grad. Inputs
/// keep their strides, so non-contiguous inputs are checked as given.
///
/// Inputs that require grad must be float64 on the CPU. Returns true, or throws saccade::Error naming the
/// input, the element, and both values at the first mismatch.
bool gradcheck(const std::function<Variable(const std::vector<Variable>&)>& f,
               const std::vector<Variable>& inputs, const GradcheckOptions& options = {});

/// Checks f's second derivatives at `inputs` (torch.autograd.gradgradcheck): gradcheck of the first-order
/// gradient. With random grad_outputs R of f's output shape (seeded by options.seed + 1), the function
/// (inputs, R) -> concatenation of saccade::grad(f(inputs), inputs, {R}, create_graph = true), flattened, is
/// checked against central differences in every input and in R. So every derivative rule f goes through is
/// differentiated once more, with respect to both the saved inputs and the incoming gradient.
///
/// Same requirements and errors as gradcheck; in addition throws saccade::Error naming the op when f goes
/// through an op with no second derivative.
bool gradgradcheck(const std::function<Variable(const std::vector<Variable>&)>& f,
                   const std::vector<Variable>& inputs, const GradcheckOptions& options = {});

}  // namespace saccade
