// Reductions. Each dim-set reduction is brought to the kernel's (outer, k, inner) form: contiguous input,
// reduced dims merged into k when they are adjacent, otherwise one dim at a time.
#include "ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/backend.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/widen.h"

namespace saccade::ops {

namespace {

// Sorted, unique, normalised dims; empty `dims` means all dims.
Shape normalize_dims(const Shape& dims, int ndim, const char* op) {
  bool seen[kMaxDims] = {};
  Shape out;
  if (dims.empty()) {
    for (int d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) {
    int n = normalize_dim(d, ndim, op);
    SACCADE_CHECK(ndim == 0 || !seen[n], "{}: dim {} repeated in {}", op, n, dims);
    if (ndim > 0) seen[n] = true;
  }
  for (int d = 0; d < ndim; ++d)
    if (seen[d]) out.push_back(d);
  return out;
}

// `shape` without the (sorted, normalised) dims `ds`: the result shape of a reduction without keepdim.
Shape drop_dims(const Shape& shape, const Shape& ds) {
  Shape s;
  for (int d = 0, k = 0; d < shape.size(); ++d) {
    if (k < ds.size() && ds[k] == d) {
      ++k;
      continue;
    }
    s.push_back(shape[d]);
  }
  return s;
}

// Reduces a contiguous tensor over dims [d0, d1] (adjacent) with the kernel; keepdim shape.
Tensor reduce_range(ReduceOp op, const Tensor& a, int d0, int d1) {
  int64_t outer = 1, k = 1, inner = 1;
  for (int d = 0; d < a.dim(); ++d) (d < d0 ? outer : d <= d1 ? k : inner) *= a.shape()[d];
  Shape out_shape = a.shape();
  for (int d = d0; d <= d1; ++d) out_shape[d] = 1;
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  backend(a.device()).reduce(op, a, out, outer, k, inner);
  return out;
}

Tensor reduce(ReduceOp op, const Tensor& a, const Shape& dims, bool keepdim, const char* name) {
  SACCADE_CHECK(a.defined(), "{}: got an undefined tensor", name);
  Shape ds = normalize_dims(dims, a.dim(), name);
  Tensor x = a.dtype() == DType::Bool ? a.to(DType::Int64) : a.contiguous();
  if (op == ReduceOp::Max || op == ReduceOp::Min)
    for (int64_t d : ds)
      SACCADE_CHECK(a.shape()[d] > 0, "{}: cannot reduce an empty dim {} of shape {}", name, d, a.shape());
  if (a.dim() == 0) return x.clone();
  // reduce runs of adjacent dims from the last run backwards, so earlier dim numbers stay valid
  for (int i = ds.size() - 1; i >= 0;) {
    int j = i;
    while (j > 0 && ds[j - 1] == ds[j] - 1) --j;
    x = reduce_range(op, x, static_cast<int>(ds[j]), static_cast<int>(ds[i]));
    i = j - 1;
  }
  return keepdim ? x : x.view(drop_dims(a.shape(), ds));
}

int64_t count(const Tensor& a, const Shape& ds) {
  int64_t n = 1;
  for (int64_t d : ds) n *= a.shape()[d];
  return n;
}

}  // namespace

Tensor sum(const Tensor& a) { return reduce(ReduceOp::Sum, a, {}, false, "sum"); }
Tensor sum(const Tensor& a, const Shape& dims, bool keepdim) {
  return reduce(ReduceOp::Sum, a, dims, keepdim, "sum");
}
Tensor prod(const Tensor& a, const Shape& dims, bool keepdim) {
  return reduce(ReduceOp::Prod, a, dims, keepdim, "prod");
}

Tensor mean(const Tensor& a, const Shape& dims, bool keepdim) {
  SACCADE_CHECK(a.defined() && is_floating(a.dtype()), "mean: expected a float tensor, got {} of shape {}",
                a.defined() ? dtype_name(a.dtype()) : "undefined", a.shape());
  Shape ds = normalize_dims(dims, a.dim(), "mean");
  // 16-bit: the sum and the division in float32, one rounding (not one for the sum and one for the quotient)
  const double n = static_cast<double>(count(a, ds));
  return composed_in_float32(
      a.dtype(), [&](const Tensor& x) { return div(sum(x, dims, keepdim), n); }, a);
}
Tensor mean(const Tensor& a) { return mean(a, {}, false); }

Tensor max(const Tensor& a) { return reduce(ReduceOp::Max, a, {}, false, "max"); }
Tensor min(const Tensor& a) { return reduce(ReduceOp::Min, a, {}, false, "min"); }
Tensor amax(const Tensor& a, const Shape& dims, bool keepdim) {
  return reduce(ReduceOp::Max, a, dims, keepdim, "amax");
}
Tensor amin(const Tensor& a, const Shape& dims, bool keepdim) {
  return reduce(ReduceOp::Min, a, dims, keepdim, "amin");
}

static ValuesIndices arg_reduce(ReduceOp op, const Tensor& a, int64_t dim, bool keepdim, const char* name) {
  SACCADE_CHECK(a.defined(), "{}: got an undefined tensor", name);
  SACCADE_CHECK(a.dtype() != DType::Bool, "{}: not defined for bool tensors (shape {})", name, a.shape());
  // NOTE: unsqueeze, not reshape({1}): Tensor::view cannot yet view a 0-d tensor as [1]
  Tensor x = a.dim() == 0 ? a.unsqueeze(0) : a.contiguous();
  int d = normalize_dim(dim, x.dim(), name);
  SACCADE_CHECK(x.shape()[d] > 0, "{}: cannot reduce an empty dim {} of shape {}", name, d, a.shape());
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < x.dim(); ++i)
    if (i != d) (i < d ? outer : inner) *= x.shape()[i];
  Shape s = x.shape();
  s[d] = 1;
  ValuesIndices r{Tensor::empty(s, x.dtype(), x.device()), Tensor::empty(s, DType::Int64, x.device())};
  backend(x.device()).arg_reduce(op, x, r.values, r.indices, outer, x.shape()[d], inner);
  if (a.dim() == 0) return {r.values.view({}), r.indices.view({})};
  if (!keepdim) r = {r.values.squeeze(d), r.indices.squeeze(d)};
  return r;
}

ValuesIndices max(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_reduce(ReduceOp::Max, a, dim, keepdim, "max");
}
ValuesIndices min(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_reduce(ReduceOp::Min, a, dim, keepdim, "min");
}
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_reduce(ReduceOp::Max, a, dim, keepdim, "argmax").indices;
}
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_reduce(ReduceOp::Min, a, dim, keepdim, "argmin").indices;
}
ValuesIndices topk(const Tensor& a, int64_t k, int64_t dim) {
  SACCADE_CHECK(a.dtype() != DType::Bool, "topk: a bool tensor (shape {}) has no order", a.shape());
  const int d = normalize_dim(dim, std::max(a.dim(), 1), "topk");
  const int64_t n = a.dim() == 0 ? 1 : a.size(d);
  SACCADE_CHECK(k >= 0 && k <= n, "topk: k = {} is out of range for dim {} of shape {} (0 <= k <= {})", k, d,
                a.shape(), n);
  if (a.dim() == 0) return {a.clone(), zeros({}, DType::Int64, a.device())};
  // the rows along `dim`, last, as float64 on the host (every dtype's values compare exactly there, but
  // int64's beyond 2^53: those are compared as their nearest doubles)
  const Tensor rows = a.transpose(d, -1).to(Device::cpu()).to(DType::Float64).contiguous();
  Shape out_shape = rows.shape();
  out_shape[out_shape.size() - 1] = k;
  Tensor idx = Tensor::empty(out_shape, DType::Int64, Device::cpu());
  const double* x = rows.data<double>();
  int64_t* out = idx.data<int64_t>();
  const int64_t count = n == 0 ? 0 : rows.numel() / n;
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t r = 0; r < count; ++r) {
    const double* row = x + r * n;
    // a above b: NaN first, then larger, then the lower index
    auto above = [row](int64_t i, int64_t j) {
      const bool ni = std::isnan(row[i]), nj = std::isnan(row[j]);
      if (ni != nj) return ni;
      if (!ni && row[i] != row[j]) return row[i] > row[j];
      return i < j;
    };
    std::iota(order.begin(), order.end(), int64_t{0});
    std::partial_sort(order.begin(), order.begin() + k, order.end(), above);
    std::copy(order.begin(), order.begin() + k, out + r * k);
  }
  Tensor indices = idx.transpose(d, -1).contiguous().to(a.device());
  return {gather(a, d, indices), indices};
}

Tensor argmax(const Tensor& a) {
  SACCADE_CHECK(a.defined(), "argmax: got an undefined tensor");
  return arg_reduce(ReduceOp::Max, a.dim() == 0 ? a : a.reshape({-1}), 0, false, "argmax").indices;
}

Tensor var(const Tensor& a, const Shape& dims, bool unbiased, bool keepdim) {
  SACCADE_CHECK(a.defined() && is_floating(a.dtype()), "var: expected a float tensor, got {} of shape {}",
                a.defined() ? dtype_name(a.dtype()) : "undefined", a.shape());
  Shape ds = normalize_dims(dims, a.dim(), "var");
  int64_t n = count(a, ds);
  return composed_in_float32(  // as mean
      a.dtype(),
      [&](const Tensor& x) {
        Tensor centered = sub(x, mean(x, ds, true));
        Tensor ss = sum(mul(centered, centered), ds, keepdim);
        // n <= correction gives 0 / 0 = nan (or x / 0 = inf), as torch
        return div(ss, static_cast<double>(std::max<int64_t>(n - (unbiased ? 1 : 0), 0)));
      },
      a);
}
Tensor var(const Tensor& a, bool unbiased) { return var(a, {}, unbiased, false); }

Tensor logsumexp(const Tensor& a, const Shape& dims, bool keepdim) {
  SACCADE_CHECK(a.defined() && is_floating(a.dtype()),
                "logsumexp: expected a float tensor, got {} of shape {}",
                a.defined() ? dtype_name(a.dtype()) : "undefined", a.shape());
  Shape ds = normalize_dims(dims, a.dim(), "logsumexp");
  Shape out_shape = keepdim ? a.shape() : drop_dims(a.shape(), ds);
  if (keepdim)
    for (int64_t d : ds) out_shape[static_cast<int>(d)] = 1;
  // log of an empty sum is -inf, as torch
  if (count(a, ds) == 0) return full(out_shape, -INFINITY, a.dtype(), a.device());
  return composed_in_float32(  // as mean
      a.dtype(),
      [&](const Tensor& x) {
        Tensor m = amax(x, ds, true);
        // NOTE: rows that are all -inf would give (-inf) - (-inf) = NaN; shift them (and +inf rows) by 0.
        Tensor m_safe = where(eq(abs(m), INFINITY), zeros_like(m), m);
        Tensor r = add(log(sum(exp(sub(x, m_safe)), ds, true)), m_safe);
        return r.view(out_shape);
      },
      a);
}

Tensor sum_to(const Tensor& a, const Shape& shape) {
  if (a.shape() == shape) return a;
  SACCADE_CHECK(broadcast_shapes(a.shape(), shape, "sum_to") == a.shape(),
                "sum_to: shape {} is not a broadcast of {}", a.shape(), shape);
  int lead = a.dim() - shape.size();
  Shape dims;
  for (int d = 0; d < a.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && a.shape()[d] != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? a : sum(a, dims, true);
  return r.reshape(shape);
}

}  // namespace saccade::ops
