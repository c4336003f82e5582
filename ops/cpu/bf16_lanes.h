#pragma once
// bfloat16 <-> float for loops that GCC should vectorise: the same bits as ops/half.h's bfloat16(float) and
// float(bfloat16) (nearest even; NaN stays a quiet NaN of the same sign), written as branch-free integer
// arithmetic on the 16 bits. Inside a loop that does other work too (dropout's product and mask, attention's
// head copies), the struct's conversions, whose NaN case returns early, kept GCC 12 from vectorising: those
// loops ran one element at a time.
#include <bit>
#include <cstdint>

namespace saccade::cpu {

/// The bfloat16 bits nearest to f (ties to even); NaN -> quiet NaN.
inline uint16_t bf16_round(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x0040u;
  // a mask, not a ?: select, which GCC turned back into a branch inside longer loops
  const uint32_t is_nan = 0u - static_cast<uint32_t>((u & 0x7fffffffu) > 0x7f800000u);
  return static_cast<uint16_t>((rounded & ~is_nan) | (nan & is_nan));
}

/// The float of bfloat16 bits h (exact).
inline float bf16_widen(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

}  // namespace saccade::cpu
