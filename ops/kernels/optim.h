#pragma once
// The kernels of the fused optimizer steps, as every backend implements them: one row per kernel (row format:
// ops/backend.h), its contract above it. CPU: ops/cpu/optim.cpp; CUDA: ops/cuda/optim.cu. The ops that call
// them: ops/optim.h. A contract header includes no op header (scripts/check_layers).
#include <vector>

#include "ops/tensor.h"

namespace saccade::ops {

/// The hyper-parameters of one fused Adam/AdamW update (torch.optim.Adam / AdamW; Kingma & Ba 2015,
/// Algorithm 1; Loshchilov & Hutter 2019, Algorithm 2).
struct AdamStepArgs {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;  ///< AdamW: p *= 1 - lr · weight_decay; Adam: g += weight_decay · p
};

}  // namespace saccade::ops

#define SACCADE_OPTIM_KERNELS(K, K16)                                                                        \
  /* Lists of one length, entry i of one shape and dtype (float32 or float64), all contiguous, numel > 0;    \
   * step_size[i] = lr / (1 - β1^t_i), bc2_sqrt[i] = √(1 - β2^t_i). ops::adam_foreach_step_'s update. */ \
  K(adam_step,                                                                                               \
    (const std::vector<Tensor>& params, const std::vector<Tensor>& grads,                                    \
     const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,                            \
     const std::vector<double>& step_size, const std::vector<double>& bc2_sqrt,                              \
     const ops::AdamStepArgs& args),                                                                         \
    (params, grads, exp_avgs, exp_avg_sqs, step_size, bc2_sqrt, args))                                       \
  /* tensors: contiguous float32/float64, numel > 0; out: float64 (), set to Σ |t|^p (max |t| for p = inf). \
   */                                                                                                        \
  K(pow_sum, (const std::vector<Tensor>& tensors, double p, const Tensor& out), (tensors, p, out))           \
  /* tensors: contiguous floating, numel > 0; scale: float64 (1) on their device. t *= scale. */             \
  K(foreach_mul, (const std::vector<Tensor>& tensors, const Tensor& scale), (tensors, scale))
