// Random tensors from a Generator (ops/random.h).
#include "ops/random.h"

#include <cmath>

#include "ops/backend.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace saccade {

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

namespace ops {

static Generator& pick(Generator* gen) { return gen ? *gen : default_generator(); }

static Tensor uniform_named(const Shape& shape, double low, double high, DType dtype, Device device,
                            Generator* gen, const char* op) {
  SACCADE_CHECK(is_floating(dtype), "{}: expected a float dtype, got {}", op, dtype);
  SACCADE_CHECK(low <= high, "{}: low {} is greater than high {}", op, low, high);
  for (int64_t s : shape) SACCADE_CHECK(s >= 0, "{}: negative size in shape {}", op, shape);
  Tensor t = Tensor::empty(shape, dtype, device);
  Generator& g = pick(gen);
  backend(device).uniform(t, g.seed(), g.advance(static_cast<uint64_t>(t.numel())), low, high);
  return t;
}

static Tensor normal_named(const Shape& shape, double mean, double std, DType dtype, Device device,
                           Generator* gen, const char* op) {
  SACCADE_CHECK(is_floating(dtype), "{}: expected a float dtype, got {}", op, dtype);
  SACCADE_CHECK(std >= 0, "{}: std must be non-negative, got {}", op, std);
  for (int64_t s : shape) SACCADE_CHECK(s >= 0, "{}: negative size in shape {}", op, shape);
  Tensor t = Tensor::empty(shape, dtype, device);
  Generator& g = pick(gen);
  backend(device).normal(t, g.seed(), g.advance(static_cast<uint64_t>(t.numel())), mean, std);
  return t;
}

Tensor uniform(const Shape& shape, double low, double high, DType dtype, Device device, Generator* gen) {
  return uniform_named(shape, low, high, dtype, device, gen, "uniform");
}
Tensor normal(const Shape& shape, double mean, double std, DType dtype, Device device, Generator* gen) {
  return normal_named(shape, mean, std, dtype, device, gen, "normal");
}
Tensor rand(const Shape& shape, DType dtype, Device device, Generator* gen) {
  return uniform_named(shape, 0, 1, dtype, device, gen, "rand");
}
Tensor randn(const Shape& shape, DType dtype, Device device, Generator* gen) {
  return normal_named(shape, 0, 1, dtype, device, gen, "randn");
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Device device, Generator* gen) {
  SACCADE_CHECK(low < high, "randint: low {} must be less than high {}", low, high);
  for (int64_t s : shape) SACCADE_CHECK(s >= 0, "randint: negative size in shape {}", shape);
  // floor(low + (high - low) * u) with u in [0, 1) from float64 uniforms
  Tensor u = uniform(shape, 0, 1, DType::Float64, Device::cpu(), gen);
  Tensor out = Tensor::empty(shape, DType::Int64, Device::cpu());
  const double* pu = u.data<double>();
  int64_t* po = out.data<int64_t>();
  const double span = static_cast<double>(high - low);
  for (int64_t i = 0; i < out.numel(); ++i)
    po[i] = std::min(high - 1, low + static_cast<int64_t>(std::floor(pu[i] * span)));
  return out.to(device);
}

Tensor randperm(int64_t n, Generator* gen) {
  SACCADE_CHECK(n >= 0, "randperm: n must be non-negative, got {}", n);
  // Fisher-Yates with one uniform per swap
  Tensor u = uniform({n}, 0, 1, DType::Float64, Device::cpu(), gen);
  Tensor out = arange(0, static_cast<double>(n), 1, DType::Int64);
  int64_t* p = out.data<int64_t>();
  const double* pu = u.data<double>();
  for (int64_t i = n - 1; i > 0; --i) {
    auto j = std::min(i, static_cast<int64_t>(std::floor(pu[i] * static_cast<double>(i + 1))));
    std::swap(p[i], p[j]);
  }
  return out;
}

}  // namespace ops
}  // namespace saccade
