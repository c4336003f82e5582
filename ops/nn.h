#pragma once
// Neural-network primitives on Tensors (no gradients): softmax family, masked softmax, layer norm, dropout,
// and the losses. autograd/functions/nn.h wraps them with derivative rules.
//
// Errors: every function throws saccade::Error whose message starts with the op's name and names the
// offending shapes, for an undefined tensor, a wrong dtype, mismatched shapes or devices, a dim or an index
// out of range.
#include <cstdint>

#include "ops/random.h"
#include "ops/tensor.h"

namespace saccade::ops {

/// How a loss reduces its per-element values: keep them (None), average (Mean) or add them up (Sum).
enum class Reduction { None, Mean, Sum };

// ---- softmax family ----

/// softmax along `dim`: exp(x_i - max) / Σ_j exp(x_j - max) (as torch.softmax). x: any shape, any floating
/// dtype (bfloat16 / float16 computed in float32, rounded once); result: x's shape and dtype. A slice that is
/// all -inf gives zeros (never NaN); a NaN makes its slice NaN.
Tensor softmax(const Tensor& x, int64_t dim);
/// log-softmax along `dim`: x_i - max - log Σ_j exp(x_j - max) (as torch.log_softmax). Shapes as softmax;
/// an all -inf slice gives zeros (the backend's convention).
Tensor log_softmax(const Tensor& x, int64_t dim);
/// dL/dx of softmax (log = false) or log_softmax (log = true) along `dim`, from the forward result y and
/// gy = dL/dy (same shape and dtype as y):  softmax: y ⊙ (gy - Σ gy ⊙ y);  log: gy - exp(y) Σ gy.
Tensor softmax_backward(const Tensor& y, const Tensor& gy, int64_t dim, bool log);

/// The Bool keep-mask of d2l's masked_softmax (d2l section 11.3, Attention Scoring Functions), expanded to
/// x_shape = (B, ..., Tq, Tk): true where k < valid_len. valid_lens: int64 of shape (B) (one length per
/// batch row, for every query) or (B, Tq) (one per query); dims between B and Tq (heads) broadcast.
/// Throws for a non-int64 or negative valid_lens, or when its shape does not match x_shape.
Tensor valid_lens_to_mask(const Tensor& valid_lens, const Shape& x_shape);
/// Softmax over the last dim of x (..., Tq, Tk) with masked positions excluded (they get probability 0).
/// `valid_lens_or_mask` is one of:
///   - int64 valid_lens of shape (B) or (B, Tq), as d2l section 11.3 (see valid_lens_to_mask);
///   - a Bool mask broadcastable to x, true = keep (attend), as the boolean attn_mask of
///     torch.nn.functional.scaled_dot_product_attention;
///   - undefined: plain softmax.
/// Masked entries are filled with -inf (not -1e6), so a fully masked row gives zeros, never NaN.
Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens_or_mask);
/// The Bool keep-mask masked_softmax uses (broadcastable to x's shape), or an undefined Tensor when
/// `valid_lens_or_mask` is undefined. Checks as masked_softmax.
Tensor attention_keep_mask(const Tensor& x, const Tensor& valid_lens_or_mask,
                           const char* op = "masked_softmax");

// ---- layer norm ----

/// layer_norm_forward's results: out (x's shape), and per normalised row its mean and rstd = 1/sqrt(var+eps)
/// (shape: x's leading dims, those before normalized_shape; x's dtype, float32 for a 16-bit x).
struct LayerNormForward {
  Tensor out, mean, rstd;
};
/// Layer normalisation (Ba et al. 2016, eq. 4; as torch.nn.functional.layer_norm) over the trailing dims
/// `normalized_shape` of x: (x - mean) / sqrt(var + eps) * weight + bias, with the biased variance.
/// weight, bias: of normalized_shape and x's dtype, or undefined (then 1 and 0). x: any floating dtype
/// (bfloat16 / float16: computed in float32, out rounded once; mean and rstd float32).
LayerNormForward layer_norm_forward(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                    const Tensor& bias, double eps = 1e-5);
/// layer_norm_forward(...).out.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
/// Gradients of layer_norm: gx (x's shape), gweight and gbias (normalized_shape; undefined unless
/// asked for with `weight_grad` / `bias_grad`).
struct LayerNormGrads {
  Tensor gx, gweight, gbias;
};
/// The backward of layer_norm_forward: gy = dL/d(out), x, weight (or undefined), and the saved mean, rstd.
LayerNormGrads layer_norm_backward(const Tensor& gy, const Tensor& x, const Shape& normalized_shape,
                                   const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                   bool weight_grad, bool bias_grad);

// ---- RMS norm ----

/// rms_norm_forward's results: out (x's shape), and per normalised row rstd = 1/sqrt(mean(x²) + eps) (x's
/// leading dims; x's dtype, float32 for a 16-bit x).
struct RmsNormForward {
  Tensor out, rstd;
};
/// Root-mean-square normalisation (Zhang & Sennrich 2019, eq. 4; as torch.nn.functional.rms_norm and Hugging
/// Face's LlamaRMSNorm) over the trailing dims `normalized_shape` of x: x / sqrt(mean(x²) + eps) * weight.
/// weight: of normalized_shape and x's dtype, or undefined (then 1). x: any floating dtype (bfloat16 /
/// float16: computed in float32, out rounded once; rstd float32). Its own kernels (rms_norm,
/// rms_norm_backward: layer norm's row code without the centring). Throws saccade::Error naming rms_norm when
/// normalized_shape is not x's trailing dims, the weight's shape or dtype differs, or eps < 0.
RmsNormForward rms_norm_forward(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                double eps);
/// rms_norm_forward(...).out.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps);
/// Gradients of rms_norm: gx (x's shape), gweight (normalized_shape; undefined unless `weight_grad`).
struct RmsNormGrads {
  Tensor gx, gweight;
};
/// The backward of rms_norm_forward: gy = dL/d(out), x, weight (or undefined), and the saved rstd.
///   x̂ = x · rstd,  ĝ = gy ⊙ w:   gx = rstd (ĝ - x̂ mean(ĝ ⊙ x̂)),   gw = Σ_rows gy ⊙ x̂
RmsNormGrads rms_norm_backward(const Tensor& gy, const Tensor& x, const Shape& normalized_shape,
                               const Tensor& weight, const Tensor& rstd, bool weight_grad);

// ---- GRU gates ----

/// gru_gates' results: the next state h' (B, H), and saved (B, 3H) = [r, z, n] for gru_gates_backward.
struct GruGates {
  Tensor h, saved;
};
/// The gate math of one GRU step (Cho et al. 2014; torch.nn.GRUCell after its two products) from the input
/// projection gi = x W_ih^T + b_ih and the state projection gh = h W_hh^T + b_hh, both (B, 3H) laid out
/// [r | z | n], and the state h (B, H):
///   r = σ(gi_r + gh_r),  z = σ(gi_z + gh_z),  n = tanh(gi_n + r ⊙ gh_n),  h' = n + z ⊙ (h - n).
/// One pass on the CPU (the composed ops elsewhere). float32/64 of one dtype, or bfloat16 / float16, which
/// may meet float32 (autocast's 16-bit gi and gh beside a float32 h): computed in float32, h' in the inputs'
/// promoted dtype, saved in float32. One device. Throws saccade::Error naming "gru_gates" and the shapes for
/// other shapes, dtypes (float64 with another) or mixed devices.
GruGates gru_gates(const Tensor& gi, const Tensor& gh, const Tensor& h);
/// gru_gates composed of elementwise ops (16-bit inputs widened to float32, h' rounded once): the readable
/// reference of the fused kernel, and what gru_gates runs on a backend without one (Backend::fuses: CUDA).
/// The same results and errors as gru_gates.
GruGates gru_gates_composed(const Tensor& gi, const Tensor& gh, const Tensor& h);
/// gru_gates_backward's results: gradients of gi, gh (B, 3H) and h (B, H).
struct GruGatesGrads {
  Tensor ggi, ggh, gh;
};
/// The backward of gru_gates: gy = dL/dh' (B, H), gh and h as given to gru_gates, saved = its [r, z, n].
/// ggi = [a_r, a_z, a_n], ggh = [a_r, a_z, a_n ⊙ r] with a_n = gy (1 - z)(1 - n²),
/// a_r = a_n gh_n r (1 - r), a_z = gy (h - n) z (1 - z); and dh = gy ⊙ z, each in the compute dtype (float32
/// for 16-bit inputs). Errors as gru_gates.
GruGatesGrads gru_gates_backward(const Tensor& gy, const Tensor& gh, const Tensor& h, const Tensor& saved);
/// gru_gates_backward composed of elementwise ops, as gru_gates_composed is gru_gates'.
GruGatesGrads gru_gates_backward_composed(const Tensor& gy, const Tensor& gh, const Tensor& h,
                                          const Tensor& saved);

// ---- dropout ----

/// out and the scale it applied: out = x ⊙ mask.
struct DropoutResult {
  Tensor out, mask;
};
/// Inverted dropout (Srivastava et al. 2014; as torch.nn.functional.dropout): each element is zeroed with
/// probability p and the others scaled by 1/(1-p), so that E[out] = x. mask holds 0 or 1/(1-p) (x's shape and
/// dtype; for a 16-bit x, the float32 draws with out and mask rounded). When !training or p == 0: out is x
/// itself and mask is undefined (no random numbers are drawn). Random numbers come from ops::rand with `gen`
/// (the default generator when null). p must be in [0, 1).
DropoutResult dropout(const Tensor& x, double p, bool training = true, Generator* gen = nullptr);
/// dropout (training) composed of ops: the uniforms ops::rand draws, compared with p and scaled, then the
/// product (16-bit x: in float32, out and mask rounded once). The readable reference of the fused kernel and
/// what dropout runs on a backend without one (Backend::fuses: CUDA); the same numbers for the same generator
/// state, and the same errors.
DropoutResult dropout_composed(const Tensor& x, double p, Generator* gen = nullptr);

// ---- losses ----

/// cross_entropy_forward's results: the loss as cross_entropy returns it, log_softmax(logits) (N, C), the
/// target weights q (N, C) with loss_i = -Σ_c q_ic log p_ic (zero rows for ignored targets), and the number
/// of targets that were not ignored (the divisor of Mean).
struct CrossEntropyForward {
  Tensor loss, log_probs, weights;
  int64_t count = 0;
};
/// Cross-entropy of logits (N, C) against class indices target (int64, N), as
/// torch.nn.functional.cross_entropy (torch 1.13): loss_i = (1-ε)(-log p_i[t_i]) + ε/C Σ_c (-log p_ic), with
/// p = softmax(logits) and ε = label_smoothing in [0, 1]. Rows whose target is ignore_index contribute
/// nothing (the smoothing term included); Mean divides by the number of other rows (NaN when there are
/// none, as torch). Result: 0-d for Mean/Sum, (N) for None, logits' dtype, except float32 for 16-bit logits
/// (computed in float32; log_probs and weights float32 too). Throws for a target outside [0, C) that is not
/// ignore_index.
CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& target,
                                          int64_t ignore_index = -100, Reduction reduction = Reduction::Mean,
                                          double label_smoothing = 0.0);
/// The one-hot targets of class indices target (int64, N) over num_classes classes: (N, num_classes) in
/// `dtype`, 1 at column t_i of row i, and a zero row where t_i is ignore_index (the weights q of
/// cross_entropy_forward without label smoothing). Targets must be checked first (in [0, num_classes) or
/// ignore_index), as cross_entropy does.
Tensor one_hot_targets(const Tensor& target, int64_t num_classes, int64_t ignore_index, DType dtype);
/// cross_entropy_forward(...).loss.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::Mean, double label_smoothing = 0.0);
/// cross_entropy_rows' results: the loss as cross_entropy returns it (label_smoothing 0), each row's
/// log-sum-exp of the logits lse (N) and the number of targets that were not ignored (the divisor of Mean).
struct CrossEntropyRows {
  Tensor loss, lse;
  int64_t count = 0;
};
/// cross_entropy without label smoothing, from each row's log-sum-exp: loss_i = lse_i - logits_i[t_i] on kept
/// rows, lse_i = log Σ_c e^(logits_ic) (compute dtype: float32 for 16-bit logits), reduced as
/// cross_entropy. No (N, C) result: where the backend fuses it (the CPU), each row is read twice, in its own
/// dtype; elsewhere cross_entropy_rows_composed. The same numbers as cross_entropy(..., 0.0) up to the order
/// of the sums, and its errors (named "cross_entropy").
CrossEntropyRows cross_entropy_rows(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                                    Reduction reduction = Reduction::Mean);
/// cross_entropy_rows composed of ops (max, exp, sum, log, gather): the readable twin of the fused kernel.
CrossEntropyRows cross_entropy_rows_composed(const Tensor& logits, const Tensor& target,
                                             int64_t ignore_index = -100,
                                             Reduction reduction = Reduction::Mean);
/// The gradient of cross_entropy_rows in logits: gx (N, C) in logits' dtype, gx_ic = scale_i (e^(logits_ic
/// - lse_i) - [c = t_i]) = scale_i (softmax(logits)_ic - onehot_ic), 0 on rows whose target is ignore_index;
/// lse (N) as cross_entropy_rows returned it, scale (N) in its dtype: the loss's gradient of each row (g for
/// Sum, g / count for Mean, g_i for None). One (N, C) result, written once (fused on the CPU; else
/// cross_entropy_rows_backward_composed).
Tensor cross_entropy_rows_backward(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                   const Tensor& lse, const Tensor& scale);
/// cross_entropy_rows_backward composed of ops: the readable twin.
Tensor cross_entropy_rows_backward_composed(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                            const Tensor& lse, const Tensor& scale);

/// Mean squared error (a - b)^2, reduced (as torch.nn.functional.mse_loss). a, b: same shape and float dtype
/// (no broadcasting). Result: 0-d for Mean/Sum, a's shape for None.
Tensor mse_loss(const Tensor& a, const Tensor& b, Reduction reduction = Reduction::Mean);

/// Applies `reduction` to per-element losses (Mean divides by `count`; count < 0 means numel).
Tensor reduce_loss(const Tensor& losses, Reduction reduction, int64_t count = -1);

}  // namespace saccade::ops
