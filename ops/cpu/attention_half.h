#pragma once
// The 16-bit unit of the CPU flash attention (ops/cpu/attention_half.cpp): bfloat16 and float16 heads, run
// through the float32 tile loop (attention_loop.h). CpuBackend's flash_attention_forward / _backward
// (ops/cpu/attention.cpp) call these for 16-bit q, k, v; the arguments are theirs (ops/backend.h), lse
// float32.
#include "ops/backend.h"

namespace saccade::cpu::flash {

void forward_half(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionMask& mask,
                  double scale, const ops::AttentionDropout& dropout, const Tensor& out, const Tensor& lse);

void backward_half(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& gout,
                   const Tensor& lse, const ops::AttentionMask& mask, double scale,
                   const ops::AttentionDropout& dropout, const Tensor& gq, const Tensor& gk,
                   const Tensor& gv);

}  // namespace saccade::cpu::flash
