#pragma once
// The kernels of reductions, as every backend implements them: one row per kernel (row format:
// ops/backend.h), its contract above it. CPU: ops/cpu/reduce.cpp; CUDA: ops/cuda/reduce.cu. The ops that call
// them: ops/reduce.h. A contract header includes no op header (scripts/check_layers).
#include "ops/tensor.h"

namespace saccade {

/// The reductions along one dim (Backend::reduce); Max and Min also drive Backend::arg_reduce.
enum class ReduceOp { Sum, Max, Min, Prod };

}  // namespace saccade

#define SACCADE_REDUCE_KERNELS(K, K16)                                                                       \
  /* a contiguous, viewed as (outer, k, inner); out contiguous (outer, inner): op over k. */                 \
  K(reduce, (ReduceOp op, const Tensor& a, const Tensor& out, int64_t outer, int64_t k, int64_t inner),      \
    (op, a, out, outer, k, inner))                                                                           \
  /* a as reduce; values (outer, inner) and int64 indices (outer, inner) of the max (Max) or min (Min) along \
   * k; ties give the first index; NaN wins. */                                                              \
  K(arg_reduce,                                                                                              \
    (ReduceOp op, const Tensor& a, const Tensor& values, const Tensor& indices, int64_t outer, int64_t k,    \
     int64_t inner),                                                                                         \
    (op, a, values, indices, outer, k, inner))
