#pragma once
// Autocast: mixed precision as a policy of the differentiable layer (PyTorch's torch.autocast, "Automatic
// Mixed Precision package", and its CPU / CUDA op lists). While an AutocastGuard lives in a thread, each
// autograd function that opts in first casts its floating inputs by its row of the op table
// (autograd/op_info.h: its autocast_cuda and autocast_cpu columns) for the device of its inputs (PyTorch's
// autocast keys CUDA and CPU have lists of their own), then runs as usual:
//
//   Lower    matmul, bmm, mm, linear, conv2d, flash attention, the additive attention scores: float32
//            inputs are cast to the guard's 16-bit dtype, so the GEMMs run in 16 bits (twice the FLOPs of
//            float32 on AVX512-BF16 and tensor cores) and their outputs are 16-bit. Both devices.
//   Float32  16-bit inputs are cast to float32 and the result is float32. On CUDA: softmax, log_softmax,
//            masked_softmax, layer_norm, the losses, logsumexp, exp, log, pow, sum (CUDA's fp32 lists);
//            on the CPU the losses (torch.autocast("cpu")'s fp32 list) and layer_norm (see its row): there
//            softmax, exp and the others run in the 16-bit dtype they are given, float32 inside each
//            kernel (ops/).
//   Promote  cat, stack: every input is cast to the widest floating dtype among them. Both devices.
//   Keep     no cast (every other row: mean is on neither of PyTorch's lists; the CPU rows above).
// Those ops run in the dtype their inputs have (gelu, dropout, add of a 16-bit and a float32 tensor,
// which promotes to float32 in ops/). float64 inputs are never cast (as PyTorch's is_eligible).
//
// The cast is Variable::to, a recorded op, so the gradient of a float32 parameter arrives in float32 (the
// "master weights" of Micikevicius et al. 2018): the optimizer and its state never see 16 bits. A parameter
// (a leaf that requires grad) is cast once per guard and the cast reused by every op that reads it (PyTorch's
// weight cache): a GPT's lm_head or a weight shared by T decoder steps is converted once, not T times. The
// cache is dropped when the outermost guard ends, and an entry is remade when the parameter was modified in
// place since (its storage version moved: every optimizer step bumps it, fused or not) or when a recorded
// forward finds a cast made under no_grad. A cast's node saves nothing, so a backward never spends it: two
// graphs built in one guard share the cast, and each can be backpropagated on its own.
//
// How an autograd function opts in: one line at the top of its forward,
//
//   Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
//     OpScope op(op_info::linear, x, weight);
//     SACCADE_AUTOCAST(op, linear, x, weight, bias);
//
// which, when autocast is on in this thread, casts the arguments by the op's row and calls
// the function again with autocast excluded (so the ops it is made of are not cast a second time), as
// PyTorch's Autocast dispatch key redispatches. The backward pass runs with autocast excluded too (the
// engine): a gradient stays in the dtype its forward used. ops/ knows nothing of this; nn/ modules never
// cast.
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/op_info.h"
#include "autograd/variable.h"
#include "ops/dtype.h"

namespace saccade {

/// The policy of `op` on `device`'s kind: its row's autocast_cpu or autocast_cuda column (AutocastPolicy,
/// autograd/op_info.h).
inline AutocastPolicy autocast_policy(const OpInfo& op, Device device) {
  return device.is_cpu() ? op.autocast_cpu : op.autocast_cuda;
}

/// Whether autocast is on in this thread (a live AutocastGuard), and the 16-bit dtype it lowers to.
bool autocast_enabled();
DType autocast_dtype();

/// While alive, autocast is on in this thread with 16-bit dtype `dtype` (torch.autocast(device, dtype));
/// `enabled = false` turns it off for the scope instead (torch.autocast(..., enabled=False)). Guards nest;
/// the weight cache is dropped when the outermost one ends. Throws saccade::Error naming AutocastGuard when
/// `dtype` is not bfloat16 or float16.
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool prev_enabled_;
  DType prev_dtype_;
};

namespace autocast {

/// Whether SACCADE_AUTOCAST casts now: autocast is on and this thread is not inside an autocast
/// redispatch or a backward pass.
bool active();

/// While alive, autocast does not cast in this thread (around a redispatched op, and the engine's backward):
/// grad_mode.h's AutocastExcludeGuard, which the engine can include.
using ExcludeGuard = AutocastExcludeGuard;

/// What SACCADE_AUTOCAST does in this thread now: cast (active) to `dtype`, or not.
struct State {
  bool active = false;
  DType dtype = DType::BFloat16;
};
State state();

/// While alive, autocast in this thread is as `s` says, whatever guard or exclusion surrounds it: active with
/// s.dtype, or off. checkpoint()'s recomputation re-enters its forward's state this way inside backward,
/// where the engine turns autocast off (torch.utils.checkpoint records and restores it too).
class StateGuard {
 public:
  explicit StateGuard(State s);
  ~StateGuard();
  StateGuard(const StateGuard&) = delete;
  StateGuard& operator=(const StateGuard&) = delete;

 private:
  bool prev_excluded_;
  std::optional<AutocastGuard> guard_;
};

/// `v` cast to `dtype` (recorded: Variable::to); a parameter's cast comes from the weight cache. `v` itself
/// when it already has that dtype or is undefined.
Variable cast(const Variable& v, DType dtype);

/// How many casts of parameters the weight cache made in this thread since the last reset (tests).
int64_t weight_cache_casts();
void reset_weight_cache_casts();

/// The dtype `policy` casts a floating input of dtype `from` to (`widest`: for Promote), or `from`.
DType target_dtype(AutocastPolicy policy, DType from, DType widest);

namespace detail {
inline void widest_of(DType& w, const Variable& v) {
  if (v.defined() && is_floating(v.dtype())) w = promote_types(w, v.dtype());
}
inline void widest_of(DType& w, const std::vector<Variable>& vs) {
  for (const Variable& v : vs) widest_of(w, v);
}
template <class T>
inline void widest_of(DType&, const T&) {}

inline Variable cast_arg(AutocastPolicy p, DType widest, const Variable& v) {
  return v.defined() && is_floating(v.dtype()) ? cast(v, target_dtype(p, v.dtype(), widest)) : v;
}
inline std::vector<Variable> cast_arg(AutocastPolicy p, DType widest, const std::vector<Variable>& vs) {
  std::vector<Variable> out;
  out.reserve(vs.size());
  for (const Variable& v : vs) out.push_back(cast_arg(p, widest, v));
  return out;
}
template <class T>
inline const T& cast_arg(AutocastPolicy, DType, const T& x) {
  return x;
}

// the device of the first defined Variable among an op's arguments
inline void device_of(std::optional<Device>& d, const Variable& v) {
  if (!d && v.defined()) d = v.device();
}
inline void device_of(std::optional<Device>& d, const std::vector<Variable>& vs) {
  for (const Variable& v : vs) device_of(d, v);
}
template <class T>
inline void device_of(std::optional<Device>&, const T&) {}
}  // namespace detail

/// Casts `args` (Variables and vectors of Variables; other arguments pass through) by `op`'s row for the
/// device of its first Variable and returns f(cast args...) with autocast excluded. What SACCADE_AUTOCAST
/// calls.
template <class F, class... Args>
auto redispatch(const OpInfo& op, F&& f, const Args&... args) {
  std::optional<Device> device;
  (detail::device_of(device, args), ...);
  const AutocastPolicy policy = autocast_policy(op, device.value_or(Device::cpu()));
  DType widest = DType::Bool;
  if (policy == AutocastPolicy::Promote) (detail::widest_of(widest, args), ...);
  ExcludeGuard exclude;
  return f(detail::cast_arg(policy, widest, args)...);
}

}  // namespace autocast

}  // namespace saccade

/// The one line after an autograd function's OpScope that opts it into autocast (see the file comment):
/// `scope` is that OpScope (its row gives the policy), `fn` the function itself, then its arguments in order.
/// The scope's profiler range is dropped when it ends: the second call opens and closes its own.
#define SACCADE_AUTOCAST(scope, fn, ...)                                                              \
  do {                                                                                                \
    if (::saccade::autocast::active()) [[unlikely]]                                                   \
      return ::saccade::autocast::redispatch(                                                         \
          (scope).info(), [&](const auto&... saccade_a_) { return fn(saccade_a_...); }, __VA_ARGS__); \
  } while (0)
