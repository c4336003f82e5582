#pragma once
// Differentiable fused attention: one derivative rule that calls the backward kernel (ops/attention.h).
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

}  // namespace saccade
