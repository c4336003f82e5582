// Index ops: argument checks (including index bounds, on the host), then the (outer, n, inner) kernels of
// ops/backend.h on contiguous operands.
#include "ops/index.h"

#include "ops/backend.h"
#include "ops/elementwise.h"
#include "ops/widen.h"

namespace saccade::ops {

namespace {

void check_index_dtype(const char* op, const Tensor& index) {
  SACCADE_CHECK(index.dtype() == DType::Int64, "{}: expected an int64 index, got {} of shape {}", op,
                index.dtype(), index.shape());
}

// Every value of `index` in [0, n); the index is copied to the host for the check.
void check_bounds(const char* op, const Tensor& index, int64_t n, int dim) {
  for (int64_t v : index.to_vector<int64_t>())
    SACCADE_CHECK(v >= 0 && v < n, "{}: index {} is out of bounds for dim {} of size {}", op, v, dim, n);
}

// Products of the sizes before and after `d`.
void outer_inner(const Shape& s, int d, int64_t& outer, int64_t& inner) {
  outer = inner = 1;
  for (int k = 0; k < s.size(); ++k) (k < d ? outer : inner) *= k == d ? 1 : s[k];
}

// `t` narrowed to `sizes` in every dim except `d` (where t keeps its own size).
Tensor narrow_except(const Tensor& t, const Shape& sizes, int d) {
  Tensor v = t;
  for (int k = 0; k < t.dim(); ++k)
    if (k != d && sizes[k] != t.shape()[k]) v = v.narrow(k, 0, sizes[k]);
  return v;
}

// The shared checks of gather and scatter_add: index int64, as many dims as t, index.size(k) <= t.size(k)
// for k != d (and <= src.size(k) for all k when src is given).
void check_gather_scatter(const char* op, const Tensor& t, int d, const Tensor& index, const Tensor* src) {
  check_index_dtype(op, index);
  SACCADE_CHECK(index.dim() == t.dim(),
                "{}: index of shape {} must have as many dims as the input's shape {}", op, index.shape(),
                t.shape());
  for (int k = 0; k < t.dim(); ++k) {
    SACCADE_CHECK(k == d || index.shape()[k] <= t.shape()[k],
                  "{}: index of shape {} is larger than the input's shape {} in dim {}", op, index.shape(),
                  t.shape(), k);
    SACCADE_CHECK(!src || index.shape()[k] <= src->shape()[k],
                  "{}: index of shape {} is larger than src's shape {} in dim {}", op, index.shape(),
                  src->shape(), k);
  }
}

}  // namespace

// t: (.., n, ..), index: (m) -> (.., m, ..)
Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index) {
  check_same_device("index_select", {&t, &index});
  check_index_dtype("index_select", index);
  SACCADE_CHECK(index.dim() <= 1, "index_select: index must be 1-d, got shape {}", index.shape());
  SACCADE_CHECK(t.dim() > 0, "index_select: expects a tensor of at least 1 dim, got a 0-d tensor");
  int d = normalize_dim(dim, t.dim(), "index_select");
  check_bounds("index_select", index, t.shape()[d], d);
  Shape out_shape = t.shape();
  out_shape[d] = index.numel();
  Tensor out = Tensor::empty(out_shape, t.dtype(), t.device());
  int64_t outer, inner;
  outer_inner(t.shape(), d, outer, inner);
  if (out.numel() > 0)
    backend(t.device()).index_select(t.contiguous(), index.contiguous(), out, outer, inner);
  return out;
}

// t: (S..), index: (I..) with I_k <= S_k for k != dim -> (I..)
Tensor gather(const Tensor& t, int64_t dim, const Tensor& index) {
  check_same_device("gather", {&t, &index});
  int d = normalize_dim(dim, t.dim(), "gather");
  check_gather_scatter("gather", t, d, index, nullptr);
  check_bounds("gather", index, t.dim() == 0 ? 1 : t.shape()[d], d);
  // NOTE: unsqueeze, not reshape({1}): Tensor::reshape cannot yet turn a 0-d tensor into shape [1]
  if (t.dim() == 0) return index_select(t.unsqueeze(0), 0, index.unsqueeze(0)).squeeze(0);
  Tensor out = Tensor::empty(index.shape(), t.dtype(), t.device());
  if (out.numel() == 0) return out;
  int64_t outer, inner;
  outer_inner(index.shape(), d, outer, inner);
  backend(t.device())
      .gather(narrow_except(t, index.shape(), d).contiguous(), index.contiguous(), out, outer, inner);
  return out;
}

// t: (S..), index: (I..), src: (R..) with I_k <= R_k, I_k <= S_k for k != dim -> (S..)
Tensor scatter_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
  check_same_device("scatter_add", {&t, &index, &src});
  int d = normalize_dim(dim, t.dim(), "scatter_add");
  SACCADE_CHECK(src.dtype() == t.dtype(), "scatter_add: src has dtype {} but the input has {}", src.dtype(),
                t.dtype());
  SACCADE_CHECK(t.dtype() != DType::Bool, "scatter_add: not defined for bool tensors (shape {})", t.shape());
  SACCADE_CHECK(src.dim() == t.dim(),
                "scatter_add: src of shape {} must have as many dims as the input's shape {}", src.shape(),
                t.shape());
  check_gather_scatter("scatter_add", t, d, index, &src);
  check_bounds("scatter_add", index, t.dim() == 0 ? 1 : t.shape()[d], d);
  if (t.dim() == 0) return index_add(t.unsqueeze(0), 0, index.unsqueeze(0), src.unsqueeze(0)).squeeze(0);
  // 16 bits: accumulate in float32 (the buffer's sums and their addition too), round once (ops/widen.h)
  return composed_in_float32(
      t.dtype(),
      [&](const Tensor& ts, const Tensor& ss) {
        Tensor out = ts.clone();
        if (index.numel() == 0) return out;
        // the kernel needs out's sizes to equal index's outside dim; otherwise scatter into a zero buffer
        Shape buf_shape = index.shape();
        buf_shape[d] = ts.shape()[d];
        Tensor buf = buf_shape == ts.shape() ? out : Tensor::empty(buf_shape, ts.dtype(), ts.device());
        if (!(buf_shape == ts.shape())) backend(ts.device()).fill(buf, 0);
        Tensor src_view = ss;
        for (int k = 0; k < ss.dim(); ++k)
          if (ss.shape()[k] != index.shape()[k]) src_view = src_view.narrow(k, 0, index.shape()[k]);
        int64_t outer, inner;
        outer_inner(index.shape(), d, outer, inner);
        backend(ts.device()).scatter_add(buf, index.contiguous(), src_view.contiguous(), outer, inner);
        if (!(buf_shape == ts.shape())) {
          Tensor part = narrow_except(out, buf_shape, d);
          add_(part, buf);
        }
        return out;
      },
      t, src);
}

// t: (.., n, ..), index: (m), src: (.., m, ..) -> (.., n, ..)
Tensor index_add(const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
  check_same_device("index_add", {&t, &index, &src});
  check_index_dtype("index_add", index);
  SACCADE_CHECK(index.dim() <= 1, "index_add: index must be 1-d, got shape {}", index.shape());
  SACCADE_CHECK(src.dtype() == t.dtype(), "index_add: src has dtype {} but the input has {}", src.dtype(),
                t.dtype());
  SACCADE_CHECK(t.dtype() != DType::Bool, "index_add: not defined for bool tensors (shape {})", t.shape());
  SACCADE_CHECK(t.dim() > 0, "index_add: expects a tensor of at least 1 dim, got a 0-d tensor");
  int d = normalize_dim(dim, t.dim(), "index_add");
  Shape want = t.shape();
  want[d] = index.numel();
  SACCADE_CHECK(src.shape() == want,
                "index_add: src of shape {} does not match {} (input {} with dim {} of index size {})",
                src.shape(), want, t.shape(), d, index.numel());
  check_bounds("index_add", index, t.shape()[d], d);
  // 16-bit: the backend accumulates in float32 (repeated indices, e.g. embedding's backward, would round at
  // every add) and rounds once at the end (Kernel16::IndexAdd)
  Tensor out = t.clone();
  int64_t outer, inner;
  outer_inner(t.shape(), d, outer, inner);
  if (src.numel() > 0) backend(t.device()).index_add(out, index.contiguous(), src.contiguous(), outer, inner);
  return out;
}

// weight: (V, D), indices: (I..) -> (I.., D)
Tensor embedding(const Tensor& weight, const Tensor& indices) {
  check_same_device("embedding", {&weight, &indices});
  SACCADE_CHECK(weight.dim() == 2, "embedding: weight must be 2-d (V, D), got shape {}", weight.shape());
  SACCADE_CHECK(indices.dtype() == DType::Int64, "embedding: expected int64 indices, got {} of shape {}",
                indices.dtype(), indices.shape());
  for (int64_t v : indices.to_vector<int64_t>())
    SACCADE_CHECK(v >= 0 && v < weight.shape()[0], "embedding: index {} is out of range for {} embeddings", v,
                  weight.shape()[0]);
  Shape out_shape = indices.shape();
  out_shape.push_back(weight.shape()[1]);
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());
  if (out.numel() > 0)
    backend(weight.device())
        .index_select(weight.contiguous(), indices.contiguous(), out, 1, weight.shape()[1]);
  return out;
}

}  // namespace saccade::ops
