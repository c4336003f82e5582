// Initialisers: each draws a fresh tensor with ops/random and copies it into the target.
#include "nn/init.h"

#include <cmath>

#include "ops/elementwise.h"

namespace saccade::nn::init {

static void check_float(const Tensor& t, const char* op) {
  SACCADE_CHECK(t.defined(), "{}: got an undefined tensor", op);
  SACCADE_CHECK(is_floating(t.dtype()), "{}: expected a float32 or float64 tensor, got {} of shape {}", op,
                t.dtype(), t.shape());
}

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Sigmoid:
      return 1;
    case Nonlinearity::Tanh:
      return 5.0 / 3;
    case Nonlinearity::Relu:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyRelu: {
      double slope = param < 0 ? 0.01 : param;
      return std::sqrt(2.0 / (1 + slope * slope));
    }
    case Nonlinearity::Selu:
      return 3.0 / 4;
  }
  throw Error("calculate_gain: unknown nonlinearity");
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Shape& shape) {
  SACCADE_CHECK(
      shape.size() >= 2,
      "calculate_fan_in_and_fan_out: fan in and fan out need a tensor of at least 2 dims, got shape {}",
      shape);
  int64_t receptive = 1;
  for (int i = 2; i < shape.size(); ++i) receptive *= shape[i];
  return {shape[1] * receptive, shape[0] * receptive};
}

namespace {
thread_local bool skip_init = false;
}  // namespace

SkipInitGuard::SkipInitGuard() : previous_(skip_init) { skip_init = true; }
SkipInitGuard::~SkipInitGuard() { skip_init = previous_; }
bool init_skipped() { return skip_init; }

Tensor uniform_(const Tensor& t, double a, double b, Generator* gen) {
  check_float(t, "uniform_");
  SACCADE_CHECK(a <= b, "uniform_: expected a <= b, got a = {}, b = {}", a, b);
  if (skip_init) return t;
  Tensor out = t;
  ops::copy_(out, ops::uniform(t.shape(), a, b, t.dtype(), t.device(), gen));
  return out;
}

Tensor normal_(const Tensor& t, double mean, double std, Generator* gen) {
  check_float(t, "normal_");
  SACCADE_CHECK(std >= 0, "normal_: expected std >= 0, got {}", std);
  if (skip_init) return t;
  Tensor out = t;
  ops::copy_(out, ops::normal(t.shape(), mean, std, t.dtype(), t.device(), gen));
  return out;
}

Tensor constant_(const Tensor& t, double value) {
  SACCADE_CHECK(t.defined(), "constant_: got an undefined tensor");
  Tensor out = t;
  ops::fill_(out, value);
  return out;
}
Tensor zeros_(const Tensor& t) { return constant_(t, 0); }
Tensor ones_(const Tensor& t) { return constant_(t, 1); }

Tensor xavier_uniform_(const Tensor& t, double gain, Generator* gen) {
  check_float(t, "xavier_uniform_");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t.shape());
  double std = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  double a = std::sqrt(3.0) * std;
  return uniform_(t, -a, a, gen);
}

Tensor xavier_normal_(const Tensor& t, double gain, Generator* gen) {
  check_float(t, "xavier_normal_");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t.shape());
  return normal_(t, 0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), gen);
}

static double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity,
                          const char* op) {
  check_float(t, op);
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t.shape());
  double fan = static_cast<double>(mode == FanMode::FanIn ? fan_in : fan_out);
  return calculate_gain(nonlinearity, a) / std::sqrt(fan);
}

Tensor kaiming_uniform_(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity, Generator* gen) {
  check_float(t, "kaiming_uniform_");
  if (t.numel() == 0) return t;
  double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nonlinearity, "kaiming_uniform_");
  return uniform_(t, -bound, bound, gen);
}

Tensor kaiming_normal_(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity, Generator* gen) {
  check_float(t, "kaiming_normal_");
  if (t.numel() == 0) return t;
  return normal_(t, 0, kaiming_std(t, a, mode, nonlinearity, "kaiming_normal_"), gen);
}

void linear_default_init_(const Tensor& weight, const Tensor& bias, Generator* gen) {
  kaiming_uniform_(weight, std::sqrt(5.0), FanMode::FanIn, Nonlinearity::LeakyRelu, gen);
  if (!bias.defined()) return;
  int64_t fan_in = calculate_fan_in_and_fan_out(weight.shape()).first;
  double bound = fan_in > 0 ? 1 / std::sqrt(static_cast<double>(fan_in)) : 0;
  uniform_(bias, -bound, bound, gen);
}

}  // namespace saccade::nn::init
