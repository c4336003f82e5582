#pragma once
// Differentiable 2-d convolution and pooling on NCHW Variables. Shapes, dtypes and errors as in ops/conv.h.
#include "autograd/variable.h"
#include "ops/conv.h"

namespace saccade {

/// x (N, C, H, W) * weight (O, C, kh, kw) + bias (O) or undefined -> (N, O, OH, OW); as
/// torch.nn.functional.conv2d with dilation 1 and groups 1. Differentiable in x, weight and bias.
Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias = Variable(),
                Size2 stride = {1, 1}, Size2 padding = {0, 0});

/// Max pooling of x (N, C, H, W) -> (N, C, OH, OW); the gradient goes to each window's max (the first one at
/// ties). `stride` {0, 0} means `kernel`. As torch.nn.functional.max_pool2d; use ops::max_pool2d for the
/// indices.
Variable max_pool2d(const Variable& x, Size2 kernel, Size2 stride = {0, 0}, Size2 padding = {0, 0});

/// Average pooling of x (N, C, H, W) -> (N, C, OH, OW), zero padding counted in the divisor; as
/// torch.nn.functional.avg_pool2d with count_include_pad=True.
Variable avg_pool2d(const Variable& x, Size2 kernel, Size2 stride = {0, 0}, Size2 padding = {0, 0});

}  // namespace saccade
