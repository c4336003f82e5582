#pragma once
// The functional core of attention and the two scoring functions of d2l chapter 11 (Attention Mechanisms and
// Transformers):
//   - attend_from_scores / scaled_dot_product_attention: masked softmax over keys, dropout, weighted sum of
//     values. Every dot-product module (DotProductAttention, MultiHeadAttention, MultiheadAttention, the
//     Transformer blocks) calls scaled_dot_product_attention, which takes the fused kernel
//     (saccade::flash_attention, ops/attention.h) unless the caller asks for the weights (need_weights), and
//     the composed path (scores, masked_softmax, dropout, matmul: the readable reference) when it does.
//   - AdditiveAttention (Bahdanau et al. 2015; d2l 11.3.2) and DotProductAttention (Vaswani et al. 2017;
//     d2l 11.3.3) as modules that keep their last attention weights for plotting.
//
// Masks: a `valid_lens_or_mask` argument is, as saccade::masked_softmax takes it, int64 valid_lens (B) or
// (B, Tq) (keys k >= valid_len are masked, d2l 11.3.1), a Bool keep-mask broadcastable to the scores
// (true = attend), or undefined (no mask). A query row with nothing to attend gets zero weights and a zero
// output, never NaN. The mask is checked and converted once (ops::attention_mask) where the user hands it
// in; a negative valid_len counts as 0 (no value is read on the host: no device synchronisation).
//
// need_weights (torch's name): the modules that keep their last weights for plotting (d2l's
// attention_weights()) keep them when their `need_weights` member says so; left unset (the default), only
// in eval mode. So a d2l user who plots after model.eval() gets the weights, and training takes the fused
// kernel. Asking for weights takes the composed path (O(T²) memory).
#include <cstdint>
#include <memory>

#include <optional>

#include "autograd/functions/attention.h"
#include "autograd/variable.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "ops/attention.h"
#include "ops/random.h"

namespace saccade::nn {

/// An attention result: output (..., Tq, Dv) and the attention weights (..., Tq, Tk) before dropout.
struct AttentionOutput {
  Variable output;
  Variable weights;
};

/// The Bool causal keep-mask (Tq, Tk) on `device`: query i may attend to key j iff j <= i + (Tk - Tq), i.e.
/// the queries are the last Tq positions of the key sequence (bottom-right aligned, as flash-attention; for
/// Tq == Tk this is the usual lower triangle j <= i). This alignment is what makes incremental decoding
/// (new queries attending to cached keys) equal to full-sequence decoding. Throws if Tq or Tk is negative.
Tensor causal_mask(int64_t tq, int64_t tk, Device device = Device::cpu());

/// The options of scaled_dot_product_attention, by name: torch.nn.functional.scaled_dot_product_attention's
/// (attn_mask, dropout_p, is_causal, scale, enable_gqa) and the rest that saccade's attention takes, each
/// with its default, so that a call names what it changes (C++20 designated initializers, in this order):
///
///     nn::scaled_dot_product_attention(q, k, v, {.attn_mask = valid_lens, .is_causal = true});
///     nn::scaled_dot_product_attention(q, k, v, {.dropout_p = 0.1, .generator = &gen, .need_weights =
///     true});
struct AttentionOptions {
  /// int64 valid_lens (B) or (B, Tq), or a Bool keep-mask broadcastable to the scores (true = attend), as the
  /// file comment says; undefined (the default): no mask.
  Tensor attn_mask{};
  /// Query i attends only to keys j <= i + (Tk - Tq) (causal_mask: the queries are the last Tq positions),
  /// combined with attn_mask.
  bool is_causal = false;
  /// Sliding-window (local) causal attention (Beltagy et al. 2020, Longformer; Jiang et al. 2023, Mistral;
  /// transformers' sliding_window): with window = W >= 1 query i attends only to the last W keys up to its
  /// causal limit, i + (Tk - Tq) - W < j <= i + (Tk - Tq). Needs is_causal (a window without it is refused,
  /// not made symmetric). 0 (the default): none.
  int64_t window = 0;
  /// Dropout on the attention weights, in [0, 1), applied whenever it is > 0 (as torch's functional form; a
  /// module passes its dropout in training mode and 0 in eval mode).
  double dropout_p = 0.0;
  /// Dropout's random numbers: the default generator when null.
  Generator* generator = nullptr;
  /// The scores' factor, softmax(q kᵀ · scale); unset (the default): 1/√D, D the query's last dim.
  std::optional<double> scale{};
  /// Grouped-query attention (torch's name; Ainslie et al. 2023): H = G·H_kv query heads, query head h
  /// attending with key/value head h / G; false (the default): H_kv must equal H.
  bool enable_gqa = false;
  /// Return the attention weights before dropout: true takes the composed path (the readable reference;
  /// O(T²) memory); false (the default, as torch's function, which never returns them) takes the fused kernel
  /// and leaves `weights` undefined. Both give the same output and gradients, and the same dropout for the
  /// same generator state.
  bool need_weights = false;
  /// Logit soft-capping (Gemma 2's attn_logit_softcapping; Gemma Team 2024): the scaled scores become
  /// softcap · tanh(scores / softcap) before the mask and the softmax. Unset (the default): none. The fused
  /// kernels do not cap: a softcap takes the composed path (O(T²) memory) whatever need_weights says, and
  /// returns the weights only when need_weights.
  std::optional<double> softcap{};
};

/// Attention from precomputed scores (d2l 11.3, eq. 11.3.3): weights = masked_softmax(scores, mask) with the
/// causal mask and-ed in when options.is_causal; output = dropout(weights) @ values.
///
/// scores: (B, ..., Tq, Tk) float; values: (B, ..., Tk, Dv) with the same leading dims. Of `options` only
/// attn_mask, is_causal, dropout_p and generator apply (the scores are already scaled; the weights are always
/// returned). Returns output (B, ..., Tq, Dv) and the weights before dropout. Throws saccade::Error naming
/// `op` for mismatched ranks or shapes, a bad mask, a bad dropout_p, or an option that does not apply
/// (window, scale, enable_gqa).
AttentionOutput attend_from_scores(const Variable& scores, const Variable& values,
                                   const AttentionOptions& options = {},
                                   const char* op = "attend_from_scores");

/// Whether a module keeps its attention weights: `need_weights` when set, else only in eval mode.
inline bool keeps_weights(const std::optional<bool>& need_weights, bool training) {
  return need_weights.value_or(!training);
}

/// Scaled dot-product attention (Vaswani et al. 2017, eq. 1; d2l 11.3.3):
///   output = softmax(q kᵀ · scale + mask) v,   scale = 1/√D unless options.scale,
/// with masked positions excluded from the softmax (probability 0; a fully masked row gives zeros).
///
/// q: (B, ..., H, Tq, D), k: (B, ..., H_kv, Tk, D), v: (B, ..., H_kv, Tk, Dv), all of one rank >= 3 and the
/// same leading dims, one float dtype (float32, float64, bfloat16, float16). H_kv = H unless
/// options.enable_gqa: then H may be G·H_kv (multi-query when H_kv = 1); neither path repeats k or v (the
/// fused kernel reads the shared head, the composed one folds the group into one product: attention_scores).
/// The heads dim is the one before Tq (rank >= 4). The mask, causal rule, window, dropout and weights are
/// `options`' (AttentionOptions). The fused kernels (CPU and CUDA; FlashAttention, Dao et al. 2022 and 2023,
/// O(T) memory) skip the key tiles outside every window, so a window costs O(Tq·W). Returns the output (B,
/// ..., H, Tq, Dv) and, with need_weights, the weights (B, ..., H, Tq, Tk). Throws saccade::Error naming
/// "scaled_dot_product_attention" and the shapes for mismatched ranks, leading dims, D or Tk, H_kv != H
/// without enable_gqa, H not a multiple of H_kv, a bad mask, dropout_p outside [0, 1), a scale that is not
/// finite, window < 0, or a window without is_causal.
AttentionOutput scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                             const AttentionOptions& options = {});
/// The same with the mask already checked and converted by ops::attention_mask (the form the modules pass
/// down, with either causal alignment and its window): options.attn_mask, is_causal and window must be left
/// unset (the mask holds them). Errors name `op`.
AttentionOutput scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                             const ops::AttentionMask& mask, const AttentionOptions& options,
                                             const char* op);

/// The additive-attention scores composed from ops (saccade::additive_scores_composed,
/// autograd/functions/attention.h, where it also gives the fused kernel its second derivative).
using saccade::additive_scores_composed;

/// Additive attention (Bahdanau et al. 2015, eq. 6; d2l 11.3.2): the score of query q and key k is
///   a(q, k) = w_vᵀ tanh(W_q q + W_k k),
/// then masked softmax over keys, dropout on the weights, weighted sum of the values.
/// Parameters (torch layouts, no biases, as d2l): W_q.weight (num_hiddens, query_size),
/// W_k.weight (num_hiddens, key_size), w_v.weight (1, num_hiddens).
/// The scores go through the fused saccade::additive_attention_scores when `use_fused` (the default: see
/// the member), else through additive_scores_composed; both give the same numbers and gradients.
class AdditiveAttention : public Module {
 public:
  /// Linear layers initialised as torch.nn.Linear's default from `gen` (the default generator when null),
  /// which also drives dropout (it must outlive the module).
  AdditiveAttention(int64_t key_size, int64_t query_size, int64_t num_hiddens, double dropout = 0.0,
                    Generator* gen = nullptr);

  /// queries (B, Tq, query_size), keys (B, Tk, key_size), values (B, Tk, Dv), valid_lens_or_mask as in the
  /// file comment -> (B, Tq, Dv). Throws saccade::Error naming "AdditiveAttention" and the shapes for
  /// wrong ranks, feature sizes, mismatched B or Tk, or valid_lens of the wrong shape.
  Variable forward(const Variable& queries, const Variable& keys, const Variable& values,
                   const Tensor& valid_lens_or_mask = Tensor());
  /// forward, also returning the weights (B, Tq, Tk) as a differentiable Variable (for a loss on them, such
  /// as the doubly stochastic regularisation of Xu et al. 2015, eq. 14).
  AttentionOutput forward_with_weights(const Variable& queries, const Variable& keys, const Variable& values,
                                       const Tensor& valid_lens_or_mask = Tensor());

  /// W_k keys: keys (B, Tk, key_size) -> projected keys (B, Tk, num_hiddens). The keys' half of the score
  /// does not depend on the query: a decoder attending over one encoder output at every step projects it
  /// once and calls forward_projected at each step. Throws saccade::Error naming "AdditiveAttention" and the
  /// shape for keys that are not (B, Tk, key_size).
  Variable project_keys(const Variable& keys);
  /// forward_with_weights with the keys already projected by project_keys: queries (B, Tq, query_size),
  /// projected_keys (B, Tk, num_hiddens), values (B, Tk, Dv) -> output (B, Tq, Dv) and weights (B, Tq, Tk);
  /// forward_projected(q, project_keys(k), v, m) computes exactly forward_with_weights(q, k, v, m). Throws as
  /// forward does.
  AttentionOutput forward_projected(const Variable& queries, const Variable& projected_keys,
                                    const Variable& values, const Tensor& valid_lens_or_mask = Tensor());
  /// The weights (B, Tq, Tk) of the last forward (undefined before the first).
  Tensor attention_weights() const { return weights_; }

  std::shared_ptr<Linear> W_q, W_k, w_v;
  double dropout;
  /// Scores through the fused kernel (true, the default: one pass over (B, Tq, L, A) that keeps nothing of
  /// that size for backward, which recomputes tanh, where the composed path keeps each step's tanh; figures:
  /// bench/RESULTS.md, "2026-11-23 — fused against composed additive-attention scores") or through
  /// additive_scores_composed (false: the readable reference).
  bool use_fused = true;

 private:
  Generator* gen_;
  Tensor weights_;
};

/// Scaled dot-product attention as a module (d2l 11.3.3): softmax(q kᵀ / √d) v with dropout on the weights;
/// calls scaled_dot_product_attention (fused unless the weights are kept: see need_weights in the file
/// comment). No parameters.
class DotProductAttention : public Module {
 public:
  /// Dropout draws from `gen` (the default generator when null; it must outlive the module).
  explicit DotProductAttention(double dropout = 0.0, Generator* gen = nullptr);

  /// queries (B, Tq, D), keys (B, Tk, D), values (B, Tk, Dv), valid_lens_or_mask as in the file comment,
  /// `causal` as scaled_dot_product_attention -> (B, Tq, Dv). Throws saccade::Error naming
  /// "DotProductAttention" and the shapes for wrong ranks, mismatched D, B or Tk, or a bad mask.
  Variable forward(const Variable& queries, const Variable& keys, const Variable& values,
                   const Tensor& valid_lens_or_mask = Tensor(), bool causal = false);
  /// The weights (B, Tq, Tk) of the last forward; undefined before the first. Throws saccade::Error naming
  /// "DotProductAttention::attention_weights" when the last forward did not keep them (a training-mode
  /// forward ran the fused kernel, which never forms them): call eval() or set need_weights = true first.
  Tensor attention_weights() const;

  double dropout;
  /// Keep the weights of each forward (true), never (false), or only in eval mode (unset, the default).
  std::optional<bool> need_weights;

 private:
  Generator* gen_;
  Tensor weights_;
  bool weights_skipped_ = false;  // the last forward took the fused kernel
};

/// The weights a module kept, or a saccade::Error naming `accessor` and saying why there are none and how to
/// get them when its last forward took the fused kernel (`skipped`). The attention modules' accessors.
Tensor kept_attention_weights(const Tensor& weights, bool skipped, const char* accessor);

/// Checks that `mask` (undefined, int64 valid_lens or a Bool mask) fits scores of shape (B, ..., Tq, Tk),
/// throwing saccade::Error naming `module` (used by the modules to report bad input under their own name).
void check_valid_lens_or_mask(const char* module, const Tensor& mask, const Shape& scores_shape);

}  // namespace saccade::nn
