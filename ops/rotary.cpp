// Rotary position embedding (ops/rotary.h): the tables, the checks, the 16-bit route; the
// kernels per device (cpu/rotary.cpp, cuda/rotary.cu; Backend's composed default, ops/backend.cpp,
// for a backend without one).
#include "ops/rotary.h"

#include <cmath>

#include "ops/backend.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace saccade::ops {

RotaryTables rotary_tables(int64_t num_positions, int64_t rotary_dim, double theta, DType dtype,
                           Device device) {
  constexpr const char* op = "rotary_tables";
  SACCADE_CHECK(num_positions >= 0, "{}: num_positions must be >= 0, got {}", op, num_positions);
  SACCADE_CHECK(rotary_dim > 0 && rotary_dim % 2 == 0, "{}: rotary_dim must be even and positive, got {}", op,
                rotary_dim);
  SACCADE_CHECK(std::isfinite(theta) && theta > 1, "{}: theta must be finite and > 1, got {}", op, theta);
  SACCADE_CHECK(dtype == DType::Float32 || dtype == DType::Float64,
                "{}: the tables are float32 or float64, got {}", op, dtype);
  const int64_t half = rotary_dim / 2;
  Tensor c = Tensor::empty({num_positions, half}, DType::Float64),
         s = Tensor::empty({num_positions, half}, DType::Float64);
  double* pc = c.data<double>();
  double* ps = s.data<double>();
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim));
    for (int64_t p = 0; p < num_positions; ++p) {
      const double a = static_cast<double>(p) * inv_freq;
      pc[p * half + i] = std::cos(a);
      ps[p * half + i] = std::sin(a);
    }
  }
  return {c.to(dtype).to(device), s.to(dtype).to(device)};
}

Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryStyle style,
                        bool inverse) {
  constexpr const char* op = "rotary_embedding";
  SACCADE_CHECK(x.defined() && cos.defined() && sin.defined(), "{}: got an undefined tensor", op);
  check_same_device(op, {&x, &cos, &sin});
  SACCADE_CHECK(is_floating(x.dtype()) && x.dim() >= 2,
                "{}: x must be a floating tensor (..., T, D), got {} {}", op, x.dtype(), x.shape());
  const int64_t T = x.size(-2), D = x.size(-1);
  SACCADE_CHECK(cos.dim() == 2 && cos.shape() == sin.shape() && cos.size(0) == T && 2 * cos.size(1) <= D &&
                    cos.size(1) > 0,
                "{}: cos and sin must be (T, R/2) with T = {} and 0 < R <= D = {}, got {} and {} (x {})", op,
                T, D, cos.shape(), sin.shape(), x.shape());
  const DType table = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  SACCADE_CHECK(cos.dtype() == table && sin.dtype() == table,
                "{}: the tables must be {} for a {} x, got {} and {}", op, table, x.dtype(), cos.dtype(),
                sin.dtype());
  // 16-bit x: the CPU and CUDA kernels load and store the 16 bits themselves, float32 inside
  // (Kernel16::RotaryEmbedding)
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  const int64_t rows = x.numel() / (T * D);
  backend(x.device())
      .rotary_embedding(x.contiguous().view({rows, T, D}), cos.contiguous(), sin.contiguous(),
                        out.view({rows, T, D}), style == RotaryStyle::Interleaved, inverse);
  return out;
}

}  // namespace saccade::ops
