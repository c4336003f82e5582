#pragma once
// Conv2d, MaxPool2d and AvgPool2d (torch.nn.Conv2d / MaxPool2d / AvgPool2d) on NCHW inputs; an unbatched
// (C, H, W) input gives an unbatched result, as torch. No dilation, no groups, no ceil_mode (see ops/conv.h).
#include <cstdint>

#include "nn/unary_module.h"
#include "ops/conv.h"
#include "ops/random.h"

namespace saccade::nn {

/// 2-d cross-correlation: y[n, o] = bias[o] + Σ_c weight[o, c] ⋆ x[n, c], zero padding `padding` on each side
/// (torch.nn.Conv2d with dilation 1, groups 1, padding_mode 'zeros').
///
/// Parameters (torch's names and layouts): `weight` (out_channels, in_channels, kh, kw), `bias`
/// (out_channels) when `bias`. Default init as torch: kaiming_uniform(a = √5), i.e. U(±1/√fan_in) with fan_in
/// = in_channels·kh·kw, bias U(±1/√fan_in), from `gen`.
/// forward: x (N, in_channels, H, W) or (in_channels, H, W) -> (N, out_channels, OH, OW) (or unbatched), with
/// OH = (H + 2 ph - kh) / sh + 1 (floor), likewise OW.
/// Throws saccade::Error naming "Conv2d" for non-positive sizes or strides, negative padding, an input that
/// is not 3-d or 4-d, a channel count other than in_channels, or a kernel bigger than the padded input.
class Conv2d : public UnaryModule {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride = {1, 1},
         Size2 padding = {0, 0}, bool bias = true, Generator* gen = nullptr);
  /// Square kernel, stride and padding.
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, bool bias = true, Generator* gen = nullptr)
      : Conv2d(in_channels, out_channels, Size2{kernel_size, kernel_size}, Size2{stride, stride},
               Size2{padding, padding}, bias, gen) {}
  Variable forward(const Variable& x) override;

  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  Variable weight, bias;  // bias undefined when built with bias = false

 private:
  int64_t in_channels_, out_channels_;
  Size2 stride_, padding_;  // the kernel size is the weight's
};

/// Max over each kh×kw window (torch.nn.MaxPool2d; padding counts as -inf). `stride` {0, 0} (the default)
/// means kernel_size, as torch's stride=None. The gradient goes to each window's maximum.
/// forward: x (N, C, H, W) or (C, H, W) -> (N, C, OH, OW) (or unbatched), OH = (H + 2 ph - kh) / sh + 1.
/// Throws saccade::Error naming "MaxPool2d" for an input that is not 3-d or 4-d, or bad sizes (as
/// ops::max_pool2d, whose message follows).
class MaxPool2d : public UnaryModule {
 public:
  explicit MaxPool2d(Size2 kernel_size, Size2 stride = {0, 0}, Size2 padding = {0, 0});
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0)
      : MaxPool2d(Size2{kernel_size, kernel_size}, Size2{stride, stride}, Size2{padding, padding}) {}
  Variable forward(const Variable& x) override;

 private:
  Size2 kernel_size_, stride_, padding_;
};

/// Mean over each kh×kw window, zero padding counted in the divisor (torch.nn.AvgPool2d with
/// count_include_pad=True). `stride` {0, 0} means kernel_size. Shapes and errors as MaxPool2d, naming
/// "AvgPool2d".
class AvgPool2d : public UnaryModule {
 public:
  explicit AvgPool2d(Size2 kernel_size, Size2 stride = {0, 0}, Size2 padding = {0, 0});
  explicit AvgPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0)
      : AvgPool2d(Size2{kernel_size, kernel_size}, Size2{stride, stride}, Size2{padding, padding}) {}
  Variable forward(const Variable& x) override;

 private:
  Size2 kernel_size_, stride_, padding_;
};

}  // namespace saccade::nn
