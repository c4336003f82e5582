#include "autograd/gradcheck.h"

#include <cmath>

#include "autograd/functions/shape.h"
#include "autograd/grad_mode.h"
#include "ops/creation.h"
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

bool gradgradcheck(const std::function<Variable(const std::vector<Variable>&)>& f,
                   const std::vector<Variable>& inputs, const GradcheckOptions& opt) {
  std::vector<size_t> wrt;  // positions of the inputs that require grad
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) wrt.push_back(i);
  SACCADE_CHECK(!wrt.empty(), "gradgradcheck: no input requires grad");
  Shape out_shape;
  {
    NoGradGuard ng;
    out_shape = f(inputs).shape();
  }
  Generator gen(opt.seed + 1);
  std::vector<Variable> args = inputs;
  args.push_back(Variable(ops::randn(out_shape, DType::Float64, Device::cpu(), &gen), true));
  // (inputs, R) -> the first-order gradients, flattened and concatenated
  auto first_order = [&](const std::vector<Variable>& xs) {
    AutoGradMode record(true);  // gradcheck evaluates its objective under NoGradGuard
    std::vector<Variable> in(xs.begin(), xs.end() - 1), wanted;
    for (size_t i : wrt) wanted.push_back(in[i]);
    Variable out = f(in);
    std::vector<Variable> gs = grad({out}, wanted, {xs.back().to(out.dtype())}, std::nullopt, true, true);
    std::vector<Variable> flat;
    for (size_t j = 0; j < gs.size(); ++j)
      flat.push_back(reshape(gs[j].defined() ? gs[j] : Variable(ops::zeros_like(wanted[j].data())), {-1}));
    return cat(flat, 0);
  };
  return gradcheck(first_order, args, opt);
}

}  // namespace saccade
