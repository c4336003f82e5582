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
  // 16-bit: the float32 draws (same counters), rounded once (Kernel16::Uniform)
  Tensor t = Tensor::empty(shape, dtype, device, op);
  Generator::Draw d = pick(gen).reserve(static_cast<uint64_t>(t.numel()));
  backend(device).uniform(t, d.seed, d.offset, low, high);
  return t;
}

static Tensor normal_named(const Shape& shape, double mean, double std, DType dtype, Device device,
                           Generator* gen, const char* op) {
  SACCADE_CHECK(is_floating(dtype), "{}: expected a float dtype, got {}", op, dtype);
  SACCADE_CHECK(std >= 0, "{}: std must be non-negative, got {}", op, std);
  // 16-bit: the float32 draws (same counters), rounded once (Kernel16::Normal)
  Tensor t = Tensor::empty(shape, dtype, device, op);
  Generator::Draw d = pick(gen).reserve(static_cast<uint64_t>(t.numel()));
  backend(device).normal(t, d.seed, d.offset, mean, std);
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
  // floor(low + (high - low) * u) with u in [0, 1) from float64 uniforms
  Tensor out = Tensor::empty(shape, DType::Int64, Device::cpu(), "randint");
  Tensor u = uniform_named(shape, 0, 1, DType::Float64, Device::cpu(), gen, "randint");
  const double* pu = u.data<double>();
  int64_t* po = out.data<int64_t>();
  // high - low may not fit int64 (low = -2^63, high = 2^63 - 1): take the span in unsigned arithmetic
  const uint64_t span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double v = std::floor(pu[i] * static_cast<double>(span));  // may round up to 2^64
    const uint64_t step = v >= 0x1p64 ? span - 1 : std::min(span - 1, static_cast<uint64_t>(v));
    po[i] = static_cast<int64_t>(static_cast<uint64_t>(low) + step);
  }
  return out.to(device);
}

Tensor randperm(int64_t n, Generator* gen) {
  SACCADE_CHECK(n >= 0, "randperm: n must be non-negative, got {}", n);
  // Fisher-Yates with one uniform per swap
  Tensor out = Tensor::empty({n}, DType::Int64, Device::cpu(), "randperm");
  Tensor u = uniform_named({n}, 0, 1, DType::Float64, Device::cpu(), gen, "randperm");
  backend(Device::cpu()).arange(out, 0, 1);
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
