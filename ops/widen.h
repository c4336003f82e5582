#pragma once
// The readable 16-bit route of the ops that have no 16-bit kernel yet (conv2d, pooling, additive scores,
// index_add, mean, var, CUDA's flash attention, ...): widen the 16-bit inputs to float32 (exact), run the
// float32 kernel, round the result once. One pair of helpers for every op file that does it (ops/*.cpp only;
// kernels in ops/cpu and ops/cuda convert element by element instead).
#include "ops/tensor.h"

namespace saccade::ops {

/// `t` as float32 (a widened copy; exact from bfloat16 and float16), or `t` itself when undefined.
inline Tensor f32(const Tensor& t) { return t.defined() ? t.to(DType::Float32) : t; }

/// `t` rounded to `dtype` (to nearest even), or `t` itself when undefined.
inline Tensor narrow_to(const Tensor& t, DType dtype) { return t.defined() ? t.to(dtype) : t; }

}  // namespace saccade::ops
