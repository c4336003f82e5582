// Derivative rules of the index ops, each beside its forward. `g` is dL/d(output). The index is saved as a
// SavedTensor: modifying it in place before backward would silently misroute gradients.
#include "autograd/functions/index.h"

#include "autograd/function.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/shape.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/index.h"

namespace saccade {

using Grads = std::vector<Variable>;

Variable index_select(const Variable& a, int64_t dim, const Tensor& index) {
  OpScope op(op_info::index_select, a, dim, index);
  // a: (.., n, ..), index: (m) -> y (.., m, ..)
  // y[.., j, ..] = a[.., index[j], ..]:  da = index_add(zeros(a.shape), dim, index, g)
  Tensor y = ops::index_select(a.data(), dim, index);
  Shape sa = a.shape();
  SavedTensor si(index, op_info::index_select);
  return make_result(op, y, {a}, [sa, dim, si](const Variable& g) -> Grads {
    return {index_add(ops::zeros(sa, g.dtype(), g.device()), dim, si.get(), g)};
  });
}

Variable gather(const Variable& a, int64_t dim, const Tensor& index) {
  OpScope op(op_info::gather, a, dim, index);
  // a: (S..), index: (I..) -> y (I..)
  // y[..j..] = a[..index[..j..]..] (along dim):  da = scatter_add(zeros(a.shape), dim, index, g)
  Tensor y = ops::gather(a.data(), dim, index);
  Shape sa = a.shape();
  SavedTensor si(index, op_info::gather);
  return make_result(op, y, {a}, [sa, dim, si](const Variable& g) -> Grads {
    return {scatter_add(ops::zeros(sa, g.dtype(), g.device()), dim, si.get(), g)};
  });
}

Variable scatter_add(const Variable& a, int64_t dim, const Tensor& index, const Variable& src) {
  OpScope op(op_info::scatter_add, a, dim, index, src);
  // a: (S..), index: (I..), src: (R..) -> y (S..)
  // y = a + scatter(src at index):  da = g,  dsrc[..j..] = g[..index[..j..]..] for j inside index's shape,
  // zero for the entries of src that index does not reach
  Tensor y = ops::scatter_add(a.data(), dim, index, src.data());
  Shape ss = src.shape();
  SavedTensor si(index, op_info::scatter_add);
  bool gsrc = src.requires_grad();
  return make_result(op, y, {a, src}, [ss, dim, si, gsrc](const Variable& g) -> Grads {
    if (!gsrc) return {g, Variable()};
    const Tensor& index = si.get();
    Variable picked = gather(g, dim, index);
    if (index.shape() == ss) return {g, picked};
    // picked placed at the front corner of zeros of src's shape (padded with zeros dim by dim)
    for (int k = 0; k < index.dim(); ++k) {
      if (picked.size(k) == ss[k]) continue;
      Shape pad = picked.shape();
      pad[k] = ss[k] - pad[k];
      picked = cat({picked, Variable(ops::zeros(pad, g.dtype(), g.device()))}, k);
    }
    return {g, picked};
  });
}

Variable index_add(const Variable& a, int64_t dim, const Tensor& index, const Variable& src) {
  OpScope op(op_info::index_add, a, dim, index, src);
  // a: (.., n, ..), index: (m), src: (.., m, ..) -> y (.., n, ..)
  // y = a;  y[.., index[j], ..] += src[.., j, ..]:  da = g,  dsrc = index_select(g, dim, index)
  Tensor y = ops::index_add(a.data(), dim, index, src.data());
  SavedTensor si(index, op_info::index_add);
  bool gsrc = src.requires_grad();
  return make_result(op, y, {a, src}, [dim, si, gsrc](const Variable& g) -> Grads {
    return {g, gsrc ? index_select(g, dim, si.get()) : Variable()};
  });
}

Variable embedding(const Variable& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  OpScope op(op_info::embedding, weight, indices);
  // weight: (V, D), indices: (I..) -> y (I.., D)
  // y[i..] = weight[indices[i..]]:  dweight = index_add(zeros(V, D), 0, indices, g) over rows != padding_idx
  Tensor y = ops::embedding(weight.data(), indices);
  int64_t vocab = weight.shape()[0];
  if (padding_idx) {
    SACCADE_CHECK(*padding_idx >= -vocab && *padding_idx < vocab,
                  "embedding: padding_idx {} is out of range for {} embeddings", *padding_idx, vocab);
    if (*padding_idx < 0) *padding_idx += vocab;
  }
  Shape sw = weight.shape();
  SavedTensor si(indices, op_info::embedding);
  return make_result(op, y, {weight}, [sw, si, padding_idx](const Variable& g) -> Grads {
    const Tensor& ids = si.get();
    Tensor flat_index = ids.dim() == 0 ? ids.unsqueeze(0) : ids.reshape({-1});  // (N)
    Variable rows = reshape(g, {flat_index.numel(), sw[1]});                    // (N, D)
    if (padding_idx)
      rows = masked_fill(rows, ops::eq(flat_index, static_cast<double>(*padding_idx)).unsqueeze(1), 0);
    return {index_add(ops::zeros(sw, g.dtype(), g.device()), 0, flat_index, rows)};
  });
}

}  // namespace saccade
