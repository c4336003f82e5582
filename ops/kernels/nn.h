#pragma once
// The kernels of the neural-network primitives (softmax, layer norm, RMSNorm, GRU gates), as every backend
// implements them: one row per kernel (row format: ops/backend.h), its contract above it. CPU: ops/cpu/nn.cpp
// and rnn.cpp; CUDA: ops/cuda/nn.cu. The ops that call them: ops/nn.h. A contract header includes no op
// header (scripts/check_layers).
#include "ops/tensor.h"

#define SACCADE_NN_KERNELS(K, K16)                                                                                       \
  /* x, out: (rows, n), contiguous. Softmax (or log-softmax) of each row. A row that is all -inf gives                   \
   * zeros. */                                                                                                           \
  K16(softmax, (const Tensor& x, const Tensor& out, bool log), (x, out, log), Kernel16::Softmax, OutFrom<1>)             \
  /* y = softmax(x) (or log_softmax), gy = dL/dy, gx = dL/dx; all (rows, n), contiguous. */                              \
  K16(softmax_backward, (const Tensor& y, const Tensor& gy, const Tensor& gx, bool log), (y, gy, gx, log),               \
      Kernel16::SoftmaxBackward, OutFrom<2>)                                                                             \
  /* Layer norm (ops::layer_norm_forward). x, out: (rows, n); weight, bias: (n) or undefined; mean, rstd:                \
   * (rows), compute_dtype(x) (float32 for 16-bit x), written; all contiguous:                                           \
   * out = (x - μ) · rstd · w + b, μ = mean(x), rstd = 1 / sqrt(var(x) + eps) (biased variance). */                  \
  K16(layer_norm,                                                                                                        \
      (const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,                         \
       const Tensor& mean, const Tensor& rstd),                                                                          \
      (x, weight, bias, eps, out, mean, rstd), Kernel16::LayerNorm, OutFrom<4>)                                          \
  /* gy, x, gx (rows, n); mean, rstd as layer_norm wrote them; gweight, gbias (n) or undefined (then not                 \
   * computed); all contiguous: gx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ ⊙ x̂)), x̂ = (x - μ) rstd, ĝ = gy ⊙ w,    \
   * gweight = Σ_rows gy ⊙ x̂, gbias = Σ_rows gy. */                                                                \
  K16(layer_norm_backward,                                                                                               \
      (const Tensor& gy, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,                  \
       const Tensor& gx, const Tensor& gweight, const Tensor& gbias),                                                    \
      (gy, x, weight, mean, rstd, gx, gweight, gbias), Kernel16::LayerNormBackward, OutFrom<5>)                          \
  /* RMSNorm (ops::rms_norm_forward). x, out: (rows, n); weight: (n) or undefined; rstd: (rows),                         \
   * compute_dtype(x), written; all contiguous: out = x · rstd · w, rstd = 1 / sqrt(mean(x²) + eps). */               \
  K16(rms_norm, (const Tensor& x, const Tensor& weight, double eps, const Tensor& out, const Tensor& rstd),              \
      (x, weight, eps, out, rstd), Kernel16::RmsNorm, OutFrom<3>)                                                        \
  /* gy, x, gx (rows, n); rstd as rms_norm wrote it; gweight (n) or undefined (then not computed); all                   \
   * contiguous: gx = rstd (ĝ - x̂ mean(ĝ ⊙ x̂)), x̂ = x · rstd, ĝ = gy ⊙ w, gweight = Σ_rows gy ⊙ x̂. */ \
  K16(rms_norm_backward,                                                                                                 \
      (const Tensor& gy, const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& gx,                    \
       const Tensor& gweight),                                                                                           \
      (gy, x, weight, rstd, gx, gweight), Kernel16::RmsNormBackward, OutFrom<4>)

/// The kernels a backend may leave out (Backend::fuses, FusedKernel): without one, the op composes the same
/// numbers from other ops (ops::gru_gates_composed, ops/nn.cpp). Rows as above.
#define SACCADE_NN_FUSED_KERNELS(K, K16)                                                                     \
  /* GRU gates (ops::gru_gates). gi, gh, saved: (B, 3H) contiguous, h, out: (B, H) contiguous, one float     \
   * dtype (16-bit ones, which may meet float32 under autocast, are widened): out = h', saved = [r, z, n] as \
   * ops::gru_gates defines them. The CPU's (ops/cpu/rnn.cpp) makes them in one pass; CUDA has none. */      \
  K16(gru_gates,                                                                                             \
      (const Tensor& gi, const Tensor& gh, const Tensor& h, const Tensor& out, const Tensor& saved),         \
      (gi, gh, h, out, saved), Kernel16::GruGates, OutFrom<3>)                                               \
  /* gy, h, gx_h: (B, H), gh, saved, ggi, ggh: (B, 3H), all contiguous, one float dtype (16-bit ones         \
   * widened): the gradients of ops::gru_gates_backward into ggi, ggh and gx_h. CPU: one pass                \
   * (ops/cpu/rnn.cpp); CUDA: none. */                                                                       \
  K16(gru_gates_backward,                                                                                    \
      (const Tensor& gy, const Tensor& gh, const Tensor& h, const Tensor& saved, const Tensor& ggi,          \
       const Tensor& ggh, const Tensor& gx_h),                                                               \
      (gy, gh, h, saved, ggi, ggh, gx_h), Kernel16::GruGatesBackward, OutFrom<4>)                            \
  /* The cross-entropy's rows (ops::cross_entropy_rows). logits (N, C) contiguous float (16 bits read as     \
   * they are), target (N) int64 contiguous, each in [0, C) or ignore_index (checked by the op); lse,        \
   * picked (N) compute_dtype(logits), written: lse_i = log Σ_c e^(x_ic), picked_i = x_i[t_i] (0 on an      \
   * ignored row). The CPU's reads each row once for its max and once for its sum; CUDA: none. */            \
  K16(cross_entropy_rows,                                                                                    \
      (const Tensor& logits, const Tensor& target, int64_t ignore_index, const Tensor& lse,                  \
       const Tensor& picked),                                                                                \
      (logits, target, ignore_index, lse, picked), Kernel16::CrossEntropyRows, OutFrom<3>)                   \
  /* Its gradient: logits, target as above, lse as written, scale (N) compute dtype (the loss's gradient of  \
   * each row: g, g / count or g_i); gx (N, C) logits' dtype, written: gx_ic = scale_i (e^(x_ic - lse_i) -   \
   * [c = t_i]), rows whose target is ignore_index 0. One pass over each row; CUDA: none. */                 \
  K16(cross_entropy_rows_backward,                                                                           \
      (const Tensor& logits, const Tensor& target, int64_t ignore_index, const Tensor& lse,                  \
       const Tensor& scale, const Tensor& gx),                                                               \
      (logits, target, ignore_index, lse, scale, gx), Kernel16::CrossEntropyRowsBackward, OutFrom<5>)
