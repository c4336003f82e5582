// Derivative rules of 2-d convolution and pooling, each beside its forward. `g` is dL/d(output). The closed
// set: conv2d's backward is conv2d_input_grad and conv2d_weight_grad, whose own backwards are conv2d and each
// other (all three are bilinear); a pool's backward is linear in g, and its backward is the pool's forward
// (avg) or a gather at the forward's indices (max).
#include "autograd/functions/conv.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/index.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"

namespace saccade {

using Grads = std::vector<Variable>;

Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias, Size2 stride,
                Size2 padding) {
  OpScope op(op_info::conv2d, x, weight);
  SACCADE_AUTOCAST(op, conv2d, x, weight, bias, stride, padding);
  // x: (N, C, H, W), weight: (O, C, kh, kw), bias: (O) -> (N, O, OH, OW)
  // y = W ⋆ x + b, i.e. y[n] = W (O, C*kh*kw) @ im2col(x)[n] + b:
  //   dx = col2im(W^T @ g[n]),  dW = Σ_n g[n] @ im2col(x)[n]^T,  db = Σ_{n,oh,ow} g
  Tensor y = ops::conv2d(x.data(), weight.data(), bias.defined() ? bias.data() : Tensor(), stride, padding);
  const bool gx = x.requires_grad(), gw = weight.requires_grad(), gb = bias.defined() && bias.requires_grad();
  // dx needs W and x's shape, dW needs x and W's shape: both are saved
  SavedVariable sx(x, op_info::conv2d), sw(weight, op_info::conv2d);
  return make_result(op, y, {x, weight, bias},
                     [sx, sw, gx, gw, gb, stride, padding](const Variable& g) -> Grads {
                       const Variable xv = sx.get(), wv = sw.get();
                       return {gx ? conv2d_input_grad(g, wv, xv.shape(), stride, padding) : Variable(),
                               gw ? conv2d_weight_grad(xv, g, wv.shape(), stride, padding) : Variable(),
                               gb ? sum(g, {0, 2, 3}) : Variable()};
                     });
}

Variable conv2d_input_grad(const Variable& grad_out, const Variable& weight, const Shape& input_shape,
                           Size2 stride, Size2 padding) {
  OpScope op(op_info::conv2d_input_grad, grad_out, weight);
  // grad_out: (N, O, OH, OW), weight: (O, C, kh, kw) -> (N, C, H, W)
  // y = col2im(W^T @ grad_out), bilinear, the adjoint of conv2d in x: <y, g> = <grad_out, conv2d(g, W)>:
  //   dgrad_out = conv2d(g, W),  dW = conv2d_weight_grad(g, grad_out)
  Tensor y = ops::conv2d_input_grad(grad_out.data(), weight.data(), input_shape, stride, padding);
  const bool gg = grad_out.requires_grad(), gw = weight.requires_grad();
  SavedVariable sg(grad_out, op_info::conv2d_input_grad), sw(weight, op_info::conv2d_input_grad);
  return make_result(op, y, {grad_out, weight},
                     [sg, sw, gg, gw, stride, padding](const Variable& g) -> Grads {
                       const Variable go = sg.get(), wv = sw.get();
                       return {gg ? conv2d(g, wv, Variable(), stride, padding) : Variable(),
                               gw ? conv2d_weight_grad(g, go, wv.shape(), stride, padding) : Variable()};
                     });
}

Variable conv2d_weight_grad(const Variable& x, const Variable& grad_out, const Shape& weight_shape,
                            Size2 stride, Size2 padding) {
  OpScope op(op_info::conv2d_weight_grad, x, grad_out);
  // x: (N, C, H, W), grad_out: (N, O, OH, OW) -> (O, C, kh, kw)
  // y = Σ_n grad_out[n] @ im2col(x)[n]^T, bilinear: <y, g> = <conv2d(x, g), grad_out>:
  //   dx = conv2d_input_grad(grad_out, g),  dgrad_out = conv2d(x, g)
  Tensor y = ops::conv2d_weight_grad(x.data(), grad_out.data(), weight_shape, stride, padding);
  const bool gx = x.requires_grad(), gg = grad_out.requires_grad();
  SavedVariable sx(x, op_info::conv2d_weight_grad), sg(grad_out, op_info::conv2d_weight_grad);
  return make_result(op, y, {x, grad_out}, [sx, sg, gx, gg, stride, padding](const Variable& g) -> Grads {
    const Variable xv = sx.get(), go = sg.get();
    return {gx ? conv2d_input_grad(go, g, xv.shape(), stride, padding) : Variable(),
            gg ? conv2d(xv, g, Variable(), stride, padding) : Variable()};
  });
}

Variable max_pool2d(const Variable& x, Size2 kernel, Size2 stride, Size2 padding) {
  OpScope op(op_info::max_pool2d, x);
  // x: (N, C, H, W) -> (N, C, OH, OW)
  // y = max over each window:  dx[argmax] += g (the indices are ours, never written in place)
  ops::ValuesIndices r = ops::max_pool2d(x.data(), kernel, stride, padding);
  const Shape xs = x.shape();
  Tensor indices = r.indices;
  return make_result(op, r.values, {x}, [indices, xs](const Variable& g) -> Grads {
    return {max_pool2d_backward(g, indices, xs)};
  });
}

Variable max_pool2d_backward(const Variable& grad_out, const Tensor& indices, const Shape& input_shape) {
  OpScope op(op_info::max_pool2d_backward, grad_out, indices);
  // grad_out, indices: (N, C, OH, OW) -> (N, C, H, W)
  // y[n, c, indices[n, c, i]] += grad_out[n, c, i], linear: dgrad_out[n, c, i] = g[n, c, indices[n, c, i]]
  // (the second derivative of max_pool2d in x is zero almost everywhere)
  Tensor y = ops::max_pool2d_backward(grad_out.data(), indices, input_shape);
  const Shape gs = grad_out.shape();
  return make_result(op, y, {grad_out}, [indices, gs](const Variable& g) -> Grads {
    Variable planes = reshape(g, {gs[0], gs[1], -1});  // (N, C, H*W)
    return {reshape(gather(planes, 2, indices.reshape({gs[0], gs[1], -1})), gs)};
  });
}

Variable avg_pool2d(const Variable& x, Size2 kernel, Size2 stride, Size2 padding) {
  OpScope op(op_info::avg_pool2d, x);
  // x: (N, C, H, W) -> (N, C, OH, OW)
  // y = Σ_window x / (kh kw):  dx[window] += g / (kh kw)
  const Shape xs = x.shape();
  return make_result(op, ops::avg_pool2d(x.data(), kernel, stride, padding), {x},
                     [xs, kernel, stride, padding](const Variable& g) -> Grads {
                       return {avg_pool2d_backward(g, xs, kernel, stride, padding)};
                     });
}

Variable avg_pool2d_backward(const Variable& grad_out, const Shape& input_shape, Size2 kernel, Size2 stride,
                             Size2 padding) {
  OpScope op(op_info::avg_pool2d_backward, grad_out);
  // grad_out: (N, C, OH, OW) -> (N, C, H, W)
  // y[window] += grad_out / (kh kw), linear, the adjoint of avg_pool2d:  dgrad_out = avg_pool2d(g)
  Tensor y = ops::avg_pool2d_backward(grad_out.data(), input_shape, kernel, stride, padding);
  return make_result(op, y, {grad_out}, [kernel, stride, padding](const Variable& g) -> Grads {
    return {avg_pool2d(g, kernel, stride, padding)};
  });
}

}  // namespace saccade
