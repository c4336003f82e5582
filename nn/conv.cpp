#include "nn/conv.h"

#include <functional>

#include "autograd/functions/conv.h"
#include "autograd/functions/shape.h"
#include "nn/init.h"

namespace saccade::nn {

// Runs f on x made 4-d: an unbatched (C, H, W) input gets a batch dim of 1, removed again from the result.
static Variable batched(const Variable& x, const char* module,
                        const std::function<Variable(const Variable&)>& f) {
  SACCADE_CHECK(x.defined(), "{}: got an undefined input", module);
  SACCADE_CHECK(x.dim() == 3 || x.dim() == 4, "{}: expected input (N, C, H, W) or (C, H, W), got shape {}",
                module, x.shape());
  if (x.dim() == 4) return f(x);
  return squeeze(f(unsqueeze(x, 0)), 0);
}

// Runs f, prefixing any error it throws with the module's name (the op's own message follows).
static Variable named(const char* module, const std::function<Variable()>& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", module, e.what()));
  }
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride, Size2 padding,
               bool with_bias, Generator* gen)
    : UnaryModule("Conv2d"),
      in_channels_(in_channels),
      out_channels_(out_channels),
      stride_(stride),
      padding_(padding) {
  ErrorScope scope(name());
  SACCADE_CHECK(
      in_channels > 0 && out_channels > 0 && kernel_size[0] > 0 && kernel_size[1] > 0,
      "Conv2d: expected positive sizes, got in_channels = {}, out_channels = {}, kernel_size = ({}, {})",
      in_channels, out_channels, kernel_size[0], kernel_size[1]);
  SACCADE_CHECK(
      stride[0] > 0 && stride[1] > 0 && padding[0] >= 0 && padding[1] >= 0,
      "Conv2d: expected positive strides and non-negative padding, got stride ({}, {}), padding ({}, {})",
      stride[0], stride[1], padding[0], padding[1]);
  Tensor w = Tensor::empty({out_channels, in_channels, kernel_size[0], kernel_size[1]});
  Tensor b = with_bias ? Tensor::empty({out_channels}) : Tensor();
  init::linear_default_init_(w, b, gen);  // torch's Conv reset_parameters is Linear's scheme
  weight = register_parameter("weight", w);
  if (with_bias) bias = register_parameter("bias", b);
}

// x: (N, C, H, W), weight: (O, C, kh, kw), bias: (O) -> (N, O, OH, OW)
Variable Conv2d::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  return batched(x, "Conv2d", [&](const Variable& x4) {
    SACCADE_CHECK(x4.size(1) == in_channels_,
                  "Conv2d: expected {} input channels (in_channels), got input {}", in_channels_, x.shape());
    return named("Conv2d", [&] { return conv2d(x4, weight, bias, stride_, padding_); });
  });
}

MaxPool2d::MaxPool2d(Size2 kernel_size, Size2 stride, Size2 padding)
    : UnaryModule("MaxPool2d"), kernel_size_(kernel_size), stride_(stride), padding_(padding) {}

// x: (N, C, H, W) -> (N, C, OH, OW)
Variable MaxPool2d::forward(const Variable& x) {
  ErrorScope scope(name());
  return batched(x, "MaxPool2d", [&](const Variable& x4) {
    return named("MaxPool2d", [&] { return max_pool2d(x4, kernel_size_, stride_, padding_); });
  });
}

AvgPool2d::AvgPool2d(Size2 kernel_size, Size2 stride, Size2 padding)
    : UnaryModule("AvgPool2d"), kernel_size_(kernel_size), stride_(stride), padding_(padding) {}

// x: (N, C, H, W) -> (N, C, OH, OW)
Variable AvgPool2d::forward(const Variable& x) {
  ErrorScope scope(name());
  return batched(x, "AvgPool2d", [&](const Variable& x4) {
    return named("AvgPool2d", [&] { return avg_pool2d(x4, kernel_size_, stride_, padding_); });
  });
}

}  // namespace saccade::nn
