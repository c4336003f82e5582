#include "autograd/grad_mode.h"

namespace saccade {

namespace {
thread_local bool g_grad_enabled = true;
thread_local bool g_anomaly_enabled = false;
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool enabled) { g_grad_enabled = enabled; }
bool anomaly_mode_enabled() { return g_anomaly_enabled; }
void set_anomaly_mode_enabled(bool enabled) { g_anomaly_enabled = enabled; }

}  // namespace saccade
