#pragma once
// FLOP and byte counts of the ops the profiler measures against the machine. A multiply-add is two FLOPs,
// as in PyTorch's torch.utils.flop_counter and the roofline literature. Only the products are counted (the
// additions of a bias, the softmax's exponentials are lower order).
#include <cstdint>

namespace saccade::profiler::flops {

/// A (m, k) x (k, n) product, batched `batch` times: 2·batch·m·n·k FLOPs (each of the m·n outputs takes k
/// multiply-adds). matmul, mm, bmm and linear all reduce to this (linear: m = rows of x, k = in, n = out).
inline int64_t gemm(int64_t batch, int64_t m, int64_t n, int64_t k) { return 2 * batch * m * n * k; }

/// conv2d of x (N, C_in, H, W) with weight (C_out, C_in/groups, kH, kW) giving (N, C_out, H_out, W_out):
/// 2·N·C_out·H_out·W_out·(C_in/groups)·kH·kW FLOPs (each output is a dot product over its window), i.e.
/// 2 · numel(output) · numel(weight) / C_out.
inline int64_t conv2d(int64_t output_numel, int64_t weight_numel, int64_t out_channels) {
  return out_channels > 0 ? 2 * output_numel * (weight_numel / out_channels) : 0;
}

/// Attention of q (B, H, Tq, D) against k (B, H, Tk, D) and v (B, H, Tk, Dv): the scores q·kᵀ (2·B·H·Tq·Tk·D)
/// and the weighted sum of values (2·B·H·Tq·Tk·Dv). A causal mask is not discounted (as torch's flop
/// counter): the figure is the dense products' work; a causal kernel that skips masked tiles shows up as
/// higher GFLOP/s.
inline int64_t attention(int64_t bh, int64_t tq, int64_t tk, int64_t d, int64_t dv) {
  return 2 * bh * tq * tk * d + 2 * bh * tq * tk * dv;
}

/// Backward of a product (GEMM, conv2d): one product of the forward's size per input gradient, so twice the
/// forward's FLOPs (when both inputs need a gradient, the usual case that this counts).
inline int64_t product_backward(int64_t forward_flops) { return 2 * forward_flops; }

/// Backward of attention (FlashAttention-2, Dao 2023, Algorithm 2): recompute the scores q·kᵀ, then dV =
/// Pᵀ·dO, dP = dO·vᵀ, dQ = dS·k, dK = dSᵀ·q: five products of the forward's two, 2.5 times its FLOPs.
inline int64_t attention_backward(int64_t forward_flops) { return forward_flops * 5 / 2; }

/// Bytes an op moves that is counted by bytes (elementwise, reductions, copies): each input read once and the
/// result written once. A view (the result shares an input's storage) moves nothing: 0.
inline int64_t bytes_moved(int64_t input_bytes, int64_t output_bytes) { return input_bytes + output_bytes; }

}  // namespace saccade::profiler::flops
