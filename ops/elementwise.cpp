// Elementwise ops: broadcasting, type promotion and output allocation happen here, once; kernels only loop.
#include "ops/elementwise.h"

#include <cmath>
#include <string>

#include "ops/backend.h"
#include "ops/creation.h"

namespace saccade::ops {

void check_same_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    SACCADE_CHECK(t->defined(), "{}: got an undefined tensor", op);
    if (!first) first = t;
    SACCADE_CHECK(t->device() == first->device(),
                  "{}: expected all tensors on one device, got {} (shape {}) and {} (shape {})", op,
                  first->device(), first->shape(), t->device(), t->shape());
  }
}

static bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq && op <= BinaryOp::Ge; }
static bool is_logical(BinaryOp op) { return op == BinaryOp::LogicalAnd || op == BinaryOp::LogicalOr; }

static int category(DType t) { return t == DType::Bool ? 0 : is_floating(t) ? 2 : 1; }

DType result_type(const Tensor& a, const Tensor& b) {
  const bool a0 = a.dim() == 0, b0 = b.dim() == 0;
  if (a0 == b0) return promote_types(a.dtype(), b.dtype());
  const DType dims = a0 ? b.dtype() : a.dtype(), zero = a0 ? a.dtype() : b.dtype();
  return category(zero) > category(dims) ? promote_types(dims, zero) : dims;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_op_name(op).data();
  check_same_device(name, {&a, &b});
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  DType dt = is_logical(op) ? DType::Bool : result_type(a, b);
  SACCADE_CHECK(is_comparison(op) || is_logical(op) || dt != DType::Bool,
                "{}: not defined for bool tensors (shapes {} and {})", name, a.shape(), b.shape());
  // true division, as torch.div: integers divide as float32 (and never trap on a zero divisor)
  if (op == BinaryOp::Div && !is_floating(dt)) dt = DType::Float32;
  Tensor out = Tensor::empty(shape, is_comparison(op) || is_logical(op) ? DType::Bool : dt, a.device());
  backend(a.device()).binary(op, a.to(dt).expand(shape), b.to(dt).expand(shape), out);
  return out;
}

Tensor unary(UnaryOp op, const Tensor& a, double alpha) {
  const char* name = unary_op_name(op).data();
  SACCADE_CHECK(a.defined(), "{}: got an undefined tensor", name);
  bool int_ok = op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Sign || op == UnaryOp::Relu ||
                op == UnaryOp::PowScalar;
  if (op == UnaryOp::LogicalNot) {
    SACCADE_CHECK(a.dtype() == DType::Bool, "logical_not: expected a bool tensor, got {} of shape {}",
                  a.dtype(), a.shape());
  } else {
    SACCADE_CHECK(is_floating(a.dtype()) || (int_ok && a.dtype() == DType::Int64),
                  "{}: not defined for {} tensors (shape {})", name, a.dtype(), a.shape());
  }
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  backend(a.device()).unary(op, a, out, alpha);
  return out;
}

// A 0-d tensor holding `v` for `a op v`: the scalar takes a's dtype (as PyTorch's wrapped numbers), except
// that an int64 or bool tensor with a non-integral scalar (fractional, nan, inf) promotes to float32, and a
// bool tensor with an integral scalar to int64.
static Tensor scalar_like(const Tensor& a, double v, const char* op) {
  SACCADE_CHECK(a.defined(), "{}: got an undefined tensor", op);
  DType dt = a.dtype();
  // (an integral value beyond int64's range promotes too: converting it would overflow)
  if (!is_floating(dt))
    dt = std::isfinite(v) && v == std::trunc(v) && std::abs(v) < 0x1p63 ? DType::Int64 : DType::Float32;
  return scalar_tensor(v, dt, a.device());
}

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Pow, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Minimum, a, b); }
Tensor add(const Tensor& a, double b) { return binary(BinaryOp::Add, a, scalar_like(a, b, "add")); }
Tensor sub(const Tensor& a, double b) { return binary(BinaryOp::Sub, a, scalar_like(a, b, "sub")); }
Tensor mul(const Tensor& a, double b) { return binary(BinaryOp::Mul, a, scalar_like(a, b, "mul")); }
Tensor div(const Tensor& a, double b) { return binary(BinaryOp::Div, a, scalar_like(a, b, "div")); }
Tensor pow(const Tensor& a, double e) {
  SACCADE_CHECK(a.defined(), "pow: got an undefined tensor");
  // as torch: an integer tensor to a fractional power is float32; to a negative integer power, an error
  if (a.dtype() == DType::Int64 && e != std::trunc(e))
    return unary(UnaryOp::PowScalar, a.to(DType::Float32), e);
  SACCADE_CHECK(a.dtype() != DType::Int64 || e >= 0,
                "pow: integers to negative integer powers are not allowed (shape {}, exponent {})", a.shape(),
                e);
  return unary(UnaryOp::PowScalar, a, e);
}
Tensor rsub(const Tensor& a, double b) { return binary(BinaryOp::Sub, scalar_like(a, b, "rsub"), a); }
Tensor rdiv(const Tensor& a, double b) { return binary(BinaryOp::Div, scalar_like(a, b, "rdiv"), a); }
Tensor maximum(const Tensor& a, double b) {
  return binary(BinaryOp::Maximum, a, scalar_like(a, b, "maximum"));
}
Tensor minimum(const Tensor& a, double b) {
  return binary(BinaryOp::Minimum, a, scalar_like(a, b, "minimum"));
}

Tensor eq(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Ge, a, b); }
Tensor eq(const Tensor& a, double b) { return binary(BinaryOp::Eq, a, scalar_like(a, b, "eq")); }
Tensor ne(const Tensor& a, double b) { return binary(BinaryOp::Ne, a, scalar_like(a, b, "ne")); }
Tensor lt(const Tensor& a, double b) { return binary(BinaryOp::Lt, a, scalar_like(a, b, "lt")); }
Tensor le(const Tensor& a, double b) { return binary(BinaryOp::Le, a, scalar_like(a, b, "le")); }
Tensor gt(const Tensor& a, double b) { return binary(BinaryOp::Gt, a, scalar_like(a, b, "gt")); }
Tensor ge(const Tensor& a, double b) { return binary(BinaryOp::Ge, a, scalar_like(a, b, "ge")); }

static void check_bool(const char* op, const Tensor& t) {
  SACCADE_CHECK(t.defined() && t.dtype() == DType::Bool, "{}: expected a bool tensor, got {} of shape {}", op,
                t.defined() ? dtype_name(t.dtype()) : "undefined", t.shape());
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  check_bool("logical_and", a), check_bool("logical_and", b);
  return binary(BinaryOp::LogicalAnd, a, b);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  check_bool("logical_or", a), check_bool("logical_or", b);
  return binary(BinaryOp::LogicalOr, a, b);
}
Tensor logical_not(const Tensor& a) { return unary(UnaryOp::LogicalNot, a); }

Tensor neg(const Tensor& a) { return unary(UnaryOp::Neg, a); }
Tensor exp(const Tensor& a) { return unary(UnaryOp::Exp, a); }
Tensor log(const Tensor& a) { return unary(UnaryOp::Log, a); }
Tensor sqrt(const Tensor& a) { return unary(UnaryOp::Sqrt, a); }
Tensor rsqrt(const Tensor& a) { return unary(UnaryOp::Rsqrt, a); }
Tensor abs(const Tensor& a) { return unary(UnaryOp::Abs, a); }
Tensor sin(const Tensor& a) { return unary(UnaryOp::Sin, a); }
Tensor cos(const Tensor& a) { return unary(UnaryOp::Cos, a); }
Tensor tanh(const Tensor& a) { return unary(UnaryOp::Tanh, a); }
Tensor sigmoid(const Tensor& a) { return unary(UnaryOp::Sigmoid, a); }
Tensor relu(const Tensor& a) { return unary(UnaryOp::Relu, a); }
Tensor gelu(const Tensor& a) { return unary(UnaryOp::Gelu, a); }
Tensor gelu_grad(const Tensor& a) { return unary(UnaryOp::GeluGrad, a); }
// The check of the fused floating-only binary ops (gelu_backward, silu_backward, swiglu): both defined and
// floating, and for swiglu of one shape.
static void check_floating_pair(const char* op, const Tensor& a, const Tensor& b, bool same_shape) {
  SACCADE_CHECK(a.defined() && b.defined() && is_floating(a.dtype()) && is_floating(b.dtype()) &&
                    (!same_shape || a.shape() == b.shape()),
                "{}: expected floating tensors{}, got {} {} and {} {}", op, same_shape ? " of one shape" : "",
                a.defined() ? a.shape() : Shape{}, a.defined() ? dtype_name(a.dtype()) : "undefined",
                b.defined() ? b.shape() : Shape{}, b.defined() ? dtype_name(b.dtype()) : "undefined");
}
Tensor gelu_backward(const Tensor& g, const Tensor& x) {
  check_floating_pair("gelu_backward", g, x, false);
  return binary(BinaryOp::GeluBackward, g, x);
}
Tensor silu(const Tensor& a) {
  SACCADE_CHECK(!a.defined() || is_floating(a.dtype()),
                "silu: expected a floating tensor, got {} of shape {}", a.dtype(), a.shape());
  return unary(UnaryOp::Silu, a);
}
Tensor silu_backward(const Tensor& g, const Tensor& x) {
  check_floating_pair("silu_backward", g, x, false);
  return binary(BinaryOp::SiluBackward, g, x);
}
Tensor swiglu(const Tensor& gate, const Tensor& up) {
  check_floating_pair("swiglu", gate, up, true);
  return binary(BinaryOp::Swiglu, gate, up);
}
static void check_swiglu_backward(const Tensor& g, const Tensor& gate, const Tensor& up) {
  constexpr const char* op = "swiglu_backward";
  check_floating_pair(op, gate, up, true);
  check_floating_pair(op, g, gate, true);
  check_same_device(op, {&g, &gate, &up});
  SACCADE_CHECK(g.dtype() == gate.dtype() && up.dtype() == gate.dtype(),
                "{}: g ({}), gate ({}) and up ({}) must have one dtype (shape {})", op, g.dtype(),
                gate.dtype(), up.dtype(), gate.shape());
}
SwigluGrads swiglu_backward(const Tensor& g, const Tensor& gate, const Tensor& up) {
  check_swiglu_backward(g, gate, up);
  Backend& b = backend(gate.device());
  if (!b.fuses(FusedKernel::SwigluBackward)) return swiglu_backward_composed(g, gate, up);
  SwigluGrads r{Tensor::empty(gate.shape(), gate.dtype(), gate.device()),
                Tensor::empty(gate.shape(), gate.dtype(), gate.device())};
  if (gate.numel() > 0) b.swiglu_backward(g.contiguous(), gate.contiguous(), up.contiguous(), r.dgate, r.dup);
  return r;
}
// dgate = silu'(gate) ⊙ (g ⊙ up), dup = silu(gate) ⊙ g
SwigluGrads swiglu_backward_composed(const Tensor& g, const Tensor& gate, const Tensor& up) {
  check_swiglu_backward(g, gate, up);
  return {silu_backward(mul(g, up), gate), swiglu(gate, g)};
}
Tensor sign(const Tensor& a) { return unary(UnaryOp::Sign, a); }

Tensor clamp(const Tensor& a, std::optional<double> lo, std::optional<double> hi) {
  SACCADE_CHECK(a.defined(), "clamp: got an undefined tensor");
  SACCADE_CHECK(a.dtype() != DType::Bool, "clamp: not defined for bool tensors (shape {})", a.shape());
  SACCADE_CHECK(!(lo && hi && *lo > *hi), "clamp: min {} is greater than max {}", *lo, *hi);
  Tensor out = a;
  if (lo) out = maximum(out, *lo);
  if (hi) out = minimum(out, *hi);
  return lo || hi ? out : a.clone();
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_device("where", {&cond, &a, &b});
  check_bool("where", cond);
  Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  DType dt = result_type(a, b);
  Tensor out = Tensor::empty(shape, dt, a.device());
  backend(a.device()).where(cond.expand(shape), a.to(dt).expand(shape), b.to(dt).expand(shape), out);
  return out;
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, double value) {
  check_same_device("masked_fill", {&a, &mask});
  check_bool("masked_fill", mask);
  SACCADE_CHECK(broadcast_shapes(a.shape(), mask.shape(), "masked_fill") == a.shape(),
                "masked_fill: mask of shape {} does not broadcast to the input's shape {}", mask.shape(),
                a.shape());
  Tensor fill;
  {
    ErrorScope scope("masked_fill");  // a value a.dtype() cannot hold: "masked_fill > scalar_tensor: ..."
    fill = scalar_tensor(value, a.dtype(), a.device());
  }
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  backend(a.device()).where(mask.expand(a.shape()), fill.expand(a.shape()), a, out);
  return out;
}

// ---- in place ----

static void inplace_binary(BinaryOp op, Tensor& a, const Tensor& b) {
  const std::string name = fmt::format("{}_", binary_op_name(op));
  check_same_device(name.c_str(), {&a, &b});
  SACCADE_CHECK(a.dtype() != DType::Bool, "{}: not defined for bool tensors (shape {})", name, a.shape());
  // as torch: the result may be narrowed within floats (float64 into float32) but not from float to int64
  SACCADE_CHECK(is_floating(a.dtype()) || !is_floating(b.dtype()),
                "{}: result type {} cannot be cast to the {} output (shapes {} and {})", name, b.dtype(),
                a.dtype(), a.shape(), b.shape());
  SACCADE_CHECK(broadcast_shapes(a.shape(), b.shape(), name.c_str()) == a.shape(),
                "{}: shape {} does not broadcast to the output's shape {}", name, b.shape(), a.shape());
  backend(a.device()).binary(op, a, b.to(a.dtype()).expand(a.shape()), a);
  a.bump_version();
}

Tensor& add_(Tensor& a, const Tensor& b, double alpha) {
  inplace_binary(BinaryOp::Add, a, alpha == 1 ? b : mul(b, alpha));
  return a;
}
Tensor& sub_(Tensor& a, const Tensor& b) {
  inplace_binary(BinaryOp::Sub, a, b);
  return a;
}
Tensor& mul_(Tensor& a, const Tensor& b) {
  inplace_binary(BinaryOp::Mul, a, b);
  return a;
}
Tensor& mul_(Tensor& a, double b) {
  inplace_binary(BinaryOp::Mul, a, scalar_like(a, b, "mul_"));
  return a;
}
Tensor& div_(Tensor& a, const Tensor& b) {
  inplace_binary(BinaryOp::Div, a, b);
  return a;
}
Tensor& fill_(Tensor& a, double value) {
  SACCADE_CHECK(a.defined(), "fill_: got an undefined tensor");
  backend(a.device()).fill(a, a.dtype() == DType::Bool ? double(value != 0) : value);
  a.bump_version();
  return a;
}
Tensor& zero_(Tensor& a) { return fill_(a, 0); }
Tensor& copy_(Tensor& dst, const Tensor& src) {
  SACCADE_CHECK(dst.defined() && src.defined(), "copy_: got an undefined tensor");
  SACCADE_CHECK(broadcast_shapes(dst.shape(), src.shape(), "copy_") == dst.shape(),
                "copy_: source of shape {} does not broadcast to the destination's shape {}", src.shape(),
                dst.shape());
  Tensor s = src.to(dst.device()).expand(dst.shape());
  backend(dst.device()).copy(s, dst);
  dst.bump_version();
  return dst;
}

}  // namespace saccade::ops
