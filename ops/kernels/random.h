#pragma once
// The kernels of random numbers (and dropout), as every backend implements them: one row per kernel (row
// format: ops/backend.h), its contract above it. CPU: ops/cpu/random.cpp; CUDA: ops/cuda/random.cu. The ops
// that call them: ops/random.h, and ops/nn.h (dropout). A contract header includes no op header
// (scripts/check_layers).
#include "ops/tensor.h"

#define SACCADE_RANDOM_KERNELS(K, K16)                                                                     \
  /* Counter-based Philox4x32-10 (ops/philox.h); element i uses counter offset + i. out (contiguous float) \
   * = U[low, high). 16 bits: the same counters give the float32 draws, each rounded once. */              \
  K16(uniform, (const Tensor& out, uint64_t seed, uint64_t offset, double low, double high),               \
      (out, seed, offset, low, high), Kernel16::Uniform, OutFrom<0>)                                       \
  /* out (contiguous float) = N(mean, std^2) by Box-Muller; 16 bits as uniform. */                         \
  K16(normal, (const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std),                \
      (out, seed, offset, mean, std), Kernel16::Normal, OutFrom<0>)

/// The kernels a backend may leave out (Backend::fuses, FusedKernel): without one, the op composes the same
/// numbers from other ops (ops::dropout_composed, ops/nn.cpp). Rows as above.
#define SACCADE_RANDOM_FUSED_KERNELS(K, K16)                                                                \
  /* Inverted dropout of contiguous float x: mask[i] = 1/(1-p) in x's dtype where u_i >= p (u_i = U[0, 1)   \
   * of counter offset + i as `uniform` draws it, compared in x's dtype), else 0; out = x ⊙ mask (out and \
   * mask contiguous, x's shape and dtype). The CPU's makes it in one pass (ops/cpu/random.cpp); CUDA has   \
   * none (the op composes `uniform` with elementwise ops: every device draws the same mask). 16 bits       \
   * widened: the draws are float32's (compared with p in float32); out and the mask are rounded once. */   \
  K16(dropout,                                                                                              \
      (const Tensor& x, uint64_t seed, uint64_t offset, double p, const Tensor& out, const Tensor& mask),   \
      (x, seed, offset, p, out, mask), Kernel16::Dropout, OutFrom<4>)
