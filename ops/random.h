#pragma once
// Seeded random tensors. The Generator is a (seed, offset) pair over the counter-based Philox4x32-10 stream
// (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; ops/philox.h): element i of a draw
// is made from the Philox block at counter offset + i, so CPU and GPU produce the same numbers for the same
// seed, in any thread order. Uniforms use the block's first word: u = w * 2^-32 in [0, 1) (float32: the top
// 24 bits, u = (w >> 8) * 2^-24). Normals use Box-Muller on its first two words.
#include <cstdint>

#include "ops/tensor.h"

namespace saccade {

/// A source of random numbers: the same seed gives the same sequence of tensors.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  void manual_seed(uint64_t seed) { seed_ = seed, offset_ = 0; }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  /// Reserves `n` counters and returns the first; each draw advances the stream.
  uint64_t advance(uint64_t n) {
    uint64_t o = offset_;
    offset_ += n;
    return o;
  }

 private:
  uint64_t seed_ = 0, offset_ = 0;
};

/// The process-wide generator used when none is passed (seed 0 until manual_seed).
Generator& default_generator();
/// Reseeds the default generator (torch.manual_seed).
void manual_seed(uint64_t seed);

namespace ops {
/// U[0, 1) of `shape`, float dtype.
Tensor rand(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu(),
            Generator* gen = nullptr);
/// N(0, 1) of `shape`.
Tensor randn(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu(),
             Generator* gen = nullptr);
/// U[low, high).
Tensor uniform(const Shape& shape, double low, double high, DType dtype = DType::Float32,
               Device device = Device::cpu(), Generator* gen = nullptr);
/// N(mean, std^2).
Tensor normal(const Shape& shape, double mean, double std, DType dtype = DType::Float32,
              Device device = Device::cpu(), Generator* gen = nullptr);
/// int64 uniform in [low, high).
Tensor randint(int64_t low, int64_t high, const Shape& shape, Device device = Device::cpu(),
               Generator* gen = nullptr);
/// A random permutation of 0..n-1 (int64).
Tensor randperm(int64_t n, Generator* gen = nullptr);
}  // namespace ops

}  // namespace saccade
