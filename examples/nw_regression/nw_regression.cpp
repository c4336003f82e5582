#include "examples/nw_regression/nw_regression.h"

#include <cmath>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/grad_mode.h"
#include "nn/optim.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/random.h"
#include "ops/reduce.h"

namespace saccade::examples {

// TEMPORARY: the pooling written inline until nn/nadaraya_watson.h (branch attn) lands.
namespace {
// q (Q), k (Q, K) or (K), v like k -> scores (Q, K)
Variable pairwise_diff(const Variable& q, const Variable& k) {
  Variable kk = k.dim() == 1 ? unsqueeze(k, 0) : k;
  return unsqueeze(q, 1) - kk;
}
}  // namespace

std::string kernel_name(NwKernel kernel) {
  switch (kernel) {
    case NwKernel::Gaussian:
      return "gaussian";
    case NwKernel::Boxcar:
      return "boxcar";
    case NwKernel::Epanechnikov:
      return "epanechnikov";
  }
  return "?";
}

NwFit average_pooling(const Tensor& x_query, const Tensor& y_train) {
  double m = ops::mean(y_train).item<double>();
  return {ops::full({x_query.numel()}, m), Tensor(), 0};
}

NwFit nonparametric_nw(const Tensor& x_query, const Tensor& x_train, const Tensor& y_train, NwKernel kernel,
                       double width) {
  SACCADE_CHECK(width > 0, "nonparametric_nw: width must be > 0, got {}", width);
  NoGradGuard no_grad;
  Variable u = pairwise_diff(Variable(x_query), Variable(x_train)) / width;
  Variable k;
  switch (kernel) {
    case NwKernel::Gaussian:
      k = exp(u * u * -0.5);
      break;
    case NwKernel::Boxcar:
      k = Variable(ops::lt(ops::abs(u.data()), ops::scalar_tensor(1.0)).to(DType::Float32));
      break;
    case NwKernel::Epanechnikov:
      k = relu(1.0 - abs(u));
      break;
  }
  Variable s = sum(k, {1}, true);
  Tensor empty = ops::eq(s.data(), ops::scalar_tensor(0.0));
  int64_t empty_rows = ops::sum(empty.to(DType::Int64)).item<int64_t>();
  Variable a = where(empty, Variable(ops::zeros_like(k.data())),
                     k / where(empty, Variable(ops::ones_like(s.data())), s));
  Variable y = matmul(a, Variable(y_train));
  return {y.data(), a.data(), empty_rows};
}

LeaveOneOut leave_one_out(const Tensor& x_train, const Tensor& y_train) {
  SACCADE_CHECK(x_train.dim() == 1 && y_train.shape() == x_train.shape() && x_train.numel() >= 2,
                "leave_one_out: need x_train and y_train of one 1-d shape with n >= 2, got {} and {}",
                x_train.shape(), y_train.shape());
  int64_t n = x_train.numel();
  std::vector<float> x = x_train.to_vector<float>(), y = y_train.to_vector<float>(), keys, values;
  keys.reserve(n * (n - 1));
  values.reserve(n * (n - 1));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      if (j != i) keys.push_back(x[j]), values.push_back(y[j]);
  return {ops::from_vector(keys, {n, n - 1}), ops::from_vector(values, {n, n - 1})};
}

ParametricRun train_parametric_nw(const NwData& data, const ParametricOptions& options,
                                  const std::function<void(int64_t, double)>& on_epoch) {
  SACCADE_CHECK(options.epochs >= 1 && options.lr > 0,
                "train_parametric_nw: need epochs >= 1 and lr > 0, got {} and {}", options.epochs,
                options.lr);
  Generator gen(options.seed);
  Variable w(ops::rand({1}, DType::Float32, Device::cpu(), &gen), true);
  auto forward = [&](const Tensor& q, const Tensor& k, const Tensor& v, Tensor* attn) {
    Variable d = pairwise_diff(Variable(q), Variable(k)) * w;
    Variable a = softmax(d * d * -0.5, 1);
    if (attn) *attn = a.data();
    Variable vv = v.dim() == 1 ? unsqueeze(Variable(v), 0) : Variable(v);
    return sum(a * vv, {1});
  };
  ParametricRun run;
  run.w_init = w.item<double>();
  LeaveOneOut loo = leave_one_out(data.x_train, data.y_train);
  nn::SGD sgd({w}, nn::SGDOptions{.lr = options.lr});
  for (int64_t epoch = 1; epoch <= options.epochs; ++epoch) {
    sgd.zero_grad();
    Variable loss = mse_loss(forward(data.x_train, loo.keys, loo.values, nullptr), Variable(data.y_train),
                             Reduction::Sum);
    loss.backward();
    sgd.step();
    run.epoch_loss.push_back(loss.item<double>());
    run.epoch_w.push_back(w.item<double>());
    if (on_epoch) on_epoch(epoch, run.epoch_loss.back());
  }
  run.w = w.item<double>();
  NoGradGuard no_grad;
  Tensor attn;
  Variable y = forward(data.x_test, data.x_train, data.y_train, &attn);
  run.fit = {y.data(), attn, 0};
  return run;
}

double mse(const Tensor& prediction, const Tensor& truth) {
  SACCADE_CHECK(prediction.dim() == 1 && prediction.shape() == truth.shape(),
                "mse: need two 1-d tensors of one length, got {} and {}", prediction.shape(), truth.shape());
  std::vector<double> p = prediction.to_vector<double>(), t = truth.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += (p[i] - t[i]) * (p[i] - t[i]);
  return p.empty() ? 0 : s / static_cast<double>(p.size());
}

}  // namespace saccade::examples
