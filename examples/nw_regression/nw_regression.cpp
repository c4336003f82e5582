#include "examples/nw_regression/nw_regression.h"

#include "autograd/functions/nn.h"
#include "autograd/grad_mode.h"
#include "examples/common/step_profiler.h"
#include "nn/optim.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/random.h"
#include "ops/reduce.h"

namespace saccade::examples {

std::string kernel_name(nn::Kernel kernel) {
  switch (kernel) {
    case nn::Kernel::Gaussian:
      return "gaussian";
    case nn::Kernel::Boxcar:
      return "boxcar";
    case nn::Kernel::Epanechnikov:
      return "epanechnikov";
    case nn::Kernel::Triangular:
      return "triangular";
    case nn::Kernel::Constant:
      return "constant";
  }
  return "?";
}

// x_query: (Q), y_train: (K) -> y_hat (Q)
NwFit average_pooling(const Tensor& x_query, const Tensor& y_train) {
  return {ops::full({x_query.numel()}, ops::mean(y_train).item<double>()), Tensor(), 0};
}

// x_query: (Q), x_train, y_train: (K) -> y_hat (Q), attention (Q, K)
NwFit nonparametric_nw(const Tensor& x_query, const Tensor& x_train, const Tensor& y_train, nn::Kernel kernel,
                       double width) {
  NoGradGuard no_grad;
  nn::NadarayaWatson pool(kernel, width);
  nn::NadarayaWatsonOutput out = pool.forward(x_query, x_train, y_train);
  // all-zero rows: no key inside the kernel's support
  Tensor row_sums = ops::sum(out.weights.data(), {1});
  int64_t empty = ops::sum(ops::eq(row_sums, 0.0).to(DType::Int64)).item<int64_t>();
  return {out.predictions.data(), out.weights.data(), empty};
}

// x_train, y_train: (n) -> keys, values (n, n - 1)
LeaveOneOut leave_one_out(const Tensor& x_train, const Tensor& y_train) {
  SACCADE_CHECK(x_train.defined() && y_train.defined() && x_train.dim() == 1 &&
                    y_train.shape() == x_train.shape() && x_train.numel() >= 2,
                "leave_one_out: need x_train and y_train of one 1-d shape with n >= 2, got {} and {}",
                x_train.defined() ? x_train.shape() : Shape{}, y_train.defined() ? y_train.shape() : Shape{});
  const int64_t n = x_train.numel();
  std::vector<double> x = x_train.to_vector<double>(), y = y_train.to_vector<double>(), keys, values;
  keys.reserve(n * (n - 1));
  values.reserve(n * (n - 1));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      if (j != i) keys.push_back(x[j]), values.push_back(y[j]);
  return {ops::from_vector(keys, {n, n - 1}).to(x_train.dtype()),
          ops::from_vector(values, {n, n - 1}).to(y_train.dtype())};
}

ParametricRun train_parametric_nw(const NwData& data, const ParametricOptions& options,
                                  const std::function<void(int64_t, double)>& on_epoch) {
  SACCADE_CHECK(options.epochs >= 1 && options.lr > 0,
                "train_parametric_nw: need epochs >= 1 and lr > 0, got {} and {}", options.epochs,
                options.lr);
  Generator gen(options.seed);
  nn::ParametricNadarayaWatson net(&gen);
  nn::SGD trainer(net.parameters(), nn::SGDOptions{.lr = options.lr});
  // Each training query attends to the other n - 1 training points.
  const LeaveOneOut loo = leave_one_out(data.x_train, data.y_train);

  ParametricRun run;
  run.w_init = net.w.item<double>();
  StepProfiler profile(options.profile_trace, 1, 3);
  for (int64_t epoch = 1; epoch <= options.epochs; ++epoch) {
    profile.step();
    trainer.zero_grad();
    Variable y_hat = net.forward(data.x_train, loo.keys, loo.values).predictions;
    Variable loss = mse_loss(y_hat, data.y_train, Reduction::Sum);
    loss.backward();
    trainer.step();
    run.epoch_loss.push_back(loss.item<double>());
    run.epoch_w.push_back(net.w.item<double>());
    profile.end_step(epoch == options.epochs);
    if (on_epoch) on_epoch(epoch, run.epoch_loss.back());
  }
  profile.finish();
  run.w = net.w.item<double>();

  NoGradGuard no_grad;
  nn::NadarayaWatsonOutput test = net.forward(data.x_test, data.x_train, data.y_train);
  run.fit = {test.predictions.data(), test.weights.data(), 0};
  return run;
}

double mse(const Tensor& prediction, const Tensor& truth) {
  SACCADE_CHECK(
      prediction.defined() && truth.defined() && prediction.dim() == 1 && prediction.shape() == truth.shape(),
      "mse: need two 1-d tensors of one length, got {} and {}",
      prediction.defined() ? prediction.shape() : Shape{}, truth.defined() ? truth.shape() : Shape{});
  std::vector<double> p = prediction.to_vector<double>(), t = truth.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += (p[i] - t[i]) * (p[i] - t[i]);
  return p.empty() ? 0 : s / static_cast<double>(p.size());
}

}  // namespace saccade::examples
