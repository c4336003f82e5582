// The backend contract's code: backend(device) picks the table, the op enums get their names, Backend::widen
// is the 16-bit route's widening, and a fused kernel a backend leaves out throws (ops compose it instead).
// Nothing here calls an op: calls go down only.
#include "ops/backend.h"

#include "ops/tensor.h"

namespace saccade {

// ---- dispatch ----

bool cuda_is_available() { return detail::cuda_backend() != nullptr; }

Backend& backend(Device device) {
  if (device.is_cpu()) return *detail::cpu_backend();
  Backend* b = detail::cuda_backend();
  SACCADE_CHECK(b != nullptr, "backend: {} requested, but {}", device,
#ifdef SACCADE_WITH_CUDA
                "no CUDA GPU is present"
#else
                "saccade was built without CUDA (configure with -DSACCADE_CUDA=ON)"
#endif
  );
  return *b;
}

AllocatorStats memory_stats(Device device) { return backend(device).memory_stats(); }
void empty_cache(Device device) { backend(device).empty_cache(); }

#ifndef SACCADE_WITH_CUDA
Backend* detail::cuda_backend() { return nullptr; }
#endif

// ---- op names ----

// Switches, not arrays indexed by enum position: -Wswitch names any enumerator left without a name.
std::string_view unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg:
      return "neg";
    case UnaryOp::Exp:
      return "exp";
    case UnaryOp::Log:
      return "log";
    case UnaryOp::Sqrt:
      return "sqrt";
    case UnaryOp::Rsqrt:
      return "rsqrt";
    case UnaryOp::Abs:
      return "abs";
    case UnaryOp::Sin:
      return "sin";
    case UnaryOp::Cos:
      return "cos";
    case UnaryOp::Tanh:
      return "tanh";
    case UnaryOp::Sigmoid:
      return "sigmoid";
    case UnaryOp::Relu:
      return "relu";
    case UnaryOp::Gelu:
      return "gelu";
    case UnaryOp::GeluGrad:
      return "gelu_grad";
    case UnaryOp::Silu:
      return "silu";
    case UnaryOp::Sign:
      return "sign";
    case UnaryOp::PowScalar:
      return "pow";
    case UnaryOp::LogicalNot:
      return "logical_not";
  }
  return "unknown unary op";
}

std::string_view binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "add";
    case BinaryOp::Sub:
      return "sub";
    case BinaryOp::Mul:
      return "mul";
    case BinaryOp::Div:
      return "div";
    case BinaryOp::Pow:
      return "pow";
    case BinaryOp::Maximum:
      return "maximum";
    case BinaryOp::Minimum:
      return "minimum";
    case BinaryOp::Eq:
      return "eq";
    case BinaryOp::Ne:
      return "ne";
    case BinaryOp::Lt:
      return "lt";
    case BinaryOp::Le:
      return "le";
    case BinaryOp::Gt:
      return "gt";
    case BinaryOp::Ge:
      return "ge";
    case BinaryOp::LogicalAnd:
      return "logical_and";
    case BinaryOp::GeluBackward:
      return "gelu_backward";
    case BinaryOp::SiluBackward:
      return "silu_backward";
    case BinaryOp::Swiglu:
      return "swiglu";
    case BinaryOp::LogicalOr:
      return "logical_or";
  }
  return "unknown binary op";
}

// ---- the 16-bit route ----

bool Backend::native_16bit(Kernel16) const { return false; }

bool Backend::widens(const Tensor& t) { return t.defined() && is_half(t.dtype()); }

Tensor Backend::widened(const Tensor& t, bool read) {
  if (!widens(t)) return t;
  return read ? t.to(DType::Float32) : Tensor::empty(t.shape(), DType::Float32, t.device());
}

void Backend::round_into(const Tensor& wide, const Tensor& t) {
  if (widens(t)) backend(t.device()).copy(wide, t);  // rounds to t's dtype
}

void Backend::widen(std::initializer_list<Tensor> in, std::initializer_list<Tensor> inout,
                    std::initializer_list<Tensor> out,
                    const std::function<void(const std::vector<Tensor>&)>& f32_kernel) {
  std::vector<Tensor> wide;
  wide.reserve(in.size() + inout.size() + out.size());
  for (const Tensor& t : in) wide.push_back(widened(t, true));
  for (const Tensor& t : inout) wide.push_back(widened(t, true));
  for (const Tensor& t : out) wide.push_back(widened(t, false));
  f32_kernel(wide);
  size_t i = in.size();
  for (std::initializer_list<Tensor> written : {inout, out})
    for (const Tensor& t : written) round_into(wide[i++], t);
}

// ---- the fused kernels a backend may leave out ----

bool Backend::fuses(FusedKernel) const { return false; }

// A fused kernel this backend lacks: the op asked fuses() and composed it instead, so no call reaches here
// (the arguments are named only so that the row's parameters count as used).
#define SACCADE_UNFUSED_KERNEL(kernel, params, args, ...)                                              \
  void Backend::kernel params {                                                                        \
    [](const auto&...) {} args;                                                                        \
    throw Error(fmt::format("{}: the {} backend has no fused kernel (ops compose it: Backend::fuses)", \
                            #kernel, name()));                                                         \
  }
SACCADE_BACKEND_FUSED_KERNELS(SACCADE_UNFUSED_KERNEL, SACCADE_UNFUSED_KERNEL)
#undef SACCADE_UNFUSED_KERNEL

}  // namespace saccade
