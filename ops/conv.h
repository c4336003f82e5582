#pragma once
// 2-d convolution (im2col + GEMM) and 2-d max / average pooling on NCHW tensors, with the backward helpers
// autograd uses. Float32 and float64; output sizes as PyTorch's (floor mode): OH = (H + 2 ph - kh) / sh + 1.
// No dilation, no groups, no ceil_mode.
#include <array>
#include <cstdint>

#include "ops/reduce.h"
#include "ops/tensor.h"

namespace saccade {

/// A (height, width) pair: kernel size, stride or padding.
using Size2 = std::array<int64_t, 2>;

}  // namespace saccade

namespace saccade::ops {

/// Cross-correlation of x (N, C, H, W) with weight (O, C, kh, kw), plus bias (O) when defined; zero padding
/// `padding` on each side. Returns (N, O, OH, OW). Computed as weight (O, C*kh*kw) @ im2col(x)
/// (N, C*kh*kw, OH*OW) (Chellapilla et al. 2006, "High performance convolutional neural networks for document
/// processing"). As torch.nn.functional.conv2d with dilation 1 and groups 1. Throws saccade::Error naming
/// "conv2d" and the shapes for wrong ranks, a channel or bias mismatch, non-float or mixed dtypes, a
/// non-positive stride, negative padding, or a kernel bigger than the padded input.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride = {1, 1},
              Size2 padding = {0, 0});

/// dL/dx (input_shape (N, C, H, W)) of y = conv2d(x, weight, b, stride, padding), given grad_out = dL/dy
/// (N, O, OH, OW) and weight (O, C, kh, kw): col2im(W^T @ grad_out). Bilinear in (grad_out, weight): the
/// adjoint of conv2d in x (torch.nn.grad.conv2d_input). Throws naming "conv2d_input_grad" for wrong ranks, a
/// channel or dtype mismatch, or grad_out not of the forward's output shape.
Tensor conv2d_input_grad(const Tensor& grad_out, const Tensor& weight, const Shape& input_shape,
                         Size2 stride = {1, 1}, Size2 padding = {0, 0});
/// dL/dW (weight_shape (O, C, kh, kw)) of y = conv2d(x, W, b, stride, padding), given x (N, C, H, W) and
/// grad_out = dL/dy (N, O, OH, OW): Σ_n grad_out[n] @ im2col(x)[n]^T. Bilinear in (x, grad_out)
/// (torch.nn.grad.conv2d_weight). Throws naming "conv2d_weight_grad" as conv2d_input_grad.
Tensor conv2d_weight_grad(const Tensor& x, const Tensor& grad_out, const Shape& weight_shape,
                          Size2 stride = {1, 1}, Size2 padding = {0, 0});

/// Gradients of conv2d with respect to its input (N, C, H, W), weight (O, C, kh, kw) and bias (O).
struct Conv2dGrads {
  Tensor grad_input, grad_weight, grad_bias;
};
/// Given grad_out = dL/dy (N, O, OH, OW) of y = conv2d(x, weight, b, stride, padding): grad_input =
/// col2im(W^T @ grad_out), grad_weight = Σ_n grad_out[n] @ im2col(x)[n]^T, grad_bias = Σ_{n,oh,ow} grad_out
/// (conv2d_input_grad, conv2d_weight_grad and a sum). Each is computed only when its need_* flag is set
/// (otherwise undefined). Throws naming "conv2d_backward" when grad_out does not have the forward's output
/// shape.
Conv2dGrads conv2d_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, Size2 stride,
                            Size2 padding, bool need_input = true, bool need_weight = true,
                            bool need_bias = true);

/// Max over kh x kw windows of x (N, C, H, W) -> values (N, C, OH, OW) and int64 indices (N, C, OH, OW), each
/// the flat position h * W + w of its max within its (H, W) plane (as torch.nn.functional.max_pool2d with
/// return_indices=True). `stride` {0, 0} means `kernel`. Padding counts as -inf and may be at most half the
/// kernel; NaN wins. Throws naming "max_pool2d" and the shape for a non-4-d or non-float x, non-positive
/// kernel or stride, bad padding, or a kernel bigger than the padded input.
ValuesIndices max_pool2d(const Tensor& x, Size2 kernel, Size2 stride = {0, 0}, Size2 padding = {0, 0});
/// dL/dx (input_shape) of max_pool2d: each grad_out element is added at its index. grad_out and indices
/// (N, C, OH, OW). Throws naming "max_pool2d_backward" for mismatched shapes or non-int64 indices.
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_shape);

/// Mean over kh x kw windows of x (N, C, H, W) -> (N, C, OH, OW); zero padding counts in the divisor (as
/// torch.nn.functional.avg_pool2d with count_include_pad=True). `stride` {0, 0} means `kernel`. Errors as
/// max_pool2d, naming "avg_pool2d".
Tensor avg_pool2d(const Tensor& x, Size2 kernel, Size2 stride = {0, 0}, Size2 padding = {0, 0});
/// dL/dx (input_shape) of avg_pool2d with the same kernel, stride and padding: each grad_out element spread
/// evenly over its window. Throws naming "avg_pool2d_backward" when grad_out has the wrong shape.
Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_shape, Size2 kernel,
                           Size2 stride = {0, 0}, Size2 padding = {0, 0});

}  // namespace saccade::ops
