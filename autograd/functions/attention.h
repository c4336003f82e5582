#pragma once
// Differentiable fused attention: one derivative rule per fused kernel (ops/attention.h), each calling its
// backward kernel.
#include "autograd/variable.h"
#include "ops/attention.h"

namespace saccade {

/// out = dropout(softmax(q kᵀ · scale, masked)) v through the fused kernel (FlashAttention, Dao et al. 2022),
/// differentiable in q, k and v. q (B, ..., Tq, D), k (B, ..., Tk, D), v (B, ..., Tk, Dv) -> (B, ..., Tq,
/// Dv); `mask` from ops::attention_mask. Dropout p in [0, 1) is applied when `training`, drawing B·…·Tq·Tk
/// counters from `gen` (the default generator when null) exactly as ops::dropout on the (B, ..., Tq, Tk)
/// weights would, so that the composed path with the same generator state gives the same result.
/// Throws saccade::Error naming "flash_attention" for mismatched shapes or dtypes, or a bad p.
Variable flash_attention(const Variable& q, const Variable& k, const Variable& v,
                         const ops::AttentionMask& mask, double scale, double dropout_p = 0.0,
                         bool training = false, Generator* gen = nullptr);

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
