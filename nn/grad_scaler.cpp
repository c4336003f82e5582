// GradScaler (torch.amp.GradScaler): the per-optimizer bookkeeping here, the device work in ops/amp.h.
#include "nn/grad_scaler.h"

#include <cmath>

#include "autograd/functions/elementwise.h"
#include "autograd/grad_mode.h"
#include "ops/amp.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace saccade::nn {

namespace {
void check_options(const GradScalerOptions& o, const char* op) {
  SACCADE_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0,
                "{}: init_scale must be finite and > 0, got {}", op, o.init_scale);
  SACCADE_CHECK(std::isfinite(o.growth_factor) && o.growth_factor > 1,
                "{}: growth_factor must be finite and > 1, got {}", op, o.growth_factor);
  SACCADE_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1, "{}: backoff_factor must be in (0, 1), got {}",
                op, o.backoff_factor);
  SACCADE_CHECK(o.growth_interval >= 1, "{}: growth_interval must be >= 1, got {}", op, o.growth_interval);
}
}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  check_options(options_, "GradScaler");
  scale_ = ops::full({1}, options_.init_scale, DType::Float32, options_.device);
  growth_tracker_ = ops::zeros({1}, DType::Int64, options_.device);
}

Variable GradScaler::scale(const Variable& loss) const {
  SACCADE_CHECK(loss.defined(), "GradScaler::scale: got an undefined loss");
  if (!options_.enabled) return loss;
  SACCADE_CHECK(loss.data().device() == options_.device,
                "GradScaler::scale: the loss is on {}, the scaler on {}", loss.data().device(),
                options_.device);
  return mul(loss, Variable(scale_.reshape({})));  // 0-d: the loss keeps its shape
}

GradScaler::PerOptimizer& GradScaler::state_of(const Optimizer& optimizer) {
  PerOptimizer& s = per_optimizer_[&optimizer];
  if (!s.found_inf.defined()) s.found_inf = ops::zeros({1}, DType::Float32, options_.device);
  return s;
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!options_.enabled) return;
  PerOptimizer& s = state_of(optimizer);
  SACCADE_CHECK(!s.unscaled,
                "GradScaler::unscale_: already called on this optimizer since the last update()");
  SACCADE_CHECK(!s.stepped, "GradScaler::unscale_: called after step() and before update()");
  NoGradGuard no_grad;
  // 1 / S in float64, then float32, as PyTorch (self._scale.double().reciprocal().float())
  const Tensor inv_scale = ops::rdiv(scale_.to(DType::Float64), 1.0).to(DType::Float32);
  std::vector<Tensor> grads;
  for (const Variable& p : optimizer.parameters())
    if (p.grad().defined()) grads.push_back(p.grad());
  ops::amp_foreach_non_finite_check_and_unscale_(grads, s.found_inf, inv_scale);
  s.unscaled = true;
  s.checked = !grads.empty();
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  PerOptimizer& s = state_of(optimizer);
  SACCADE_CHECK(!s.stepped, "GradScaler::step: already called on this optimizer since the last update()");
  if (!s.unscaled) unscale_(optimizer);
  // as PyTorch: a step with no gradient at all is a mistake (backward not run, or the wrong optimizer)
  SACCADE_CHECK(s.checked,
                "GradScaler::step: no inf checks were recorded for this optimizer: none of its {} parameters "
                "has a gradient (run backward on the scaled loss first)",
                optimizer.parameters().size());
  const bool finite = s.found_inf.item<float>() == 0.0f;  // the step's one host read
  if (finite) optimizer.step();
  s.stepped = true;
  return finite;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  SACCADE_CHECK(!per_optimizer_.empty(),
                "GradScaler::update: no optimizer was stepped or unscaled since the last update()");
  bool checked = false;
  for (const auto& [opt, s] : per_optimizer_) checked = checked || s.checked;
  SACCADE_CHECK(
      checked,
      "GradScaler::update: no inf checks were recorded prior to update: the {} optimizer(s) unscaled "
      "since the last update had no gradients",
      per_optimizer_.size());
  Tensor found_inf = ops::zeros({1}, DType::Float32, options_.device);
  for (const auto& [opt, s] : per_optimizer_) found_inf = ops::add(found_inf, s.found_inf);
  ops::amp_update_scale_(scale_, growth_tracker_, found_inf, options_.growth_factor, options_.backoff_factor,
                         options_.growth_interval);
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!options_.enabled) return;
  SACCADE_CHECK(std::isfinite(new_scale) && new_scale > 0,
                "GradScaler::update: new_scale must be finite and > 0, got {}", new_scale);
  scale_ = ops::full({1}, new_scale, DType::Float32, options_.device);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const { return options_.enabled ? scale_.item<float>() : 1.0; }
int64_t GradScaler::growth_tracker() const { return options_.enabled ? growth_tracker_.item<int64_t>() : 0; }

// ---- state ----

namespace {
const char* const kFloatKeys[] = {"scale", "growth_factor", "backoff_factor"};
const char* const kIntKeys[] = {"growth_interval", "_growth_tracker"};
}  // namespace

StateDict GradScaler::state_dict() const {
  StateDict out;
  if (!options_.enabled) return out;
  out.insert("scale", ops::scalar_tensor(get_scale(), DType::Float64));
  out.insert("growth_factor", ops::scalar_tensor(options_.growth_factor, DType::Float64));
  out.insert("backoff_factor", ops::scalar_tensor(options_.backoff_factor, DType::Float64));
  out.insert("growth_interval",
             ops::scalar_tensor(static_cast<double>(options_.growth_interval), DType::Int64));
  out.insert("_growth_tracker", ops::scalar_tensor(static_cast<double>(growth_tracker()), DType::Int64));
  return out;
}

void GradScaler::check_state_dict(const StateDict& dict) const {
  constexpr const char* op = "GradScaler::load_state_dict";
  if (!options_.enabled) return;  // loads nothing, so nothing to check (as PyTorch's)
  SACCADE_CHECK(!dict.empty(), "{}: the state dict is empty (saved from a disabled GradScaler?)", op);
  for (const char* k : kFloatKeys) {
    const Tensor* t = dict.find(k);
    SACCADE_CHECK(t && t->numel() == 1 && is_floating(t->dtype()),
                  "{}: '{}' must be a one-element float tensor", op, k);
  }
  for (const char* k : kIntKeys) {
    const Tensor* t = dict.find(k);
    SACCADE_CHECK(t && t->numel() == 1 && t->dtype() == DType::Int64,
                  "{}: '{}' must be a one-element int64 tensor", op, k);
  }
  for (const std::string& k : dict.keys()) {
    bool known = false;
    for (const char* f : kFloatKeys) known |= k == f;
    for (const char* f : kIntKeys) known |= k == f;
    SACCADE_CHECK(known, "{}: unexpected key '{}'", op, k);
  }
  GradScalerOptions o = options_;
  o.init_scale = dict.at("scale").item<double>();
  o.growth_factor = dict.at("growth_factor").item<double>();
  o.backoff_factor = dict.at("backoff_factor").item<double>();
  o.growth_interval = dict.at("growth_interval").item<int64_t>();
  check_options(o, op);
  const int64_t tracker = dict.at("_growth_tracker").item<int64_t>();
  SACCADE_CHECK(tracker >= 0 && tracker < o.growth_interval, "{}: '_growth_tracker' {} is outside [0, {})",
                op, tracker, o.growth_interval);
}

void GradScaler::load_state_dict(const StateDict& dict) {
  if (!options_.enabled) return;  // as PyTorch's: a disabled scaler keeps no state
  check_state_dict(dict);
  options_.init_scale = dict.at("scale").item<double>();
  options_.growth_factor = dict.at("growth_factor").item<double>();
  options_.backoff_factor = dict.at("backoff_factor").item<double>();
  options_.growth_interval = dict.at("growth_interval").item<int64_t>();
  scale_ = ops::full({1}, options_.init_scale, DType::Float32, options_.device);
  growth_tracker_ = ops::full({1}, static_cast<double>(dict.at("_growth_tracker").item<int64_t>()),
                              DType::Int64, options_.device);
  per_optimizer_.clear();
}

}  // namespace saccade::nn
