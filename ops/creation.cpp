// Creation ops.
#include "ops/creation.h"

#include <cmath>

#include "ops/backend.h"
#include "ops/elementwise.h"

namespace saccade::ops {

Tensor empty(const Shape& shape, DType dtype, Device device) { return Tensor::empty(shape, dtype, device); }

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  for (int64_t s : shape) SACCADE_CHECK(s >= 0, "full: negative size in shape {}", shape);
  Tensor t = Tensor::empty(shape, dtype, device);
  // bool holds 0 or 1 only: any nonzero value is true
  backend(device).fill(t, dtype == DType::Bool ? double(value != 0) : value);
  return t;
}
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1, dtype, device); }
Tensor empty_like(const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), t.device()); }
Tensor zeros_like(const Tensor& t) { return full(t.shape(), 0, t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return full(t.shape(), 1, t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, t.dtype(), t.device()); }
Tensor scalar_tensor(double value, DType dtype, Device device) { return full({}, value, dtype, device); }

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  SACCADE_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
                "arange: start {}, end {} and step {} must be finite", start, end, step);
  SACCADE_CHECK(step != 0, "arange: step must be nonzero");
  SACCADE_CHECK((end - start) * step >= 0, "arange: start {} end {} and step {} are inconsistent", start, end,
                step);
  SACCADE_CHECK(dtype != DType::Bool, "arange: bool dtype is not supported");
  auto n = static_cast<int64_t>(std::ceil((end - start) / step));
  Tensor t = Tensor::empty({n}, dtype, device);
  backend(device).arange(t, start, step);
  return t;
}
Tensor arange(double end, DType dtype, Device device) { return arange(0, end, 1, dtype, device); }

Tensor linspace(double start, double end, int64_t steps, DType dtype, Device device) {
  SACCADE_CHECK(steps >= 0, "linspace: steps must be non-negative, got {}", steps);
  SACCADE_CHECK(dtype != DType::Bool, "linspace: bool dtype is not supported");
  SACCADE_CHECK(std::isfinite(start) && std::isfinite(end), "linspace: start {} and end {} must be finite",
                start, end);
  Tensor t = Tensor::empty({steps}, dtype, device);
  backend(device).arange(t, start, steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0);
  return t;
}

Tensor eye(int64_t n, int64_t m, DType dtype, Device device) {
  SACCADE_CHECK(n >= 0, "eye: n must be non-negative, got {}", n);
  if (m < 0) m = n;
  Tensor t = zeros({n, m}, dtype, device);
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
  SACCADE_CHECK(static_cast<int64_t>(values.size()) == shape.numel(),
                "from_vector: {} values do not fill shape {} ({} elements)", values.size(), shape,
                shape.numel());
  Tensor t = Tensor::empty(shape, dtype_of<T>(), Device::cpu());
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

Tensor tensor(std::initializer_list<double> values, const Shape& shape, DType dtype, Device device) {
  SACCADE_CHECK(static_cast<int64_t>(values.size()) == shape.numel(),
                "tensor: {} values do not fill shape {} ({} elements)", values.size(), shape, shape.numel());
  return from_vector(std::vector<double>(values), shape, Device::cpu()).to(dtype).to(device);
}
Tensor tensor(std::initializer_list<double> values, DType dtype, Device device) {
  return tensor(values, {static_cast<int64_t>(values.size())}, dtype, device);
}

}  // namespace saccade::ops
