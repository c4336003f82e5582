// Derivative rules of the matrix products, each beside its forward. `g` is dL/d(output).
#include "autograd/functions/linalg.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/reduce.h"

namespace saccade {

using Grads = std::vector<Variable>;

namespace {

// The product of all dims but the last: the rows of a (..., n) tensor seen as a matrix. Written out because
// reshape({-1, n}) cannot infer the -1 when n is 0.
int64_t leading_rows(const Shape& s) {
  int64_t rows = 1;
  for (int i = 0; i + 1 < s.size(); ++i) rows *= s[i];
  return rows;
}

// Swaps the last two dims (a view).
Variable mT(const Variable& v) { return transpose(v, -1, -2); }

}  // namespace

Variable matmul(const Variable& a, const Variable& b) {
  OpScope op(op_info::matmul, a, b);
  SACCADE_AUTOCAST(op, matmul, a, b);
  // a: (*a, M, K) or (K), b: (*b, K, N) or (K) -> (broadcast(*a, *b), M, N) without the dims of 1-d operands
  // y = a @ b:  da = g @ b^T,  db = a^T @ g, after making 1-d operands matrices (a (1, K), b (K, 1)) and g
  // the matching shape; broadcast batch dims are summed back by sum_to. Each gradient needs only the other
  // operand: save what will be used.
  const bool ga = a.requires_grad(), gb = b.requires_grad();
  SavedVariable sa = gb ? SavedVariable(a, op_info::matmul) : SavedVariable();
  SavedVariable sb = ga ? SavedVariable(b, op_info::matmul) : SavedVariable();
  const Shape xs = a.shape(), ys = b.shape();
  return make_result(op, ops::matmul(a.data(), b.data()), {a, b},
                     [sa, sb, ga, gb, xs, ys](const Variable& g) -> Grads {
                       // 1-d operands as matrices: a (K) -> (1, K), b (K) -> (K, 1); g gets the dims matmul
                       // removed.
                       Shape xs2 = xs, ys2 = ys;
                       if (xs.size() == 1) xs2.insert(0, 1);
                       if (ys.size() == 1) ys2.push_back(1);
                       Variable g2 = g;
                       if (xs.size() == 1 && ys.size() == 1) {
                         // NOTE: unsqueeze twice, as Tensor::reshape of a 0-d tensor throws (core)
                         g2 = unsqueeze(unsqueeze(g, 0), 0);
                       } else {
                         if (xs.size() == 1) g2 = unsqueeze(g2, -2);
                         if (ys.size() == 1) g2 = unsqueeze(g2, -1);
                       }
                       Variable dx, dy;
                       if (ga) dx = reshape(sum_to(matmul(g2, mT(reshape(sb.get(), ys2))), xs2), xs);
                       if (gb) {
                         const Variable x2 = reshape(sa.get(), xs2);
                         if (ys2.size() == 2 && xs2.size() > 2) {
                           // (*, M, K) @ (K, N): db sums over every row of a: (rows, K)^T @ (rows, N), one
                           // GEMM
                           const int64_t rows = leading_rows(xs2);
                           dy = mm(t(reshape(x2, {rows, xs2.back()})), reshape(g2, {rows, ys2.back()}));
                         } else {
                           dy = sum_to(matmul(mT(x2), g2), ys2);
                         }
                         dy = reshape(dy, ys);
                       }
                       return {dx, dy};
                     });
}

Variable bmm(const Variable& a, const Variable& b) {
  OpScope op(op_info::bmm, a, b);
  SACCADE_AUTOCAST(op, bmm, a, b);
  // a: (B, M, K), b: (B, K, N) -> (B, M, N)
  // y = a @ b:  da = g @ b^T,  db = a^T @ g
  SavedVariable sa(a, op_info::bmm), sb(b, op_info::bmm);
  const bool ga = a.requires_grad(), gb = b.requires_grad();
  return make_result(op, ops::bmm(a.data(), b.data()), {a, b}, [sa, sb, ga, gb](const Variable& g) -> Grads {
    return {ga ? bmm(g, mT(sb.get())) : Variable(), gb ? bmm(mT(sa.get()), g) : Variable()};
  });
}

Variable mm(const Variable& a, const Variable& b) {
  OpScope op(op_info::mm, a, b);
  SACCADE_AUTOCAST(op, mm, a, b);
  // a: (M, K), b: (K, N) -> (M, N)
  // y = a @ b:  da = g @ b^T,  db = a^T @ g
  SavedVariable sa(a, op_info::mm), sb(b, op_info::mm);
  const bool ga = a.requires_grad(), gb = b.requires_grad();
  return make_result(op, ops::mm(a.data(), b.data()), {a, b}, [sa, sb, ga, gb](const Variable& g) -> Grads {
    return {ga ? mm(g, t(sb.get())) : Variable(), gb ? mm(t(sa.get()), g) : Variable()};
  });
}

Variable grouped_mm(const Variable& a, const Variable& b, const std::vector<int64_t>& offs) {
  OpScope op(op_info::grouped_mm, a, b);
  SACCADE_AUTOCAST(op, grouped_mm, a, b, offs);
  // Per group, y_g = a_g @ b_g:  da_g = ȳ_g b_gᵀ,  db_g = a_gᵀ ȳ_g. Written with grouped_mm itself:
  //   a (M, K), b (G, K, N), y (M, N):  da = grouped_mm(ȳ, bᵀ (G, N, K)) (M, K),
  //                                     db = grouped_mm(aᵀ (K, M), ȳ) (G, K, N);
  //   a (K, M), b (M, N), y (G, K, N):  da = grouped_mm(b, ȳᵀ (G, N, K))ᵀ (K, M),
  //                                     db = grouped_mm(aᵀ (M, K), ȳ) (M, N).
  const bool ga = a.requires_grad(), gb = b.requires_grad(), rows = b.dim() == 3;
  SavedVariable sa = gb ? SavedVariable(a, op_info::grouped_mm) : SavedVariable();
  SavedVariable sb = ga ? SavedVariable(b, op_info::grouped_mm) : SavedVariable();
  return make_result(op, ops::grouped_mm(a.data(), b.data(), offs), {a, b},
                     [sa, sb, ga, gb, rows, offs](const Variable& g) -> Grads {
                       Variable da, db;
                       if (ga)
                         da = rows ? grouped_mm(g, mT(sb.get()), offs) : t(grouped_mm(sb.get(), mT(g), offs));
                       if (gb) db = grouped_mm(t(sa.get()), g, offs);
                       return {da, db};
                     });
}

Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
  OpScope op(op_info::linear, x, weight);
  SACCADE_AUTOCAST(op, linear, x, weight, bias);
  // x: (*, in), weight: (out, in), bias: (out) -> (*, out)
  const Tensor &xt = x.data(), &wt = weight.data();
  SACCADE_CHECK(
      wt.dim() == 2 && xt.dim() >= 1 && xt.size(-1) == wt.size(1),
      "linear: input of shape {} does not fit weight of shape {} (need input (*, in), weight (out, in))",
      xt.shape(), wt.shape());
  const int64_t in = wt.size(1), out = wt.size(0);
  Tensor y = ops::matmul(xt, wt.t());
  if (bias.defined()) {
    SACCADE_CHECK(bias.dim() == 1 && bias.size(0) == out && bias.dtype() == wt.dtype(),
                  "linear: bias of shape {} and dtype {} does not fit weight of shape {} and dtype {}",
                  bias.shape(), bias.dtype(), wt.shape(), wt.dtype());
    ops::add_(y, bias.data());
  }
  // y = x W^T + b:  dx = g @ W,  dW = g^T @ x (all leading dims as rows),  db = Σ_rows g
  const bool gx = x.requires_grad(), gw = weight.requires_grad(), gb = bias.defined() && bias.requires_grad();
  SavedVariable sx = gw ? SavedVariable(x, op_info::linear) : SavedVariable();
  SavedVariable sw = gx ? SavedVariable(weight, op_info::linear) : SavedVariable();
  return make_result(op, y, {x, weight, bias}, [sx, sw, gx, gw, gb, in, out](const Variable& g) -> Grads {
    const int64_t rows = leading_rows(g.shape());
    Variable g2 = reshape(g, {rows, out});
    return {gx ? matmul(g, sw.get()) : Variable(), gw ? mm(t(g2), reshape(sx.get(), {rows, in})) : Variable(),
            gb ? sum(g2, {0}) : Variable()};
  });
}

}  // namespace saccade
