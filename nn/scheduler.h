#pragma once
// Learning-rate schedulers (as torch.optim.lr_scheduler): each sets the optimizer's per-group learning rates
// from the "base" rates it saw at construction and a step counter. They use the closed forms, so a resumed
// run can jump to any step with set_last_epoch().
//
// Usage, as in torch: build the scheduler on a fresh optimizer, call optimizer.step() then scheduler.step()
// once per step (or epoch). To resume, build optimizer and scheduler as at the start, load the optimizer's
// state, then call scheduler.set_last_epoch(saved_step).
#include <cstdint>
#include <vector>

#include "nn/optim.h"

namespace saccade::nn {

/// Base of the schedulers. Holds a reference to the optimizer, which must outlive it.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  /// Advances the counter by one and sets every group's lr to get_lr().
  void step();
  /// The learning rates (one per group) for the current counter value: what step() set last.
  std::vector<double> get_lr() const;
  /// The number of step() calls so far (torch's last_epoch).
  int64_t last_epoch() const { return last_epoch_; }
  /// Sets the counter and the optimizer's learning rates as if step() had been called `epoch` times.
  void set_last_epoch(int64_t epoch);
  /// The learning rates the optimizer had when the scheduler was built.
  const std::vector<double>& base_lrs() const { return base_lrs_; }

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  /// The learning rate at step `epoch` of a group whose base rate is `base_lr`.
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;
  /// Writes get_lr() into the optimizer (derived constructors call it, as torch's initial step).
  void apply();

 private:
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = 0;
};

/// lr = base_lr · gamma^⌊epoch / step_size⌋ (as torch.optim.lr_scheduler.StepLR).
/// Throws saccade::Error for step_size <= 0 or gamma < 0.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// lr = eta_min + (base_lr - eta_min) (1 + cos(π epoch / T_max)) / 2 (Loshchilov & Hutter 2017, SGDR eq. 5
/// without restarts; as torch.optim.lr_scheduler.CosineAnnealingLR, which keeps following the cosine past
/// T_max). Throws saccade::Error for T_max <= 0.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

/// Linear warmup from start_factor · base_lr to base_lr over `warmup_steps` steps (torch's LinearLR), then
/// either constant (cosine_steps = 0) or cosine decay to eta_min over `cosine_steps` steps (torch's
/// SequentialLR([LinearLR, CosineAnnealingLR(T_max = cosine_steps)], milestones = [warmup_steps])):
///   epoch <  W: base_lr (s + (1 - s) epoch / W)
///   epoch >= W: eta_min + (base_lr - eta_min) (1 + cos(π (epoch - W) / cosine_steps)) / 2
/// Throws saccade::Error for warmup_steps < 0, start_factor outside (0, 1], or cosine_steps < 0.
class LinearWarmup : public LRScheduler {
 public:
  LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, double start_factor = 1.0 / 3,
               int64_t cosine_steps = 0, double eta_min = 0);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t warmup_steps_, cosine_steps_;
  double start_factor_, eta_min_;
};

}  // namespace saccade::nn
