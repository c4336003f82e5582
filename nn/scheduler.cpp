// Learning-rate schedulers: closed forms of torch's StepLR, CosineAnnealingLR, LinearLR (+ cosine).
#include "nn/scheduler.h"

#include <cmath>
#include <numbers>

#include "profiler/profiler.h"

namespace saccade::nn {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (size_t g = 0; g < optimizer.num_groups(); ++g) base_lrs_.push_back(optimizer.lr(g));
}

std::vector<double> LRScheduler::get_lr() const {
  std::vector<double> out;
  for (double base : base_lrs_) out.push_back(lr_at(last_epoch_, base));
  return out;
}

void LRScheduler::apply() {
  std::vector<double> lrs = get_lr();
  for (size_t g = 0; g < lrs.size(); ++g) optimizer_.set_lr(g, lrs[g]);
}

void LRScheduler::step() {
  profiler::RecordFunction range("LRScheduler.step", "scheduler");
  ++last_epoch_;
  apply();
}

void LRScheduler::set_last_epoch(int64_t epoch) {
  SACCADE_CHECK(epoch >= 0, "set_last_epoch: expected a non-negative step, got {}", epoch);
  last_epoch_ = epoch;
  apply();
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  SACCADE_CHECK(step_size > 0, "StepLR: step_size must be positive, got {}", step_size);
  SACCADE_CHECK(gamma >= 0, "StepLR: gamma must be non-negative, got {}", gamma);
  apply();
}

double StepLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  SACCADE_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be positive, got {}", T_max);
  apply();
}

double CosineAnnealingLR::lr_at(int64_t epoch, double base_lr) const {
  double c = std::cos(std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(T_max_));
  return eta_min_ + (base_lr - eta_min_) * (1 + c) / 2;
}

LinearWarmup::LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, double start_factor,
                           int64_t cosine_steps, double eta_min)
    : LRScheduler(optimizer),
      warmup_steps_(warmup_steps),
      cosine_steps_(cosine_steps),
      start_factor_(start_factor),
      eta_min_(eta_min) {
  SACCADE_CHECK(warmup_steps >= 0, "LinearWarmup: warmup_steps must be non-negative, got {}", warmup_steps);
  SACCADE_CHECK(start_factor > 0 && start_factor <= 1, "LinearWarmup: start_factor must be in (0, 1], got {}",
                start_factor);
  SACCADE_CHECK(cosine_steps >= 0, "LinearWarmup: cosine_steps must be non-negative, got {}", cosine_steps);
  apply();
}

double LinearWarmup::lr_at(int64_t epoch, double base_lr) const {
  if (epoch < warmup_steps_) {
    double frac = static_cast<double>(epoch) / static_cast<double>(warmup_steps_);
    return base_lr * (start_factor_ + (1 - start_factor_) * frac);
  }
  if (cosine_steps_ == 0) return base_lr;
  double t = static_cast<double>(epoch - warmup_steps_) / static_cast<double>(cosine_steps_);
  return eta_min_ + (base_lr - eta_min_) * (1 + std::cos(std::numbers::pi * t)) / 2;
}

}  // namespace saccade::nn
