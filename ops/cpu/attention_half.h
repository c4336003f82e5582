#pragma once
// The 16-bit unit of the CPU flash attention (ops/cpu/attention_half.cpp): bfloat16 and float16 heads, run
// through the float32 tile loop (attention_loop.h). CpuBackend's flash_attention_forward / _backward
// (ops/cpu/attention.cpp) call these for 16-bit q, k, v; the arguments are theirs (ops/backend.h), lse
// float32.
#include "ops/backend.h"

namespace saccade::cpu::flash {

/// flash_attention_forward for bfloat16 or float16 q (B, H, Tq, D), k (B, H_kv, Tk, D), v (B, H_kv, Tk, Dv):
/// writes out (B, H, Tq, Dv) of q's dtype and lse (B, H, Tq) float32 (FlashAttention, Dao 2022 and 2023;
/// grouped-query heads, H = G·H_kv, as in attention.cpp).
void forward_half(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionMask& mask,
                  double scale, const ops::AttentionDropout& dropout, const Tensor& out, const Tensor& lse);

/// flash_attention_backward for 16-bit heads (shapes as forward_half; gout like out): writes gq, gk, gv of
/// q's, k's and v's shapes and dtype, each rounded once from float32 (gk, gv summed over each group first).
void backward_half(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& gout,
                   const Tensor& lse, const ops::AttentionMask& mask, double scale,
                   const ops::AttentionDropout& dropout, const Tensor& gq, const Tensor& gk,
                   const Tensor& gv);

}  // namespace saccade::cpu::flash
