#pragma once
// Differentiable fused attention: one derivative rule per fused kernel (ops/attention.h), each calling its
// backward kernel.
#include "autograd/variable.h"
#include "ops/attention.h"

namespace saccade {

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

}  // namespace saccade
