#pragma once
// Seeded random tensors. The Generator is a (seed, offset) pair over the counter-based Philox4x32-10 stream
// (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; ops/philox.h): element i of a draw
// is made from the Philox block at counter offset + i, so CPU and GPU produce the same numbers for the same
// seed, in any thread order. Uniforms use the block's first word: u = w * 2^-32 in [0, 1) (float32: the top
// 24 bits, u = (w >> 8) * 2^-24). Normals use Box-Muller on its first two words.
#include <cstdint>
#include <mutex>

#include "ops/tensor.h"

namespace saccade {

/// A source of random numbers: the same seed gives the same sequence of tensors.
///
/// Thread safety: every method takes a lock, so threads sharing one generator (the default one, typically)
/// never get the same counters and never lose an update; which thread gets which numbers then depends on
/// timing. For reproducible runs on several threads, give each thread its own Generator.
class Generator {
 public:
  /// The (seed, first counter) of one draw: the draw uses counters [offset, offset + n).
  struct Draw {
    uint64_t seed, offset;
  };
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  Generator(const Generator& other) : seed_(other.seed()), offset_(other.offset()) {}
  Generator& operator=(const Generator& other) {
    const uint64_t seed = other.seed(), offset = other.offset();
    std::lock_guard lock(mutex_);
    seed_ = seed, offset_ = offset;
    return *this;
  }
  void manual_seed(uint64_t seed) {
    std::lock_guard lock(mutex_);
    seed_ = seed, offset_ = 0;
  }
  uint64_t seed() const {
    std::lock_guard lock(mutex_);
    return seed_;
  }
  uint64_t offset() const {
    std::lock_guard lock(mutex_);
    return offset_;
  }
  /// Reserves `n` counters: returns the seed and the first counter together (one lock), and advances the
  /// stream past them. Every random op draws through this.
  Draw reserve(uint64_t n) {
    std::lock_guard lock(mutex_);
    Draw d{seed_, offset_};
    offset_ += n;
    return d;
  }
  /// Reserves `n` counters and returns the first (reserve(n).offset).
  uint64_t advance(uint64_t n) { return reserve(n).offset; }

 private:
  mutable std::mutex mutex_;
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
};

/// The process-wide generator used when none is passed (seed 0 until manual_seed). It is shared by all
/// threads and safe to use from several at once (see Generator).
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
