#pragma once
// Sinusoidal positional encodings (Vaswani et al. 2017, section 3.5; d2l section 11.6.3): fixed,
// parameter-free position signals added to token (or grid-cell) representations so that attention, which is
// permutation equivariant, can tell positions apart; and the rotary embedding of queries and keys (Su et al.
// 2021), which makes a score depend on the distance between positions.
#include <cstdint>

#include <tuple>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "nn/dropout.h"
#include "nn/module.h"
#include "ops/random.h"
#include "ops/rotary.h"

namespace saccade::nn {

/// The table P (max_len, num_hiddens) of d2l eq. 11.6.2:
///   P[i, 2j] = sin(i / 10000^(2j / d)),   P[i, 2j + 1] = cos(i / 10000^(2j / d)),
/// d = num_hiddens (an odd d drops the last cosine column). dtype float32 or float64. Throws saccade::Error
/// naming "sinusoidal_positions" for a negative max_len or a non-positive num_hiddens.
Tensor sinusoidal_positions(int64_t max_len, int64_t num_hiddens, DType dtype = DType::Float32);

/// The 2-d table P (rows, cols, channels) for a grid: the first channels / 2 channels hold the 1-d encoding
/// of the row index, the other channels / 2 that of the column index (as DETR's sine position embedding,
/// Carion et al. 2020, section A.4, without normalisation). channels must be even and positive.
Tensor sinusoidal_positions_2d(int64_t rows, int64_t cols, int64_t channels, DType dtype = DType::Float32);

/// X + P[:T] followed by dropout (d2l section 11.6.3, PositionalEncoding).
/// Buffer: `P` of shape (1, max_len, num_hiddens) (float32; follows module.to(dtype)).
class PositionalEncoding : public Module {
 public:
  /// Dropout draws from `gen` (the default generator when null; it must outlive the module).
  PositionalEncoding(int64_t num_hiddens, double dropout, int64_t max_len = 1000, Generator* gen = nullptr);

  /// X (B, T, num_hiddens) -> (B, T, num_hiddens), positions offset, offset + 1, ... (offset > 0 lets an
  /// incremental decoder encode step t alone). Throws saccade::Error naming "PositionalEncoding" for another
  /// shape, a dtype other than P's, or offset + T > max_len.
  Variable forward(const Variable& X, int64_t offset = 0);

  Variable P;
  std::shared_ptr<Dropout> dropout;
};

/// X + P2d followed by dropout, for a feature grid (the image captioner adds it to its CNN features before
/// attending over them). Buffer: `P` of shape (max_rows, max_cols, num_channels) (sinusoidal_positions_2d).
class PositionalEncoding2D : public Module {
 public:
  PositionalEncoding2D(int64_t num_channels, double dropout, int64_t max_rows = 64, int64_t max_cols = 64,
                       Generator* gen = nullptr);

  /// Channels-last X (B, H, W, C) -> (B, H, W, C) with P[:H, :W] added. Throws saccade::Error naming
  /// "PositionalEncoding2D" for another rank, C != num_channels, H > max_rows, W > max_cols or a dtype other
  /// than P's.
  Variable forward(const Variable& X);
  /// Channels-first X (B, C, H, W) (a CNN's output) -> (B, C, H, W). Errors as forward.
  Variable forward_nchw(const Variable& X);

  Variable P;
  std::shared_ptr<Dropout> dropout;
};

/// Rotary position embedding of queries and keys (Su et al. 2021; Hugging Face's LlamaRotaryEmbedding with
/// apply_rotary_pos_emb): rotates the first rotary_dim = head_dim · rotary_fraction dims (rounded down to
/// even) of x (B, H, T, head_dim) by the angles of each position. The cos/sin tables (ops::rotary_tables) are
/// made once and grown by doubling when a later position needs more rows, one set per table dtype (float32,
/// or float64 for float64 inputs) and device: no step recomputes them. They are no state (as Hugging Face's
/// non-persistent buffers): state_dict() is empty.
/// `scaling` rescales the frequencies for a longer context (ops::RopeScaling: linear, Llama 3's, YaRN,
/// LongRope, whose forward picks its short or long factors by the last position it rotates, and Dynamic,
/// whose base grows with it: rope_scaling_at; Dynamic makes a new set of tables for each length past the
/// original context, keeping only the newest).
/// Throws saccade::Error naming "RotaryEmbedding" for an odd or non-positive rotary dim (a head_dim of 1, or
/// an odd head_dim with rotary_fraction 1), a rotary_fraction outside (0, 1], theta <= 1, or a scaling that
/// ops::rotary_inv_freq refuses.
class RotaryEmbedding : public Module {
 public:
  RotaryEmbedding(int64_t head_dim, double theta = 10000.0, ops::RotaryStyle style = ops::RotaryStyle::Half,
                  double rotary_fraction = 1.0, const ops::RopeScaling& scaling = {});

  /// x (B, H, T, head_dim) (or any (..., T, head_dim)) rotated at positions offset .. offset + T - 1 (a
  /// KV-cache step passes its own position). Throws saccade::Error naming "RotaryEmbedding" for another last
  /// dim, offset < 0, or a non-floating x.
  Variable forward(const Variable& x, int64_t offset = 0);
  /// x rotated at `positions`: int64 (T), each >= 0, shared by every batch row. Throws
  /// saccade::Error naming "RotaryEmbedding" for another length or a negative position.
  Variable forward(const Variable& x, const Tensor& positions);

  int64_t head_dim() const { return head_dim_; }
  int64_t rotary_dim() const { return rotary_dim_; }
  double theta() const { return theta_; }
  ops::RotaryStyle style() const { return style_; }
  const ops::RopeScaling& scaling() const { return scaling_; }

 private:
  // the tables for x, with at least `positions` rows
  const ops::RotaryTables& tables(const Variable& x, int64_t positions);
  int64_t head_dim_, rotary_dim_;
  double theta_;
  ops::RotaryStyle style_;
  ops::RopeScaling scaling_;
  using TableKey = std::tuple<DType, Device, int64_t>;  // the tables' dtype, device, ops::rope_tables_at
  std::vector<std::pair<TableKey, ops::RotaryTables>> cache_;
};

}  // namespace saccade::nn
