#pragma once
// The 16-bit rule of the ops composed of several kernels (conv2d = im2col, GEMM and bias; mean = sum / n;
// var; logsumexp; scatter_add into a buffer): composed in 16 bits they would round after every kernel, so
// they compose in float32 and round the result once. A single kernel's 16-bit route is the backend's
// (Kernel16, ops/backend_widening.h); this header is for ops/*.cpp only.
#include "ops/tensor.h"

namespace saccade::ops {

/// `t` as float32 (a widened copy; exact from bfloat16 and float16), or `t` itself when undefined.
inline Tensor f32(const Tensor& t) { return t.defined() ? t.to(DType::Float32) : t; }

/// compose(ts...) for an op whose result has `dtype`: when `dtype` is bfloat16 or float16, compose runs on
/// float32 copies of the tensors `ts` (undefined ones stay undefined) and its result is rounded once to
/// `dtype` (to nearest even); otherwise compose(ts...) as it is. `compose` returns a Tensor.
template <class F, class... Ts>
Tensor composed_in_float32(DType dtype, F&& compose, const Ts&... ts) {
  if (!is_half(dtype)) return compose(ts...);
  return compose(f32(ts)...).to(dtype);
}

}  // namespace saccade::ops
