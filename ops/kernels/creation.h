#pragma once
// The kernels of copying, filling and ranges, as every backend implements them: one row per kernel (row
// format: ops/backend.h), its contract above it. CPU: ops/cpu/memory.cpp; CUDA: ops/cuda/memory.cu. The ops
// that call them: ops/creation.h. A contract header includes no op header (scripts/check_layers).
#include "ops/tensor.h"

#define SACCADE_CREATION_KERNELS(K, K16)                                                           \
  /* dst[i] = cast(src[i]); same shape, any strides, any dtypes (both on this device). Tensor::to, \
   * contiguous and every op that writes into a view end here. */                                  \
  K(copy, (const Tensor& src, const Tensor& dst), (src, dst))                                      \
  /* every element of `out` (any strides) = value. */                                              \
  K(fill, (const Tensor& out, double value), (out, value))                                         \
  /* out (contiguous, numel n): out[i] = start + i * step. */                                      \
  K(arange, (const Tensor& out, double start, double step), (out, start, step))
