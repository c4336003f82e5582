#pragma once
// Optimizers (as torch.optim in PyTorch 1.13, single-tensor code path): SGD with momentum / Nesterov, Adam
// and AdamW, and gradient clipping. An optimizer holds the parameter Variables themselves (shared handles),
// so it sees new gradients after every backward, and updates the parameters' data in place under NoGradGuard.
//
// State (momentum buffers, Adam moments, step counts) is kept per parameter and can be saved and restored as
// named Tensors (state_dict / load_state_dict), so that a resumed run continues exactly.
#include <cstddef>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "nn/module.h"

namespace saccade::nn {

/// Parameters optimised with their own learning rate and weight decay (unset: the optimizer's defaults), as a
/// torch param group: e.g. no weight decay on biases and norms.
struct ParamGroup {
  std::vector<Variable> params;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

/// Base of the optimizers: parameter groups, per-parameter state, zero_grad, lr access and state_dict.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter whose grad is defined (parameters without a gradient are skipped and their
  /// state is left untouched).
  virtual void step() = 0;
  /// Drops every parameter's gradient (torch's zero_grad(set_to_none=True)).
  void zero_grad();

  const std::string& name() const { return name_; }
  size_t num_groups() const { return groups_.size(); }
  /// Learning rate of group `group` (schedulers read and write these).
  double lr(size_t group = 0) const;
  void set_lr(size_t group, double lr);
  double weight_decay(size_t group = 0) const;
  const std::vector<Variable>& params(size_t group) const;
  /// Every parameter, group after group (the order state_dict numbers them in).
  std::vector<Variable> parameters() const;

  /// The optimizer's state as named tensors: "state.<i>.<key>" for parameter i (in parameters() order; keys
  /// such as "step", "momentum_buffer", "exp_avg", "exp_avg_sq"), and per group g "param_groups.<g>.lr",
  /// "param_groups.<g>.weight_decay" (0-d float64) and "param_groups.<g>.num_params" (0-d int64). The
  /// tensors are copies.
  StateDict state_dict() const;
  /// Throws saccade::Error naming the key when `dict` does not fit this optimizer (group count or sizes, an
  /// unknown key, a parameter index out of range, a state tensor of the wrong shape); changes nothing.
  void check_state_dict(const StateDict& dict) const;
  /// Replaces the state and the groups' lr and weight decay by `dict`'s (tensors copied to each parameter's
  /// device and dtype), after check_state_dict: on error the optimizer is unchanged.
  void load_state_dict(const StateDict& dict);

 protected:
  /// `lr` and `weight_decay` are the defaults of groups that leave theirs unset. Throws saccade::Error naming
  /// `name` for an empty parameter list, an undefined, non-float or non-leaf parameter, or a parameter in
  /// two groups, or a negative lr or weight decay.
  Optimizer(std::string name, std::vector<ParamGroup> groups, double lr, double weight_decay);
  /// The state keys this optimizer may store; "step" is 0-d int64, the others have the parameter's shape.
  virtual std::vector<std::string> state_keys() const = 0;
  /// The first line of every step(): throws saccade::Error naming the optimizer, before any parameter is
  /// updated, when a defined gradient differs from its parameter in dtype, shape or device (a bool or int64
  /// tensor given to set_grad, say), instead of an error from inside the update naming an inner op.
  void check_grads() const;

  struct Group {
    std::vector<Variable> params;
    double lr, weight_decay;
  };
  std::vector<Group> groups_;
  /// Per-parameter state by index in parameters() order; empty until the parameter's first update.
  std::vector<std::map<std::string, Tensor>> state_;

 private:
  std::string name_;
};

/// SGD hyperparameters (torch.optim.SGD; torch has no default lr).
struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

/// Stochastic gradient descent with momentum (as torch.optim.SGD): with d = grad + weight_decay · p,
/// buf = d at the first step, then buf = momentum · buf + (1 - dampening) · d; the update direction is
/// d + momentum · buf (Nesterov, Sutskever et al. 2013) or buf; p -= lr · direction. State:
/// "momentum_buffer".
class SGD : public Optimizer {
 public:
  /// Throws saccade::Error for negative hyperparameters, or nesterov without momentum or with dampening.
  SGD(std::vector<Variable> params, SGDOptions options = {});
  SGD(std::vector<ParamGroup> groups, SGDOptions options = {});
  void step() override;
  const SGDOptions& options() const { return options_; }

 protected:
  std::vector<std::string> state_keys() const override { return {"momentum_buffer"}; }

 private:
  SGDOptions options_;
};

/// Adam and AdamW hyperparameters (torch.optim.Adam defaults; AdamW's default weight_decay is 0.01).
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  /// One fused update of all parameters (ops::adam_foreach_step_: on a GPU one kernel per 48 parameters, as
  /// torch.optim.AdamW(fused=True)); false: the readable per-parameter composition of saccade:: ops (a dozen
  /// kernels per parameter), which the tests hold the fused kernel to. Both give the same values to rounding.
  bool fused = true;
};

/// Adam (Kingma & Ba 2015, Algorithm 1; as torch.optim.Adam): with g = grad + weight_decay · p (L2 penalty),
/// m = β1 m + (1 - β1) g, v = β2 v + (1 - β2) g², t += 1,
/// p -= lr / (1 - β1^t) · m / (√v / √(1 - β2^t) + eps). State: "step", "exp_avg" (m), "exp_avg_sq" (v).
class Adam : public Optimizer {
 public:
  /// Throws saccade::Error for a negative lr, eps or weight decay, or betas outside [0, 1).
  Adam(std::vector<Variable> params, AdamOptions options = {});
  Adam(std::vector<ParamGroup> groups, AdamOptions options = {});
  void step() override;
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(const char* name, std::vector<ParamGroup> groups, AdamOptions options, bool decoupled);
  std::vector<std::string> state_keys() const override { return {"step", "exp_avg", "exp_avg_sq"}; }

 private:
  AdamOptions options_;
  bool decoupled_;
};

/// AdamW (Loshchilov & Hutter 2019, Algorithm 2; as torch.optim.AdamW): Adam without the L2 term, and the
/// weight decay applied to the parameter directly first: p *= 1 - lr · weight_decay.
class AdamW : public Adam {
 public:
  /// Default options: torch's, with weight_decay 0.01.
  static AdamOptions default_options() { return AdamOptions{.weight_decay = 1e-2}; }
  AdamW(std::vector<Variable> params, AdamOptions options = default_options());
  AdamW(std::vector<ParamGroup> groups, AdamOptions options = default_options());
};

/// Rescales the gradients of `params` so that their joint norm is at most `max_norm` (as
/// torch.nn.utils.clip_grad_norm_ in 1.13): total = ‖(‖g_1‖_p, ..., ‖g_n‖_p)‖_p over the defined gradients
/// (p = ∞: the largest |g|), then every gradient is multiplied by min(1, max_norm / (total + 1e-6)).
/// Returns total (0 when no gradient is defined). Throws saccade::Error for norm_type <= 0 or a gradient that
/// is not float.
double clip_grad_norm_(const std::vector<Variable>& params, double max_norm, double norm_type = 2);

}  // namespace saccade::nn
