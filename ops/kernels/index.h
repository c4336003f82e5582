#pragma once
// The kernels of indexing, as every backend implements them: one row per kernel (row format: ops/backend.h),
// its contract above it. CPU: ops/cpu/index.cpp; CUDA: ops/cuda/index.cu. The ops that call them:
// ops/index.h. A contract header includes no op header (scripts/check_layers).
#include "ops/tensor.h"

#define SACCADE_INDEX_KERNELS(K, K16)                                                                       \
  /* index is contiguous int64, its bounds checked by the op. a viewed as (outer, n, inner) contiguous;     \
   * index (m); out (outer, m, inner): out[o,j,i] = a[o,index[j],i]. */                                     \
  K(index_select, (const Tensor& a, const Tensor& index, const Tensor& out, int64_t outer, int64_t inner),  \
    (a, index, out, outer, inner))                                                                          \
  /* out viewed as (outer, n, inner); src (outer, m, inner): out[o,index[j],i] += src[o,j,i]. 16 bits: the  \
   * sums of repeated indices (embedding's backward) accumulate in float32 and round once. */               \
  K16(index_add, (const Tensor& out, const Tensor& index, const Tensor& src, int64_t outer, int64_t inner), \
      (out, index, src, outer, inner), Kernel16::IndexAdd, InOut<0>)                                        \
  /* a (outer, n, inner), index and out (outer, m, inner): out[o,j,i] = a[o, index[o,j,i], i]. */           \
  K(gather, (const Tensor& a, const Tensor& index, const Tensor& out, int64_t outer, int64_t inner),        \
    (a, index, out, outer, inner))                                                                          \
  /* out (outer, n, inner), index and src (outer, m, inner): out[o, index[o,j,i], i] += src[o,j,i]. */      \
  K(scatter_add, (const Tensor& out, const Tensor& index, const Tensor& src, int64_t outer, int64_t inner), \
    (out, index, src, outer, inner))
