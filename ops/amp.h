#pragma once
// The two kernels of loss scaling (mixed-precision training, Micikevicius et al. 2018, section 3.2; PyTorch's
// torch.amp.GradScaler, which calls torch._amp_foreach_non_finite_check_and_unscale_ and
// torch._amp_update_scale_). Both work on the device and never read a value on the host: a training step
// checks all its gradients with one pass and one flag, and the scale is updated where it lives.
// nn::GradScaler (nn/grad_scaler.h) drives them.
#include <vector>

#include "ops/tensor.h"

namespace saccade::ops {

/// For every tensor g of `grads` (float32 or float64, any strides, all on found_inf's device):
/// g *= inv_scale in place, and found_inf = 1 when any element of any g is NaN or ±inf (found_inf is never
/// reset here: several calls accumulate into one flag). `found_inf` and `inv_scale`: float32 tensors of one
/// element on the grads' device. As torch._amp_foreach_non_finite_check_and_unscale_: the gradients are
/// multiplied even when a non-finite value is found (the step that follows is skipped anyway). One pass over
/// all gradients on the CPU; on CUDA, one kernel per group of up to 64 gradients of one dtype, no host
/// synchronisation. Throws saccade::Error naming the op for an undefined gradient or one of another dtype
/// (16-bit included), a gradient on another device, or a found_inf / inv_scale that is not a one-element
/// float32 tensor.
void amp_foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                               const Tensor& inv_scale);

/// One update of the loss scale (torch._amp_update_scale_), in place on the device:
///   found_inf != 0:  scale *= backoff_factor, growth_tracker = 0
///   otherwise:       growth_tracker += 1; when it reaches growth_interval, scale *= growth_factor (only if
///                    the product is finite) and growth_tracker = 0.
/// `scale`: float32 (1), `growth_tracker`: int64 (1), `found_inf`: float32 (1), all on one device.
/// Throws saccade::Error naming the op for other shapes, dtypes or devices, or growth_interval < 1.
void amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                       double growth_factor, double backoff_factor, int64_t growth_interval);

}  // namespace saccade::ops
