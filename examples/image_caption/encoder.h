#pragma once
// The CNN grid encoder both captioners share: conv-relu-pool twice turns a 56x56 scene into a G x G grid of
// feature vectors (G = 7: pools of 2 then 4; G = 14: pools of 2 and 2), a linear layer projects each to
// d_model, and a fixed 2-d sinusoidal encoding of its grid position is added (without it the attended
// context could not tell top from bottom: attention pooling is permutation invariant).
#include <cstdint>
#include <memory>

#include "autograd/variable.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/positional.h"
#include "ops/random.h"

namespace saccade::examples {

/// images (B, 1, 56, 56) -> memory (B, G * G, d_model), rows in row-major grid order.
/// Children: conv1, conv2 (nn::Conv2d, 3x3, padding 1), proj (nn::Linear), pos (nn::PositionalEncoding2D).
class GridEncoder : public nn::Module {
 public:
  /// conv1 / conv2: channels of the two 3x3 convolutions (padding 1); grid: 7 or 14; weights drawn from
  /// `gen`. Throws saccade::Error naming "GridEncoder" for another grid size.
  GridEncoder(int64_t conv1, int64_t conv2, int64_t grid, int64_t d_model, Generator* gen);
  Variable forward(const Tensor& images);
  int64_t grid() const { return grid_; }

  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::Linear> proj;
  std::shared_ptr<nn::PositionalEncoding2D> pos;

 private:
  int64_t grid_, d_model_;
};

}  // namespace saccade::examples
