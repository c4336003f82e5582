#pragma once
// The Nadaraya-Watson regression data of d2l (v0.17 / zh-v2) section 10.2, "Attention Pooling:
// Nadaraya-Watson Kernel Regression": y = 2 sin x + x^0.8 + eps. (Later d2l editions changed this data set;
// we keep this one.)
#include <cstdint>

#include "ops/tensor.h"

namespace saccade::examples {

/// The noise-free function f(x) = 2 sin(x) + x^0.8 (x >= 0).
double nw_true_function(double x);

/// The regression data set, all float32 1-d tensors.
struct NwData {
  Tensor x_train;  ///< (n): sort(5 * U(0, 1)), ascending
  Tensor y_train;  ///< (n): f(x_train) + eps, eps ~ N(0, noise_std^2)
  Tensor x_test;   ///< (50): 0, 0.1, ..., 4.9
  Tensor y_truth;  ///< (50): f(x_test), no noise
};

/// Draws the data set from saccade::Generator(seed): first the n uniforms (ops::rand), then the n normals
/// (ops::normal), so the same seed gives the same data. d2l uses n = 50 and torch.normal(0.0, 0.5), i.e.
/// standard deviation 0.5. Throws saccade::Error for n_train < 1 or noise_std < 0.
NwData make_nw_data(uint64_t seed = 0, int64_t n_train = 50, double noise_std = 0.5);

}  // namespace saccade::examples
