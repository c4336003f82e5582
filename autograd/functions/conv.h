#pragma once
// Differentiable 2-d convolution and pooling on NCHW Variables. Shapes, dtypes and errors as in ops/conv.h.
#include "autograd/op_info.h"
#include "autograd/variable.h"
#include "ops/conv.h"

namespace saccade {

// The rows of facts of this file's ops (autograd/op_info.h; autograd/op_table.h lists every row once).
namespace op_info {

inline constexpr OpInfo conv2d = with_half(
    with_cost(with_autocast(row("conv2d", "conv.cpp"), Lower, Lower), cost::kConv2d), Widened, Widened);
inline constexpr OpInfo conv2d_input_grad = with_half(row("conv2d_input_grad", "conv.cpp"), Widened, Widened);
inline constexpr OpInfo conv2d_weight_grad =
    with_half(row("conv2d_weight_grad", "conv.cpp"), Widened, Widened);
inline constexpr OpInfo max_pool2d = with_kernel16(row("max_pool2d", "conv.cpp"), Kernel16::MaxPool2d);
inline constexpr OpInfo max_pool2d_backward =
    with_kernel16(row("max_pool2d_backward", "conv.cpp"), Kernel16::MaxPool2dBackward);
inline constexpr OpInfo avg_pool2d = with_kernel16(row("avg_pool2d", "conv.cpp"), Kernel16::AvgPool2d);
inline constexpr OpInfo avg_pool2d_backward =
    with_kernel16(row("avg_pool2d_backward", "conv.cpp"), Kernel16::AvgPool2dBackward);

}  // namespace op_info

/// x (N, C, H, W) * weight (O, C, kh, kw) + bias (O) or undefined -> (N, O, OH, OW); as
/// torch.nn.functional.conv2d with dilation 1 and groups 1. Differentiable in x, weight and bias.
Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias = Variable(),
                Size2 stride = {1, 1}, Size2 padding = {0, 0});

/// dL/dx (input_shape (N, C, H, W)) of conv2d by weight (O, C, kh, kw) with `stride` and `padding`, given
/// grad_out (N, O, OH, OW): ops::conv2d_input_grad, differentiable in grad_out and weight (the double
/// backward of conv2d, as PyTorch's convolution_backward). Errors as ops::conv2d_input_grad.
Variable conv2d_input_grad(const Variable& grad_out, const Variable& weight, const Shape& input_shape,
                           Size2 stride = {1, 1}, Size2 padding = {0, 0});
/// dL/dW (weight_shape (O, C, kh, kw)) of conv2d of x (N, C, H, W), given grad_out (N, O, OH, OW):
/// ops::conv2d_weight_grad, differentiable in x and grad_out. Errors as ops::conv2d_weight_grad.
Variable conv2d_weight_grad(const Variable& x, const Variable& grad_out, const Shape& weight_shape,
                            Size2 stride = {1, 1}, Size2 padding = {0, 0});

/// Max pooling of x (N, C, H, W) -> (N, C, OH, OW); the gradient goes to each window's max (the first one at
/// ties). `stride` {0, 0} means `kernel`. As torch.nn.functional.max_pool2d; use ops::max_pool2d for the
/// indices.
Variable max_pool2d(const Variable& x, Size2 kernel, Size2 stride = {0, 0}, Size2 padding = {0, 0});

/// Average pooling of x (N, C, H, W) -> (N, C, OH, OW), zero padding counted in the divisor; as
/// torch.nn.functional.avg_pool2d with count_include_pad=True.
Variable avg_pool2d(const Variable& x, Size2 kernel, Size2 stride = {0, 0}, Size2 padding = {0, 0});

/// dL/dx (input_shape (N, C, H, W)) of max_pool2d, given grad_out and the forward's indices (N, C, OH, OW):
/// ops::max_pool2d_backward, differentiable in grad_out (its gradient gathers at the indices). Errors as
/// ops::max_pool2d_backward.
Variable max_pool2d_backward(const Variable& grad_out, const Tensor& indices, const Shape& input_shape);

/// dL/dx (input_shape (N, C, H, W)) of avg_pool2d with the same kernel, stride and padding, given grad_out
/// (N, C, OH, OW): ops::avg_pool2d_backward, differentiable in grad_out (its gradient is avg_pool2d). Errors
/// as ops::avg_pool2d_backward.
Variable avg_pool2d_backward(const Variable& grad_out, const Shape& input_shape, Size2 kernel,
                             Size2 stride = {0, 0}, Size2 padding = {0, 0});

}  // namespace saccade
