#pragma once
// The fused kernels of the optimizers: one pass over all of a model's parameters instead of a dozen small
// ops per parameter (PyTorch's torch._fused_adamw_ and torch._foreach_norm / _foreach_mul_, which
// torch.optim.AdamW(fused=True) and torch.nn.utils.clip_grad_norm_ call). On a GPU a small model's step is
// bound by kernel launches, not arithmetic: examples/gpt's AdamW composed from saccade:: ops launches 11
// kernels for each of its 68 parameters; fused, one launch per group of up to 48 tensors. nn::Adam
// (AdamOptions::fused) and nn::clip_grad_norm_ drive them; the composed versions stay there as the readable
// reference that the tests hold these to.
#include <vector>

#include "ops/kernels/optim.h"
#include "ops/tensor.h"

namespace saccade::ops {

/// One Adam (or AdamW) update of every tensor i, in place, in one pass that reads and writes each element
/// once, in the parameters' dtype:
///   AdamW: p *= 1 - lr·wd                      Adam: g = grad + wd·p
///   m = β1·m + (1-β1)·g,   v = β2·v + (1-β2)·g²
///   p -= lr / (1 - β1^t) · m / (√v / √(1 - β2^t) + eps),   t = steps[i] (the step count after this one, ≥ 1)
/// params, grads, exp_avgs, exp_avg_sqs: equally long lists; entry i of each has one shape, one dtype
/// (float32 or float64) and one device (all entries on one device); params and the two states contiguous
/// (grads may be any strides). The same arithmetic, in the same order, as the composed per-parameter update
/// in nn/optim.cpp, so the two agree to rounding (fused multiply-adds aside).
/// Throws saccade::Error naming the op for lists of different lengths, an undefined tensor, mismatched
/// shapes, dtypes or devices, a non-float dtype, a non-contiguous parameter or state, or a step < 1.
void adam_foreach_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                        const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                        const std::vector<int64_t>& steps, const AdamStepArgs& args);

/// Σ_i Σ_j |t_ij|^p over all tensors together (p = 2: the sum of squares), or max_ij |t_ij| when p is +inf,
/// as a one-element float64 tensor on the tensors' device, without reading anything on the host: its p-th
/// root is the norm of the concatenation (torch.linalg.vector_norm of torch._foreach_norm's results).
/// Sums in float64, in a fixed order (the same result for any thread count). Empty lists and empty tensors
/// add nothing (0). Throws saccade::Error naming the op for p <= 0, an undefined or non-float tensor, or
/// tensors on two devices.
Tensor foreach_pow_sum(const std::vector<Tensor>& tensors, double p);

/// t *= scale for every tensor t (in place, any float dtype and strides), with `scale` a one-element tensor
/// on their device read there (torch._foreach_mul_ with a tensor scalar): no host synchronisation.
/// Throws saccade::Error naming the op for an undefined or non-float tensor, a scale of another size, or
/// tensors on two devices.
void foreach_mul_(const std::vector<Tensor>& tensors, const Tensor& scale);

}  // namespace saccade::ops
