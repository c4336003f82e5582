#pragma once
// The kernels of weights kept quantized, as a backend implements them: one row per kernel (row format:
// ops/backend.h), its contract above it. CPU: ops/cpu/quant.cpp; CUDA has none (the op composes it). The ops
// that call them: ops/quant.h. A contract header includes no op header (scripts/check_layers).
#include <cstdint>
#include <memory>
#include <vector>

#include "ops/tensor.h"  // float16 (ops/half.h)

namespace saccade {

/// GGUF's Q8_0 block (llama.cpp's block_q8_0, ggml-common.h): 32 consecutive weights of a row as int8 qs[i]
/// and one float16 scale d; weight i ≈ d · qs[i]. 34 bytes for 32 weights (8.5 bits a weight), laid out as in
/// a GGUF file, so that a Q8_0 tensor read from one is used as it is.
struct BlockQ8_0 {
  static constexpr int64_t kSize = 32;  ///< weights a block
  float16 d;
  int8_t qs[kSize];
};
static_assert(sizeof(BlockQ8_0) == 34, "BlockQ8_0 is GGUF's 34-byte block");

/// A matrix (rows, cols) kept in Q8_0, in host memory: each row's cols in blocks_per_row() = ⌈cols / 32⌉
/// blocks, the last zero-padded when 32 does not divide cols (GGUF's Q8_0 tensors always have cols % 32 == 0
/// and need no padding); block b of row r at blocks[r · blocks_per_row() + b]. Immutable once made (the
/// blocks are shared between copies). Made by ops::quantize_q8_0 (ops/quant.h).
struct Q8_0Matrix {
  int64_t rows = 0, cols = 0;
  std::shared_ptr<const std::vector<BlockQ8_0>> blocks;
  bool defined() const { return blocks != nullptr; }
  int64_t blocks_per_row() const { return (cols + BlockQ8_0::kSize - 1) / BlockQ8_0::kSize; }
  /// The bytes the blocks take: rows · blocks_per_row() · 34.
  int64_t bytes() const { return rows * blocks_per_row() * static_cast<int64_t>(sizeof(BlockQ8_0)); }
};

}  // namespace saccade

#define SACCADE_QUANT_FUSED_KERNELS(K, K16)                                                                    \
  /* out (M, N) float32 contiguous = x (M, K) float32 contiguous · wᵀ, w a Q8_0Matrix (N, K) on the host:   \
   * out[m][n] = Σ_b d_nb · Σ_i qs_nb[i] · x[m][32b + i], float32 products and sums. Fused: the blocks are \
   * read once and never widened into memory (ops/cpu/quant.cpp). Without it (CUDA), the op multiplies by      \
   * the dequantized float32 matrix (ops::linear_q8_0_composed, the reference it is tested against). */        \
  K(linear_q8_0, (const Tensor& x, const Q8_0Matrix& w, const Tensor& out), (x, w, out))
