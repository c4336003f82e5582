#pragma once
// Elementwise ops with NumPy/PyTorch broadcasting and type promotion (bool < int64 < float32 < float64), as
// torch.add, torch.eq, torch.exp, ... .
// Shapes: the result has broadcast_shapes(a.shape(), b.shape()); comparisons return Bool.
// Errors (saccade::Error, message starting with the op's name): unbroadcastable shapes (naming both), an
// undefined tensor, a mix of devices, or a dtype the op does not take (listed per group below).
#include <optional>
#include <string_view>

#include "ops/kernels/elementwise.h"
#include "ops/tensor.h"

namespace saccade::ops {

// ---- binary (Tensor, Tensor) and (Tensor, scalar) ----
/// a op b elementwise, broadcast; the result has the promoted dtype. A scalar takes the tensor's dtype,
/// except that an int64 / bool tensor with a non-integral scalar (0.5, nan, inf) gives float32, and a bool
/// tensor with an integral scalar int64 (as torch's wrapped numbers). div is true division: integers divide
/// as float32. pow(int64, negative integer exponent) throws; pow(int64, fractional) is float32. maximum /
/// minimum propagate NaN. Bool operands throw (use logical_and / logical_or).
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double exponent);
/// b - a and b / a for a scalar b.
Tensor rsub(const Tensor& a, double b);
Tensor rdiv(const Tensor& a, double b);
Tensor maximum(const Tensor& a, double b);
Tensor minimum(const Tensor& a, double b);

// ---- comparisons -> Bool ----
/// a op b elementwise, broadcast, compared in the promoted dtype; the result is Bool. NaN compares unequal to
/// everything (ne gives true).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
/// Bool x Bool -> Bool, broadcast; any other dtype throws.
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);

// ---- unary ----
/// op(a) elementwise, same shape and dtype. Float dtypes only, except neg, abs, sign and relu, which also
/// take int64; bool throws. relu propagates NaN (as torch); sign(NaN) is 0 (as torch 1.13).
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
/// Exact GELU, x Φ(x) (Hendrycks & Gimpel 2016), and its derivative Φ(x) + x φ(x).
Tensor gelu(const Tensor& a);
Tensor gelu_grad(const Tensor& a);
/// g · gelu'(x) elementwise, broadcast and promoted as mul (GELU's backward in one pass: gelu'(x) is not
/// rounded to the dtype on its own, nor stored). Throws saccade::Error naming "gelu_backward" and the shapes
/// for undefined or non-floating tensors, or shapes that do not broadcast.
Tensor gelu_backward(const Tensor& g, const Tensor& x);
/// SiLU (swish), x σ(x) = x / (1 + e^-x) (Elfwing et al. 2018; as torch.nn.functional.silu). Floating only.
Tensor silu(const Tensor& a);
/// g · silu'(x) = g σ(x) (1 + x (1 - σ(x))) in one pass, broadcast and promoted as mul. Throws saccade::Error
/// naming "silu_backward" and the shapes for undefined or non-floating tensors.
Tensor silu_backward(const Tensor& g, const Tensor& x);
/// silu(gate) ⊙ up in one pass (SwiGLU's gate, Shazeer 2020; Llama's MLP computes down(silu(gate) * up)).
/// gate, up: one shape, floating (16-bit: float32 inside, one rounding). Throws saccade::Error naming
/// "swiglu" and the shapes for undefined, non-floating or differently shaped tensors.
Tensor swiglu(const Tensor& gate, const Tensor& up);
/// swiglu_backward's results: the gradients of gate and up (their shape and dtype).
struct SwigluGrads {
  Tensor dgate, dup;
};
/// The backward of swiglu in one pass (one read of g, gate and up, one write of each gradient): with
/// s = σ(gate), dgate = (g ⊙ up) s (1 + gate (1 - s)), dup = silu(gate) ⊙ g (math::SwigluBackward; Shazeer
/// 2020, eq. 6 with Swish_1). g, gate, up: one shape and floating dtype (16-bit: float32 inside, each
/// gradient rounded once). Throws saccade::Error naming "swiglu_backward" and the shapes for undefined,
/// non-floating, differently shaped or differently typed tensors, or tensors on different devices.
SwigluGrads swiglu_backward(const Tensor& g, const Tensor& gate, const Tensor& up);
/// swiglu_backward in three elementwise passes, dgate = silu_backward(g ⊙ up, gate) (g ⊙ up rounded to the
/// dtype on its own) and dup = swiglu(gate, g): the readable reference of the one-pass kernel, and what
/// swiglu_backward runs on a backend without one (Backend::fuses: CUDA). Errors as swiglu_backward.
SwigluGrads swiglu_backward_composed(const Tensor& g, const Tensor& gate, const Tensor& up);
Tensor sign(const Tensor& a);
/// min(max(a, lo), hi); either bound may be absent (both absent: a copy). Throws when lo > hi, or for bool.
Tensor clamp(const Tensor& a, std::optional<double> lo, std::optional<double> hi);

// ---- selection ----
/// cond ? a : b, all three broadcast together; a and b promote; cond must be Bool (as torch.where).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// a where mask is false, `value` (converted to a's dtype) where true; mask must be Bool and broadcast to a's
/// shape (as torch.Tensor.masked_fill).
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value);

// ---- in place ----
/// a op= b: b broadcasts to a's shape and is converted to a's dtype; bumps a's version counter. Throws for a
/// bool `a`, or a float `b` into an int64 `a` (as torch's "result type can't be cast").
Tensor& add_(Tensor& a, const Tensor& b, double alpha = 1);  // a += alpha * b
Tensor& sub_(Tensor& a, const Tensor& b);
Tensor& mul_(Tensor& a, const Tensor& b);
Tensor& mul_(Tensor& a, double b);
Tensor& div_(Tensor& a, const Tensor& b);
/// Sets every element to `value` (a bool tensor stores value != 0); bumps the version.
Tensor& fill_(Tensor& a, double value);
Tensor& zero_(Tensor& a);
/// Copies src (broadcast to dst's shape, converted to dst's dtype) into dst; devices may differ.
Tensor& copy_(Tensor& dst, const Tensor& src);

/// The building blocks of the above (public for autograd and tests): checks, promotion, allocation, then the
/// device's kernel. binary(Pow) on int64 does not check for negative exponents.
Tensor unary(UnaryOp op, const Tensor& a, double alpha = 0);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);

/// The dtype of `a op b` (torch.result_type): tensors with dimensions decide within a category (bool <
/// integer < floating); a 0-d tensor beside one with dimensions counts only when its category is higher, as
/// a scalar does (a bfloat16 (3) times a float32 0-d tensor is bfloat16; an int64 (3) times a float64 0-d
/// tensor is float64). Two 0-d tensors, or two with dimensions, promote as promote_types (ops/dtype.h).
DType result_type(const Tensor& a, const Tensor& b);

/// Throws naming `op` unless every defined tensor is on the same device as the first.
void check_same_device(const char* op, std::initializer_list<const Tensor*> ts);

}  // namespace saccade::ops

namespace saccade {
// ---- C++ operators (in saccade so that argument-dependent lookup finds them for Tensor) ----
inline Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return ops::div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return ops::add(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return ops::rsub(b, a); }
inline Tensor operator*(double a, const Tensor& b) { return ops::mul(b, a); }
inline Tensor operator/(double a, const Tensor& b) { return ops::rdiv(b, a); }
inline Tensor operator-(const Tensor& a) { return ops::neg(a); }

}  // namespace saccade
