// Derivative rules of the views and joins, each beside its forward. `g` is dL/d(output).
// A view's backward undoes the view on g (reshape back, inverse permute, sum over broadcast dims), or, for
// views that pick a part of the input (narrow, slice, select, split, chunk), hands g on as the gradient of
// that part: the engine adds it into the part of the input's gradient (Node::set_part), as if g had been
// placed into zeros of the input's shape.
#include "autograd/functions/shape.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/reduce.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/join.h"
#include "ops/reduce.h"

namespace saccade {

using Grads = std::vector<Variable>;

namespace {

// Records y, a view of the part of `a` that `part` picks: da = zeros of a's shape with g at part(da).
Variable part_result(OpScope& op, Tensor y, const Variable& a, Node::PartFn part) {
  Variable out = make_result(op, std::move(y), {a}, [](const Variable& g) -> Grads { return {g}; });
  if (out.grad_fn()) out.grad_fn()->set_part(std::move(part));
  return out;
}

// g: (.., r * s, ..) at dim d -> (.., s, ..): the sum of the r blocks of dim d (zeros when r is 0).
Variable sum_blocks(const Variable& g, int d, int64_t r, int64_t s) {
  if (g.dim() < kMaxDims) {  // split dim d into (r, s) and reduce the r
    Shape split = g.shape();
    split[d] = s;
    split.insert(d, r);
    return sum(reshape(g, split), {d});
  }
  Shape out_shape = g.shape();
  out_shape[d] = s;
  Variable acc(ops::zeros(out_shape, g.dtype(), g.device()));
  for (int64_t k = 0; k < r; ++k) acc = add(acc, narrow(g, d, k * s, s));
  return acc;
}

}  // namespace

// ---- views ----

Variable reshape(const Variable& a, const Shape& shape) {
  OpScope op(op_info::reshape, a);
  // y = reshape(a):  da = reshape(g, a.shape)
  Shape sa = a.shape();
  return make_result(op, a.data().reshape(shape), {a},
                     [sa](const Variable& g) -> Grads { return {reshape(g, sa)}; });
}

Variable view(const Variable& a, const Shape& shape) {
  OpScope op(op_info::view, a);
  // y = view(a):  da = reshape(g, a.shape)
  Shape sa = a.shape();
  return make_result(op, a.data().view(shape), {a},
                     [sa](const Variable& g) -> Grads { return {reshape(g, sa)}; });
}

Variable permute(const Variable& a, const Shape& dims) {
  OpScope op(op_info::permute, a);
  // y = permute(a, p), y dim i = a dim p[i]:  da = permute(g, p^-1), p^-1[p[i]] = i
  Tensor y = a.data().permute(dims);
  Shape inverse = Shape::filled(dims.size(), 0);
  for (int i = 0; i < dims.size(); ++i) inverse[normalize_dim(dims[i], dims.size(), "permute")] = i;
  return make_result(op, y, {a}, [inverse](const Variable& g) -> Grads { return {permute(g, inverse)}; });
}

Variable transpose(const Variable& a, int64_t d0, int64_t d1) {
  OpScope op(op_info::transpose, a);
  // y = transpose(a, d0, d1):  da = transpose(g, d0, d1)
  return make_result(op, a.data().transpose(d0, d1), {a},
                     [d0, d1](const Variable& g) -> Grads { return {transpose(g, d0, d1)}; });
}

Variable t(const Variable& a) {
  OpScope op(op_info::t, a);
  // y = a^T:  da = g^T
  return make_result(op, a.data().t(), {a}, [](const Variable& g) -> Grads { return {t(g)}; });
}

Variable squeeze(const Variable& a) {
  OpScope op(op_info::squeeze, a);
  // y = squeeze(a):  da = reshape(g, a.shape)
  Shape sa = a.shape();
  return make_result(op, a.data().squeeze(), {a},
                     [sa](const Variable& g) -> Grads { return {reshape(g, sa)}; });
}

Variable squeeze(const Variable& a, int64_t dim) {
  OpScope op(op_info::squeeze, a);
  // y = squeeze(a, dim):  da = reshape(g, a.shape)
  Shape sa = a.shape();
  return make_result(op, a.data().squeeze(dim), {a},
                     [sa](const Variable& g) -> Grads { return {reshape(g, sa)}; });
}

Variable unsqueeze(const Variable& a, int64_t dim) {
  OpScope op(op_info::unsqueeze, a);
  // y = unsqueeze(a, dim):  da = reshape(g, a.shape)
  Shape sa = a.shape();
  return make_result(op, a.data().unsqueeze(dim), {a},
                     [sa](const Variable& g) -> Grads { return {reshape(g, sa)}; });
}

Variable expand(const Variable& a, const Shape& shape) {
  OpScope op(op_info::expand, a);
  // y = expand(a) (y[i] = a[i mod broadcast]):  da = sum of g over the broadcast dims
  Shape sa = a.shape();
  return make_result(op, a.data().expand(shape), {a},
                     [sa](const Variable& g) -> Grads { return {sum_to(g, sa)}; });
}

Variable flatten(const Variable& a, int64_t start_dim, int64_t end_dim) {
  OpScope op(op_info::flatten, a);
  // y = flatten(a):  da = reshape(g, a.shape)
  Shape sa = a.shape();
  return make_result(op, a.data().flatten(start_dim, end_dim), {a},
                     [sa](const Variable& g) -> Grads { return {reshape(g, sa)}; });
}

Variable narrow(const Variable& a, int64_t dim, int64_t start, int64_t length) {
  OpScope op(op_info::narrow, a);
  // y = a[.., start:start+length, ..]:  da = zeros with g at [.., start:start+length, ..]
  return part_result(op, a.data().narrow(dim, start, length), a,
                     [=](const Tensor& z) { return z.narrow(dim, start, length); });
}

Variable slice(const Variable& a, int64_t dim, int64_t start, int64_t end, int64_t step) {
  OpScope op(op_info::slice, a);
  // y = a[.., start:end:step, ..]:  da = zeros with g at [.., start:end:step, ..]
  return part_result(op, a.data().slice(dim, start, end, step), a,
                     [=](const Tensor& z) { return z.slice(dim, start, end, step); });
}

Variable select(const Variable& a, int64_t dim, int64_t index) {
  OpScope op(op_info::select, a);
  // y = a[.., index, ..]:  da = zeros with g at [.., index, ..]
  return part_result(op, a.data().select(dim, index), a,
                     [=](const Tensor& z) { return z.select(dim, index); });
}

Variable contiguous(const Variable& a) {
  OpScope op(op_info::contiguous, a);
  // y = a (copied to row-major order):  da = g
  return make_result(op, a.data().contiguous(), {a}, [](const Variable& g) -> Grads { return {g}; });
}

// ---- conversions (members of Variable, recorded here with the other copies) ----

namespace {
// A conversion's rule keeps only the source dtype or device: its node is never released (Node::release), so
// a cast shared by two graphs (autocast's weight cache) serves a backward through each.
Variable saves_nothing(Variable y) {
  if (y.grad_fn()) y.grad_fn()->set_saves_nothing();
  return y;
}
}  // namespace

Variable Variable::to(DType dtype) const {
  // y = cast(a) to dtype:  da = cast(g) back to a's dtype
  if (dtype == this->dtype()) return *this;
  OpScope op(op_info::to, *this);
  DType from = this->dtype();
  return saves_nothing(saccade::make_result(op, data().to(dtype), {*this},
                                            [from](const Variable& g) -> Grads { return {g.to(from)}; }));
}

Variable Variable::to(Device device) const {
  // y = a copied to device:  da = g copied back to a's device
  if (device == this->device()) return *this;
  OpScope op(op_info::to, *this);
  Device from = this->device();
  return saves_nothing(saccade::make_result(op, data().to(device), {*this},
                                            [from](const Variable& g) -> Grads { return {g.to(from)}; }));
}

// ---- joins ----

Variable cat(const std::vector<Variable>& xs, int64_t dim) {
  OpScope op(op_info::cat, xs);
  SACCADE_AUTOCAST(op, cat, xs, dim);
  // xs: k tensors (.., n_i, ..) -> y (.., Σ n_i, ..)
  // y = [x_0, ..., x_k-1] along dim:  dx_i = g[.., o_i : o_i + n_i, ..] with o_i = Σ_{j<i} n_j
  std::vector<Tensor> ts;
  for (const Variable& x : xs) ts.push_back(x.defined() ? x.data() : Tensor());
  Tensor y = ops::cat(ts, dim);
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  std::vector<bool> needs;
  for (size_t i = 0; i < ts.size(); ++i)
    shapes.push_back(ts[i].shape()), dtypes.push_back(ts[i].dtype()), needs.push_back(xs[i].requires_grad());
  int d = normalize_dim(dim, y.dim(), "cat");
  return make_result(op, y, xs, [shapes, dtypes, needs, d](const Variable& g) -> Grads {
    Grads out;
    int64_t offset = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (shapes[i].size() == 1 && shapes[i].numel() == 0 && g.dim() != 1) {  // skipped by cat
        out.push_back(needs[i] ? Variable(ops::zeros(shapes[i], dtypes[i], g.device())) : Variable());
        continue;
      }
      out.push_back(needs[i] ? narrow(g, d, offset, shapes[i][d]).to(dtypes[i]) : Variable());
      offset += shapes[i][d];
    }
    return out;
  });
}

Variable stack(const std::vector<Variable>& xs, int64_t dim) {
  OpScope op(op_info::stack, xs);
  SACCADE_AUTOCAST(op, stack, xs, dim);
  // xs: k tensors (S..) -> y (S0.., k, ..Sd);  y = stack(xs):  dx_i = g.select(dim, i)
  std::vector<Tensor> ts;
  for (const Variable& x : xs) ts.push_back(x.defined() ? x.data() : Tensor());
  Tensor y = ops::stack(ts, dim);
  int d = normalize_dim(dim, y.dim(), "stack");
  std::vector<DType> dtypes;
  std::vector<bool> needs;
  for (size_t i = 0; i < ts.size(); ++i)
    dtypes.push_back(ts[i].dtype()), needs.push_back(xs[i].requires_grad());
  return make_result(op, y, xs, [dtypes, needs, d](const Variable& g) -> Grads {
    Grads out;
    for (size_t i = 0; i < dtypes.size(); ++i)
      out.push_back(needs[i] ? select(g, d, static_cast<int64_t>(i)).to(dtypes[i]) : Variable());
    return out;
  });
}

// One Variable per piece, each a part view of a.
static std::vector<Variable> pieces(const Variable& a, const std::vector<Tensor>& parts, int d, OpScope& op) {
  std::vector<Variable> out;
  int64_t start = 0;
  for (const Tensor& p : parts) {
    int64_t length = p.shape()[d];
    // y = a[.., start:start+length, ..]:  da = zeros with g at [.., start:start+length, ..]
    out.push_back(
        part_result(op, p, a, [d, start, length](const Tensor& z) { return z.narrow(d, start, length); }));
    start += length;
  }
  return out;
}

std::vector<Variable> split(const Variable& a, int64_t split_size, int64_t dim) {
  OpScope op(op_info::split, a);
  std::vector<Tensor> parts = ops::split(a.data(), split_size, dim);
  return pieces(a, parts, normalize_dim(dim, a.dim(), "split"), op);
}

std::vector<Variable> split(const Variable& a, const std::vector<int64_t>& sizes, int64_t dim) {
  OpScope op(op_info::split, a);
  std::vector<Tensor> parts = ops::split(a.data(), sizes, dim);
  return pieces(a, parts, normalize_dim(dim, a.dim(), "split"), op);
}

std::vector<Variable> chunk(const Variable& a, int64_t chunks, int64_t dim) {
  OpScope op(op_info::chunk, a);
  std::vector<Tensor> parts = ops::chunk(a.data(), chunks, dim);
  return pieces(a, parts, normalize_dim(dim, a.dim(), "chunk"), op);
}

Variable repeat(const Variable& a, const Shape& repeats) {
  OpScope op(op_info::repeat, a);
  // a: (S0.., Sd) (padded with leading 1s to repeats.size()) -> y (r0 * S0, ..., rd * Sd)
  // y = tile(a, r):  da = Σ over the r_d blocks of every dim d of g
  Shape sa = a.shape();
  return make_result(op, ops::repeat(a.data(), repeats), {a}, [sa, repeats](const Variable& g) -> Grads {
    const int lead = repeats.size() - sa.size();  // leading dims repeat added
    Variable acc = g;
    for (int d = 0; d < repeats.size(); ++d)
      if (repeats[d] != 1) acc = sum_blocks(acc, d, repeats[d], d < lead ? 1 : sa[d - lead]);
    return {reshape(acc, sa)};
  });
}

Variable repeat_interleave(const Variable& a, int64_t repeats, int64_t dim) {
  OpScope op(op_info::repeat_interleave, a);
  // a: (.., n, ..) -> y (.., n * r, ..);  y[.., j*r + k, ..] = a[.., j, ..]:  da[.., j, ..] = Σ_k g[.., j*r +
  // k, ..]
  Tensor y = ops::repeat_interleave(a.data(), repeats, dim);
  int d = normalize_dim(dim, a.dim(), "repeat_interleave");
  Shape sa = a.shape();
  return make_result(op, y, {a}, [sa, d, repeats](const Variable& g) -> Grads {
    Shape wide = sa;
    wide.insert(d + 1, repeats);
    return {sum(reshape(g, wide), {d + 1})};
  });
}

Variable tril(const Variable& a, int64_t k) {
  OpScope op(op_info::tril, a);
  // y = tril(a, k):  da = tril(g, k)
  return make_result(op, ops::tril(a.data(), k), {a},
                     [k](const Variable& g) -> Grads { return {tril(g, k)}; });
}

Variable triu(const Variable& a, int64_t k) {
  OpScope op(op_info::triu, a);
  // y = triu(a, k):  da = triu(g, k)
  return make_result(op, ops::triu(a.data(), k), {a},
                     [k](const Variable& g) -> Grads { return {triu(g, k)}; });
}

}  // namespace saccade
