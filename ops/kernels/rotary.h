#pragma once
// The kernels of the rotary position embedding, as every backend implements them: one row per kernel (row
// format: ops/backend.h), its contract above it. CPU: ops/cpu/rotary.cpp; CUDA: ops/cuda/rotary.cu. The ops
// that call them: ops/rotary.h. A contract header includes no op header (scripts/check_layers).
#include "ops/tensor.h"

#define SACCADE_ROTARY_KERNELS(K, K16)                                                                     \
  /* x, out (N, T, D) floating, cos, sin (T, R/2) compute_dtype(x) (f32 for 16 bits), contiguous: out = x  \
   * with the first R dims of each row rotated (pairs (i, i + R/2), or (2i, 2i + 1) when `interleaved`) by \
   * the angles of its position t, by their negatives when `inverse`; the rest copied. One pass:           \
   * ops/cpu/rotary.cpp, ops/cuda/rotary.cu (the composed reference is autograd's                          \
   * rotary_embedding_composed). */                                                                        \
  K16(rotary_embedding,                                                                                    \
      (const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out, bool interleaved,         \
       bool inverse),                                                                                      \
      (x, cos, sin, out, interleaved, inverse), Kernel16::RotaryEmbedding, OutFrom<3>)
