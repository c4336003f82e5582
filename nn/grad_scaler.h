#pragma once
// Loss scaling for float16 training (Micikevicius et al. 2018, "Mixed Precision Training", section 3.2;
// PyTorch's torch.amp.GradScaler, whose algorithm, defaults and state_dict keys these are).
//
// float16's smallest normal is 6.1e-5 (subnormals reach 6e-8): small gradients flush to zero. Multiplying the
// loss by a scale S shifts every gradient up by S; the optimizer must then see grad / S, and a step whose
// scaled gradients overflowed (inf or NaN somewhere) is skipped and S halved. After growth_interval steps in
// a row without overflow, S doubles, so S hovers just below the overflow point. bfloat16 has float32's
// range and needs no scaler. The parameters and their gradients stay float32 (master weights): only the
// activations' backward runs in 16 bits, and that is where the scale protects the small values.
//
//   nn::GradScaler scaler;                       // init_scale 2^16, growth 2, backoff 0.5, interval 2000
//   {
//     AutocastGuard autocast(DType::Float16);
//     loss = ...;
//   }
//   scaler.scale(loss).backward();
//   scaler.unscale_(optimizer);                  // optional: before clip_grad_norm_, which needs true grads
//   nn::clip_grad_norm_(params, 1.0);
//   scaler.step(optimizer);                      // skipped when any gradient is inf or NaN
//   scaler.update();                             // S *= backoff on overflow, *= growth every interval steps
//
// The overflow check is one pass over all gradients (ops::amp_foreach_non_finite_check_and_unscale_) into
// one flag on the device; step() reads that flag once (the only host synchronisation of a step), as
// PyTorch's does.
#include <cstdint>
#include <map>

#include "autograd/variable.h"
#include "nn/module.h"
#include "nn/optim.h"

namespace saccade::nn {

/// GradScaler's hyperparameters (torch.amp.GradScaler's defaults).
struct GradScalerOptions {
  double init_scale = 65536.0;  ///< 2^16
  double growth_factor = 2.0;   ///< > 1
  double backoff_factor = 0.5;  ///< in (0, 1)
  int64_t growth_interval = 2000;
  bool enabled = true;  ///< false: scale() returns the loss, step() just steps, update() does nothing
  Device device = Device::cpu();  ///< where the scale lives: the gradients' device
};

/// Dynamic loss scaling (torch.amp.GradScaler): scale(), unscale_(), step(), update(), state_dict().
class GradScaler {
 public:
  /// Throws saccade::Error naming GradScaler for init_scale <= 0 (or not finite), growth_factor <= 1,
  /// backoff_factor outside (0, 1), or growth_interval < 1.
  explicit GradScaler(GradScalerOptions options = {});

  /// loss · S, recorded (its backward multiplies the gradient by S). Keeps loss's shape; S is cast to loss's
  /// dtype by promotion. Throws saccade::Error naming GradScaler::scale for an undefined loss or a loss on
  /// another device than the scaler's.
  Variable scale(const Variable& loss) const;

  /// Divides the gradients of `optimizer`'s parameters by S in place and records whether any was inf or NaN
  /// (one pass, no host synchronisation). Call it at most once per optimizer between update()s (before
  /// clipping); step() calls it when you did not. Throws saccade::Error for a second call before update(),
  /// after step(), or for a gradient on another device than the scaler's.
  void unscale_(Optimizer& optimizer);

  /// unscale_ (unless done), then optimizer.step() when every gradient was finite. Returns whether the
  /// optimizer stepped. A skipped step leaves the parameters and the optimizer's state untouched. Throws
  /// saccade::Error for a second step() before update(), and when none of the optimizer's parameters has a
  /// gradient ("no inf checks were recorded for this optimizer", as PyTorch).
  bool step(Optimizer& optimizer);

  /// Updates S from the overflows seen since the last update() (over every optimizer stepped): backoff on
  /// overflow, growth after growth_interval clean steps in a row (ops::amp_update_scale_). Throws
  /// saccade::Error when no optimizer was stepped or unscaled since the last update, or none of those had a
  /// gradient ("no inf checks were recorded prior to update", as PyTorch).
  void update();
  /// Sets S to `new_scale` (> 0) and forgets the overflows seen, as update(new_scale) does in PyTorch; the
  /// growth tracker is left as it is.
  void update(double new_scale);

  /// S (a host read of the scale: a synchronisation on a GPU). 1 when disabled.
  double get_scale() const;
  int64_t growth_tracker() const;
  bool is_enabled() const { return options_.enabled; }
  const GradScalerOptions& options() const { return options_; }

  /// PyTorch's keys: "scale" (0-d float64), "growth_factor", "backoff_factor" (0-d float64),
  /// "growth_interval", "_growth_tracker" (0-d int64). Empty when disabled (as PyTorch's).
  StateDict state_dict() const;
  /// Throws saccade::Error naming the key when `dict` lacks one of state_dict()'s keys, has another one, or a
  /// value of the wrong shape or an invalid value; changes nothing then. A disabled scaler accepts any dict.
  void check_state_dict(const StateDict& dict) const;
  /// Replaces S, the factors, the interval and the tracker by `dict`'s (after check_state_dict). A disabled
  /// scaler loads nothing and returns (as PyTorch's).
  void load_state_dict(const StateDict& dict);

 private:
  struct PerOptimizer {
    bool unscaled = false, stepped = false;
    bool checked = false;  // unscale_ saw at least one gradient (PyTorch's non-empty found_inf_per_device)
    Tensor found_inf;      // float32 (1) on the scaler's device
  };
  PerOptimizer& state_of(const Optimizer& optimizer);

  GradScalerOptions options_;
  Tensor scale_;                                            // float32 (1)
  Tensor growth_tracker_;                                   // int64 (1)
  std::map<const Optimizer*, PerOptimizer> per_optimizer_;  // cleared by update()
};

}  // namespace saccade::nn
