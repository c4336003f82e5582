#include "autograd/grad_mode.h"

#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/tensor.h"

namespace saccade {

namespace {
thread_local bool g_grad_enabled = true;
thread_local bool g_anomaly_enabled = false;
thread_local bool g_autocast_excluded = false;
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool enabled) { g_grad_enabled = enabled; }
bool anomaly_mode_enabled() { return g_anomaly_enabled; }
void set_anomaly_mode_enabled(bool enabled) { g_anomaly_enabled = enabled; }
bool autocast_excluded() { return g_autocast_excluded; }
void set_autocast_excluded(bool excluded) { g_autocast_excluded = excluded; }

bool all_finite(const Tensor& t) {
  if (!is_floating(t.dtype())) return true;
  // finite <=> x - x == 0 (NaN and ±Inf give NaN)
  return ops::sum(ops::ne(ops::sub(t, t), 0.0)).item<int64_t>() == 0;
}

}  // namespace saccade
