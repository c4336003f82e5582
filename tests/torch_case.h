#pragma once
// Reading the PyTorch 1.13 fixtures of tests/fixtures/make_layers.py (tests/data/layers_*.safetensors): one
// case per module, keys "<case>.param.<torch name>", "<case>.in.<name>", "<case>.gy.<k>", "<case>.out.<k>",
// "<case>.grad.<torch name>", "<case>.gin.<name>".
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "helpers.h"

namespace saccade::testing {

/// The largest relative error max_i |a_i - b_i| / |b_i| over the elements, where entries of b smaller than
/// `floor` times b's largest magnitude count as that (so that a value that cancels to ~0 in float32 does not
/// make the measure meaningless). Infinity for a shape mismatch.
inline double max_rel_error(const Tensor& a, const Tensor& b, double floor = 1e-2) {
  if (!(a.shape() == b.shape())) return INFINITY;
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double scale = 0, err = 0;
  for (double v : y) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < x.size(); ++i) {
    double d = std::max(std::abs(y[i]), floor * scale);
    if (d > 0) err = std::max(err, std::abs(x[i] - y[i]) / d);
  }
  return err;
}

/// One fixture case: its tensors, and the errors seen per module (printed when SACCADE_PRINT_ERRORS is set).
class TorchCase {
 public:
  TorchCase(const std::string& file, std::string name) : name_(std::move(name)) {
    static std::map<std::string, nn::StateDict> cache;
    auto it = cache.find(file);
    if (it == cache.end())
      it = cache.emplace(file, nn::load_safetensors(std::string(SACCADE_TEST_DATA_DIR) + "/" + file).tensors)
               .first;
    dict_ = &it->second;
  }
  const Tensor& at(const std::string& kind, const std::string& key) const {
    return dict_->at(name_ + "." + kind + "." + key);
  }
  Tensor in(const std::string& key) const { return at("in", key).clone(); }
  const Tensor& gy(int k = 0) const { return at("gy", std::to_string(k)); }
  const Tensor& out(int k = 0) const { return at("out", std::to_string(k)); }
  /// The module's parameters as torch saved them, under torch's names.
  nn::StateDict params() const {
    nn::StateDict sd;
    const std::string prefix = name_ + ".param.";
    for (const auto& [k, t] : *dict_)
      if (k.rfind(prefix, 0) == 0) sd.insert(k.substr(prefix.size()), t);
    return sd;
  }
  /// Records and returns the relative error of `ours` against torch's `theirs`.
  double compare(const std::string& what, const Tensor& ours, const Tensor& theirs) {
    double e = max_rel_error(ours, theirs);
    if (std::getenv("SACCADE_PRINT_ERRORS"))
      std::printf("%-22s %-28s %.3g\n", name_.c_str(), what.c_str(), e);
    return e;
  }
  /// Backward of Σ_k out_k ⊙ gy_k.
  void backward(const std::vector<Variable>& outs) const {
    Variable total;
    for (size_t k = 0; k < outs.size(); ++k) {
      Variable term = sum(outs[k] * Variable(gy(static_cast<int>(k))));
      total = total.defined() ? total + term : term;
    }
    total.backward();
  }
  /// Compares every parameter gradient of `m` (named as torch) and returns the largest error.
  double compare_param_grads(const nn::Module& m) {
    double worst = 0;
    for (const auto& [k, p] : m.named_parameters()) {
      REQUIRE(p.grad().defined());
      worst = std::max(worst, compare("grad " + k, p.grad(), at("grad", k)));
    }
    return worst;
  }

 private:
  const nn::StateDict* dict_;
  std::string name_;
};

}  // namespace saccade::testing
