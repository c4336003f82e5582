#pragma once
// Sinusoidal positional encodings (Vaswani et al. 2017, section 3.5; d2l section 11.6.3): fixed,
// parameter-free position signals added to token (or grid-cell) representations so that attention, which is
// permutation equivariant, can tell positions apart.
#include <cstdint>

#include "autograd/variable.h"
#include "nn/dropout.h"
#include "nn/module.h"
#include "ops/random.h"

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

}  // namespace saccade::nn
