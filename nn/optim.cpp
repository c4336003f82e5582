// Optimizer base (groups, state_dict), SGD, Adam/AdamW and clip_grad_norm_. The update formulas follow
// torch/optim/{sgd,adam,adamw}.py (1.13, _single_tensor_*), operation for operation.
#include "nn/optim.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/join.h"
#include "ops/optim.h"
#include "ops/reduce.h"
#include "profiler/profiler.h"

namespace saccade::nn {

// ---- Optimizer ----

Optimizer::Optimizer(std::string name, std::vector<ParamGroup> groups, double lr, double weight_decay)
    : name_(std::move(name)) {
  SACCADE_CHECK(lr >= 0, "{}: invalid learning rate {}", name_, lr);
  SACCADE_CHECK(weight_decay >= 0, "{}: invalid weight_decay {}", name_, weight_decay);
  std::unordered_set<const VariableImpl*> seen;
  size_t total = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    ParamGroup& pg = groups[g];
    double glr = pg.lr.value_or(lr), gwd = pg.weight_decay.value_or(weight_decay);
    SACCADE_CHECK(glr >= 0, "{}: invalid learning rate {} in group {}", name_, glr, g);
    SACCADE_CHECK(gwd >= 0, "{}: invalid weight_decay {} in group {}", name_, gwd, g);
    for (const Variable& p : pg.params) {
      SACCADE_CHECK(p.defined(), "{}: undefined parameter in group {}", name_, g);
      SACCADE_CHECK(p.is_leaf(), "{}: can't optimize a non-leaf Variable (shape {})", name_, p.shape());
      SACCADE_CHECK(is_floating(p.dtype()), "{}: parameters must be float, got {} of shape {}", name_,
                    p.dtype(), p.shape());
      SACCADE_CHECK(seen.insert(p.impl().get()).second,
                    "{}: a parameter of shape {} appears more than once in the parameter groups", name_,
                    p.shape());
    }
    total += pg.params.size();
    groups_.push_back({std::move(pg.params), glr, gwd});
  }
  SACCADE_CHECK(total > 0, "{}: got an empty parameter list", name_);
  state_.resize(total);
}

void Optimizer::check_grads() const {
  size_t i = 0;
  for (const Group& group : groups_)
    for (const Variable& v : group.params) {
      const Tensor& g = v.grad();
      SACCADE_CHECK(
          !g.defined() || (g.dtype() == v.dtype() && g.shape() == v.shape() && g.device() == v.device()),
          "{}: the gradient of parameter {} is {} of shape {} on {}; expected {} of shape {} on {} (the "
          "parameter's)",
          name_, i, g.dtype(), g.shape(), g.device(), v.dtype(), v.shape(), v.device());
      ++i;
    }
}

void Optimizer::zero_grad() {
  for (Group& g : groups_)
    for (Variable& p : g.params) p.zero_grad();
}

double Optimizer::lr(size_t group) const {
  SACCADE_CHECK(group < groups_.size(), "{}: group {} out of range ({} groups)", name_, group,
                groups_.size());
  return groups_[group].lr;
}

void Optimizer::set_lr(size_t group, double lr) {
  SACCADE_CHECK(group < groups_.size(), "{}: group {} out of range ({} groups)", name_, group,
                groups_.size());
  SACCADE_CHECK(lr >= 0, "{}: invalid learning rate {}", name_, lr);
  groups_[group].lr = lr;
}

double Optimizer::weight_decay(size_t group) const {
  SACCADE_CHECK(group < groups_.size(), "{}: group {} out of range ({} groups)", name_, group,
                groups_.size());
  return groups_[group].weight_decay;
}

const std::vector<Variable>& Optimizer::params(size_t group) const {
  SACCADE_CHECK(group < groups_.size(), "{}: group {} out of range ({} groups)", name_, group,
                groups_.size());
  return groups_[group].params;
}

std::vector<Variable> Optimizer::parameters() const {
  std::vector<Variable> out;
  for (const Group& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  for (size_t i = 0; i < state_.size(); ++i)
    for (const auto& [key, t] : state_[i]) out.insert(fmt::format("state.{}.{}", i, key), t.clone());
  for (size_t g = 0; g < groups_.size(); ++g) {
    out.insert(fmt::format("param_groups.{}.lr", g), ops::scalar_tensor(groups_[g].lr, DType::Float64));
    out.insert(fmt::format("param_groups.{}.weight_decay", g),
               ops::scalar_tensor(groups_[g].weight_decay, DType::Float64));
    out.insert(fmt::format("param_groups.{}.num_params", g),
               ops::scalar_tensor(static_cast<double>(groups_[g].params.size()), DType::Int64));
  }
  return out;
}

namespace {
// "state.<i>.<key>" or "param_groups.<g>.<field>", split into its parts; false when the key has another form.
// The index is written as state_dict writes it: decimal digits without a leading zero, so that no two keys
// ("state.9.step", "state.09.step") name the same entry (the fuzz target of resume_gpt found that pair).
bool parse_key(const std::string& name, std::string& kind, size_t& index, std::string& field) {
  size_t a = name.find('.');
  if (a == std::string::npos) return false;
  size_t b = name.find('.', a + 1);
  if (b == std::string::npos || b == a + 1 || b + 1 == name.size()) return false;
  if (name[a + 1] == '0' && b > a + 2) return false;
  kind = name.substr(0, a);
  auto [ptr, ec] = std::from_chars(name.data() + a + 1, name.data() + b, index);
  if (ec != std::errc() || ptr != name.data() + b) return false;
  field = name.substr(b + 1);
  return kind == "state" || kind == "param_groups";
}
}  // namespace

void Optimizer::check_state_dict(const StateDict& dict) const {
  const char* op = "load_state_dict";
  std::vector<Variable> params = parameters();
  std::vector<std::string> keys = state_keys();
  for (const auto& [name, t] : dict) {
    std::string kind, field;
    size_t i = 0;
    SACCADE_CHECK(parse_key(name, kind, i, field), "{}: {}: unexpected key '{}'", name_, op, name);
    SACCADE_CHECK(t.defined(), "{}: {}: undefined tensor for '{}'", name_, op, name);
    if (kind == "param_groups") {
      SACCADE_CHECK(i < groups_.size(), "{}: {}: '{}' names group {}, but the optimizer has {} groups", name_,
                    op, name, i, groups_.size());
      SACCADE_CHECK(field == "lr" || field == "weight_decay" || field == "num_params",
                    "{}: {}: unexpected key '{}'", name_, op, name);
      SACCADE_CHECK(t.numel() == 1, "{}: {}: '{}' must have one element, got shape {}", name_, op, name,
                    t.shape());
      if (field == "num_params")
        SACCADE_CHECK(t.item<int64_t>() == static_cast<int64_t>(groups_[i].params.size()),
                      "{}: {}: group {} has {} parameters in the checkpoint and {} in the optimizer", name_,
                      op, i, t.item<int64_t>(), groups_[i].params.size());
      else
        SACCADE_CHECK(t.item<double>() >= 0, "{}: {}: negative value for '{}'", name_, op, name);
      continue;
    }
    SACCADE_CHECK(i < params.size(), "{}: {}: '{}' names parameter {}, but the optimizer has {}", name_, op,
                  name, i, params.size());
    SACCADE_CHECK(std::find(keys.begin(), keys.end(), field) != keys.end(),
                  "{}: {}: unexpected state key '{}'", name_, op, name);
    if (field == "step") {
      SACCADE_CHECK(t.numel() == 1 && t.dtype() == DType::Int64,
                    "{}: {}: '{}' must be a one-element int64 tensor, got {} of shape {}", name_, op, name,
                    t.dtype(), t.shape());
    } else {
      SACCADE_CHECK(is_floating(t.dtype()), "{}: {}: '{}' must be float, got {}", name_, op, name, t.dtype());
      SACCADE_CHECK(t.shape() == params[i].shape(), "{}: {}: '{}' has shape {}, the parameter has shape {}",
                    name_, op, name, t.shape(), params[i].shape());
    }
  }
  // a parameter's state is whole or absent: step() starts an empty one afresh and reads every key of one
  // that is not (a missing "exp_avg" made AdamW's next step throw, leaving an undefined tensor in its state)
  for (size_t i = 0; i < params.size(); ++i) {
    size_t present = 0;
    for (const std::string& key : keys) present += dict.contains(fmt::format("state.{}.{}", i, key));
    if (present == 0) continue;
    for (const std::string& key : keys)
      SACCADE_CHECK(dict.contains(fmt::format("state.{}.{}", i, key)),
                    "{}: {}: the state of parameter {} lacks '{}' (it has {} of the {} keys {})", name_, op,
                    i, fmt::format("state.{}.{}", i, key), present, keys.size(), fmt::join(keys, ", "));
  }
  for (size_t g = 0; g < groups_.size(); ++g)
    for (const char* field : {"lr", "weight_decay", "num_params"})
      SACCADE_CHECK(dict.contains(fmt::format("param_groups.{}.{}", g, field)), "{}: {}: missing key '{}'",
                    name_, op, fmt::format("param_groups.{}.{}", g, field));
}

void Optimizer::load_state_dict(const StateDict& dict) {
  check_state_dict(dict);
  std::vector<Variable> params = parameters();
  std::vector<std::map<std::string, Tensor>> state(params.size());
  for (const auto& [name, t] : dict) {
    std::string kind, field;
    size_t i = 0;
    parse_key(name, kind, i, field);
    if (kind == "state") {
      const Tensor& p = params[i].data();
      state[i][field] =
          field == "step" ? t.to(Device::cpu()).reshape({}).clone() : t.to(p.device()).to(p.dtype()).clone();
    } else if (field == "lr") {
      groups_[i].lr = t.item<double>();
    } else if (field == "weight_decay") {
      groups_[i].weight_decay = t.item<double>();
    }
  }
  state_ = std::move(state);
}

// ---- SGD ----

SGD::SGD(std::vector<Variable> params, SGDOptions options)
    : SGD(std::vector<ParamGroup>{ParamGroup{std::move(params), {}, {}}}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer("SGD", std::move(groups), options.lr, options.weight_decay), options_(options) {
  SACCADE_CHECK(options.momentum >= 0, "SGD: invalid momentum {}", options.momentum);
  SACCADE_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
                "SGD: nesterov momentum requires a momentum and zero dampening, got momentum {} dampening {}",
                options.momentum, options.dampening);
}

void SGD::step() {
  profiler::RecordFunction range("SGD.step", "optimizer");
  check_grads();
  NoGradGuard no_grad;
  size_t i = 0;
  for (Group& group : groups_) {
    for (Variable& v : group.params) {
      std::map<std::string, Tensor>& state = state_[i++];
      if (!v.grad().defined()) continue;
      Tensor p = v.data();
      Tensor d = v.grad();
      if (group.weight_decay != 0) d = ops::add(d, ops::mul(p, group.weight_decay));
      if (options_.momentum != 0) {
        auto it = state.find("momentum_buffer");
        Tensor buf;
        if (it == state.end()) {
          buf = d.clone();
          state["momentum_buffer"] = buf;
        } else {
          buf = it->second;
          ops::mul_(buf, options_.momentum);
          ops::add_(buf, d, 1 - options_.dampening);
        }
        d = options_.nesterov ? ops::add(d, ops::mul(buf, options_.momentum)) : buf;
      }
      ops::add_(p, d, -group.lr);
    }
  }
}

// ---- Adam, AdamW ----

Adam::Adam(std::vector<Variable> params, AdamOptions options)
    : Adam("Adam", std::vector<ParamGroup>{ParamGroup{std::move(params), {}, {}}}, options, false) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options)
    : Adam("Adam", std::move(groups), options, false) {}

Adam::Adam(const char* name, std::vector<ParamGroup> groups, AdamOptions options, bool decoupled)
    : Optimizer(name, std::move(groups), options.lr, options.weight_decay),
      options_(options),
      decoupled_(decoupled) {
  SACCADE_CHECK(options.eps >= 0, "{}: invalid epsilon {}", name, options.eps);
  SACCADE_CHECK(options.beta1 >= 0 && options.beta1 < 1, "{}: invalid beta1 {}", name, options.beta1);
  SACCADE_CHECK(options.beta2 >= 0 && options.beta2 < 1, "{}: invalid beta2 {}", name, options.beta2);
}

void Adam::step() {
  profiler::RecordFunction range(decoupled_ ? "AdamW.step" : "Adam.step", "optimizer");
  check_grads();
  NoGradGuard no_grad;
  const double beta1 = options_.beta1, beta2 = options_.beta2;
  size_t i = 0;
  for (Group& group : groups_) {
    // the fused path gathers the group's tensors and updates them in one op
    std::vector<Tensor> ps, gs, ms, vs;
    std::vector<int64_t> steps;
    for (Variable& v : group.params) {
      std::map<std::string, Tensor>& state = state_[i++];
      if (!v.grad().defined()) continue;
      Tensor p = v.data();
      Tensor grad = v.grad();
      if (state.empty()) {
        state["step"] = ops::scalar_tensor(0, DType::Int64);
        state["exp_avg"] = ops::zeros_like(p);
        state["exp_avg_sq"] = ops::zeros_like(p);
      }
      Tensor &step_t = state["step"], &exp_avg = state["exp_avg"], &exp_avg_sq = state["exp_avg_sq"];
      const int64_t step_n = step_t.item<int64_t>() + 1;  // a CPU scalar: no device read
      ops::fill_(step_t, static_cast<double>(step_n));
      if (options_.fused && grad.dtype() == p.dtype() && p.is_contiguous() && exp_avg.is_contiguous() &&
          exp_avg_sq.is_contiguous() && (p.dtype() == DType::Float32 || p.dtype() == DType::Float64)) {
        ps.push_back(p), gs.push_back(grad), ms.push_back(exp_avg), vs.push_back(exp_avg_sq);
        steps.push_back(step_n);
        continue;
      }
      // The readable update, one saccade:: op at a time (Kingma & Ba 2015, Algorithm 1).
      const double step = static_cast<double>(step_n);
      if (decoupled_) {
        ops::mul_(p, 1 - group.lr * group.weight_decay);
      } else if (group.weight_decay != 0) {
        grad = ops::add(grad, ops::mul(p, group.weight_decay));
      }
      ops::mul_(exp_avg, beta1);
      ops::add_(exp_avg, grad, 1 - beta1);
      ops::mul_(exp_avg_sq, beta2);
      ops::add_(exp_avg_sq, ops::mul(grad, grad), 1 - beta2);
      double bias_correction1 = 1 - std::pow(beta1, step);
      double bias_correction2 = 1 - std::pow(beta2, step);
      double step_size = group.lr / bias_correction1;
      Tensor denom = ops::add(ops::div(ops::sqrt(exp_avg_sq), std::sqrt(bias_correction2)), options_.eps);
      ops::add_(p, ops::div(exp_avg, denom), -step_size);
    }
    if (!ps.empty())
      ops::adam_foreach_step_(ps, gs, ms, vs, steps,
                              ops::AdamStepArgs{.lr = group.lr,
                                                .beta1 = beta1,
                                                .beta2 = beta2,
                                                .eps = options_.eps,
                                                .weight_decay = group.weight_decay,
                                                .decoupled = decoupled_});
  }
}

AdamW::AdamW(std::vector<Variable> params, AdamOptions options)
    : Adam("AdamW", std::vector<ParamGroup>{ParamGroup{std::move(params), {}, {}}}, options, true) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamOptions options)
    : Adam("AdamW", std::move(groups), options, true) {}

// ---- clip_grad_norm_ ----

double clip_grad_norm_(const std::vector<Variable>& params, double max_norm, double norm_type) {
  SACCADE_CHECK(norm_type > 0, "clip_grad_norm_: norm_type must be positive, got {}", norm_type);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Variable& p : params)
    if (p.defined() && p.grad().defined()) {
      SACCADE_CHECK(is_floating(p.grad().dtype()),
                    "clip_grad_norm_: expected float gradients, got {} of shape {}", p.grad().dtype(),
                    p.grad().shape());
      grads.push_back(p.grad());
    }
  if (grads.empty()) return 0;
  // One fused pass for the norm (ops::foreach_pow_sum: Σ |g|^p, or max |g|, as a float64 scalar on the
  // device), the coefficient min(1, max_norm / (total + 1e-6)) computed there, one fused multiply
  // (torch's foreach path), and one host read at the end for the returned total, once all is queued.
  const bool inf = std::isinf(norm_type);
  Tensor total_t = ops::foreach_pow_sum(grads, norm_type);
  if (!inf) total_t = ops::pow(total_t, 1 / norm_type);
  Tensor coef =
      ops::clamp(ops::div(ops::full({}, max_norm, DType::Float64, total_t.device()), ops::add(total_t, 1e-6)),
                 std::nullopt, 1.0);
  ops::foreach_mul_(grads, coef);
  return total_t.item<double>();
}

}  // namespace saccade::nn
