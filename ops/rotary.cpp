// Rotary position embedding (ops/rotary.h): the tables, the checks, the 16-bit route; the
// kernels per device (cpu/rotary.cpp, cuda/rotary.cu; Backend's composed default, ops/backend.cpp,
// for a backend without one).
#include "ops/rotary.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ops/backend.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace saccade::ops {

std::vector<double> rotary_inv_freq(int64_t rotary_dim, double theta, const RopeScaling& scaling,
                                    const char* op) {
  SACCADE_CHECK(rotary_dim > 0 && rotary_dim % 2 == 0, "{}: rotary_dim must be even and positive, got {}", op,
                rotary_dim);
  SACCADE_CHECK(std::isfinite(theta) && theta > 1, "{}: theta must be finite and > 1, got {}", op, theta);
  using Type = RopeScaling::Type;
  const double factor = scaling.factor, lo = scaling.low_freq_factor, hi = scaling.high_freq_factor;
  // (LongRope's factor only sets its attention factor: 1 at and below 1)
  SACCADE_CHECK(scaling.type == Type::Default || (std::isfinite(factor) && factor >= 1) ||
                    (scaling.type == Type::LongRope && std::isfinite(factor) && factor > 0),
                "{}: the rope scaling factor must be finite and >= 1, got {}", op, factor);
  SACCADE_CHECK(scaling.type != Type::Llama3 ||
                    (std::isfinite(hi) && lo > 0 && hi > lo && scaling.original_max_position_embeddings >= 1),
                "{}: llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor and "
                "original_max_position_embeddings >= 1, got {}, {} and {}",
                op, lo, hi, scaling.original_max_position_embeddings);
  SACCADE_CHECK(
      scaling.type != Type::Yarn ||
          (scaling.original_max_position_embeddings >= 1 && std::isfinite(scaling.beta_fast) &&
           std::isfinite(scaling.beta_slow) && scaling.beta_fast > 0 && scaling.beta_slow > 0),
      "{}: yarn rope scaling needs original_max_position_embeddings >= 1 and positive beta_fast and "
      "beta_slow, got {}, {} and {}",
      op, scaling.original_max_position_embeddings, scaling.beta_fast, scaling.beta_slow);
  SACCADE_CHECK(
      scaling.type != Type::Dynamic || (scaling.original_max_position_embeddings >= 1 && rotary_dim > 2),
      "{}: dynamic rope scaling needs original_max_position_embeddings >= 1 and rotary_dim > 2, got {} "
      "and {}",
      op, scaling.original_max_position_embeddings, rotary_dim);
  if (scaling.type == Type::LongRope) {
    const size_t half = static_cast<size_t>(rotary_dim / 2);
    auto fits = [&](const std::vector<double>& f) {
      return f.size() == half &&
             std::all_of(f.begin(), f.end(), [](double v) { return std::isfinite(v) && v > 0; });
    };
    SACCADE_CHECK(
        fits(scaling.short_factor) && fits(scaling.long_factor) &&
            scaling.original_max_position_embeddings >= 1,
        "{}: longrope rope scaling needs short_factor and long_factor of rotary_dim / 2 = {} positive "
        "numbers each and original_max_position_embeddings >= 1, got {} and {} numbers and {}",
        op, half, scaling.short_factor.size(), scaling.long_factor.size(),
        scaling.original_max_position_embeddings);
  }
  const double L = static_cast<double>(scaling.original_max_position_embeddings);
  // Yarn: the dims between lo and hi blend interpolation into extrapolation (transformers'
  // find_correction_range)
  double ramp_lo = 0, ramp_hi = 0;
  if (scaling.type == Type::Yarn) {
    const double d = static_cast<double>(rotary_dim);
    auto correction_dim = [&](double rotations) {
      return d * std::log(L / (rotations * 2 * std::numbers::pi)) / (2 * std::log(theta));
    };
    ramp_lo = correction_dim(scaling.beta_fast), ramp_hi = correction_dim(scaling.beta_slow);
    if (scaling.truncate) ramp_lo = std::floor(ramp_lo), ramp_hi = std::ceil(ramp_hi);
    ramp_lo = std::max(ramp_lo, 0.0), ramp_hi = std::min(ramp_hi, d - 1);
    if (ramp_lo == ramp_hi) ramp_hi += 0.001;  // as transformers: no division by zero
  }
  // Dynamic: the base grown for S = max(positions, L) (L itself: theta unchanged)
  double base = theta;
  if (scaling.type == Type::Dynamic) {
    const double S = std::max(static_cast<double>(scaling.positions), L), R = static_cast<double>(rotary_dim);
    base = theta * std::pow(factor * S / L - (factor - 1), R / (R - 2));
  }
  std::vector<double> inv_freq(static_cast<size_t>(rotary_dim / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const double f = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim));
    switch (scaling.type) {
      case Type::Default:
      case Type::Dynamic:  // (its base grown above)
        inv_freq[i] = f;
        break;
      case Type::Linear:
        inv_freq[i] = f / factor;
        break;
      case Type::Llama3: {
        const double wavelen = 2 * std::numbers::pi / f;
        if (wavelen < L / hi) {
          inv_freq[i] = f;  // high frequencies: kept
        } else if (wavelen > L / lo) {
          inv_freq[i] = f / factor;  // low frequencies: interpolated
        } else {
          const double s = (L / wavelen - lo) / (hi - lo);  // between: blended
          inv_freq[i] = (1 - s) * f / factor + s * f;
        }
        break;
      }
      case Type::Yarn: {
        const double ramp = std::clamp((static_cast<double>(i) - ramp_lo) / (ramp_hi - ramp_lo), 0.0, 1.0);
        inv_freq[i] = f / factor * ramp + f * (1 - ramp);  // extrapolated where ramp is 0, interpolated at 1
        break;
      }
      case Type::LongRope:
        inv_freq[i] = f / scaling.short_factor[i];  // (rope_scaling_at puts long_factor here past L)
        break;
    }
  }
  return inv_freq;
}

int64_t rope_tables_at(const RopeScaling& scaling, int64_t positions) {
  using Type = RopeScaling::Type;
  if (positions <= scaling.original_max_position_embeddings) return 0;
  return scaling.type == Type::LongRope ? 1 : scaling.type == Type::Dynamic ? positions : 0;
}

RopeScaling rope_scaling_at(const RopeScaling& scaling, int64_t positions) {
  if (rope_tables_at(scaling, positions) == 0) return scaling;
  RopeScaling past = scaling;
  if (scaling.type == RopeScaling::Type::LongRope) past.short_factor = scaling.long_factor;
  if (scaling.type == RopeScaling::Type::Dynamic) past.positions = positions;
  return past;
}

double rotary_attention_factor(const RopeScaling& scaling) {
  using Type = RopeScaling::Type;
  if (scaling.type != Type::Yarn && scaling.type != Type::LongRope) return 1.0;
  if (scaling.attention_factor > 0) return scaling.attention_factor;
  if (scaling.type == Type::LongRope)  // transformers' _compute_longrope_parameters
    return scaling.factor <= 1
               ? 1.0
               : std::sqrt(1 + std::log(scaling.factor) /
                                   std::log(static_cast<double>(scaling.original_max_position_embeddings)));
  auto mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
  if (scaling.mscale > 0 && scaling.mscale_all_dim > 0)
    return mscale(scaling.factor, scaling.mscale) / mscale(scaling.factor, scaling.mscale_all_dim);
  return mscale(scaling.factor, 1.0);
}

RotaryTables rotary_tables(int64_t num_positions, int64_t rotary_dim, double theta, DType dtype,
                           Device device, const RopeScaling& scaling) {
  constexpr const char* op = "rotary_tables";
  SACCADE_CHECK(num_positions >= 0, "{}: num_positions must be >= 0, got {}", op, num_positions);
  SACCADE_CHECK(dtype == DType::Float32 || dtype == DType::Float64,
                "{}: the tables are float32 or float64, got {}", op, dtype);
  const std::vector<double> inv_freq = rotary_inv_freq(rotary_dim, theta, scaling, op);
  const double af = rotary_attention_factor(scaling);
  const int64_t half = rotary_dim / 2;
  Tensor c = Tensor::empty({num_positions, half}, DType::Float64),
         s = Tensor::empty({num_positions, half}, DType::Float64);
  double* pc = c.data<double>();
  double* ps = s.data<double>();
  for (int64_t i = 0; i < half; ++i) {
    for (int64_t p = 0; p < num_positions; ++p) {
      const double a = static_cast<double>(p) * inv_freq[static_cast<size_t>(i)];
      pc[p * half + i] = af * std::cos(a);
      ps[p * half + i] = af * std::sin(a);
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
