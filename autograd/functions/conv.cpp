// Derivative rules of 2-d convolution and pooling, each beside its forward. `g` is dL/d(output).
#include "autograd/functions/conv.h"

#include "autograd/autocast.h"
#include "autograd/function.h"

namespace saccade {

using Grads = std::vector<Variable>;

Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias, Size2 stride,
                Size2 padding) {
  check_defined("conv2d", x, weight);
  SACCADE_AUTOCAST("conv2d", conv2d, x, weight, bias, stride, padding);
  // x: (N, C, H, W), weight: (O, C, kh, kw), bias: (O) -> (N, O, OH, OW)
  // y = W ⋆ x + b, i.e. y[n] = W (O, C*kh*kw) @ im2col(x)[n] + b:
  //   dx = col2im(W^T @ g[n]),  dW = Σ_n g[n] @ im2col(x)[n]^T,  db = Σ_{n,oh,ow} g
  Tensor y = ops::conv2d(x.data(), weight.data(), bias.defined() ? bias.data() : Tensor(), stride, padding);
  const bool gx = x.requires_grad(), gw = weight.requires_grad(), gb = bias.defined() && bias.requires_grad();
  // dx needs W, dW needs x; the backward helper reads both shapes, so both are saved.
  SavedVariable sx(x, "conv2d"), sw(weight, "conv2d");
  return make_result(
      "conv2d", y, {x, weight, bias}, [sx, sw, gx, gw, gb, stride, padding](const Variable& g) -> Grads {
        check_once_differentiable("conv2d", {g, sx.get(), sw.get()});
        ops::Conv2dGrads r =
            ops::conv2d_backward(g.data(), sx.get().data(), sw.get().data(), stride, padding, gx, gw, gb);
        return {Variable(r.grad_input), Variable(r.grad_weight), Variable(r.grad_bias)};
      });
}

Variable max_pool2d(const Variable& x, Size2 kernel, Size2 stride, Size2 padding) {
  check_defined("max_pool2d", x);
  // x: (N, C, H, W) -> (N, C, OH, OW)
  // y = max over each window:  dx[argmax] += g (the indices are ours, never written in place)
  ops::ValuesIndices r = ops::max_pool2d(x.data(), kernel, stride, padding);
  const Shape xs = x.shape();
  Tensor indices = r.indices;
  return make_result("max_pool2d", r.values, {x}, [indices, xs](const Variable& g) -> Grads {
    check_once_differentiable("max_pool2d", {g});
    return {Variable(ops::max_pool2d_backward(g.data(), indices, xs))};
  });
}

Variable avg_pool2d(const Variable& x, Size2 kernel, Size2 stride, Size2 padding) {
  check_defined("avg_pool2d", x);
  // x: (N, C, H, W) -> (N, C, OH, OW)
  // y = Σ_window x / (kh kw):  dx[window] += g / (kh kw)
  const Shape xs = x.shape();
  return make_result("avg_pool2d", ops::avg_pool2d(x.data(), kernel, stride, padding), {x},
                     [xs, kernel, stride, padding](const Variable& g) -> Grads {
                       check_once_differentiable("avg_pool2d", {g});
                       return {Variable(ops::avg_pool2d_backward(g.data(), xs, kernel, stride, padding))};
                     });
}

}  // namespace saccade
