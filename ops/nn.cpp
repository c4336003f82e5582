// nn primitives: argument checks and shape plumbing here; the row kernels live in ops/cpu/nn.cpp.
#include "ops/nn.h"

#include <cmath>
#include <initializer_list>
#include <limits>

#include "ops/attention.h"
#include "ops/backend.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/join.h"
#include "ops/reduce.h"

namespace saccade::ops {

namespace {

void check_float(const char* op, const Tensor& t, const char* what = "input") {
  SACCADE_CHECK(t.defined(), "{}: got an undefined {} tensor", op, what);
  SACCADE_CHECK(is_floating(t.dtype()), "{}: expected a floating-point {}, got {} of shape {}", op, what,
                t.dtype(), t.shape());
}

// NOTE: the ops below hand 16-bit (bfloat16, float16) tensors to the backend as they are; the backend runs
// them natively or on float32 copies with each output rounded once (Kernel16, ops/backend_widening.h).
// Statistics (layer_norm's mean and rstd, attention's lse) are float32 for 16-bit inputs (compute_dtype).

// Runs the (rows, n) softmax kernel along `dim`: the dim is moved last, the rest flattened into rows.
Tensor softmax_impl(const Tensor& x, int64_t dim, bool log, const char* op) {
  check_float(op, x);
  const int d = normalize_dim(dim, x.dim(), op);
  if (x.dim() == 0)
    return softmax_impl(x.unsqueeze(0), 0, log, op)
        .squeeze(0);  // NOTE: reshape({1}) of a 0-d tensor throws (core)
  const int last = x.dim() - 1;
  Tensor xc = (d == last ? x : x.transpose(d, last)).contiguous();
  const int64_t n = xc.shape().back(), rows = n == 0 ? 0 : xc.numel() / n;
  Tensor out = Tensor::empty(xc.shape(), x.dtype(), x.device());
  backend(x.device()).softmax(xc.view({rows, n}), out.view({rows, n}), log);
  return d == last ? out : out.transpose(d, last).contiguous();
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, false, "softmax"); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, true, "log_softmax"); }

Tensor softmax_backward(const Tensor& y, const Tensor& gy, int64_t dim, bool log) {
  const char* op = "softmax_backward";
  check_float(op, y, "output");
  check_float(op, gy, "gradient");
  check_same_device(op, {&y, &gy});
  SACCADE_CHECK(y.shape() == gy.shape() && y.dtype() == gy.dtype(),
                "{}: output {} ({}) and gradient {} ({}) must have one shape and dtype", op, y.shape(),
                y.dtype(), gy.shape(), gy.dtype());
  const int d = normalize_dim(dim, y.dim(), op);
  if (y.dim() == 0) return softmax_backward(y.unsqueeze(0), gy.unsqueeze(0), 0, log).squeeze(0);
  const int last = y.dim() - 1;
  Tensor yc = (d == last ? y : y.transpose(d, last)).contiguous();
  Tensor gc = (d == last ? gy : gy.transpose(d, last)).contiguous();
  const int64_t n = yc.shape().back(), rows = n == 0 ? 0 : yc.numel() / n;
  Tensor gx = Tensor::empty(yc.shape(), y.dtype(), y.device());
  backend(y.device()).softmax_backward(yc.view({rows, n}), gc.view({rows, n}), gx.view({rows, n}), log);
  return d == last ? gx : gx.transpose(d, last).contiguous();
}

// ---- masked softmax ----

Tensor valid_lens_to_mask(const Tensor& valid_lens, const Shape& x_shape) {
  const char* op = "valid_lens_to_mask";
  SACCADE_CHECK(valid_lens.defined(), "{}: got an undefined valid_lens tensor", op);
  SACCADE_CHECK(valid_lens.dtype() == DType::Int64, "{}: valid_lens must be int64, got {} of shape {}", op,
                valid_lens.dtype(), valid_lens.shape());
  const int nd = x_shape.size();
  const Shape& v = valid_lens.shape();
  SACCADE_CHECK(nd >= 2, "{}: scores must have at least 2 dims (..., Tq, Tk), got shape {}", op, x_shape);
  SACCADE_CHECK((v.size() == 1 && v[0] == x_shape[0]) ||
                    (v.size() == 2 && nd >= 3 && v[0] == x_shape[0] && v[1] == x_shape[nd - 2]),
                "{}: valid_lens of shape {} must be (B) or (B, Tq) for scores of shape {} (B, ..., Tq, Tk)",
                op, v, x_shape);
  // NOTE: this public op reads valid_lens to reject negative lengths (a host sync); the attention modules'
  // path (ops::attention_mask) does not, and counts a negative length as 0.
  if (valid_lens.numel() > 0)
    SACCADE_CHECK(ops::min(valid_lens).item<int64_t>() >= 0,
                  "{}: valid_lens of shape {} has a negative length", op, v);
  AttentionMask m;
  m.valid_lens = valid_lens.contiguous();
  return attention_keep_mask(m, x_shape, valid_lens.device()).expand(x_shape);
}

Tensor attention_keep_mask(const Tensor& x, const Tensor& valid_lens_or_mask, const char* op) {
  check_float(op, x, "scores");
  if (!valid_lens_or_mask.defined()) return Tensor();
  const Tensor& m = valid_lens_or_mask;
  check_same_device(op, {&x, &m});
  SACCADE_CHECK(m.dtype() == DType::Int64 || m.dtype() == DType::Bool,
                "{}: expected int64 valid_lens or a bool mask, got {} of shape {} for scores of shape {}", op,
                m.dtype(), m.shape(), x.shape());
  if (m.dtype() == DType::Int64) return valid_lens_to_mask(m, x.shape());
  return attention_mask(m, x.shape(), CausalAlign::None, x.device(), op).keep;
}

Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens_or_mask) {
  ErrorScope scope("masked_softmax");
  Tensor keep = attention_keep_mask(x, valid_lens_or_mask, "masked_softmax");
  SACCADE_CHECK(x.dim() >= 1, "masked_softmax: expected scores with at least 1 dim, got shape {}", x.shape());
  if (!keep.defined()) return softmax(x, -1);
  // NOTE: -inf, not -1e6: a row with nothing to attend gives zeros (the kernel's all -inf rule), not a
  // uniform distribution over padding.
  return softmax(masked_fill(x, logical_not(keep), -INFINITY), -1);
}

// ---- layer norm ----

namespace {

// Rows and row length of x for normalized_shape; checks that normalized_shape is x's trailing dims.
std::pair<int64_t, int64_t> layer_norm_rows(const Tensor& x, const Shape& ns, const char* op) {
  check_float(op, x);
  const int k = ns.size(), nd = x.dim();
  bool ok = k >= 1 && k <= nd;
  for (int i = 0; ok && i < k; ++i) ok = x.shape()[nd - k + i] == ns[i];
  SACCADE_CHECK(ok, "{}: normalized_shape {} must be the trailing dims of the input's shape {}", op, ns,
                x.shape());
  const int64_t n = ns.numel();
  int64_t rows = 1;
  for (int i = 0; i < nd - k; ++i) rows *= x.shape()[i];
  return {rows, n};
}

void check_affine(const char* op, const Tensor& x, const Tensor& p, const Shape& ns, const char* what) {
  if (!p.defined()) return;
  check_same_device(op, {&x, &p});
  SACCADE_CHECK(p.shape() == ns && p.dtype() == x.dtype(),
                "{}: {} must have normalized_shape {} and the input's dtype {}, got shape {} and {}", op,
                what, ns, x.dtype(), p.shape(), p.dtype());
}

Shape leading_shape(const Tensor& x, const Shape& ns) {
  Shape s;
  for (int i = 0; i < x.dim() - ns.size(); ++i) s.push_back(x.shape()[i]);
  return s;
}

Tensor flat(const Tensor& t, int64_t n) { return t.defined() ? t.contiguous().view({n}) : Tensor(); }

}  // namespace

LayerNormForward layer_norm_forward(const Tensor& x, const Shape& ns, const Tensor& weight,
                                    const Tensor& bias, double eps) {
  const char* op = "layer_norm";
  auto [rows, n] = layer_norm_rows(x, ns, op);
  check_affine(op, x, weight, ns, "weight");
  check_affine(op, x, bias, ns, "bias");
  SACCADE_CHECK(eps >= 0, "{}: eps must be non-negative, got {} (input shape {})", op, eps, x.shape());
  Tensor xc = x.contiguous();
  Shape lead = leading_shape(x, ns);
  const DType stats = compute_dtype(x.dtype());  // float32 for 16-bit x
  LayerNormForward r{Tensor::empty(x.shape(), x.dtype(), x.device()), Tensor::empty(lead, stats, x.device()),
                     Tensor::empty(lead, stats, x.device())};
  backend(x.device())
      .layer_norm(xc.view({rows, n}), flat(weight, n), flat(bias, n), eps, r.out.view({rows, n}),
                  r.mean.view({rows}), r.rstd.view({rows}));
  return r;
}

Tensor layer_norm(const Tensor& x, const Shape& ns, const Tensor& weight, const Tensor& bias, double eps) {
  return layer_norm_forward(x, ns, weight, bias, eps).out;
}

LayerNormGrads layer_norm_backward(const Tensor& gy, const Tensor& x, const Shape& ns, const Tensor& weight,
                                   const Tensor& mean, const Tensor& rstd, bool weight_grad, bool bias_grad) {
  const char* op = "layer_norm_backward";
  auto [rows, n] = layer_norm_rows(x, ns, op);
  check_float(op, gy, "gradient");
  check_affine(op, x, weight, ns, "weight");
  check_same_device(op, {&x, &gy, &mean, &rstd});
  SACCADE_CHECK(gy.shape() == x.shape() && gy.dtype() == x.dtype(),
                "{}: gradient {} ({}) must match the input {} ({})", op, gy.shape(), gy.dtype(), x.shape(),
                x.dtype());
  const DType stats = compute_dtype(x.dtype());  // as layer_norm_forward made them
  SACCADE_CHECK(
      mean.numel() == rows && rstd.numel() == rows && mean.dtype() == stats && rstd.dtype() == stats,
      "{}: mean {} and rstd {} must hold one {} value per row ({} rows of input shape {})", op, mean.shape(),
      rstd.shape(), stats, rows, x.shape());
  LayerNormGrads r;
  r.gx = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (weight_grad && weight.defined()) r.gweight = Tensor::empty(ns, x.dtype(), x.device());
  if (bias_grad) r.gbias = Tensor::empty(ns, x.dtype(), x.device());
  backend(x.device())
      .layer_norm_backward(gy.contiguous().view({rows, n}), x.contiguous().view({rows, n}), flat(weight, n),
                           mean.contiguous().view({rows}), rstd.contiguous().view({rows}),
                           r.gx.view({rows, n}), r.gweight.defined() ? r.gweight.view({n}) : Tensor(),
                           r.gbias.defined() ? r.gbias.view({n}) : Tensor());
  return r;
}

// ---- RMS norm ----

RmsNormForward rms_norm_forward(const Tensor& x, const Shape& ns, const Tensor& weight, double eps) {
  const char* op = "rms_norm";
  auto [rows, n] = layer_norm_rows(x, ns, op);
  check_affine(op, x, weight, ns, "weight");
  SACCADE_CHECK(eps >= 0, "{}: eps must be non-negative, got {} (input shape {})", op, eps, x.shape());
  Tensor xc = x.contiguous();
  const DType stats = compute_dtype(x.dtype());  // float32 for 16-bit x
  RmsNormForward r{Tensor::empty(x.shape(), x.dtype(), x.device()),
                   Tensor::empty(leading_shape(x, ns), stats, x.device())};
  backend(x.device())
      .rms_norm(xc.view({rows, n}), flat(weight, n), eps, r.out.view({rows, n}), r.rstd.view({rows}));
  return r;
}

Tensor rms_norm(const Tensor& x, const Shape& ns, const Tensor& weight, double eps) {
  return rms_norm_forward(x, ns, weight, eps).out;
}

RmsNormGrads rms_norm_backward(const Tensor& gy, const Tensor& x, const Shape& ns, const Tensor& weight,
                               const Tensor& rstd, bool weight_grad) {
  const char* op = "rms_norm_backward";
  auto [rows, n] = layer_norm_rows(x, ns, op);
  check_float(op, gy, "gradient");
  check_affine(op, x, weight, ns, "weight");
  check_same_device(op, {&x, &gy, &rstd});
  SACCADE_CHECK(gy.shape() == x.shape() && gy.dtype() == x.dtype(),
                "{}: gradient {} ({}) must match the input {} ({})", op, gy.shape(), gy.dtype(), x.shape(),
                x.dtype());
  const DType stats = compute_dtype(x.dtype());  // as rms_norm_forward made it
  SACCADE_CHECK(rstd.numel() == rows && rstd.dtype() == stats,
                "{}: rstd {} must hold one {} value per row ({} rows of input shape {})", op, rstd.shape(),
                stats, rows, x.shape());
  RmsNormGrads r;
  r.gx = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (weight_grad && weight.defined()) r.gweight = Tensor::empty(ns, x.dtype(), x.device());
  backend(x.device())
      .rms_norm_backward(gy.contiguous().view({rows, n}), x.contiguous().view({rows, n}), flat(weight, n),
                         rstd.contiguous().view({rows}), r.gx.view({rows, n}),
                         r.gweight.defined() ? r.gweight.view({n}) : Tensor());
  return r;
}

// ---- GRU gates ----

namespace {

// Checks gi, gh (B, 3H) [and saved, (B, 3H)] and h (B, H) of one float compute dtype and device; returns H.
// The GRU gates' dtype rule: under autocast gi and gh come from 16-bit products while h may be float32, so a
// 16-bit dtype may meet float32 (the 16-bit route of the kernels' rows widens it); float64 meets only itself.
int64_t check_gru_gates(const char* op, const Tensor& gi, const Tensor& gh, const Tensor& h) {
  check_float(op, gi, "gi");
  check_float(op, gh, "gh");
  check_float(op, h, "h");
  check_same_device(op, {&gi, &gh, &h});
  const int64_t H = h.dim() == 2 ? h.size(1) : 0;
  const Shape want{h.dim() == 2 ? h.size(0) : 0, 3 * H};
  SACCADE_CHECK(h.dim() == 2 && gi.shape() == want && gh.shape() == gi.shape() &&
                    compute_dtype(gi.dtype()) == compute_dtype(h.dtype()) &&
                    compute_dtype(gh.dtype()) == compute_dtype(h.dtype()),
                "{}: expected gi and gh (B, 3H) and h (B, H) of one dtype (16-bit ones may meet float32), "
                "got gi {} ({}), gh {} ({}), h {} ({})",
                op, gi.shape(), gi.dtype(), gh.shape(), gh.dtype(), h.shape(), h.dtype());
  return H;
}

// h' in the inputs' promoted dtype, rounded once; saved in the compute dtype (float32 for 16-bit)
DType gru_gates_dtype(const Tensor& gi, const Tensor& gh, const Tensor& h) {
  return promote_types(promote_types(gi.dtype(), gh.dtype()), h.dtype());
}

// The gates' parts [r | z | n] of a (B, 3H) tensor, widened to `wide` (16-bit ones computed in float32, as
// the fused kernels' 16-bit route).
Tensor gate_part(const Tensor& t, int64_t k, int64_t H, DType wide) { return t.narrow(1, k * H, H).to(wide); }

}  // namespace

GruGates gru_gates(const Tensor& gi, const Tensor& gh, const Tensor& h) {
  check_gru_gates("gru_gates", gi, gh, h);
  Backend& b = backend(h.device());
  if (!b.fuses(FusedKernel::GruGates)) return gru_gates_composed(gi, gh, h);
  const DType out = gru_gates_dtype(gi, gh, h);
  GruGates r{Tensor::empty(h.shape(), out, h.device()),
             Tensor::empty(gi.shape(), compute_dtype(out), h.device())};
  b.gru_gates(gi.contiguous(), gh.contiguous(), h.contiguous(), r.h, r.saved);
  return r;
}

// r = σ(gi_r + gh_r), z = σ(gi_z + gh_z), n = tanh(gi_n + r ⊙ gh_n), h' = n + z ⊙ (h - n)
GruGates gru_gates_composed(const Tensor& gi, const Tensor& gh, const Tensor& h) {
  const int64_t H = check_gru_gates("gru_gates", gi, gh, h);
  const DType out = gru_gates_dtype(gi, gh, h), wide = compute_dtype(out);
  Tensor r = sigmoid(add(gate_part(gi, 0, H, wide), gate_part(gh, 0, H, wide)));
  Tensor z = sigmoid(add(gate_part(gi, 1, H, wide), gate_part(gh, 1, H, wide)));
  Tensor n = tanh(add(gate_part(gi, 2, H, wide), mul(r, gate_part(gh, 2, H, wide))));
  return {add(n, mul(z, sub(h.to(wide), n))).to(out), cat({r, z, n}, 1)};
}

namespace {

// Checks gru_gates_backward's arguments; returns H.
int64_t check_gru_gates_backward(const Tensor& gy, const Tensor& gh, const Tensor& h, const Tensor& saved) {
  const char* op = "gru_gates_backward";
  const int64_t H = check_gru_gates(op, saved, gh, h);
  check_float(op, gy, "gradient");
  check_same_device(op, {&gy, &h});
  SACCADE_CHECK(gy.shape() == h.shape() && compute_dtype(gy.dtype()) == compute_dtype(h.dtype()),
                "{}: gradient {} ({}) must match the state h {} ({})", op, gy.shape(), gy.dtype(), h.shape(),
                h.dtype());
  return H;
}

}  // namespace

GruGatesGrads gru_gates_backward(const Tensor& gy, const Tensor& gh, const Tensor& h, const Tensor& saved) {
  check_gru_gates_backward(gy, gh, h, saved);
  Backend& b = backend(h.device());
  if (!b.fuses(FusedKernel::GruGatesBackward)) return gru_gates_backward_composed(gy, gh, h, saved);
  // the gradients in the compute dtype: the engine rounds each to its input's dtype
  const DType wide = compute_dtype(h.dtype());
  GruGatesGrads r{Tensor::empty(gh.shape(), wide, h.device()), Tensor::empty(gh.shape(), wide, h.device()),
                  Tensor::empty(h.shape(), wide, h.device())};
  b.gru_gates_backward(gy.contiguous(), gh.contiguous(), h.contiguous(), saved.contiguous(), r.ggi, r.ggh,
                       r.gh);
  return r;
}

// a_n = gy (1 - z)(1 - n²), a_r = a_n gh_n r (1 - r), a_z = gy (h - n) z (1 - z):
// ggi = [a_r, a_z, a_n], ggh = [a_r, a_z, a_n r], dh = gy z
GruGatesGrads gru_gates_backward_composed(const Tensor& gy, const Tensor& gh, const Tensor& h,
                                          const Tensor& saved) {
  const int64_t H = check_gru_gates_backward(gy, gh, h, saved);
  const DType wide = compute_dtype(h.dtype());
  const Tensor g = gy.to(wide), r = gate_part(saved, 0, H, wide), z = gate_part(saved, 1, H, wide),
               n = gate_part(saved, 2, H, wide);
  Tensor a_n = mul(mul(g, rsub(z, 1.0)), rsub(mul(n, n), 1.0));
  Tensor a_r = mul(mul(a_n, gate_part(gh, 2, H, wide)), mul(r, rsub(r, 1.0)));
  Tensor a_z = mul(mul(g, sub(h.to(wide), n)), mul(z, rsub(z, 1.0)));
  return {cat({a_r, a_z, a_n}, 1), cat({a_r, a_z, mul(a_n, r)}, 1), mul(g, z)};
}

// ---- dropout ----

namespace {

void check_dropout(const Tensor& x, double p) {
  check_float("dropout", x);
  SACCADE_CHECK(p >= 0 && p < 1, "dropout: p must be in [0, 1), got {} (input shape {})", p, x.shape());
}

// The counters of x's mask: those ops::rand would use, so a generator's offset advances as for rand.
Generator::Draw dropout_draw(const Tensor& x, Generator* gen) {
  return (gen ? *gen : default_generator()).reserve(static_cast<uint64_t>(x.numel()));
}

// mask = (u >= p) / (1 - p) with u the uniforms of the draw, out = x ⊙ mask; 16 bits in float32, out and
// mask rounded once (as the fused kernel's 16-bit route).
DropoutResult compose_dropout(const Tensor& x, double p, Generator::Draw d) {
  const DType wide = compute_dtype(x.dtype());
  Tensor u = Tensor::empty(x.shape(), wide, x.device(), "dropout");
  backend(x.device()).uniform(u, d.seed, d.offset, 0.0, 1.0);
  Tensor mask = mul(ge(u, p).to(wide), 1.0 / (1.0 - p));
  return {mul(x.to(wide), mask).to(x.dtype()), mask.to(x.dtype())};
}

}  // namespace

DropoutResult dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check_dropout(x, p);
  if (!training || p == 0) return {x, Tensor()};
  Backend& b = backend(x.device());
  if (!b.fuses(FusedKernel::Dropout)) return compose_dropout(x, p, dropout_draw(x, gen));
  Tensor xc = x.contiguous(), out = Tensor::empty(x.shape(), x.dtype(), x.device(), "dropout"),
         mask = Tensor::empty(x.shape(), x.dtype(), x.device(), "dropout");
  Generator::Draw d = dropout_draw(x, gen);
  b.dropout(xc, d.seed, d.offset, p, out, mask);
  return {out, mask};
}

DropoutResult dropout_composed(const Tensor& x, double p, Generator* gen) {
  check_dropout(x, p);
  if (p == 0) return {x, Tensor()};
  return compose_dropout(x, p, dropout_draw(x, gen));
}

// ---- losses ----

Tensor reduce_loss(const Tensor& losses, Reduction reduction, int64_t count) {
  switch (reduction) {
    case Reduction::None:
      return losses;
    case Reduction::Sum:
      return sum(losses);
    case Reduction::Mean:
      return div(sum(losses), static_cast<double>(count < 0 ? losses.numel() : count));
  }
  throw Error("reduce_loss: unknown reduction");
}

namespace {

// cross_entropy's argument checks; returns the number of targets that are not ignore_index.
int64_t check_cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                            double label_smoothing) {
  const char* op = "cross_entropy";
  check_float(op, logits, "logits");
  SACCADE_CHECK(target.defined(), "{}: got an undefined target tensor", op);
  check_same_device(op, {&logits, &target});
  SACCADE_CHECK(logits.dim() == 2, "{}: logits must be (N, C), got shape {}", op, logits.shape());
  SACCADE_CHECK(target.dtype() == DType::Int64,
                "{}: target must hold int64 class indices, got {} of shape {}", op, target.dtype(),
                target.shape());
  SACCADE_CHECK(target.dim() == 1 && target.shape()[0] == logits.shape()[0],
                "{}: target of shape {} must be (N) for logits of shape {}", op, target.shape(),
                logits.shape());
  SACCADE_CHECK(label_smoothing >= 0 && label_smoothing <= 1, "{}: label_smoothing must be in [0, 1], got {}",
                op, label_smoothing);
  const int64_t c = logits.shape()[1];
  int64_t count = 0;
  for (int64_t t : target.to_vector<int64_t>()) {
    if (t == ignore_index) continue;
    SACCADE_CHECK(t >= 0 && t < c, "{}: target {} out of range for {} classes (logits {}, target {})", op, t,
                  c, logits.shape(), target.shape());
    ++count;
  }
  return count;
}

}  // namespace

CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                          Reduction reduction, double label_smoothing) {
  const int64_t count = check_cross_entropy(logits, target, ignore_index, label_smoothing);
  const int64_t n = logits.shape()[0], c = logits.shape()[1];
  // A dtype rule: log-softmax and the loss in the compute dtype (float32 for 16-bit logits; the loss,
  // log_probs and weights stay float32, as PyTorch's autocast gives); the engine rounds the gradient to the
  // logits' dtype.
  const DType dt = compute_dtype(logits.dtype());
  const Device dev = logits.device();
  const double eps = label_smoothing;
  // q_ic = (1-ε)[c = t_i] + ε/C on kept rows, 0 on ignored ones; loss_i = -Σ_c q_ic log p_ic
  Tensor kept = ne(target, static_cast<double>(ignore_index)).view({n, 1});
  CrossEntropyForward r;
  r.log_probs = log_softmax(logits.to(dt), 1);
  if (eps == 0) {
    // q is the one-hot target (one_hot_targets), and loss_i = -log p_i[t_i] on kept rows: a gather of N
    // log-probabilities instead of the (N, C) products below (the same numbers: the other terms are 0)
    Tensor safe = where(kept.view({n}), target, scalar_tensor(0, DType::Int64, dev));  // ignore_index -> 0
    Tensor picked = gather(r.log_probs, 1, safe.view({n, 1})).view({n});
    r.loss = reduce_loss(neg(where(kept.view({n}), picked, scalar_tensor(0, dt, dev))), reduction, count);
    r.weights = one_hot_targets(target, c, ignore_index, dt);
    r.count = count;
    return r;
  }
  Tensor hit = logical_and(
      eq(arange(0, static_cast<double>(c), 1, DType::Int64, dev).view({1, c}), target.view({n, 1})), kept);
  Tensor q =
      where(hit, scalar_tensor(1 - eps + eps / static_cast<double>(c), dt, dev),
            where(kept, scalar_tensor(eps / static_cast<double>(c), dt, dev), scalar_tensor(0, dt, dev)));
  // where, not a plain product: 0 · (-inf) from a masked-out logit would be NaN
  Tensor terms = where(ne(q, 0.0), mul(q, r.log_probs), scalar_tensor(0, dt, dev));
  r.loss = reduce_loss(neg(sum(terms, {1})), reduction, count);
  r.weights = q;
  r.count = count;
  return r;
}

Tensor one_hot_targets(const Tensor& target, int64_t num_classes, int64_t ignore_index, DType dtype) {
  const int64_t n = target.numel();
  const Device dev = target.device();
  const Tensor kept = ne(target, static_cast<double>(ignore_index)).view({n, 1});
  // N ones scattered into zeros (an ignored row adds its 0 at column 0), not an (N, C) comparison
  const Tensor safe = where(kept, target.view({n, 1}), scalar_tensor(0, DType::Int64, dev));
  return scatter_add(zeros({n, num_classes}, dtype, dev), 1, safe, kept.to(dtype));
}

namespace {

// loss_i = lse_i - picked_i on kept rows, reduced.
CrossEntropyRows rows_loss(const Tensor& target, int64_t ignore_index, Reduction reduction, int64_t count,
                           Tensor lse, const Tensor& picked) {
  const Tensor kept = ne(target, static_cast<double>(ignore_index));
  const Tensor losses = where(kept, sub(lse, picked), scalar_tensor(0, lse.dtype(), lse.device()));
  return {reduce_loss(losses, reduction, count), std::move(lse), count};
}

}  // namespace

CrossEntropyRows cross_entropy_rows(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                    Reduction reduction) {
  const int64_t count = check_cross_entropy(logits, target, ignore_index, 0.0);
  Backend& b = backend(logits.device());
  if (!b.fuses(FusedKernel::CrossEntropyRows))
    return cross_entropy_rows_composed(logits, target, ignore_index, reduction);
  const int64_t n = logits.shape()[0];
  const DType dt = compute_dtype(logits.dtype());
  Tensor lse = Tensor::empty({n}, dt, logits.device()), picked = Tensor::empty({n}, dt, logits.device());
  b.cross_entropy_rows(logits.contiguous(), target.contiguous(), ignore_index, lse, picked);
  return rows_loss(target, ignore_index, reduction, count, lse, picked);
}

CrossEntropyRows cross_entropy_rows_composed(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                             Reduction reduction) {
  const int64_t count = check_cross_entropy(logits, target, ignore_index, 0.0);
  const int64_t n = logits.shape()[0];
  const Device dev = logits.device();
  const Tensor x = logits.to(compute_dtype(logits.dtype()));
  // lse = m + log Σ e^(x - m), m the row's max (a row of -inf keeps m = -inf: its shift is taken as 0)
  const Tensor m = amax(x, {1}, true);
  const Tensor finite =
      where(eq(m, -std::numeric_limits<double>::infinity()), scalar_tensor(0, x.dtype(), dev), m);
  const Tensor lse = add(log(sum(exp(sub(x, finite)), {1})), finite.view({n}));
  const Tensor kept = ne(target, static_cast<double>(ignore_index));
  const Tensor safe = where(kept, target, scalar_tensor(0, DType::Int64, dev));
  const Tensor picked = gather(x, 1, safe.view({n, 1})).view({n});
  return rows_loss(target, ignore_index, reduction, count, lse, picked);
}

Tensor cross_entropy_rows_backward(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                   const Tensor& lse, const Tensor& scale) {
  Backend& b = backend(logits.device());
  if (!b.fuses(FusedKernel::CrossEntropyRowsBackward))
    return cross_entropy_rows_backward_composed(logits, target, ignore_index, lse, scale);
  Tensor gx = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  b.cross_entropy_rows_backward(logits.contiguous(), target.contiguous(), ignore_index, lse.contiguous(),
                                scale.to(lse.dtype()).contiguous(), gx);
  return gx;
}

Tensor cross_entropy_rows_backward_composed(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                            const Tensor& lse, const Tensor& scale) {
  const int64_t n = logits.shape()[0], c = logits.shape()[1];
  const Device dev = logits.device();
  const Tensor x = logits.to(lse.dtype());
  const Tensor kept = ne(target, static_cast<double>(ignore_index));
  const Tensor onehot = one_hot_targets(target, c, ignore_index, x.dtype());
  const Tensor row = where(kept, scale.to(x.dtype()), scalar_tensor(0, x.dtype(), dev)).view({n, 1});
  return mul(sub(exp(sub(x, lse.view({n, 1}))), onehot), row).to(logits.dtype());
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index, Reduction reduction,
                     double label_smoothing) {
  return cross_entropy_forward(logits, target, ignore_index, reduction, label_smoothing).loss;
}

Tensor mse_loss(const Tensor& a, const Tensor& b, Reduction reduction) {
  const char* op = "mse_loss";
  check_float(op, a);
  check_float(op, b, "target");
  check_same_device(op, {&a, &b});
  SACCADE_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype(),
                "{}: input {} ({}) and target {} ({}) must have one shape and dtype", op, a.shape(),
                a.dtype(), b.shape(), b.dtype());
  Tensor d = sub(a, b);
  return reduce_loss(mul(d, d), reduction);
}

}  // namespace saccade::ops
