// Creation ops.
#include "ops/creation.h"

#include <cmath>

#include "ops/backend.h"
#include "ops/elementwise.h"

namespace saccade::ops {

Tensor empty(const Shape& shape, DType dtype, Device device) { return Tensor::empty(shape, dtype, device); }

// An int64 tensor cannot hold NaN, inf or a value beyond +-2^63 (converting one would be undefined).
static void check_int64_value(double value, DType dtype, const char* op) {
  SACCADE_CHECK(dtype != DType::Int64 || (value >= -0x1p63 && value < 0x1p63),
                "{}: value {} cannot be converted to int64 without overflow", op, value);
}

// full() under the name of the op the user called (zeros, ones, ...).
static Tensor full_named(const Shape& shape, double value, DType dtype, Device device, const char* op) {
  check_int64_value(value, dtype, op);
  Tensor t = Tensor::empty(shape, dtype, device, op);
  // bool holds 0 or 1 only: any nonzero value is true
  backend(device).fill(t, dtype == DType::Bool ? double(value != 0) : value);
  return t;
}
// The *_like ops name themselves when given an undefined tensor.
static const Tensor& like(const Tensor& t, const char* op) {
  SACCADE_CHECK(t.defined(), "{}: got an undefined tensor", op);
  return t;
}

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  return full_named(shape, value, dtype, device, "full");
}
Tensor zeros(const Shape& shape, DType dtype, Device device) {
  return full_named(shape, 0, dtype, device, "zeros");
}
Tensor ones(const Shape& shape, DType dtype, Device device) {
  return full_named(shape, 1, dtype, device, "ones");
}
Tensor empty_like(const Tensor& t) {
  return Tensor::empty(like(t, "empty_like").shape(), t.dtype(), t.device(), "empty_like");
}
Tensor zeros_like(const Tensor& t) {
  return full_named(like(t, "zeros_like").shape(), 0, t.dtype(), t.device(), "zeros_like");
}
Tensor ones_like(const Tensor& t) {
  return full_named(like(t, "ones_like").shape(), 1, t.dtype(), t.device(), "ones_like");
}
Tensor full_like(const Tensor& t, double value) {
  return full_named(like(t, "full_like").shape(), value, t.dtype(), t.device(), "full_like");
}
Tensor scalar_tensor(double value, DType dtype, Device device) {
  return full_named({}, value, dtype, device, "scalar_tensor");
}

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  SACCADE_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
                "arange: start {}, end {} and step {} must be finite", start, end, step);
  SACCADE_CHECK(step != 0, "arange: step must be nonzero");
  SACCADE_CHECK((end - start) * step >= 0, "arange: start {} end {} and step {} are inconsistent", start, end,
                step);
  SACCADE_CHECK(dtype != DType::Bool, "arange: bool dtype is not supported");
  check_int64_value(start, dtype, "arange");
  check_int64_value(end, dtype, "arange");
  const double count = std::ceil((end - start) / step);  // may exceed int64: check before converting
  SACCADE_CHECK(count < 0x1p62, "arange: size too large: [{}, {}) in steps of {} has {} elements", start, end,
                step, count);
  Tensor t = Tensor::empty({static_cast<int64_t>(count)}, dtype, device, "arange");
  backend(device).arange(t, start, step);
  return t;
}
Tensor arange(double end, DType dtype, Device device) { return arange(0, end, 1, dtype, device); }

Tensor linspace(double start, double end, int64_t steps, DType dtype, Device device) {
  SACCADE_CHECK(steps >= 0, "linspace: steps must be non-negative, got {}", steps);
  SACCADE_CHECK(dtype != DType::Bool, "linspace: bool dtype is not supported");
  SACCADE_CHECK(std::isfinite(start) && std::isfinite(end), "linspace: start {} and end {} must be finite",
                start, end);
  check_int64_value(start, dtype, "linspace");
  check_int64_value(end, dtype, "linspace");
  Tensor t = Tensor::empty({steps}, dtype, device, "linspace");
  backend(device).arange(t, start, steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0);
  return t;
}

Tensor eye(int64_t n, int64_t m, DType dtype, Device device) {
  SACCADE_CHECK(n >= 0, "eye: n must be non-negative, got {}", n);
  if (m < 0) m = n;
  Tensor t = full_named({n, m}, 0, dtype, device, "eye");
  // the diagonal is a strided view with stride m + 1
  Tensor diag(t.storage(), {std::min(n, m)}, {m + 1}, 0, dtype);
  backend(device).fill(diag, 1);
  return t;
}

// mask[i, j] = (j - i) >= k   (upper)   or   (j - i) <= k   (lower)
static Tensor triangle(const Tensor& t, int64_t k, bool upper, const char* op) {
  SACCADE_CHECK(t.defined() && t.dim() >= 2, "{}: expected a tensor of at least 2 dims, got shape {}", op,
                t.shape());
  int64_t r = t.size(-2), c = t.size(-1);
  Tensor i = arange(0, static_cast<double>(r), 1, DType::Int64, t.device()).unsqueeze(1);
  Tensor j = arange(0, static_cast<double>(c), 1, DType::Int64, t.device()).unsqueeze(0);
  Tensor d = sub(j, i);
  Tensor keep = upper ? ge(d, static_cast<double>(k)) : le(d, static_cast<double>(k));
  return where(keep, t, zeros({}, t.dtype(), t.device()));
}
Tensor tril(const Tensor& t, int64_t k) { return triangle(t, k, false, "tril"); }
Tensor triu(const Tensor& t, int64_t k) { return triangle(t, k, true, "triu"); }

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  const int64_t n = checked_numel(shape, "from_vector");
  SACCADE_CHECK(static_cast<int64_t>(values.size()) == n,
                "from_vector: {} values do not fill shape {} ({} elements)", values.size(), shape, n);
  Tensor t = Tensor::empty(shape, dtype_of<T>(), Device::cpu(), "from_vector");
  if constexpr (std::is_same_v<T, bool>) {
    uint8_t* p = t.data<uint8_t>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  } else {
    std::copy(values.begin(), values.end(), t.data<T>());
  }
  return t.to(device);
}
template Tensor from_vector(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector(const std::vector<int64_t>&, const Shape&, Device);
template Tensor from_vector(const std::vector<bool>&, const Shape&, Device);
template Tensor from_vector(const std::vector<bfloat16>&, const Shape&, Device);
template Tensor from_vector(const std::vector<float16>&, const Shape&, Device);

Tensor tensor(std::initializer_list<double> values, const Shape& shape, DType dtype, Device device) {
  const int64_t n = checked_numel(shape, "tensor");
  SACCADE_CHECK(static_cast<int64_t>(values.size()) == n,
                "tensor: {} values do not fill shape {} ({} elements)", values.size(), shape, n);
  return from_vector(std::vector<double>(values), shape, Device::cpu()).to(dtype).to(device);
}
Tensor tensor(std::initializer_list<double> values, DType dtype, Device device) {
  return tensor(values, {static_cast<int64_t>(values.size())}, dtype, device);
}

}  // namespace saccade::ops
