#pragma once
// The kernels of loss scaling, as every backend implements them: one row per kernel (row format:
// ops/backend.h), its contract above it. CPU: ops/cpu/amp.cpp; CUDA: ops/cuda/amp.cu. The ops that call them:
// ops/amp.h. A contract header includes no op header (scripts/check_layers).
#include "ops/tensor.h"

#define SACCADE_AMP_KERNELS(K, K16)                                                                         \
  /* grads: contiguous floating tensors, numel > 0; found_inf, inv_scale: float32 (1). Every g *= inv_scale \
   * in place; found_inf = 1 when any element is NaN or ±inf (left as it is otherwise). Read on the device \
   * only. */                                                                                               \
  K(amp_non_finite_check_and_unscale,                                                                       \
    (const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale),                   \
    (grads, found_inf, inv_scale))                                                                          \
  /* scale float32 (1), growth_tracker int64 (1), found_inf float32 (1): ops::amp_update_scale_'s rule. */  \
  K(amp_update_scale,                                                                                       \
    (const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,      \
     double backoff_factor, int64_t growth_interval),                                                       \
    (scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval))
