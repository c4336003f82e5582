#pragma once
// Creating tensors: filled, ranges, identity, triangles, from host data.
#include <initializer_list>
#include <vector>

#include "ops/tensor.h"

namespace saccade::ops {

/// Uninitialised contiguous tensor of `shape`.
Tensor empty(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
/// Tensor of `shape` filled with 0 / 1 / `value`.
Tensor zeros(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor full(const Shape& shape, double value, DType dtype = DType::Float32, Device device = Device::cpu());
/// Same shape, dtype and device as `t`.
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
/// 0-d tensor holding `value`.
Tensor scalar_tensor(double value, DType dtype = DType::Float32, Device device = Device::cpu());

/// 1-d [start, start+step, ...) up to but excluding `end` (as torch.arange). Throws if step is 0 or has the
/// wrong sign.
Tensor arange(double start, double end, double step = 1, DType dtype = DType::Int64,
              Device device = Device::cpu());
Tensor arange(double end, DType dtype = DType::Int64, Device device = Device::cpu());
/// 1-d, `steps` points evenly from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, DType dtype = DType::Float32,
                Device device = Device::cpu());
/// (n, m) identity (m = n when m < 0).
Tensor eye(int64_t n, int64_t m = -1, DType dtype = DType::Float32, Device device = Device::cpu());
/// Lower / upper triangle of the last two dims of `t` (elements with j - i <= k / j - i >= k), rest zero.
Tensor tril(const Tensor& t, int64_t k = 0);
Tensor triu(const Tensor& t, int64_t k = 0);

/// Tensor of `shape` copied from `values` (values.size() must equal the shape's numel).
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu());
/// 1-d (or `shape`d) float32/float64/int64 tensor from a list: ops::tensor({1, 2, 3}).
Tensor tensor(std::initializer_list<double> values, DType dtype = DType::Float32,
              Device device = Device::cpu());
Tensor tensor(std::initializer_list<double> values, const Shape& shape, DType dtype = DType::Float32,
              Device device = Device::cpu());

}  // namespace saccade::ops
