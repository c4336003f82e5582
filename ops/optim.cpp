// The optimizers' fused ops (ops/optim.h): argument checks here, the kernels per device (cpu/optim.cpp,
// cuda/optim.cu).
#include "ops/optim.h"

#include <cmath>
#include <optional>
#include <utility>

#include "ops/backend.h"
#include "ops/creation.h"
#include "ops/foreach.h"

namespace saccade::ops {

namespace {

// The tensors of one list: defined, floating, on `device` (the first tensor's when unset).
void check_list(const char* op, const char* what, const std::vector<Tensor>& ts,
                std::optional<Device>& device) {
  for (size_t i = 0; i < ts.size(); ++i) {
    SACCADE_CHECK(ts[i].defined(), "{}: {}[{}] is undefined", op, what, i);
    SACCADE_CHECK(is_floating(ts[i].dtype()), "{}: {}[{}] has dtype {}, expected a float dtype", op, what, i,
                  ts[i].dtype());
    if (!device) device = ts[i].device();
    SACCADE_CHECK(ts[i].device() == *device, "{}: {}[{}] is on {}, the other tensors on {}", op, what, i,
                  ts[i].device(), *device);
  }
}

}  // namespace

void adam_foreach_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                        const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                        const std::vector<int64_t>& steps, const AdamStepArgs& args) {
  constexpr const char* op = "adam_foreach_step_";
  const size_t n = params.size();
  SACCADE_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n,
                "{}: {} params, {} grads, {} exp_avgs, {} exp_avg_sqs and {} steps: expected equal counts",
                op, n, grads.size(), exp_avgs.size(), exp_avg_sqs.size(), steps.size());
  if (n == 0) return;
  std::optional<Device> device;
  check_list(op, "params", params, device);
  check_list(op, "grads", grads, device);
  check_list(op, "exp_avgs", exp_avgs, device);
  check_list(op, "exp_avg_sqs", exp_avg_sqs, device);
  std::vector<Tensor> p, g, m, v;
  std::vector<double> step_size, bc2_sqrt;
  for (size_t i = 0; i < n; ++i) {
    const Shape& s = params[i].shape();
    SACCADE_CHECK(grads[i].shape() == s && exp_avgs[i].shape() == s && exp_avg_sqs[i].shape() == s,
                  "{}: entry {}: param {}, grad {}, exp_avg {}, exp_avg_sq {}: expected one shape", op, i, s,
                  grads[i].shape(), exp_avgs[i].shape(), exp_avg_sqs[i].shape());
    const DType t = params[i].dtype();
    SACCADE_CHECK(
        (t == DType::Float32 || t == DType::Float64) && grads[i].dtype() == t && exp_avgs[i].dtype() == t &&
            exp_avg_sqs[i].dtype() == t,
        "{}: entry {}: param {}, grad {}, exp_avg {}, exp_avg_sq {}: expected one dtype, float32 or "
        "float64",
        op, i, t, grads[i].dtype(), exp_avgs[i].dtype(), exp_avg_sqs[i].dtype());
    SACCADE_CHECK(params[i].is_contiguous() && exp_avgs[i].is_contiguous() && exp_avg_sqs[i].is_contiguous(),
                  "{}: entry {} (shape {}): the parameter and its states must be contiguous", op, i, s);
    SACCADE_CHECK(steps[i] >= 1, "{}: entry {}: step must be >= 1, got {}", op, i, steps[i]);
    if (params[i].numel() == 0) continue;
    p.push_back(params[i]), g.push_back(grads[i].contiguous()), m.push_back(exp_avgs[i]),
        v.push_back(exp_avg_sqs[i]);
    const double t_ = static_cast<double>(steps[i]);
    step_size.push_back(args.lr / (1 - std::pow(args.beta1, t_)));
    bc2_sqrt.push_back(std::sqrt(1 - std::pow(args.beta2, t_)));
  }
  if (p.empty()) return;
  backend(*device).adam_step(p, g, m, v, step_size, bc2_sqrt, args);
  for (const auto* written : {&p, &m, &v}) bump_versions(*written);
}

Tensor foreach_pow_sum(const std::vector<Tensor>& tensors, double p) {
  constexpr const char* op = "foreach_pow_sum";
  SACCADE_CHECK(p > 0, "{}: p must be positive, got {}", op, p);
  std::optional<Device> device;
  check_list(op, "tensors", tensors, device);
  Tensor out = zeros({}, DType::Float64, device.value_or(Device::cpu()));
  std::vector<Tensor> ts = dense(tensors, nullptr);
  for (Tensor& t : ts)  // the kernels read float32 and float64; 16-bit values widen exactly
    if (t.dtype() != DType::Float32 && t.dtype() != DType::Float64) t = t.to(DType::Float32);
  if (!ts.empty()) backend(*device).pow_sum(ts, p, out);
  return out;
}

void foreach_mul_(const std::vector<Tensor>& tensors, const Tensor& scale) {
  constexpr const char* op = "foreach_mul_";
  SACCADE_CHECK(scale.defined(), "{}: scale is undefined", op);
  SACCADE_CHECK(scale.numel() == 1 && is_floating(scale.dtype()),
                "{}: scale must be a one-element float tensor, got {} {}", op, scale.dtype(), scale.shape());
  std::optional<Device> device = scale.device();
  check_list(op, "tensors", tensors, device);
  CopyBack copy_back;
  std::vector<Tensor> ts = dense(tensors, &copy_back);
  if (!ts.empty()) backend(*device).foreach_mul(ts, scale.to(DType::Float64).contiguous());
  write_back(copy_back);
  bump_versions(tensors);
}

}  // namespace saccade::ops
