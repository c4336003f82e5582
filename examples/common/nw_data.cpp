#include "examples/common/nw_data.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/creation.h"
#include "ops/random.h"

namespace saccade::examples {

double nw_true_function(double x) { return 2 * std::sin(x) + std::pow(x, 0.8); }

NwData make_nw_data(uint64_t seed, int64_t n_train, double noise_std) {
  SACCADE_CHECK(n_train >= 1 && noise_std >= 0,
                "make_nw_data: need n_train >= 1 and noise_std >= 0, got {} and {}", n_train, noise_std);
  Generator gen(seed);
  std::vector<float> x = ops::rand({n_train}, DType::Float32, Device::cpu(), &gen).to_vector<float>();
  std::vector<float> eps =
      ops::normal({n_train}, 0.0, noise_std, DType::Float32, Device::cpu(), &gen).to_vector<float>();
  for (float& v : x) v *= 5.0f;
  std::sort(x.begin(), x.end());
  std::vector<float> y(x.size()), x_test(50), y_truth(50);
  for (size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(nw_true_function(x[i])) + eps[i];
  for (int i = 0; i < 50; ++i) {
    x_test[i] = static_cast<float>(i * 0.1);
    y_truth[i] = static_cast<float>(nw_true_function(i * 0.1));
  }
  return {ops::from_vector(x, {n_train}), ops::from_vector(y, {n_train}), ops::from_vector(x_test, {50}),
          ops::from_vector(y_truth, {50})};
}

}  // namespace saccade::examples
