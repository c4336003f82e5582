// Derivative rules of the elementwise ops, each beside its forward. `g` is dL/d(output).
// Broadcast inputs get their gradient summed back to their own shape by sum_to.
#include "autograd/functions/elementwise.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/reduce.h"
#include "autograd/grad_mode.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace saccade {

using Grads = std::vector<Variable>;

// The gradient for an input of `shape` and `dtype` from one of the (broadcast, promoted) result: summed over
// the broadcast dims and cast back to the input's dtype (a float32 input of a float64 result gets float32).
static Variable to_input(const Variable& g, const Shape& shape, DType dtype) {
  return sum_to(g, shape).to(dtype);
}

// What a binary rule needs to know about each input without holding it: shape, dtype, whether it needs a
// grad.
struct InputInfo {
  Shape shape;
  DType dtype;
  bool needs;
  explicit InputInfo(const Variable& v) : shape(v.shape()), dtype(v.dtype()), needs(v.requires_grad()) {}
  Variable grad(const Variable& g) const { return needs ? to_input(g, shape, dtype) : Variable(); }
};

// ---- binary ----

Variable add(const Variable& a, const Variable& b) {
  OpScope op(op_info::add, a, b);
  // a: (...), b: (...) broadcast together
  // y = a + b:  da = g,  db = g
  InputInfo ia(a), ib(b);
  return make_result(op, ops::add(a.data(), b.data()), {a, b}, [ia, ib](const Variable& g) -> Grads {
    return {ia.grad(g), ib.grad(g)};
  });
}

Variable sub(const Variable& a, const Variable& b) {
  OpScope op(op_info::sub, a, b);
  // y = a - b:  da = g,  db = -g
  InputInfo ia(a), ib(b);
  return make_result(op, ops::sub(a.data(), b.data()), {a, b}, [ia, ib](const Variable& g) -> Grads {
    return {ia.grad(g), ib.needs ? ib.grad(neg(g)) : Variable()};
  });
}

Variable mul(const Variable& a, const Variable& b) {
  OpScope op(op_info::mul, a, b);
  // y = a * b:  da = g * b,  db = g * a
  // only the other input is saved: a needs b, b needs a
  InputInfo ia(a), ib(b);
  SavedVariable sa(ib.needs ? a : Variable(), op_info::mul), sb(ia.needs ? b : Variable(), op_info::mul);
  return make_result(op, ops::mul(a.data(), b.data()), {a, b}, [sa, sb, ia, ib](const Variable& g) -> Grads {
    return {ia.needs ? ia.grad(mul(g, sb.get())) : Variable(),
            ib.needs ? ib.grad(mul(g, sa.get())) : Variable()};
  });
}

Variable div(const Variable& a, const Variable& b) {
  OpScope op(op_info::div, a, b);
  // y = a / b:  da = g / b,  db = -g * a / b^2
  InputInfo ia(a), ib(b);
  SavedVariable sa(a, op_info::div), sb(b, op_info::div);
  return make_result(op, ops::div(a.data(), b.data()), {a, b}, [sa, sb, ia, ib](const Variable& g) -> Grads {
    const Variable x = sa.get(), y = sb.get();
    Variable g_over_y = div(g, y);
    return {ia.grad(g_over_y), ib.needs ? ib.grad(neg(mul(g_over_y, div(x, y)))) : Variable()};
  });
}

Variable pow(const Variable& a, const Variable& b) {
  OpScope op(op_info::pow, a, b);
  SACCADE_AUTOCAST(op, pow, a, b);
  // y = a^b:  da = g * b * a^(b-1),  db = g * y * log(a)   (db = 0 where a = 0 and b >= 0, as torch)
  Tensor y = ops::pow(a.data(), b.data());
  InputInfo ia(a), ib(b);
  SavedVariable sa(a, op_info::pow), sb(b, op_info::pow), sy = SavedVariable::output(y, op_info::pow);
  return make_result(op, y, {a, b}, [sa, sb, sy, ia, ib](const Variable& g) -> Grads {
    // in the result's (promoted) dtype: an int64 base of a float exponent needs a float log(a)
    const DType dt = sy.get().dtype();
    const Variable x = sa.get().to(dt), e = sb.get().to(dt);
    Variable da, db;
    if (ia.needs) da = ia.grad(mul(g, mul(e, pow(x, sub(e, 1.0)))));
    if (ib.needs) {
      Tensor zero_base = ops::logical_and(ops::eq(x.data(), 0.0), ops::ge(e.data(), 0.0));
      db = ib.grad(masked_fill(mul(g, mul(sy.get(), log(x))), zero_base, 0.0));
    }
    return {da, db};
  });
}

Variable add(const Variable& a, double b) {
  OpScope op(op_info::add, a);
  return make_result(op, ops::add(a.data(), b), {a}, [](const Variable& g) -> Grads { return {g}; });
}
Variable sub(const Variable& a, double b) {
  OpScope op(op_info::sub, a);
  return make_result(op, ops::sub(a.data(), b), {a}, [](const Variable& g) -> Grads { return {g}; });
}
Variable mul(const Variable& a, double b) {
  OpScope op(op_info::mul, a);
  // y = a * c:  da = g * c
  return make_result(op, ops::mul(a.data(), b), {a}, [b](const Variable& g) -> Grads { return {mul(g, b)}; });
}
Variable div(const Variable& a, double b) {
  OpScope op(op_info::div, a);
  return make_result(op, ops::div(a.data(), b), {a}, [b](const Variable& g) -> Grads { return {div(g, b)}; });
}
Variable rsub(const Variable& a, double b) {
  OpScope op(op_info::rsub, a);
  // y = c - a:  da = -g
  return make_result(op, ops::rsub(a.data(), b), {a}, [](const Variable& g) -> Grads { return {neg(g)}; });
}
Variable rdiv(const Variable& a, double b) {
  OpScope op(op_info::rdiv, a);
  // y = c / a:  da = -g * y / a
  Tensor y = ops::rdiv(a.data(), b);
  SavedVariable sa(a, op_info::rdiv), sy = SavedVariable::output(y, op_info::rdiv);
  return make_result(op, y, {a},
                     [sa, sy](const Variable& g) -> Grads { return {neg(mul(g, div(sy.get(), sa.get())))}; });
}
Variable pow(const Variable& a, double e) {
  OpScope op(op_info::pow, a);
  SACCADE_AUTOCAST(op, pow, a, e);
  // y = a^e:  da = g * e * a^(e-1)   (0 for e = 0, also at a = 0)
  SavedVariable sa(a, op_info::pow);
  return make_result(op, ops::pow(a.data(), e), {a}, [sa, e](const Variable& g) -> Grads {
    if (e == 0) return {Variable(ops::zeros_like(g.data()))};
    return {mul(g, mul(pow(sa.get(), e - 1), e))};
  });
}

// y = max(a, b): the gradient goes to the larger input; ties split it in half.
static Variable extremum(const Variable& a, const Variable& b, bool is_max) {
  const OpInfo& row = is_max ? op_info::maximum : op_info::minimum;
  OpScope op(row, a, b);
  InputInfo ia(a), ib(b);
  SavedTensor sa(a.data(), row), sb(b.data(), row);  // only compared: the weights are constants
  Tensor y = is_max ? ops::maximum(a.data(), b.data()) : ops::minimum(a.data(), b.data());
  return make_result(op, y, {a, b}, [sa, sb, ia, ib, is_max](const Variable& g) -> Grads {
    const Tensor &x = sa.get(), &z = sb.get();
    Tensor wins = is_max ? ops::gt(x, z) : ops::lt(x, z);
    Tensor tie = ops::eq(x, z);
    Tensor wa = ops::add(wins.to(g.dtype()), ops::mul(tie.to(g.dtype()), 0.5));
    Variable ga = mul(g, wa);
    return {ia.grad(ga), ib.needs ? ib.grad(sub(g, ga)) : Variable()};
  });
}
Variable maximum(const Variable& a, const Variable& b) { return extremum(a, b, true); }
Variable minimum(const Variable& a, const Variable& b) { return extremum(a, b, false); }

// ---- unary ----

Variable neg(const Variable& a) {
  OpScope op(op_info::neg, a);
  return make_result(op, ops::neg(a.data()), {a}, [](const Variable& g) -> Grads { return {neg(g)}; });
}

Variable exp(const Variable& a) {
  OpScope op(op_info::exp, a);
  SACCADE_AUTOCAST(op, exp, a);
  // y = e^a:  da = g * y
  Tensor y = ops::exp(a.data());
  SavedVariable sy = SavedVariable::output(y, op_info::exp);
  return make_result(op, y, {a}, [sy](const Variable& g) -> Grads { return {mul(g, sy.get())}; });
}

Variable log(const Variable& a) {
  OpScope op(op_info::log, a);
  SACCADE_AUTOCAST(op, log, a);
  // y = ln a:  da = g / a
  SavedVariable sa(a, op_info::log);
  return make_result(op, ops::log(a.data()), {a},
                     [sa](const Variable& g) -> Grads { return {div(g, sa.get())}; });
}

Variable sqrt(const Variable& a) {
  OpScope op(op_info::sqrt, a);
  // y = √a:  da = g / (2 y)
  Tensor y = ops::sqrt(a.data());
  SavedVariable sy = SavedVariable::output(y, op_info::sqrt);
  return make_result(op, y, {a}, [sy](const Variable& g) -> Grads { return {div(g, mul(sy.get(), 2.0))}; });
}

Variable rsqrt(const Variable& a) {
  OpScope op(op_info::rsqrt, a);
  // y = a^(-1/2):  da = -g y^3 / 2
  Tensor y = ops::rsqrt(a.data());
  SavedVariable sy = SavedVariable::output(y, op_info::rsqrt);
  return make_result(op, y, {a}, [sy](const Variable& g) -> Grads {
    const Variable v = sy.get();
    return {mul(g, mul(mul(mul(v, v), v), -0.5))};
  });
}

Variable abs(const Variable& a) {
  OpScope op(op_info::abs, a);
  // y = |a|:  da = g sign(a)   (0 at a = 0)
  SavedTensor sa(a.data(), op_info::abs);  // sign(a) is piecewise constant: no history needed
  return make_result(op, ops::abs(a.data()), {a},
                     [sa](const Variable& g) -> Grads { return {mul(g, ops::sign(sa.get()))}; });
}

Variable sin(const Variable& a) {
  OpScope op(op_info::sin, a);
  // y = sin a:  da = g cos a
  SavedVariable sa(a, op_info::sin);
  return make_result(op, ops::sin(a.data()), {a},
                     [sa](const Variable& g) -> Grads { return {mul(g, cos(sa.get()))}; });
}

Variable cos(const Variable& a) {
  OpScope op(op_info::cos, a);
  // y = cos a:  da = -g sin a
  SavedVariable sa(a, op_info::cos);
  return make_result(op, ops::cos(a.data()), {a},
                     [sa](const Variable& g) -> Grads { return {neg(mul(g, sin(sa.get())))}; });
}

Variable tanh(const Variable& a) {
  OpScope op(op_info::tanh, a);
  // y = tanh a:  da = g (1 - y^2)
  Tensor y = ops::tanh(a.data());
  SavedVariable sy = SavedVariable::output(y, op_info::tanh);
  return make_result(op, y, {a}, [sy](const Variable& g) -> Grads {
    const Variable v = sy.get();
    return {mul(g, rsub(mul(v, v), 1.0))};
  });
}

Variable sigmoid(const Variable& a) {
  OpScope op(op_info::sigmoid, a);
  // y = 1 / (1 + e^-a):  da = g y (1 - y)
  Tensor y = ops::sigmoid(a.data());
  SavedVariable sy = SavedVariable::output(y, op_info::sigmoid);
  return make_result(op, y, {a}, [sy](const Variable& g) -> Grads {
    const Variable v = sy.get();
    return {mul(g, mul(v, rsub(v, 1.0)))};
  });
}

Variable relu(const Variable& a) {
  OpScope op(op_info::relu, a);
  // y = max(a, 0):  da = g where y > 0
  Tensor y = ops::relu(a.data());
  SavedTensor sy(y, op_info::relu);  // only compared: the mask is a constant
  return make_result(op, y, {a}, [sy](const Variable& g) -> Grads {
    return {where(ops::gt(sy.get(), 0.0), g, ops::zeros({}, g.dtype(), g.device()))};
  });
}

Variable gelu(const Variable& a) {
  OpScope op(op_info::gelu, a);
  // y = a Φ(a):  da = g (Φ(a) + a φ(a))
  SavedVariable sa(a, op_info::gelu);
  return make_result(op, ops::gelu(a.data()), {a}, [sa](const Variable& g) -> Grads {
    // create_graph: composed, so that the gradient is differentiable again
    if (grad_enabled()) return {mul(g, gelu_grad(sa.get()))};
    return {Variable(ops::gelu_backward(g.data(), sa.get().data()))};
  });
}

Variable gelu_grad(const Variable& a) {
  OpScope op(op_info::gelu_grad, a);
  // y = Φ(a) + a φ(a):  da = g φ(a) (2 - a²),  φ(a) = e^(-a²/2) / √(2π)
  SavedVariable sa(a, op_info::gelu_grad);
  return make_result(op, ops::gelu_grad(a.data()), {a}, [sa](const Variable& g) -> Grads {
    const Variable x = sa.get(), x2 = mul(x, x);
    const Variable phi = mul(exp(mul(x2, -0.5)), 0.3989422804014327);  // 1/√(2π)
    return {mul(g, mul(phi, rsub(x2, 2.0)))};
  });
}

namespace {
// silu'(x) = σ(x) (1 + x (1 - σ(x))), composed of recorded ops (the create_graph path of silu and swiglu)
Variable silu_grad_composed(const Variable& x) {
  const Variable s = sigmoid(x);
  return mul(s, add(mul(x, rsub(s, 1.0)), 1.0));
}
}  // namespace

Variable silu(const Variable& a) {
  OpScope op(op_info::silu, a);
  // y = a σ(a):  da = g σ(a) (1 + a (1 - σ(a)))
  SavedVariable sa(a, op_info::silu);
  return make_result(op, ops::silu(a.data()), {a}, [sa](const Variable& g) -> Grads {
    if (grad_enabled()) return {mul(g, silu_grad_composed(sa.get()))};  // create_graph: differentiable again
    return {Variable(ops::silu_backward(g.data(), sa.get().data()))};
  });
}

Variable swiglu(const Variable& gate, const Variable& up) {
  OpScope op(op_info::swiglu, gate, up);
  SACCADE_CHECK(gate.dtype() == up.dtype(), "swiglu: gate {} ({}) and up {} ({}) must have one dtype",
                gate.shape(), gate.dtype(), up.shape(), up.dtype());
  // y = silu(gate) ⊙ up:  d up = silu(gate) ⊙ g,  d gate = silu'(gate) ⊙ g ⊙ up
  SavedVariable sg(gate, op_info::swiglu), su(up, op_info::swiglu);
  return make_result(op, ops::swiglu(gate.data(), up.data()), {gate, up},
                     [sg, su](const Variable& g) -> Grads {
                       const Variable x = sg.get(), u = su.get();
                       if (grad_enabled()) return {mul(mul(g, u), silu_grad_composed(x)), mul(silu(x), g)};
                       ops::SwigluGrads r = ops::swiglu_backward(g.data().to(x.dtype()), x.data(), u.data());
                       return {Variable(r.dgate), Variable(r.dup)};
                     });
}

Variable clamp(const Variable& a, std::optional<double> lo, std::optional<double> hi) {
  OpScope op(op_info::clamp, a);
  // y = min(max(a, lo), hi):  da = g where lo <= a <= hi
  SavedTensor sa(a.data(), op_info::clamp);  // only compared: the mask is a constant
  return make_result(op, ops::clamp(a.data(), lo, hi), {a}, [sa, lo, hi](const Variable& g) -> Grads {
    const Tensor& x = sa.get();
    Tensor inside = ops::ones(x.shape(), DType::Bool, x.device());
    if (lo) inside = ops::logical_and(inside, ops::ge(x, *lo));
    if (hi) inside = ops::logical_and(inside, ops::le(x, *hi));
    return {where(inside, g, ops::zeros({}, g.dtype(), g.device()))};
  });
}

// ---- selection ----

Variable where(const Tensor& cond, const Variable& a, const Variable& b) {
  OpScope op(op_info::where, cond, a, b);
  // cond, a, b: broadcast together
  // y = cond ? a : b:  da = g where cond,  db = g where !cond
  InputInfo ia(a), ib(b);
  Tensor y = ops::where(cond, a.data(), b.data());
  SavedTensor c(cond, op_info::where);
  return make_result(op, y, {a, b}, [c, ia, ib](const Variable& g) -> Grads {
    Variable zero(ops::zeros({}, g.dtype(), g.device()));
    return {ia.needs ? ia.grad(where(c.get(), g, zero)) : Variable(),
            ib.needs ? ib.grad(where(c.get(), zero, g)) : Variable()};
  });
}

Variable masked_fill(const Variable& a, const Tensor& mask, double value) {
  OpScope op(op_info::masked_fill, a, mask);
  // a: (...), mask: broadcastable to a
  // y = mask ? value : a:  da = g where !mask
  Tensor y = ops::masked_fill(a.data(), mask, value);
  SavedTensor m(mask, op_info::masked_fill);
  return make_result(op, y, {a}, [m](const Variable& g) -> Grads { return {masked_fill(g, m.get(), 0.0)}; });
}

}  // namespace saccade
