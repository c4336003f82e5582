// examples/nw_regression end to end: d2l's parametric Nadaraya-Watson training lowers its loss, and
// nonparametric gaussian pooling beats average pooling. Compiled only when examples/nw_regression/
// CMakeLists.txt built the experiment's library and defined the macro below.
#ifdef SACCADE_HAVE_NW_REGRESSION

#include <cmath>

#include "autograd/functions/nn.h"
#include "autograd/grad_mode.h"
#include "examples/common/nw_data.h"
#include "examples/nw_regression/nw_regression.h"
#include "helpers.h"
#include "ops/elementwise.h"

using namespace saccade;
using namespace saccade::examples;

TEST_CASE("nw regression: parametric NW loss falls over the 5 d2l epochs", "[slow][examples][nw]") {
  for (uint64_t seed : {0, 1, 2}) {
    NwData d = make_nw_data(seed);
    ParametricRun run = train_parametric_nw(d, {.epochs = 5, .lr = 0.5, .seed = seed});
    INFO("seed " << seed << " loss epoch 1 " << run.epoch_loss.front() << " epoch 5 "
                 << run.epoch_loss.back());
    REQUIRE(run.epoch_loss.size() == 5);
    REQUIRE(run.epoch_w.size() == 5);
    // "Clearly below": less than 80 % of the first epoch's loss.
    CHECK(run.epoch_loss.back() < 0.8 * run.epoch_loss.front());
    CHECK(std::isfinite(run.w));
    // The trained model's attention rows are distributions over the 50 training points.
    REQUIRE(run.fit.attention.shape() == Shape{50, 50});
    std::vector<double> a = run.fit.attention.to_vector<double>();
    for (int64_t q = 0; q < 50; ++q) {
      double s = 0;
      for (int64_t k = 0; k < 50; ++k) s += a[q * 50 + k];
      CHECK(s == Approx(1.0).epsilon(1e-4));
    }
  }
}

TEST_CASE("nw regression: gaussian NW beats average pooling on test MSE", "[slow][examples][nw]") {
  for (uint64_t seed : {0, 1, 2}) {
    NwData d = make_nw_data(seed);
    double avg = mse(average_pooling(d.x_test, d.y_train).y_hat, d.y_truth);
    for (double width : {0.2, 0.5}) {
      NwFit fit = nonparametric_nw(d.x_test, d.x_train, d.y_train, nn::Kernel::Gaussian, width);
      double nw = mse(fit.y_hat, d.y_truth);
      INFO("seed " << seed << " width " << width << " average " << avg << " gaussian " << nw);
      CHECK(fit.empty_rows == 0);
      CHECK(nw < 0.5 * avg);
    }
  }
}

TEST_CASE("nw regression: leave-one-out keys drop the query's own point", "[examples][nw]") {
  Tensor x = ops::tensor({1, 2, 3}), y = ops::tensor({10, 20, 30});
  LeaveOneOut loo = leave_one_out(x, y);
  REQUIRE(loo.keys.shape() == Shape{3, 2});
  CHECK(loo.keys.to_vector<float>() == std::vector<float>{2, 3, 1, 3, 1, 2});
  CHECK(loo.values.to_vector<float>() == std::vector<float>{20, 30, 10, 30, 10, 20});
  REQUIRE_THROWS_SACCADE(leave_one_out(x, ops::tensor({1, 2})), "leave_one_out");
}

TEST_CASE("nw regression: boxcar weights by hand and empty windows", "[examples][nw]") {
  // keys 0, 1, 3; width 1.5: query 0 sees keys 0 and 1, query 5 sees none.
  Tensor xk = ops::tensor({0, 1, 3}), yk = ops::tensor({2, 4, 8}), q = ops::tensor({0, 5});
  NwFit fit = nonparametric_nw(q, xk, yk, nn::Kernel::Boxcar, 1.5);
  CHECK(fit.empty_rows == 1);
  std::vector<float> y = fit.y_hat.to_vector<float>();
  CHECK(y[0] == Approx(3.0));
  CHECK(y[1] == 0.0f);
  // Epanechnikov, width 2: u = 0, 0.5, 1.5, weights max(1 - u^2, 0) = 1, 0.75, 0 -> (2 + 3) / 1.75.
  NwFit ep = nonparametric_nw(ops::tensor({0}), xk, yk, nn::Kernel::Epanechnikov, 2.0);
  CHECK(ep.empty_rows == 0);
  CHECK(ep.y_hat.to_vector<float>()[0] == Approx(5.0 / 1.75));
  REQUIRE_THROWS_SACCADE(nonparametric_nw(q, xk, yk, nn::Kernel::Gaussian, 0.0), "NadarayaWatson");
  REQUIRE_THROWS_SACCADE(mse(q, xk), "mse");
}

TEST_CASE("nw regression: the parametric loss's gradient in w matches central differences",
          "[examples][nw]") {
  // The example's training loss (summed squared error over leave-one-out keys) in float64, at w = 0.7.
  NwData d = make_nw_data(3, 12);
  Tensor x = d.x_train.to(DType::Float64), y = d.y_train.to(DType::Float64);
  LeaveOneOut loo = leave_one_out(x, y);
  nn::ParametricNadarayaWatson net;
  net.to(DType::Float64);
  auto loss_at = [&](double w) {
    Tensor data = net.w.data();
    ops::fill_(data, w);
    return mse_loss(net.forward(x, loo.keys, loo.values).predictions, y, Reduction::Sum);
  };
  Variable l = loss_at(0.7);
  net.zero_grad();
  l.backward();
  double analytic = net.w.grad().item<double>();
  const double h = 1e-6;
  double numeric;
  {
    NoGradGuard no_grad;
    numeric = (loss_at(0.7 + h).item<double>() - loss_at(0.7 - h).item<double>()) / (2 * h);
  }
  CHECK(analytic == Approx(numeric).epsilon(1e-5));
}

#endif  // SACCADE_HAVE_NW_REGRESSION
