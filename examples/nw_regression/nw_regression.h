#pragma once
// The Nadaraya-Watson regression experiment of d2l (v0.17 / zh-v2) section 10.2, "Attention Pooling:
// Nadaraya-Watson Kernel Regression", with the kernels and widths of d2l 1.0 section 11.2: average pooling,
// nonparametric attention pooling (nn::NadarayaWatson) and parametric attention pooling with a learnable
// width (nn::ParametricNadarayaWatson) trained on leave-one-out keys. main.cpp prints and plots the results;
// tests/test_nw_integration.cpp checks them.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "examples/common/nw_data.h"
#include "nn/nadaraya_watson.h"
#include "ops/tensor.h"

namespace saccade::examples {

/// The kernel's name: "gaussian", "boxcar", "epanechnikov", "triangular", "constant".
std::string kernel_name(nn::Kernel kernel);

/// A pooling's predictions for the test queries, and where it applies its attention weights.
struct NwFit {
  Tensor y_hat;            ///< (Q) float32: the prediction at each query
  Tensor attention;        ///< (Q, K) float32: the attention weights (rows sum to 1, or 0 where no key is in
                           ///< the kernel's window), undefined for average pooling
  int64_t empty_rows = 0;  ///< queries with no key inside the kernel's support (prediction 0)
};

/// Average pooling (d2l 10.2.2): every query predicts mean(y_train). x_query (Q), y_train (K) -> y_hat (Q).
NwFit average_pooling(const Tensor& x_query, const Tensor& y_train);

/// Nonparametric Nadaraya-Watson pooling (d2l 10.2.3, eq. 10.2.3) through nn::NadarayaWatson:
/// y_hat(q) = sum_i a(q, x_i) y_i with a(q, x_i) = K((q - x_i) / width) / sum_j K((q - x_j) / width).
/// x_query (Q), x_train (K), y_train (K) float32. A query with no key inside a compact kernel's support
/// predicts 0 (counted in empty_rows). Throws saccade::Error for width <= 0.
NwFit nonparametric_nw(const Tensor& x_query, const Tensor& x_train, const Tensor& y_train, nn::Kernel kernel,
                       double width);

/// The leave-one-out keys and values of d2l 10.2.4.2: row i holds every training point except the i-th,
/// so a training query never attends to itself. x, y (n) -> keys, values (n, n - 1), of x's and y's dtypes.
struct LeaveOneOut {
  Tensor keys, values;
};
LeaveOneOut leave_one_out(const Tensor& x_train, const Tensor& y_train);

/// The training of parametric Nadaraya-Watson pooling (d2l 10.2.4, nn::ParametricNadarayaWatson),
/// attention softmax(-((q - k) w)^2 / 2):
/// each epoch is one full-batch SGD step on the summed squared error of the training queries against their
/// leave-one-out keys, as d2l's loop (MSELoss(reduction='none'), l.sum().backward()).
struct ParametricOptions {
  int64_t epochs = 5;
  double lr = 0.5;
  uint64_t seed = 0;  ///< draws the initial w (U[0, 1), as d2l's torch.rand((1,)))
  /// --profile FILE: a Chrome trace of a few steps (examples/common/step_profiler.h)
  std::string profile_trace = {};
};

/// What the training produced; the fit is on the test queries against all training points.
struct ParametricRun {
  double w_init = 0, w = 0;        ///< the width parameter before and after training
  std::vector<double> epoch_loss;  ///< summed training loss of each epoch (before its update, as d2l prints)
  std::vector<double> epoch_w;     ///< w after each epoch's update
  NwFit fit;                       ///< predictions and attention on the test queries
};

/// Trains parametric NW on `data` and evaluates it on data.x_test. `on_epoch(epoch, loss)` (1-based), when
/// given, is called after each epoch. Throws saccade::Error for epochs < 1 or lr <= 0.
ParametricRun train_parametric_nw(const NwData& data, const ParametricOptions& options,
                                  const std::function<void(int64_t, double)>& on_epoch = {});

/// Mean squared error between two 1-d tensors of one length (float64 accumulation).
double mse(const Tensor& prediction, const Tensor& truth);

}  // namespace saccade::examples
