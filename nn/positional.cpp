#include "nn/positional.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/rotary.h"
#include "autograd/functions/shape.h"
#include "ops/creation.h"
#include "ops/index.h"
#include "ops/join.h"

namespace saccade::nn {

Tensor sinusoidal_positions(int64_t max_len, int64_t num_hiddens, DType dtype) {
  SACCADE_CHECK(max_len >= 0 && num_hiddens > 0,
                "sinusoidal_positions: need max_len >= 0 and num_hiddens > 0, got {} and {}", max_len,
                num_hiddens);
  SACCADE_CHECK(is_floating(dtype), "sinusoidal_positions: dtype must be float32 or float64, got {}", dtype);
  // Computed in double on the host, then converted: the table is made once per module. Allocated as a tensor
  // first, so an absurd size is refused before any arithmetic on it.
  Tensor table = Tensor::empty({max_len, num_hiddens}, DType::Float64, Device::cpu(), "sinusoidal_positions");
  double* p = table.data<double>();
  for (int64_t i = 0; i < max_len; ++i)
    for (int64_t c = 0; c < num_hiddens; ++c) {
      const int64_t j2 = c - c % 2;  // 2j
      const double angle = static_cast<double>(i) / std::pow(10000.0, static_cast<double>(j2) / num_hiddens);
      p[i * num_hiddens + c] = c % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  return table.to(dtype);
}

Tensor sinusoidal_positions_2d(int64_t rows, int64_t cols, int64_t channels, DType dtype) {
  SACCADE_CHECK(rows >= 0 && cols >= 0 && channels > 0 && channels % 2 == 0,
                "sinusoidal_positions_2d: need rows, cols >= 0 and a positive even channels, got {}, {}, {}",
                rows, cols, channels);
  const int64_t half = channels / 2;
  // row part: (rows, 1, half) -> (rows, cols, half); column part: (1, cols, half) -> (rows, cols, half)
  Tensor r = sinusoidal_positions(rows, half, dtype).view({rows, 1, half}).expand({rows, cols, half});
  Tensor c = sinusoidal_positions(cols, half, dtype).view({1, cols, half}).expand({rows, cols, half});
  return ops::cat({r, c}, 2);
}

PositionalEncoding::PositionalEncoding(int64_t num_hiddens, double p, int64_t max_len, Generator* gen)
    : Module("PositionalEncoding") {
  ErrorScope scope(name());
  SACCADE_CHECK(num_hiddens > 0 && max_len > 0,
                "PositionalEncoding: num_hiddens and max_len must be positive, got {} and {}", num_hiddens,
                max_len);
  dropout = register_module("dropout", std::make_shared<Dropout>(p, gen));
  P = register_buffer("P", sinusoidal_positions(max_len, num_hiddens).unsqueeze(0));
}

// X: (B, T, D) -> (B, T, D)
Variable PositionalEncoding::forward(const Variable& X, int64_t offset) {
  ErrorScope scope(name(), {shape_of(X)});
  const int64_t max_len = P.size(1), d = P.size(2);
  SACCADE_CHECK(X.defined() && X.dim() == 3 && X.size(2) == d,
                "PositionalEncoding: expected X of shape (B, T, {}), got {}", d,
                X.defined() ? X.shape() : Shape{});
  // a 16-bit X (under autocast) adds the float32 table and gives float32, as x + pe does in PyTorch
  SACCADE_CHECK(X.dtype() == P.dtype() || (is_half(X.dtype()) && P.dtype() == DType::Float32),
                "PositionalEncoding: X is {} but P is {} (use module.to(dtype))", X.dtype(), P.dtype());
  SACCADE_CHECK(offset >= 0 && offset <= max_len && X.size(1) <= max_len - offset,
                "PositionalEncoding: {} positions from offset {} of X {} exceed max_len {}", X.size(1),
                offset, X.shape(), max_len);
  return dropout->forward(add(X, Variable(P.data().narrow(1, offset, X.size(1)))));
}

PositionalEncoding2D::PositionalEncoding2D(int64_t num_channels, double p, int64_t max_rows, int64_t max_cols,
                                           Generator* gen)
    : Module("PositionalEncoding2D") {
  ErrorScope scope(name());
  SACCADE_CHECK(
      num_channels > 0 && num_channels % 2 == 0 && max_rows > 0 && max_cols > 0,
      "PositionalEncoding2D: need a positive even num_channels and positive max_rows, max_cols, got {}, "
      "{}, {}",
      num_channels, max_rows, max_cols);
  dropout = register_module("dropout", std::make_shared<Dropout>(p, gen));
  P = register_buffer("P", sinusoidal_positions_2d(max_rows, max_cols, num_channels));
}

// X: (B, H, W, C) -> (B, H, W, C)
Variable PositionalEncoding2D::forward(const Variable& X) {
  ErrorScope scope(name(), {shape_of(X)});
  const int64_t rows = P.size(0), cols = P.size(1), c = P.size(2);
  SACCADE_CHECK(X.defined() && X.dim() == 4 && X.size(3) == c && X.size(1) <= rows && X.size(2) <= cols,
                "PositionalEncoding2D: expected X of shape (B, H <= {}, W <= {}, {}), got {}", rows, cols, c,
                X.defined() ? X.shape() : Shape{});
  // a 16-bit X (under autocast) adds the float32 table and gives float32, as x + pe does in PyTorch
  SACCADE_CHECK(X.dtype() == P.dtype() || (is_half(X.dtype()) && P.dtype() == DType::Float32),
                "PositionalEncoding2D: X is {} but P is {} (use module.to(dtype))", X.dtype(), P.dtype());
  Tensor p = P.data().narrow(0, 0, X.size(1)).narrow(1, 0, X.size(2));
  return dropout->forward(add(X, Variable(p)));
}

// X: (B, C, H, W) -> (B, C, H, W)
Variable PositionalEncoding2D::forward_nchw(const Variable& X) {
  ErrorScope scope(name(), {shape_of(X)});
  SACCADE_CHECK(X.defined() && X.dim() == 4, "PositionalEncoding2D: expected X of shape (B, C, H, W), got {}",
                X.defined() ? X.shape() : Shape{});
  return permute(forward(permute(X, {0, 2, 3, 1})), {0, 3, 1, 2});
}

RotaryEmbedding::RotaryEmbedding(int64_t head_dim, double theta, ops::RotaryStyle style,
                                 double rotary_fraction, const ops::RopeScaling& scaling)
    : Module("RotaryEmbedding"), head_dim_(head_dim), theta_(theta), style_(style), scaling_(scaling) {
  ErrorScope scope(name());
  SACCADE_CHECK(rotary_fraction > 0 && rotary_fraction <= 1,
                "RotaryEmbedding: rotary_fraction must be in (0, 1], got {}", rotary_fraction);
  rotary_dim_ = static_cast<int64_t>(static_cast<double>(head_dim) * rotary_fraction);
  if (rotary_fraction < 1) rotary_dim_ -= rotary_dim_ % 2;  // partial: the largest even count (as GPT-NeoX)
  SACCADE_CHECK(
      rotary_dim_ > 0 && rotary_dim_ % 2 == 0,
      "RotaryEmbedding: the rotated dims must be even and positive: head_dim {} x rotary_fraction {} "
      "gives {}",
      head_dim, rotary_fraction, rotary_dim_);
  ops::rotary_inv_freq(rotary_dim_, theta, scaling, "RotaryEmbedding");  // checks theta and the scaling
}

const ops::RotaryTables& RotaryEmbedding::tables(const Variable& x, int64_t positions) {
  const DType dtype = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  // LongRope and Dynamic: other frequencies once the positions pass the original context (the scaling is
  // copied only when tables are made: this runs in every layer at every decoded token)
  const int64_t set = ops::rope_tables_at(scaling_, positions);
  const TableKey key{dtype, x.device(), set};
  for (auto& [k, t] : cache_) {
    if (k != key) continue;
    if (t.cos.size(0) < positions)
      t = ops::rotary_tables(std::max(positions, 2 * t.cos.size(0)), rotary_dim_, theta_, dtype, x.device(),
                             ops::rope_scaling_at(scaling_, positions));
    return t;
  }
  // Dynamic past the original context: a set for each length, so only the newest is kept
  std::erase_if(cache_, [&](const auto& entry) {
    const auto& [d, dev, s] = entry.first;
    return set > 1 && s > 1 && d == dtype && dev == x.device();
  });
  cache_.emplace_back(key, ops::rotary_tables(std::max<int64_t>(positions, 64), rotary_dim_, theta_, dtype,
                                              x.device(), ops::rope_scaling_at(scaling_, positions)));
  return cache_.back().second;
}

namespace {
// RotaryEmbedding::forward's check: x is floating, (..., T, head_dim)
void check_rotary_input(const Variable& x, int64_t head_dim) {
  SACCADE_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == head_dim && is_floating(x.dtype()),
                "RotaryEmbedding: expected a floating x of shape (..., T, {}), got {}", head_dim,
                x.defined() ? x.shape() : Shape{});
}
}  // namespace

// x: (..., T, head_dim) -> the same
Variable RotaryEmbedding::forward(const Variable& x, int64_t offset) {
  ErrorScope scope(name(), {shape_of(x)});
  check_rotary_input(x, head_dim_);
  SACCADE_CHECK(offset >= 0, "RotaryEmbedding: offset must be >= 0, got {}", offset);
  const int64_t T = x.size(-2);
  const ops::RotaryTables& t = tables(x, offset + T);
  return rotary_embedding(x, t.cos.narrow(0, offset, T), t.sin.narrow(0, offset, T), style_);
}

Variable RotaryEmbedding::forward(const Variable& x, const Tensor& positions) {
  ErrorScope scope(name(), {shape_of(x)});
  check_rotary_input(x, head_dim_);
  SACCADE_CHECK(positions.defined() && positions.dtype() == DType::Int64 && positions.dim() == 1 &&
                    positions.size(0) == x.size(-2),
                "RotaryEmbedding: positions must be int64 (T) with T = {}, got {}", x.size(-2),
                positions.defined() ? positions.shape() : Shape{});
  const Tensor on_host = positions.to(Device::cpu());
  int64_t last = -1;
  for (int64_t p : on_host.to_vector<int64_t>()) {
    SACCADE_CHECK(p >= 0, "RotaryEmbedding: positions must be >= 0, got {}", p);
    last = std::max(last, p);
  }
  const ops::RotaryTables& t = tables(x, last + 1);
  const Tensor index = positions.to(x.device());
  return rotary_embedding(x, ops::index_select(t.cos, 0, index), ops::index_select(t.sin, 0, index), style_);
}

}  // namespace saccade::nn
