#pragma once
// Grad mode (is history recorded?) and anomaly mode (is every result checked for NaN/Inf?). Both are
// thread-local switches with RAII guards, as in PyTorch; all_finite is the check anomaly mode runs.

namespace saccade {

class Tensor;

/// Whether ops record history for backward in this thread (default: true).
bool grad_enabled();
void set_grad_enabled(bool enabled);

/// While alive, ops record no history (torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// While alive, grad mode is `enabled` (torch::AutoGradMode): the engine runs derivative rules under
/// AutoGradMode(create_graph), so they record a graph only when asked to.
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(grad_enabled()) { set_grad_enabled(enabled); }
  ~AutoGradMode() { set_grad_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

/// Whether anomaly detection is on (default: false). When on, the first op whose forward result or whose
/// backward gradient holds a NaN or Inf throws saccade::Error naming the op.
bool anomaly_mode_enabled();
void set_anomaly_mode_enabled(bool enabled);

/// True when `t` has no NaN or Inf (always true for integer and bool tensors). One fused reduction and one
/// read of its result (a device sync on a GPU): only anomaly mode calls it on the hot path.
bool all_finite(const Tensor& t);

/// Whether autocast (autograd/autocast.h) is held off in this thread: inside an op it already cast the
/// inputs of, and during backward (the engine sets it: a gradient stays in its forward's dtype). Its own
/// switch here, below the engine in the include order; autocast's state lives in autocast.cpp.
bool autocast_excluded();
void set_autocast_excluded(bool excluded);

/// While alive, autocast casts nothing in this thread.
class AutocastExcludeGuard {
 public:
  AutocastExcludeGuard() : prev_(autocast_excluded()) { set_autocast_excluded(true); }
  ~AutocastExcludeGuard() { set_autocast_excluded(prev_); }
  AutocastExcludeGuard(const AutocastExcludeGuard&) = delete;
  AutocastExcludeGuard& operator=(const AutocastExcludeGuard&) = delete;

 private:
  bool prev_;
};

/// While alive, anomaly detection is on (torch.autograd.detect_anomaly()).
class AnomalyModeGuard {
 public:
  AnomalyModeGuard() : prev_(anomaly_mode_enabled()) { set_anomaly_mode_enabled(true); }
  ~AnomalyModeGuard() { set_anomaly_mode_enabled(prev_); }
  AnomalyModeGuard(const AnomalyModeGuard&) = delete;
  AnomalyModeGuard& operator=(const AnomalyModeGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace saccade
