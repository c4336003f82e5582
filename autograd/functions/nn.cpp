// Derivative rules of the nn primitives, each beside its forward. `g` is dL/d(output).
#include "autograd/functions/nn.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/shape.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace saccade {

using Grads = std::vector<Tensor>;

// x: any shape; y: x's shape
static Variable softmax_impl(const Variable& x, int64_t dim, bool log, const char* name) {
  check_defined(name, x);
  SACCADE_AUTOCAST(name, softmax_impl, x, dim, log, name);
  ErrorScope scope(name);
  // softmax y = e^x / Σ e^x:      dx = y ⊙ (g - Σ g ⊙ y)
  // log-softmax y = x - log Σ e^x: dx = g - e^y Σ g
  Tensor y = log ? ops::log_softmax(x.data(), dim) : ops::softmax(x.data(), dim);
  SavedTensor sy(y, name);
  return make_result(name, y, {x}, [sy, dim, log](const Tensor& g) -> Grads {
    return {ops::softmax_backward(sy.get(), g.to(sy.get().dtype()), dim, log)};
  });
}

Variable softmax(const Variable& x, int64_t dim) { return softmax_impl(x, dim, false, "softmax"); }
Variable log_softmax(const Variable& x, int64_t dim) { return softmax_impl(x, dim, true, "log_softmax"); }

// x: (B, ..., Tq, Tk); valid_lens: (B) or (B, Tq) int64, or a Bool mask broadcastable to x
Variable masked_softmax(const Variable& x, const Tensor& valid_lens_or_mask) {
  check_defined("masked_softmax", x);
  SACCADE_AUTOCAST("masked_softmax", masked_softmax, x, valid_lens_or_mask);
  // y = softmax(x with -inf where masked):  dx = y ⊙ (g - Σ g ⊙ y), which is 0 wherever y = 0, so masked
  // positions and fully masked rows (all zeros) get zero gradient.
  Tensor y = ops::masked_softmax(x.data(), valid_lens_or_mask);
  SavedTensor sy(y, "masked_softmax");
  return make_result("masked_softmax", y, {x}, [sy](const Tensor& g) -> Grads {
    return {ops::softmax_backward(sy.get(), g.to(sy.get().dtype()), -1, false)};
  });
}

// x: (..., *normalized_shape); weight, bias: (normalized_shape)
Variable layer_norm(const Variable& x, const Shape& normalized_shape, const Variable& weight,
                    const Variable& bias, double eps) {
  check_defined("layer_norm", x);
  SACCADE_AUTOCAST("layer_norm", layer_norm, x, normalized_shape, weight, bias, eps);
  ErrorScope scope("layer_norm");
  // y = x̂ ⊙ w + b,  x̂ = (x - μ) rstd:
  //   dx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ ⊙ x̂)) with ĝ = g ⊙ w,   dw = Σ_rows g ⊙ x̂,   db = Σ_rows g
  Tensor w = weight.defined() ? weight.data() : Tensor(), b = bias.defined() ? bias.data() : Tensor();
  ops::LayerNormForward f = ops::layer_norm_forward(x.data(), normalized_shape, w, b, eps);
  SavedTensor sx(x.data(), "layer_norm"), sw(w, "layer_norm");
  Tensor mean = f.mean, rstd = f.rstd;
  const bool gw = weight.defined() && weight.requires_grad(), gb = bias.defined() && bias.requires_grad();
  return make_result("layer_norm", f.out, {x, weight, bias},
                     [sx, sw, mean, rstd, normalized_shape, gw, gb](const Tensor& g) -> Grads {
                       const Tensor& xs = sx.get();
                       ops::LayerNormGrads r = ops::layer_norm_backward(
                           g.to(xs.dtype()), xs, normalized_shape, sw.get(), mean, rstd, gw, gb);
                       return {r.gx, r.gweight, r.gbias};
                     });
}

// x: any shape; mask: x's shape
Variable dropout(const Variable& x, double p, bool training, Generator* gen) {
  check_defined("dropout", x);
  ErrorScope scope("dropout");
  // y = x ⊙ m,  m ∈ {0, 1/(1-p)}:  dx = g ⊙ m
  ops::DropoutResult r = ops::dropout(x.data(), p, training, gen);
  if (!r.mask.defined()) return x;
  Tensor mask = r.mask;
  return make_result("dropout", r.out, {x}, [mask](const Tensor& g) -> Grads { return {ops::mul(g, mask)}; });
}

// gi, gh: (B, 3H) [r | z | n], h: (B, H) -> h': (B, H)
Variable gru_gates(const Variable& gi, const Variable& gh, const Variable& h) {
  check_defined("gru_gates", gi, gh, h);
  ErrorScope scope("gru_gates");
  // r = σ(gi_r + gh_r), z = σ(gi_z + gh_z), n = tanh(gi_n + r ⊙ gh_n), h' = n + z ⊙ (h - n):
  //   dh = g z,  a_n = g (1 - z)(1 - n²),  a_r = a_n gh_n r (1 - r),  a_z = g (h - n) z (1 - z),
  //   dgi = [a_r, a_z, a_n],  dgh = [a_r, a_z, a_n r]
  ops::GruGates f = ops::gru_gates(gi.data(), gh.data(), h.data());
  SavedTensor sgh(gh.data(), "gru_gates"), sh(h.data(), "gru_gates");
  Tensor saved = f.saved;
  return make_result("gru_gates", f.h, {gi, gh, h}, [sgh, sh, saved](const Tensor& g) -> Grads {
    ops::GruGatesGrads r = ops::gru_gates_backward(g, sgh.get(), sh.get(), saved);
    return {r.ggi, r.ggh, r.gh};
  });
}

// logits: (N, C); target: (N) int64; loss: () or (N)
Variable cross_entropy(const Variable& logits, const Tensor& target, int64_t ignore_index,
                       Reduction reduction, double label_smoothing) {
  check_defined("cross_entropy", logits, target);
  SACCADE_AUTOCAST("cross_entropy", cross_entropy, logits, target, ignore_index, reduction, label_smoothing);
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
  // loss_i = -Σ_c q_ic log p_ic,  p = softmax(z),  q the smoothed one-hot target (zero rows when ignored):
  //   dz_ic = g_i (p_ic Σ_c' q_ic' - q_ic),   with g_i = g (Sum), g / count (Mean), g_i (None)
  ops::CrossEntropyForward f =
      ops::cross_entropy_forward(logits.data(), target, ignore_index, reduction, label_smoothing);
  Tensor logp = f.log_probs, q = f.weights;
  const int64_t count = f.count, n = logits.shape()[0];
  return make_result("cross_entropy", f.loss, {logits},
                     [logp, q, count, n, reduction](const Tensor& g) -> Grads {
                       Tensor gi = g.to(logp.dtype());
                       if (reduction == Reduction::None) gi = gi.view({n, 1});
                       if (reduction == Reduction::Mean) gi = ops::div(gi, static_cast<double>(count));
                       Tensor dz = ops::sub(ops::mul(ops::exp(logp), ops::sum(q, {1}, true)), q);
                       return {ops::mul(dz, gi)};
                     });
}

// a, b: same shape; loss: () or a's shape
Variable mse_loss(const Variable& a, const Variable& b, Reduction reduction) {
  check_defined("mse_loss", a, b);
  SACCADE_AUTOCAST("mse_loss", mse_loss, a, b, reduction);
  // loss = reduce((a - b)^2):  da = 2 (a - b) g / (n for Mean),  db = -da
  Tensor loss = ops::mse_loss(a.data(), b.data(), reduction);
  Tensor d = ops::sub(a.data(), b.data());
  const double scale = reduction == Reduction::Mean ? 2.0 / static_cast<double>(d.numel()) : 2.0;
  return make_result("mse_loss", loss, {a, b}, [d, scale](const Tensor& g) -> Grads {
    Tensor da = ops::mul(ops::mul(d, g.to(d.dtype())), scale);
    return {da, ops::neg(da)};
  });
}

}  // namespace saccade
