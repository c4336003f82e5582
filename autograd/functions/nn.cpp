// Derivative rules of the nn primitives, each beside its forward. `g` is dL/d(output).
#include "autograd/functions/nn.h"

#include <limits>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/grad_mode.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace saccade {

using Grads = std::vector<Variable>;

// The backward of softmax (log: log-softmax) along `dim` from its result y: the fused kernel when no graph is
// recorded, and under create_graph the same formula composed on Variables (the kernel's reference):
//   softmax: dx = y ⊙ (g - Σ g ⊙ y),   log-softmax: dx = g - e^y Σ g
static Variable softmax_backward(const Variable& y, const Variable& g, int64_t dim, bool log) {
  if (!grad_enabled()) return Variable(ops::softmax_backward(y.data(), g.data(), dim, log));
  if (log) return sub(g, mul(exp(y), sum(g, {dim}, true)));
  return mul(y, sub(g, sum(mul(g, y), {dim}, true)));
}

// x: any shape; y: x's shape
static Variable softmax_impl(const Variable& x, int64_t dim, bool log, const OpInfo& row) {
  OpScope op(row, x);
  SACCADE_AUTOCAST(op, softmax_impl, x, dim, log, row);
  ErrorScope scope(row.name);
  // softmax y = e^x / Σ e^x:      dx = y ⊙ (g - Σ g ⊙ y)
  // log-softmax y = x - log Σ e^x: dx = g - e^y Σ g
  Tensor y = log ? ops::log_softmax(x.data(), dim) : ops::softmax(x.data(), dim);
  SavedVariable sy = SavedVariable::output(y, row);
  return make_result(op, y, {x}, [sy, dim, log](const Variable& g) -> Grads {
    const Variable out = sy.get();
    return {softmax_backward(out, g.to(out.dtype()), dim, log)};
  });
}

Variable softmax(const Variable& x, int64_t dim) { return softmax_impl(x, dim, false, op_info::softmax); }
Variable log_softmax(const Variable& x, int64_t dim) {
  return softmax_impl(x, dim, true, op_info::log_softmax);
}

// x: (B, ..., Tq, Tk); valid_lens: (B) or (B, Tq) int64, or a Bool mask broadcastable to x
Variable masked_softmax(const Variable& x, const Tensor& valid_lens_or_mask) {
  OpScope op(op_info::masked_softmax, x);
  SACCADE_AUTOCAST(op, masked_softmax, x, valid_lens_or_mask);
  // y = softmax(x with -inf where masked):  dx = y ⊙ (g - Σ g ⊙ y), which is 0 wherever y = 0, so masked
  // positions and fully masked rows (all zeros) get zero gradient.
  Tensor y = ops::masked_softmax(x.data(), valid_lens_or_mask);
  SavedVariable sy = SavedVariable::output(y, op_info::masked_softmax);
  return make_result(op, y, {x}, [sy](const Variable& g) -> Grads {
    const Variable out = sy.get();
    return {softmax_backward(out, g.to(out.dtype()), -1, false)};
  });
}

namespace {
// The dims of x that normalized_shape names: its last normalized_shape.size() dims
Shape trailing_dims(const Variable& x, const Shape& normalized_shape) {
  Shape dims;
  for (int i = 0; i < normalized_shape.size(); ++i) dims.push_back(x.dim() - normalized_shape.size() + i);
  return dims;
}
}  // namespace

// x: (..., *normalized_shape); weight, bias: (normalized_shape)
Variable layer_norm_composed(const Variable& x, const Shape& normalized_shape, const Variable& weight,
                             const Variable& bias, double eps) {
  OpScope op(op_info::layer_norm_composed, x);
  // y = (x - μ) / √(σ² + eps) ⊙ w + b over the last normalized_shape.size() dims (σ² biased)
  const Shape dims = trailing_dims(x, normalized_shape);
  Variable c = sub(x, mean(x, dims, true));
  Variable y = mul(c, rsqrt(add(mean(mul(c, c), dims, true), eps)));
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

Variable layer_norm(const Variable& x, const Shape& normalized_shape, const Variable& weight,
                    const Variable& bias, double eps) {
  OpScope op(op_info::layer_norm, x);
  SACCADE_AUTOCAST(op, layer_norm, x, normalized_shape, weight, bias, eps);
  ErrorScope scope("layer_norm");
  // y = x̂ ⊙ w + b,  x̂ = (x - μ) rstd:
  //   dx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ ⊙ x̂)) with ĝ = g ⊙ w,   dw = Σ_rows g ⊙ x̂,   db = Σ_rows g
  Tensor w = weight.defined() ? weight.data() : Tensor(), b = bias.defined() ? bias.data() : Tensor();
  ops::LayerNormForward f = ops::layer_norm_forward(x.data(), normalized_shape, w, b, eps);
  SavedVariable sx(x, op_info::layer_norm), sw(weight, op_info::layer_norm), sb(bias, op_info::layer_norm);
  Tensor mean = f.mean, rstd = f.rstd;
  const bool gw = weight.defined() && weight.requires_grad(), gb = bias.defined() && bias.requires_grad();
  return make_result(op, f.out, {x, weight, bias},
                     [sx, sw, sb, mean, rstd, normalized_shape, gw, gb, eps](const Variable& g) -> Grads {
                       const Variable xs = sx.get();
                       if (grad_enabled())  // create_graph: through the composed reference
                         return recompute_backward(
                             {xs, sw.get(), sb.get()},
                             [&](const std::vector<Variable>& in) {
                               return layer_norm_composed(in[0], normalized_shape, in[1], in[2], eps);
                             },
                             g);
                       ops::LayerNormGrads r = ops::layer_norm_backward(
                           g.data().to(xs.dtype()), xs.data(), normalized_shape,
                           sw.get().defined() ? sw.get().data() : Tensor(), mean, rstd, gw, gb);
                       return {Variable(r.gx), Variable(r.gweight), Variable(r.gbias)};
                     });
}

namespace {
// PyTorch's rms_norm default: torch.finfo(x.dtype).eps
double rms_norm_eps(const Variable& x, std::optional<double> eps) {
  if (eps) return *eps;
  switch (x.dtype()) {
    case DType::Float64:
      return std::numeric_limits<double>::epsilon();
    case DType::BFloat16:
      return 0x1p-7;
    case DType::Float16:
      return 0x1p-10;
    default:
      return std::numeric_limits<float>::epsilon();
  }
}
}  // namespace

// x: (..., *normalized_shape); weight: (normalized_shape)
Variable rms_norm_composed(const Variable& x, const Shape& normalized_shape, const Variable& weight,
                           std::optional<double> eps) {
  OpScope op(op_info::rms_norm_composed, x);
  // y = x / √(mean(x²) + eps) ⊙ w over the last normalized_shape.size() dims
  const Shape dims = trailing_dims(x, normalized_shape);
  Variable y = mul(x, rsqrt(add(mean(mul(x, x), dims, true), rms_norm_eps(x, eps))));
  return weight.defined() ? mul(y, weight) : y;
}

Variable rms_norm(const Variable& x, const Shape& normalized_shape, const Variable& weight,
                  std::optional<double> eps) {
  OpScope op(op_info::rms_norm, x);
  SACCADE_AUTOCAST(op, rms_norm, x, normalized_shape, weight, eps);
  ErrorScope scope("rms_norm");
  // y = x̂ ⊙ w,  x̂ = x rstd,  rstd = 1 / √(mean(x²) + eps):
  //   dx = rstd (ĝ - x̂ mean(ĝ ⊙ x̂)) with ĝ = g ⊙ w,   dw = Σ_rows g ⊙ x̂
  const double e = rms_norm_eps(x, eps);
  ops::RmsNormForward f =
      ops::rms_norm_forward(x.data(), normalized_shape, weight.defined() ? weight.data() : Tensor(), e);
  SavedVariable sx(x, op_info::rms_norm), sw(weight, op_info::rms_norm);
  Tensor rstd = f.rstd;
  const bool gw = weight.defined() && weight.requires_grad();
  return make_result(op, f.out, {x, weight},
                     [sx, sw, rstd, normalized_shape, gw, e](const Variable& g) -> Grads {
                       const Variable xs = sx.get();
                       if (grad_enabled())  // create_graph: through the composed reference
                         return recompute_backward(
                             {xs, sw.get()},
                             [&](const std::vector<Variable>& in) {
                               return rms_norm_composed(in[0], normalized_shape, in[1], e);
                             },
                             g);
                       ops::RmsNormGrads r =
                           ops::rms_norm_backward(g.data().to(xs.dtype()), xs.data(), normalized_shape,
                                                  sw.get().defined() ? sw.get().data() : Tensor(), rstd, gw);
                       return {Variable(r.gx), Variable(r.gweight)};
                     });
}

// x: any shape; mask: x's shape
Variable dropout(const Variable& x, double p, bool training, Generator* gen) {
  OpScope op(op_info::dropout, x);
  ErrorScope scope("dropout");
  // y = x ⊙ m,  m ∈ {0, 1/(1-p)}:  dx = g ⊙ m
  ops::DropoutResult r = ops::dropout(x.data(), p, training, gen);
  if (!r.mask.defined()) return x;
  Tensor mask = r.mask;
  return make_result(op, r.out, {x}, [mask](const Variable& g) -> Grads { return {mul(g, mask)}; });
}

// gi, gh: (B, 3H) [r | z | n], h: (B, H) -> h': (B, H)
Variable gru_gates(const Variable& gi, const Variable& gh, const Variable& h) {
  OpScope op(op_info::gru_gates, gi, gh, h);
  ErrorScope scope("gru_gates");
  // r = σ(gi_r + gh_r), z = σ(gi_z + gh_z), n = tanh(gi_n + r ⊙ gh_n), h' = n + z ⊙ (h - n):
  //   dh = g z,  a_n = g (1 - z)(1 - n²),  a_r = a_n gh_n r (1 - r),  a_z = g (h - n) z (1 - z),
  //   dgi = [a_r, a_z, a_n],  dgh = [a_r, a_z, a_n r]
  ops::GruGates f = ops::gru_gates(gi.data(), gh.data(), h.data());
  SavedVariable sgi(gi, op_info::gru_gates), sgh(gh, op_info::gru_gates), sh(h, op_info::gru_gates);
  Tensor saved = f.saved;
  return make_result(op, f.h, {gi, gh, h}, [sgi, sgh, sh, saved](const Variable& g) -> Grads {
    if (grad_enabled())  // create_graph: through the composed reference
      return recompute_backward(
          {sgi.get(), sgh.get(), sh.get()},
          [](const std::vector<Variable>& in) { return gru_gates_composed(in[0], in[1], in[2]); }, g);
    ops::GruGatesGrads r = ops::gru_gates_backward(g.data(), sgh.get().data(), sh.get().data(), saved);
    return {Variable(r.ggi), Variable(r.ggh), Variable(r.gh)};
  });
}

// r, z = σ(gi_r + gh_r), σ(gi_z + gh_z);  n = tanh(gi_n + r ⊙ gh_n);  h' = (1 - z) ⊙ n + z ⊙ h = n + z ⊙ (h -
// n).
Variable gru_gates_composed(const Variable& gi, const Variable& gh, const Variable& h) {
  std::vector<Variable> i = chunk(gi, 3, -1), g = chunk(gh, 3, -1);
  Variable r = sigmoid(i[0] + g[0]);
  Variable z = sigmoid(i[1] + g[1]);
  Variable n = tanh(i[2] + r * g[2]);
  return n + z * (h - n);
}

// logits: (N, C); target: (N) int64; loss: () or (N)
Variable cross_entropy(const Variable& logits, const Tensor& target, int64_t ignore_index,
                       Reduction reduction, double label_smoothing) {
  OpScope op(op_info::cross_entropy, logits, target);
  SACCADE_AUTOCAST(op, cross_entropy, logits, target, ignore_index, reduction, label_smoothing);
  if (logits.dim() > 2) {
    // logits (N, C, d...), target (N, d...): classes to the last dim, the rest flattened -> (M, C), (M)
    Shape want = logits.shape();
    want.erase(1);
    SACCADE_CHECK(target.shape() == want, "cross_entropy: expected target of shape {} for logits {}, got {}",
                  want, logits.shape(), target.shape());
    Shape perm{0};
    for (int d = 2; d < logits.dim(); ++d) perm.push_back(d);
    perm.push_back(1);
    // (M, C) with M spelled out: -1 is ambiguous when C is 0
    Variable z = reshape(permute(logits, perm), {target.numel(), logits.size(1)});
    Variable loss = cross_entropy(z, target.reshape({-1}), ignore_index, reduction, label_smoothing);
    return reduction == Reduction::None ? reshape(loss, target.shape()) : loss;
  }
  const int64_t n = logits.shape()[0];
  if (label_smoothing == 0) {
    // loss_i = lse_i - z_i[t_i]:  dz_ic = g_i (e^(z_ic - lse_i) - [c = t_i]),  g_i = g, g / count or g_i
    // NOTE: only each row's log-sum-exp is kept, not the (N, C) log-probabilities, and a first-order backward
    // writes dz once (ops::cross_entropy_rows_backward): at a language model's vocabulary the loss's (N, C)
    // tensors were the largest of a training step. A backward under create_graph composes it from the saved
    // logits, so that it carries their history.
    ops::CrossEntropyRows f = ops::cross_entropy_rows(logits.data(), target, ignore_index, reduction);
    const Tensor lse = f.lse;
    const int64_t count = f.count;
    SavedVariable sz(logits, op_info::cross_entropy);
    return make_result(op, f.loss, {logits},
                       [lse, sz, target, count, n, ignore_index, reduction](const Variable& g) -> Grads {
                         Variable gi = g.to(lse.dtype());
                         if (reduction == Reduction::Mean) gi = div(gi, static_cast<double>(count));
                         if (!grad_enabled()) {
                           const Tensor scale = reduction == Reduction::None
                                                    ? gi.data()
                                                    : gi.data().reshape({1}).expand({n}).contiguous();
                           return {Variable(ops::cross_entropy_rows_backward(sz.get().data(), target,
                                                                             ignore_index, lse, scale))};
                         }
                         Variable z = sz.get();
                         const Tensor q = ops::one_hot_targets(target, z.size(1), ignore_index, lse.dtype());
                         if (z.dtype() != lse.dtype()) z = z.to(lse.dtype());
                         if (reduction == Reduction::None) gi = view(gi, {n, 1});
                         // p Σ_c q_ic - q: the row sum is 1 on kept rows and 0 on ignored ones
                         return {mul(sub(mul(softmax(z, 1), ops::sum(q, {1}, true)), q), gi)};
                       });
  }
  // loss_i = -Σ_c q_ic log p_ic,  p = softmax(z),  q the smoothed one-hot target (zero rows when ignored):
  //   dz_ic = g_i (p_ic Σ_c' q_ic' - q_ic),   with g_i = g (Sum), g / count (Mean), g_i (None)
  ops::CrossEntropyForward f =
      ops::cross_entropy_forward(logits.data(), target, ignore_index, reduction, label_smoothing);
  // NOTE: under create_graph, log p is recomputed from the saved logits, so that it carries their history
  Tensor logp = f.log_probs, q = f.weights;
  const int64_t count = f.count;
  SavedVariable sz(logits, op_info::cross_entropy);
  return make_result(op, f.loss, {logits}, [logp, q, sz, count, n, reduction](const Variable& g) -> Grads {
    if (!grad_enabled()) {
      // NOTE: a first-order backward writes one (N, C) buffer and updates it in place: dz = softmax(log p),
      // then dz ⊙= g_i Σ_c q_ic (a column), then dz -= g_i q. The composed form below (kept for create_graph,
      // whose gradient needs the history) allocates four (N, C) results, which at a language model's
      // vocabulary is a large share of a training step.
      Tensor gi = g.data().to(logp.dtype());
      if (reduction == Reduction::Mean) gi = ops::div(gi, static_cast<double>(count));
      if (reduction == Reduction::None) gi = gi.reshape({n, 1});
      Tensor dz = ops::softmax(logp, 1), rows = ops::sum(q, {1}, true);  // rows: 1 scored, 0 ignored
      ops::mul_(rows, gi);
      ops::mul_(dz, rows);
      if (reduction == Reduction::None)
        ops::sub_(dz, ops::mul(q, gi));
      else
        ops::add_(dz, q, -gi.to(DType::Float64).item<double>());
      return {Variable(dz)};
    }
    Variable lp = log_softmax(sz.get(), 1);
    Variable gi = g.to(logp.dtype());
    if (reduction == Reduction::None) gi = view(gi, {n, 1});
    if (reduction == Reduction::Mean) gi = div(gi, static_cast<double>(count));
    // p = softmax(log p) (the row sums of e^(log p) are 1): the vectorised row kernel,
    // where exp was libm's per element
    Variable dz = sub(mul(softmax(lp, 1), ops::sum(q, {1}, true)), q);
    return {mul(dz, gi)};
  });
}

// a, b: same shape; loss: () or a's shape
Variable mse_loss(const Variable& a, const Variable& b, Reduction reduction) {
  OpScope op(op_info::mse_loss, a, b);
  SACCADE_AUTOCAST(op, mse_loss, a, b, reduction);
  // loss = reduce((a - b)^2):  da = 2 (a - b) g / (n for Mean),  db = -da
  // NOTE: under create_graph, a - b is recomputed from the saved inputs, so that it carries their history
  Tensor loss = ops::mse_loss(a.data(), b.data(), reduction);
  Tensor d = ops::sub(a.data(), b.data());
  const double scale = reduction == Reduction::Mean ? 2.0 / static_cast<double>(d.numel()) : 2.0;
  SavedVariable sa(a, op_info::mse_loss), sb(b, op_info::mse_loss);
  return make_result(op, loss, {a, b}, [d, sa, sb, scale](const Variable& g) -> Grads {
    Variable diff = grad_enabled() ? sub(sa.get(), sb.get()) : Variable(d);
    Variable da = mul(mul(diff, g.to(d.dtype())), scale);
    return {da, neg(da)};
  });
}

}  // namespace saccade
