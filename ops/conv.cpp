// conv2d (im2col + GEMM) and 2-d pooling: argument checks and output shapes here, loops in
// ops/cpu/conv_pool.cpp.
#include "ops/conv.h"

#include "ops/backend.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/widen.h"

namespace saccade::ops {

namespace {

// The geometry of one sliding window over (H, W): kernel, stride, padding and the output size.
struct Window {
  int kh, kw, sh, sw, ph, pw;
  int64_t oh, ow;
};

Window make_window(const char* op, const Shape& x, Size2 kernel, Size2 stride, Size2 padding, bool pool) {
  if (pool && stride[0] == 0 && stride[1] == 0) stride = kernel;
  SACCADE_CHECK(kernel[0] > 0 && kernel[1] > 0, "{}: kernel size must be positive, got [{}, {}] for input {}",
                op, kernel[0], kernel[1], x);
  SACCADE_CHECK(stride[0] > 0 && stride[1] > 0, "{}: stride must be positive, got [{}, {}] for input {}", op,
                stride[0], stride[1], x);
  SACCADE_CHECK(padding[0] >= 0 && padding[1] >= 0,
                "{}: padding must be non-negative, got [{}, {}] for input {}", op, padding[0], padding[1], x);
  // the kernels take int geometry: larger values would be truncated (a stride of 2^32 became 0)
  constexpr int64_t kMax = int64_t{1} << 30;
  for (int64_t v : {kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1]})
    SACCADE_CHECK(v <= kMax,
                  "{}: kernel size, stride and padding must be at most 2^30, got kernel [{}, {}], "
                  "stride [{}, {}], padding [{}, {}]",
                  op, kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1]);
  // As PyTorch: a pooling window must hold at least one input element.
  SACCADE_CHECK(!pool || (2 * padding[0] <= kernel[0] && 2 * padding[1] <= kernel[1]),
                "{}: padding [{}, {}] must be at most half the kernel size [{}, {}]", op, padding[0],
                padding[1], kernel[0], kernel[1]);
  const int64_t hp = x[2] + 2 * padding[0], wp = x[3] + 2 * padding[1];
  SACCADE_CHECK(kernel[0] <= hp && kernel[1] <= wp,
                "{}: kernel [{}, {}] is bigger than the padded input ({} x {}) of input shape {}", op,
                kernel[0], kernel[1], hp, wp, x);
  return {static_cast<int>(kernel[0]),      static_cast<int>(kernel[1]),     static_cast<int>(stride[0]),
          static_cast<int>(stride[1]),      static_cast<int>(padding[0]),    static_cast<int>(padding[1]),
          (hp - kernel[0]) / stride[0] + 1, (wp - kernel[1]) / stride[1] + 1};
}

void check_nchw(const char* op, const Tensor& x) {
  SACCADE_CHECK(x.defined(), "{}: got an undefined tensor", op);
  SACCADE_CHECK(x.dim() == 4, "{}: expected a 4-d input (N, C, H, W), got shape {}", op, x.shape());
  SACCADE_CHECK(is_floating(x.dtype()), "{}: expected a float input, got {} of shape {}", op, x.dtype(),
                x.shape());
}

void check_grad_shape(const char* op, const Tensor& g, const Shape& want) {
  SACCADE_CHECK(g.defined(), "{}: got an undefined gradient", op);
  SACCADE_CHECK(g.shape() == want, "{}: grad_out has shape {}, expected {}", op, g.shape(), want);
}

// x (N, C, H, W) contiguous -> (N, C*kh*kw, OH*OW).
Tensor im2col(const Tensor& x, const Window& w) {
  const int64_t rows = checked_mul(checked_mul(x.size(1), w.kh, "conv2d"), w.kw, "conv2d");
  Tensor cols =
      Tensor::empty({x.size(0), rows, checked_mul(w.oh, w.ow, "conv2d")}, x.dtype(), x.device(), "conv2d");
  backend(x.device()).im2col(x, cols, w.kh, w.kw, w.sh, w.sw, w.ph, w.pw);
  return cols;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding) {
  // x: (N, C, H, W), weight: (O, C, kh, kw), bias: (O) -> (N, O, OH, OW)
  check_nchw("conv2d", x);
  check_same_device("conv2d", {&x, &weight});
  SACCADE_CHECK(
      weight.dim() == 4 && weight.size(1) == x.size(1) && weight.dtype() == x.dtype(),
      "conv2d: weight of shape {} and dtype {} does not fit input of shape {} and dtype {} (need weight "
      "(O, C, kh, kw) with the input's C and dtype)",
      weight.shape(), weight.dtype(), x.shape(), x.dtype());
  const int64_t n = x.size(0), o = weight.size(0);
  if (bias.defined()) {
    check_same_device("conv2d", {&x, &bias});
    SACCADE_CHECK(bias.dim() == 1 && bias.size(0) == o && bias.dtype() == x.dtype(),
                  "conv2d: bias of shape {} and dtype {} does not fit weight of shape {} (need ({}) {})",
                  bias.shape(), bias.dtype(), weight.shape(), o, x.dtype());
  }
  Window w = make_window("conv2d", x.shape(), {weight.size(2), weight.size(3)}, stride, padding, false);
  // 16 bits: im2col, the GEMM and the bias in float32, one rounding of the result (ops/widen.h)
  return composed_in_float32(
      x.dtype(),
      [&](const Tensor& xs, const Tensor& ws, const Tensor& bs) {
        Tensor cols = im2col(xs.contiguous(), w);
        // (O, CKK) @ (N, CKK, L): one weight for every n (CKK spelled out: -1 is ambiguous when O is 0)
        Tensor out = matmul(ws.reshape({o, cols.size(1)}), cols);
        if (bs.defined()) add_(out, bs.view({o, 1}));
        return out.view({n, o, w.oh, w.ow});
      },
      x, weight, bias);
}

namespace {

// Checks grad_out against the forward conv2d of an input of shape `x` by a weight of shape `w` (the operand
// given as a tensor has `dtype`); returns the window. grad_out: (N, O, OH, OW), x: (N, C, H, W), w: (O, C,
// kh, kw)
Window check_conv_grad(const char* op, const Tensor& grad_out, const Shape& x, const Shape& w, DType dtype,
                       Size2 stride, Size2 padding) {
  check_nchw(op, grad_out);
  SACCADE_CHECK(
      x.size() == 4 && w.size() == 4 && w[1] == x[1] && dtype == grad_out.dtype(),
      "{}: input shape {}, weight shape {} and grad_out of shape {} do not fit (need input (N, C, H, W) "
      "and weight (O, C, kh, kw), all of grad_out's dtype {}, got {})",
      op, x, w, grad_out.shape(), grad_out.dtype(), dtype);
  Window win = make_window(op, x, {w[2], w[3]}, stride, padding, false);
  check_grad_shape(op, grad_out, {x[0], w[0], win.oh, win.ow});
  return win;
}

}  // namespace

Tensor conv2d_input_grad(const Tensor& grad_out, const Tensor& weight, const Shape& input_shape, Size2 stride,
                         Size2 padding) {
  // grad_out: (N, O, OH, OW), weight: (O, C, kh, kw) -> (N, C, H, W)
  const char* op = "conv2d_input_grad";
  SACCADE_CHECK(weight.defined(), "{}: got an undefined weight", op);
  check_same_device(op, {&grad_out, &weight});
  Window w = check_conv_grad(op, grad_out, input_shape, weight.shape(), weight.dtype(), stride, padding);
  const int64_t n = input_shape[0], o = weight.size(0);
  const int64_t ckk = checked_mul(checked_mul(input_shape[1], w.kh, op), w.kw, op);
  // 16 bits: float32 inside, rounded once (ops/widen.h)
  return composed_in_float32(
      weight.dtype(),
      [&](const Tensor& gs, const Tensor& ws) {
        // dcols = W^T (CKK, O) @ g[n] (O, L), scattered back onto the input by col2im.
        Tensor dcols = matmul(ws.reshape({o, ckk}).t(), gs.reshape({n, o, w.oh * w.ow}));
        Tensor gx = Tensor::empty(input_shape, ws.dtype(), ws.device());
        backend(gx.device()).col2im(dcols, gx, w.kh, w.kw, w.sh, w.sw, w.ph, w.pw);
        return gx;
      },
      grad_out, weight);
}

Tensor conv2d_weight_grad(const Tensor& x, const Tensor& grad_out, const Shape& weight_shape, Size2 stride,
                          Size2 padding) {
  // x: (N, C, H, W), grad_out: (N, O, OH, OW) -> (O, C, kh, kw)
  const char* op = "conv2d_weight_grad";
  check_nchw(op, x);
  check_same_device(op, {&grad_out, &x});
  Window w = check_conv_grad(op, grad_out, x.shape(), weight_shape, x.dtype(), stride, padding);
  const int64_t n = x.size(0), o = weight_shape[0];
  // 16 bits: float32 inside, rounded once (ops/widen.h)
  return composed_in_float32(
      x.dtype(),
      [&](const Tensor& xs, const Tensor& gs) {
        // dW = Σ_n g[n] (O, L) @ cols[n]^T (L, CKK); cols is recomputed rather than saved (kh*kw times x's
        // size).
        Tensor cols = im2col(xs.contiguous(), w);
        Tensor per_n = bmm(gs.reshape({n, o, w.oh * w.ow}), cols.transpose(1, 2));
        return (n == 1 ? per_n.select(0, 0) : sum(per_n, {0})).view(weight_shape);
      },
      x, grad_out);
}

Conv2dGrads conv2d_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, Size2 stride,
                            Size2 padding, bool need_input, bool need_weight, bool need_bias) {
  // grad_out: (N, O, OH, OW), x: (N, C, H, W), weight: (O, C, kh, kw)
  check_nchw("conv2d_backward", x);
  SACCADE_CHECK(
      weight.defined() && weight.dim() == 4 && weight.size(1) == x.size(1) && weight.dtype() == x.dtype(),
      "conv2d_backward: weight of shape {} does not fit input of shape {}", weight.shape(), x.shape());
  Window w =
      make_window("conv2d_backward", x.shape(), {weight.size(2), weight.size(3)}, stride, padding, false);
  check_grad_shape("conv2d_backward", grad_out, {x.size(0), weight.size(0), w.oh, w.ow});
  Conv2dGrads r;
  // each gradient in float32 for 16 bits, rounded once: the bias's sum over N and (OH, OW) too
  if (need_bias)
    r.grad_bias = composed_in_float32(
        x.dtype(),
        [](const Tensor& g) {
          return sum(g, {0, 2, 3});
        },
        grad_out);
  if (need_weight) r.grad_weight = conv2d_weight_grad(x, grad_out, weight.shape(), stride, padding);
  if (need_input) r.grad_input = conv2d_input_grad(grad_out, weight, x.shape(), stride, padding);
  return r;
}

ValuesIndices max_pool2d(const Tensor& x, Size2 kernel, Size2 stride, Size2 padding) {
  // x: (N, C, H, W) -> values, indices: (N, C, OH, OW)
  check_nchw("max_pool2d", x);
  Window w = make_window("max_pool2d", x.shape(), kernel, stride, padding, true);
  Shape os{x.size(0), x.size(1), w.oh, w.ow};
  ValuesIndices r{Tensor::empty(os, x.dtype(), x.device()), Tensor::empty(os, DType::Int64, x.device())};
  backend(x.device()).max_pool2d(x.contiguous(), r.values, r.indices, w.kh, w.kw, w.sh, w.sw, w.ph, w.pw);
  return r;
}

Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_shape) {
  // grad_out, indices: (N, C, OH, OW) -> (N, C, H, W)
  const char* op = "max_pool2d_backward";
  check_nchw(op, grad_out);
  check_same_device(op, {&grad_out, &indices});
  SACCADE_CHECK(indices.dtype() == DType::Int64 && indices.shape() == grad_out.shape(),
                "{}: indices ({} of shape {}) must be int64 of grad_out's shape {}", op, indices.dtype(),
                indices.shape(), grad_out.shape());
  SACCADE_CHECK(
      input_shape.size() == 4 && input_shape[0] == grad_out.size(0) && input_shape[1] == grad_out.size(1),
      "{}: input shape {} does not fit grad_out of shape {}", op, input_shape, grad_out.shape());
  if (indices.numel() > 0) {
    const int64_t lo = min(indices).item<int64_t>(), hi = max(indices).item<int64_t>();
    SACCADE_CHECK(lo >= 0 && hi < input_shape[2] * input_shape[3],
                  "{}: index out of range [{}, {}] for an input plane of {} x {}", op, lo, hi, input_shape[2],
                  input_shape[3]);
  }
  Tensor gx = Tensor::empty(input_shape, grad_out.dtype(), grad_out.device());
  backend(gx.device()).max_pool2d_backward(grad_out.contiguous(), indices.contiguous(), gx);
  return gx;
}

Tensor avg_pool2d(const Tensor& x, Size2 kernel, Size2 stride, Size2 padding) {
  // x: (N, C, H, W) -> (N, C, OH, OW)
  check_nchw("avg_pool2d", x);
  Window w = make_window("avg_pool2d", x.shape(), kernel, stride, padding, true);
  Tensor out = Tensor::empty({x.size(0), x.size(1), w.oh, w.ow}, x.dtype(), x.device());
  backend(x.device()).avg_pool2d(x.contiguous(), out, w.kh, w.kw, w.sh, w.sw, w.ph, w.pw);
  return out;
}

Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_shape, Size2 kernel, Size2 stride,
                           Size2 padding) {
  // grad_out: (N, C, OH, OW) -> (N, C, H, W)
  const char* op = "avg_pool2d_backward";
  check_nchw(op, grad_out);
  SACCADE_CHECK(input_shape.size() == 4, "{}: expected a 4-d input shape, got {}", op, input_shape);
  Window w = make_window(op, input_shape, kernel, stride, padding, true);
  check_grad_shape(op, grad_out, {input_shape[0], input_shape[1], w.oh, w.ow});
  Tensor gx = Tensor::empty(input_shape, grad_out.dtype(), grad_out.device());
  backend(gx.device()).avg_pool2d_backward(grad_out.contiguous(), gx, w.kh, w.kw, w.sh, w.sw, w.ph, w.pw);
  return gx;
}

}  // namespace saccade::ops
