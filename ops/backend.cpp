// The backend contract's code: backend(device) picks the table, the op enums get their names, Backend::widen
// is the 16-bit route's widening, and the few kernels with a default compose others (swiglu_backward,
// dropout, the GRU gates, rotary embedding).
#include "ops/backend.h"

#include "ops/elementwise.h"
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

// ---- composed default kernels ----

void Backend::dropout(const Tensor& x, uint64_t seed, uint64_t offset, double p, const Tensor& out,
                      const Tensor& mask) {
  Tensor u = Tensor::empty(x.shape(), x.dtype(), x.device());
  uniform(u, seed, offset, 0.0, 1.0);
  copy(ops::mul(ops::ge(u, p).to(x.dtype()), 1.0 / (1.0 - p)), mask);
  binary(BinaryOp::Mul, x, mask, out);
}

// r = σ(gi_r + gh_r), z = σ(gi_z + gh_z), n = tanh(gi_n + r ⊙ gh_n), h' = n + z ⊙ (h - n)
void Backend::gru_gates(const Tensor& gi, const Tensor& gh, const Tensor& h, const Tensor& out,
                        const Tensor& saved) {
  const int64_t H = h.size(1);
  auto part = [H](const Tensor& t, int64_t k) { return t.narrow(1, k * H, H); };
  Tensor r = ops::sigmoid(ops::add(part(gi, 0), part(gh, 0)));
  Tensor z = ops::sigmoid(ops::add(part(gi, 1), part(gh, 1)));
  Tensor n = ops::tanh(ops::add(part(gi, 2), ops::mul(r, part(gh, 2))));
  copy(ops::add(n, ops::mul(z, ops::sub(h, n))), out);
  copy(r, part(saved, 0));
  copy(z, part(saved, 1));
  copy(n, part(saved, 2));
}

// a_n = gy (1 - z)(1 - n²), a_r = a_n gh_n r (1 - r), a_z = gy (h - n) z (1 - z):
// ggi = [a_r, a_z, a_n], ggh = [a_r, a_z, a_n r], gx_h = gy z
void Backend::gru_gates_backward(const Tensor& gy, const Tensor& gh, const Tensor& h, const Tensor& saved,
                                 const Tensor& ggi, const Tensor& ggh, const Tensor& gx_h) {
  const int64_t H = h.size(1);
  auto part = [H](const Tensor& t, int64_t k) { return t.narrow(1, k * H, H); };
  const Tensor r = part(saved, 0), z = part(saved, 1), n = part(saved, 2);
  Tensor a_n = ops::mul(ops::mul(gy, ops::rsub(z, 1.0)), ops::rsub(ops::mul(n, n), 1.0));
  Tensor a_r = ops::mul(ops::mul(a_n, part(gh, 2)), ops::mul(r, ops::rsub(r, 1.0)));
  Tensor a_z = ops::mul(ops::mul(gy, ops::sub(h, n)), ops::mul(z, ops::rsub(z, 1.0)));
  for (const Tensor* g : {&ggi, &ggh}) {
    copy(a_r, part(*g, 0));
    copy(a_z, part(*g, 1));
  }
  copy(a_n, part(ggi, 2));
  copy(ops::mul(a_n, r), part(ggh, 2));
  copy(ops::mul(gy, z), gx_h);
}

// dgate = silu'(gate) ⊙ (g ⊙ up) (g ⊙ up rounded to the dtype on its own),  dup = silu(gate) ⊙ g
void Backend::swiglu_backward(const Tensor& g, const Tensor& gate, const Tensor& up, const Tensor& dgate,
                              const Tensor& dup) {
  binary(BinaryOp::Mul, g, up, dgate);
  binary(BinaryOp::SiluBackward, dgate, gate, dgate);
  binary(BinaryOp::Swiglu, gate, g, dup);
}

// y_a = x_a c - x_b s,  y_b = x_b c + x_a s  (s negated when inverse), on strided views of the pairs
void Backend::rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out,
                               bool interleaved, bool inverse) {
  const int64_t half = cos.size(1), R = 2 * half, D = x.size(2);
  auto a_of = [&](const Tensor& t) { return interleaved ? t.slice(2, 0, R, 2) : t.narrow(2, 0, half); };
  auto b_of = [&](const Tensor& t) { return interleaved ? t.slice(2, 1, R, 2) : t.narrow(2, half, half); };
  const Tensor c = cos.unsqueeze(0), s = inverse ? ops::neg(sin).unsqueeze(0) : sin.unsqueeze(0);
  const Tensor xa = a_of(x), xb = b_of(x);
  copy(ops::sub(ops::mul(xa, c), ops::mul(xb, s)), a_of(out));
  copy(ops::add(ops::mul(xb, c), ops::mul(xa, s)), b_of(out));
  if (R < D) copy(x.narrow(2, R, D - R), out.narrow(2, R, D - R));
}

}  // namespace saccade
