#pragma once
// Philox4x32-10, the counter-based generator of Salmon et al. (SC 2011), as in cuRAND and PyTorch's CUDA RNG.
// A pure function of (key, counter): usable from CPU threads and CUDA threads alike.
#include <cstdint>

#if defined(__CUDACC__)
#define SACCADE_HD __host__ __device__ __forceinline__
#else
#define SACCADE_HD inline
#endif

namespace saccade {

struct Philox4 {
  uint32_t w[4];
};

/// The 4 random 32-bit words of block `counter` under `seed`.
SACCADE_HD Philox4 philox4x32_10(uint64_t seed, uint64_t counter) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c0, p1 = static_cast<uint64_t>(kM1) * c2;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return {{c0, c1, c2, c3}};
}

/// [0, 1) from one word: float32 keeps the top 24 bits so that rounding never reaches 1.
SACCADE_HD float uniform_float(uint32_t w) { return static_cast<float>(w >> 8) * (1.0f / 16777216.0f); }
SACCADE_HD double uniform_double(uint32_t w) { return static_cast<double>(w) * (1.0 / 4294967296.0); }
/// (0, 1]: safe inside log().
SACCADE_HD double uniform_open0(uint32_t w) { return (static_cast<double>(w) + 1.0) * (1.0 / 4294967296.0); }

}  // namespace saccade
