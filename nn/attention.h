#pragma once
// The attention modules of d2l chapter 11 (Attention Mechanisms and Transformers) and their shared helpers:
//   - the functional core they call, scaled_dot_product_attention and attend_from_scores, lives in
//     autograd/functions/attention.h (as torch.nn.functional's beside torch.nn's modules) and is named here
//     too (nn::scaled_dot_product_attention). Every dot-product module (DotProductAttention,
//     MultiHeadAttention, the Transformer blocks) calls it: the fused kernel unless the
//     weights are asked for (need_weights), the composed path (the readable reference) when they are;
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

/// The functional core every module below calls, autograd/functions/attention.h's (torch.nn.functional's
/// place): scaled_dot_product_attention, attend_from_scores and their AttentionOptions and AttentionOutput.
using saccade::attend_from_scores;
using saccade::AttentionOptions;
using saccade::AttentionOutput;
using saccade::scaled_dot_product_attention;

/// The Bool causal keep-mask (Tq, Tk) on `device`: query i may attend to key j iff j <= i + (Tk - Tq), i.e.
/// the queries are the last Tq positions of the key sequence (bottom-right aligned, as flash-attention; for
/// Tq == Tk this is the usual lower triangle j <= i). This alignment is what makes incremental decoding
/// (new queries attending to cached keys) equal to full-sequence decoding. Throws if Tq or Tk is negative.
Tensor causal_mask(int64_t tq, int64_t tk, Device device = Device::cpu());

/// Whether a module keeps its attention weights: `need_weights` when set, else only in eval mode.
inline bool keeps_weights(const std::optional<bool>& need_weights, bool training) {
  return need_weights.value_or(!training);
}

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
