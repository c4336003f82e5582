#pragma once
// Differentiable attention: one derivative rule per fused kernel (ops/attention.h), each calling its backward
// kernel, and the functional entry every attention module calls, scaled_dot_product_attention (torch's
// torch.nn.functional.scaled_dot_product_attention): the fused kernel, or the composed path (scores,
// masked_softmax, dropout, matmul: the readable reference) when the weights are asked for.
//
// Masks: an attn_mask is, as saccade::masked_softmax takes it, int64 valid_lens (B) or (B, Tq) (keys k >=
// valid_len are masked, d2l 11.3.1), a Bool keep-mask broadcastable to the scores (true = attend), or
// undefined (no mask). A query row with nothing to attend gets zero weights and a zero output, never NaN. The
// mask is checked and converted once (ops::attention_mask) where the user hands it in; a negative valid_len
// counts as 0 (no value is read on the host: no device synchronisation).
#include <optional>

#include "autograd/op_info.h"
#include "autograd/variable.h"
#include "ops/attention.h"
#include "ops/random.h"

namespace saccade {

// The rows of facts of this file's ops (autograd/op_info.h; autograd/op_table.h lists every row once).
namespace op_info {

// NOTE: CUDA's 16-bit flash attention runs the tensor-core kernel (native) unless it is switched off
// (cuda::set_tensor_core_attention), when it widens.
inline constexpr OpInfo flash_attention =
    with_cost(with_autocast(row("flash_attention", "attention.cpp"), Lower, Lower), cost::kAttention);
inline constexpr OpInfo additive_attention_scores = with_kernel16(
    with_autocast(row("additive_attention_scores", "attention.cpp"), Lower, Lower), Kernel16::AdditiveScores);
inline constexpr OpInfo additive_scores_composed =
    as_composite(row("additive_scores_composed", "attention.cpp"));

}  // namespace op_info

/// out = dropout(softmax(q kᵀ · scale, masked)) v through the fused kernel (FlashAttention, Dao et al. 2022;
/// FlashAttention-2, Dao 2023), differentiable in q, k and v (twice: the second derivative recomputes the
/// composed path). q (B, ..., H, Tq, D), k (B, ..., H_kv, Tk, D), v (B, ..., H_kv, Tk, Dv) -> (B, ..., H, Tq,
/// Dv), float32, float64, bfloat16 or float16. H_kv = H is multi-head attention; H = G·H_kv is grouped-query
/// attention (Ainslie et al. 2023; multi-query when H_kv = 1): query head h reads key/value head h / G, and
/// k's and v's gradients sum over each group, without repeating k or v. `mask` from ops::attention_mask
/// (for the scores (B, ..., H, Tq, Tk)). Dropout p in [0, 1) is applied when `training`, drawing
/// B·…·H·Tq·Tk counters from `gen` (the default generator when null) exactly as ops::dropout on the
/// (B, ..., H, Tq, Tk) weights would, so that the composed path with the same generator state gives the same
/// result. Throws saccade::Error naming "flash_attention" and the shapes for mismatched shapes (H not a
/// multiple of H_kv included) or dtypes, or a bad p. Grouped heads run on both devices.
Variable flash_attention(const Variable& q, const Variable& k, const Variable& v,
                         const ops::AttentionMask& mask, double scale, double dropout_p = 0.0,
                         bool training = false, Generator* gen = nullptr);

/// The scores q kᵀ · scale (B, ..., H, Tq, Tk) of q (B, ..., H, Tq, D) against k (B, ..., H_kv, Tk, D), the
/// composed path's first product. H = G·H_kv (grouped-query attention, Ainslie et al. 2023): query head h
/// against key head h / G, the G query heads of a group folded into the rows of one product with their key
/// head (q viewed as (B, ..., H_kv, G·Tq, D): a view when q is contiguous there), so k is never repeated and
/// its gradient sums over the group inside the product. H_kv = H (or rank 3): matmul(q, kᵀ) · scale. Shapes
/// as check_attention_inputs with enable_gqa (not checked again here).
Variable attention_scores(const Variable& q, const Variable& k, double scale);
/// weights (B, ..., H, Tq, Tk) @ v (B, ..., H_kv, Tk, Dv) -> (B, ..., H, Tq, Dv), grouped as
/// attention_scores (the composed path's second product).
Variable attention_values(const Variable& weights, const Variable& v);

/// The additive-attention scores (Bahdanau et al. 2015, eq. 6; d2l 11.3.2), fused:
///   scores[b, i, l] = Σ_a w_v[a] tanh(qp[b, i, a] + kp[b, l, a]),
/// qp (B, Tq, A) = W_q queries, kp (B, L, A) = W_k keys, w_v (A) -> (B, Tq, L); differentiable in all three.
/// Saves only its inputs (backward recomputes the tanh). Equal to the composed
/// squeeze(tanh(qp[:, :, None] + kp[:, None]) @ w_v) (nn::additive_scores_composed). Throws saccade::Error
/// naming "additive_attention_scores" and the shapes for mismatched shapes, dtypes or devices.
Variable additive_attention_scores(const Variable& qp, const Variable& kp, const Variable& w_v);
/// The additive-attention scores composed from ops (the readable reference of the fused
/// additive_attention_scores, and how it is differentiated under create_graph): qp (B, Tq, A) = W_q queries,
/// kp (B, L, A) = W_k keys, w_v (A) ->
///   scores[b, i, l] = w_vᵀ tanh(qp[b, i] + kp[b, l])   (B, Tq, L),
/// through the broadcast sum (B, Tq, L, A), its tanh and a matmul with w_v, all three kept for backward.
/// Throws saccade::Error naming "additive_scores_composed" and the shapes when they do not match.
Variable additive_scores_composed(const Variable& qp, const Variable& kp, const Variable& w_v);

// ---- scaled dot-product attention: the functional entry every attention module calls ----

/// An attention result: output (..., Tq, Dv) and the attention weights (..., Tq, Tk) before dropout.
struct AttentionOutput {
  Variable output;
  Variable weights;
};

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
  /// Packed documents (FlashAttention-2's variable-length batches, given as a document-id vector): int64
  /// (B, T), T = Tq = Tk, non-decreasing along T, each document one contiguous run; query i attends only to
  /// the keys of its own document, with is_causal and the rest as usual inside it. The fused kernels read two
  /// numbers a query (ops::with_documents), never a (T, T) mask. Undefined (the default): one document a row.
  Tensor document_ids{};
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
/// attn_mask, is_causal, document_ids, dropout_p and generator apply (the scores are already scaled; the
/// weights are always returned). Returns output (B, ..., Tq, Dv) and the weights before dropout. Throws
/// saccade::Error naming `op` for mismatched ranks or shapes, a bad mask, a bad dropout_p, or an option that
/// does not apply (window, scale, enable_gqa).
AttentionOutput attend_from_scores(const Variable& scores, const Variable& values,
                                   const AttentionOptions& options = {},
                                   const char* op = "attend_from_scores");
/// The same with the mask already checked and converted by ops::attention_mask (the form a module passes
/// down, its causal alignment and window inside it): weights = masked_softmax(scores, mask), output =
/// dropout(weights, dropout_p, drawn from gen) @ values, the heads grouped as attention_values when values
/// have H_kv < H heads. Shapes as above, not checked again: the composed path of every attention (the
/// readable reference).
AttentionOutput attend_from_scores(const Variable& scores, const Variable& values,
                                   const ops::AttentionMask& mask, double dropout_p, Generator* gen);

/// Scaled dot-product attention (Vaswani et al. 2017, eq. 1; d2l 11.3.3):
///   output = softmax(q kᵀ · scale + mask) v,   scale = 1/√D unless options.scale,
/// with masked positions excluded from the softmax (probability 0; a fully masked row gives zeros).
///
/// q: (B, ..., H, Tq, D), k: (B, ..., H_kv, Tk, D), v: (B, ..., H_kv, Tk, Dv), all of one rank >= 3 and the
/// same leading dims, one float dtype (float32, float64, bfloat16, float16; under autocast each is first cast
/// to its 16-bit dtype, as torch.autocast casts this op's inputs, so a float32 q and k out of a norm may meet
/// a 16-bit v). H_kv = H unless
/// options.enable_gqa: then H may be G·H_kv (multi-query when H_kv = 1); neither path repeats k or v (the
/// fused kernel reads the shared head, the composed one folds the group into one product: attention_scores).
/// The heads dim is the one before Tq (rank >= 4). The mask, causal rule, window, dropout and weights are
/// `options`' (AttentionOptions). The fused kernels (CPU and CUDA; FlashAttention, Dao et al. 2022 and 2023,
/// O(T) memory) skip the key tiles outside every window, so a window costs O(Tq·W). Returns the output (B,
/// ..., H, Tq, Dv) and, with need_weights, the weights (B, ..., H, Tq, Tk). Throws saccade::Error naming
/// "scaled_dot_product_attention" and the shapes for mismatched ranks, leading dims, D or Tk, H_kv != H
/// without enable_gqa, H not a multiple of H_kv, a bad mask, dropout_p outside [0, 1), a scale that is not
/// finite, window < 0, a window without is_causal, or bad document_ids (ops::with_documents).
AttentionOutput scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                             const AttentionOptions& options = {});
/// The same with the mask already checked and converted by ops::attention_mask (the form the modules pass
/// down, with either causal alignment and its window): options.attn_mask, is_causal and window must be left
/// unset (the mask holds them). Errors name `op`.
AttentionOutput scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                             const ops::AttentionMask& mask, const AttentionOptions& options,
                                             const char* op);

}  // namespace saccade
