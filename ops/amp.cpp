// Loss-scaling ops: argument checks here, the kernels per device (cpu/amp.cpp, cuda/amp.cu).
#include "ops/amp.h"

#include "ops/backend.h"
#include "ops/foreach.h"

namespace saccade::ops {

namespace {
void check_scalar(const char* op, const char* what, const Tensor& t, DType dtype, Device device) {
  SACCADE_CHECK(t.defined(), "{}: {} is undefined", op, what);
  SACCADE_CHECK(t.dtype() == dtype && t.numel() == 1 && t.device() == device,
                "{}: {} must be a one-element {} tensor on {}, got {} {} on {}", op, what, dtype, device,
                t.dtype(), t.shape(), t.device());
}
}  // namespace

void amp_foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                               const Tensor& inv_scale) {
  constexpr const char* op = "amp_foreach_non_finite_check_and_unscale_";
  SACCADE_CHECK(found_inf.defined(), "{}: found_inf is undefined", op);
  const Device device = found_inf.device();
  check_scalar(op, "found_inf", found_inf, DType::Float32, device);
  check_scalar(op, "inv_scale", inv_scale, DType::Float32, device);
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    SACCADE_CHECK(g.defined(), "{}: gradient {} is undefined", op, i);
    SACCADE_CHECK(
        g.dtype() == DType::Float32 || g.dtype() == DType::Float64,
        "{}: gradient {} has dtype {}, expected float32 or float64 (loss scaling unscales the float32 "
        "master weights' gradients; autocast keeps parameters float32)",
        op, i, g.dtype());
    SACCADE_CHECK(g.device() == device, "{}: gradient {} is on {}, found_inf on {}", op, i, g.device(),
                  device);
  }
  CopyBack copy_back;
  const std::vector<Tensor> ts = dense(grads, &copy_back);
  if (!ts.empty()) backend(device).amp_non_finite_check_and_unscale(ts, found_inf, inv_scale);
  write_back(copy_back);
  bump_versions(grads);
  found_inf.bump_version();
}

void amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                       double growth_factor, double backoff_factor, int64_t growth_interval) {
  constexpr const char* op = "amp_update_scale_";
  SACCADE_CHECK(scale.defined(), "{}: scale is undefined", op);
  const Device device = scale.device();
  check_scalar(op, "scale", scale, DType::Float32, device);
  check_scalar(op, "growth_tracker", growth_tracker, DType::Int64, device);
  check_scalar(op, "found_inf", found_inf, DType::Float32, device);
  SACCADE_CHECK(growth_interval >= 1, "{}: growth_interval must be >= 1, got {}", op, growth_interval);
  backend(device).amp_update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                                   growth_interval);
  bump_versions({scale, growth_tracker});
}

}  // namespace saccade::ops
