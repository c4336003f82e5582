#include "autograd/gradcheck.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "ops/elementwise.h"
#include "ops/random.h"
#include "ops/reduce.h"

namespace saccade {

// Address of the j-th element (row-major logical order) of a strided float64 tensor.
static double* element(const Tensor& t, int64_t j) {
  double* p = static_cast<double*>(t.storage()->data()) + t.offset();
  for (int d = t.dim() - 1; d >= 0; --d) {
    p += (j % t.shape()[d]) * t.strides()[d];
    j /= t.shape()[d];
  }
  return p;
}

bool gradcheck(const std::function<Variable(const std::vector<Variable>&)>& f,
               const std::vector<Variable>& inputs, const GradcheckOptions& opt) {
  std::vector<Variable> xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Variable& in = inputs[i];
    if (in.defined() && in.requires_grad())
      SACCADE_CHECK(in.dtype() == DType::Float64 && in.device().is_cpu(),
                    "gradcheck: input {} must be a float64 cpu tensor, got {} on {}", i, in.dtype(),
                    in.device());
    // fresh leaves sharing the inputs' data (and strides)
    xs.push_back(in.defined() ? Variable(in.data(), in.requires_grad()) : Variable());
  }
  Variable out = f(xs);
  SACCADE_CHECK(out.defined() && out.requires_grad(),
                "gradcheck: the function's result does not require grad");
  Generator gen(opt.seed);
  Tensor r = ops::randn(out.shape(), DType::Float64, Device::cpu(), &gen);
  out.backward(r.to(out.dtype()));

  auto objective = [&]() {
    NoGradGuard ng;
    Tensor y = f(xs).data().to(DType::Float64);
    return ops::sum(ops::mul(y, r)).item<double>();
  };
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].defined() || !xs[i].requires_grad()) continue;
    const Tensor& x = xs[i].data();
    std::vector<double> analytic =
        xs[i].grad().defined() ? xs[i].grad().to_vector<double>() : std::vector<double>(x.numel(), 0.0);
    for (int64_t j = 0; j < x.numel(); ++j) {
      double* p = element(x, j);
      const double v = *p;
      *p = v + opt.eps;
      double lp = objective();
      *p = v - opt.eps;
      double lm = objective();
      *p = v;
      double numeric = (lp - lm) / (2 * opt.eps);
      double a = analytic[static_cast<size_t>(j)];
      SACCADE_CHECK(std::abs(a - numeric) <= opt.atol + opt.rtol * std::abs(numeric),
                    "gradcheck: input {} (shape {}), element {}: analytic gradient {} but numeric {}", i,
                    x.shape(), j, a, numeric);
    }
  }
  return true;
}

}  // namespace saccade
