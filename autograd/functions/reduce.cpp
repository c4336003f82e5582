// Derivative rules of the reductions: each spreads g back over the reduced dims (expand), then weights it.
#include "autograd/functions/reduce.h"

#include <cmath>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/shape.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace saccade {

using Grads = std::vector<Variable>;

// g has the reduced shape (keepdim or not); returns it as a keepdim view expanded to `shape`.
// NOTE: a 0-d input reduced over dim 0 or -1 (as torch allows) gives a 0-d g: it already has the input's
// shape.
static Variable expand_back(const Variable& g, const Shape& shape, const Shape& dims, bool keepdim) {
  if (shape.size() == 0) return g;
  Variable r = g;
  if (!keepdim) {
    Shape ds;
    if (dims.empty()) {
      for (int d = 0; d < shape.size(); ++d) ds.push_back(d);
    } else {
      for (int64_t d : dims) ds.push_back(normalize_dim(d, shape.size(), "reduce backward"));
      std::sort(ds.begin(), ds.end());
    }
    for (int64_t d : ds) r = unsqueeze(r, d);
  }
  return expand(r, shape);
}

Variable sum(const Variable& a, const Shape& dims, bool keepdim) {
  OpScope op(op_info::sum, a);
  SACCADE_AUTOCAST(op, sum, a, dims, keepdim);
  // y = Σ_dims a:  da = g expanded over dims
  Shape s = a.shape();
  return make_result(op, ops::sum(a.data(), dims, keepdim), {a},
                     [s, dims, keepdim](const Variable& g) -> Grads {
                       return {contiguous(expand_back(g, s, dims, keepdim))};
                     });
}
Variable sum(const Variable& a) { return sum(a, {}, false); }

Variable mean(const Variable& a, const Shape& dims, bool keepdim) {
  OpScope op(op_info::mean, a);
  SACCADE_AUTOCAST(op, mean, a, dims, keepdim);
  // y = Σ_dims a / n:  da = g / n expanded over dims
  Shape s = a.shape();
  Tensor y = ops::mean(a.data(), dims, keepdim);
  double n = static_cast<double>(a.numel()) / static_cast<double>(std::max<int64_t>(y.numel(), 1));
  return make_result(op, y, {a}, [s, dims, keepdim, n](const Variable& g) -> Grads {
    return {div(expand_back(g, s, dims, keepdim), n)};
  });
}
Variable mean(const Variable& a) { return mean(a, {}, false); }

// y = max_dims a:  da = g * [a == y] / (number of ties)
static Variable extremum(const Variable& a, const Shape& dims, bool keepdim, bool is_max, const OpInfo& row) {
  OpScope op(row, a);
  Tensor y = is_max ? ops::amax(a.data(), dims, keepdim) : ops::amin(a.data(), dims, keepdim);
  SavedTensor sa(a.data(), row), sy(y, row);  // only compared: the weights are constants
  Shape s = a.shape();
  return make_result(op, y, {a}, [sa, sy, s, dims, keepdim](const Variable& g) -> Grads {
    Tensor hit = ops::eq(sa.get(), expand_back(sy.get(), s, dims, keepdim).data()).to(g.dtype());
    Tensor count = ops::sum(hit, dims, true);
    return {mul(div(expand_back(g, s, dims, keepdim), count), hit)};
  });
}
Variable max(const Variable& a) { return extremum(a, {}, false, true, op_info::max); }
Variable min(const Variable& a) { return extremum(a, {}, false, false, op_info::min); }
Variable amax(const Variable& a, const Shape& dims, bool keepdim) {
  return extremum(a, dims, keepdim, true, op_info::amax);
}
Variable amin(const Variable& a, const Shape& dims, bool keepdim) {
  return extremum(a, dims, keepdim, false, op_info::amin);
}

// y = a[index] along dim:  da = zeros with g scattered to the index
static VariableIndices arg_extremum(const Variable& a, int64_t dim, bool keepdim, bool is_max) {
  const OpInfo& row = is_max ? op_info::max : op_info::min;
  OpScope op(row, a);
  ops::ValuesIndices r = is_max ? ops::max(a.data(), dim, keepdim) : ops::min(a.data(), dim, keepdim);
  Shape s = a.shape();
  int d = a.dim() == 0 ? 0 : normalize_dim(dim, a.dim(), row.name);
  Tensor idx = keepdim || a.dim() == 0 ? r.indices : r.indices.unsqueeze(d);
  Variable v = make_result(op, r.values, {a}, [s, d, idx](const Variable& g) -> Grads {
    if (s.size() == 0) return {g};
    Variable gk = g.dim() == idx.dim() ? g : unsqueeze(g, d);
    Tensor onehot = ops::eq(ops::arange(0, static_cast<double>(s[d]), 1, DType::Int64, g.device()).view([&] {
      Shape v = Shape::filled(s.size(), 1);
      v[d] = s[d];
      return v;
    }()),
                            idx);
    return {where(onehot, gk, ops::zeros({}, g.dtype(), g.device()))};
  });
  return {v, r.indices};
}
VariableIndices max(const Variable& a, int64_t dim, bool keepdim) {
  return arg_extremum(a, dim, keepdim, true);
}
VariableIndices min(const Variable& a, int64_t dim, bool keepdim) {
  return arg_extremum(a, dim, keepdim, false);
}

Variable var(const Variable& a, const Shape& dims, bool unbiased, bool keepdim) {
  OpScope op(op_info::var, a);
  // composed: Σ (a - mean)^2 / (n - 1); the engine chains the rules of sub, mul, sum
  SACCADE_CHECK(is_floating(a.dtype()), "var: expected a float tensor, got {} of shape {}", a.dtype(),
                a.shape());
  double n = 1;
  if (dims.empty() || a.dim() == 0) {
    n = static_cast<double>(a.numel());
  } else {
    for (int64_t d : dims) n *= static_cast<double>(a.shape()[normalize_dim(d, a.dim(), "var")]);
  }
  Variable c = sub(a, mean(a, dims, true));
  return div(sum(mul(c, c), dims, keepdim), std::max(n - (unbiased ? 1.0 : 0.0), 0.0));
}

Variable logsumexp(const Variable& a, const Shape& dims, bool keepdim) {
  OpScope op(op_info::logsumexp, a);
  SACCADE_AUTOCAST(op, logsumexp, a, dims, keepdim);
  // y = log Σ e^a:  da = g * e^(a - y) = g * softmax(a)
  // NOTE: a row of all -inf (y = -inf) gets a zero gradient, not torch's NaN: e^(a - 0) = 0 there.
  Tensor y = ops::logsumexp(a.data(), dims, keepdim);
  SavedVariable sa(a, op_info::logsumexp), sy = SavedVariable::output(y, op_info::logsumexp);
  Shape s = a.shape();
  return make_result(op, y, {a}, [sa, sy, s, dims, keepdim](const Variable& g) -> Grads {
    const Variable y = sy.get();
    Variable y_safe = masked_fill(y, ops::eq(y.data(), -INFINITY), 0.0);
    Variable p = exp(sub(sa.get(), expand_back(y_safe, s, dims, keepdim)));
    return {mul(p, expand_back(g, s, dims, keepdim))};
  });
}

Variable sum_to(const Variable& a, const Shape& shape) {
  OpScope op(op_info::sum_to, a);
  // a: (..., S) broadcast from `shape` -> y (shape)
  // y = Σ over the broadcast dims of a:  da = g expanded back to a's shape
  Shape s = a.shape();
  if (s == shape) return a;
  return make_result(op, ops::sum_to(a.data(), shape), {a},
                     [s](const Variable& g) -> Grads { return {expand(g, s)}; });
}

}  // namespace saccade
