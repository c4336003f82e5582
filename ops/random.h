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

// ---- this family's backend kernels ----
// The one declaration of each kernel of this family (row format: ops/backend.h, which expands the list into
// Backend's virtual functions; the CPU and CUDA backends expand it into their overrides,
// ops/backend_widening.h into the 16-bit route). A kernel assumes the op checked its arguments.
#define SACCADE_RANDOM_KERNELS(K, K16)                                                                     \
  /* Counter-based Philox4x32-10 (ops/philox.h); element i uses counter offset + i. out (contiguous float) \
   * = U[low, high). 16 bits: the same counters give the float32 draws, each rounded once. */              \
  K16(uniform, (const Tensor& out, uint64_t seed, uint64_t offset, double low, double high),               \
      (out, seed, offset, low, high), Kernel16::Uniform, OutFrom<0>)                                       \
  /* out (contiguous float) = N(mean, std^2) by Box-Muller; 16 bits as uniform. */                         \
  K16(normal, (const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std),                \
      (out, seed, offset, mean, std), Kernel16::Normal, OutFrom<0>)

/// The kernels with a default that composes others (Backend's body in ops/backend.cpp); rows as above.
#define SACCADE_RANDOM_COMPOSED_KERNELS(K, K16)                                                             \
  /* Inverted dropout of contiguous float x: mask[i] = 1/(1-p) in x's dtype where u_i >= p (u_i = U[0, 1)   \
   * of counter offset + i as `uniform` draws it, compared in x's dtype), else 0; out = x ⊙ mask (out and \
   * mask contiguous, x's shape and dtype). The default composes `uniform` with the elementwise kernels     \
   * (every device draws the same mask); the CPU makes it in one pass. 16 bits widened: the draws are       \
   * float32's (compared with p in float32); out and the mask are rounded once. */                          \
  K16(dropout,                                                                                              \
      (const Tensor& x, uint64_t seed, uint64_t offset, double p, const Tensor& out, const Tensor& mask),   \
      (x, seed, offset, p, out, mask), Kernel16::Dropout, OutFrom<4>)
