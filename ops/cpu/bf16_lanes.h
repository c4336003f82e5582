#pragma once
// bfloat16 <-> float (and float16 -> float) for loops that GCC should vectorise: the same bits as
// ops/half.h's bfloat16(float) and float(bfloat16) (nearest even; NaN stays a quiet NaN of the same sign),
// written as branch-free integer arithmetic on the 16 bits. Inside a loop that does other work too (dropout's
// product and mask, attention's head copies), the struct's conversions, whose NaN case returns early, kept
// GCC 12 from vectorising: those loops ran one element at a time.
#include <bit>
#include <cstdint>
#include <type_traits>

#include "ops/dtype.h"

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

/// The float of IEEE binary16 bits h (exact, as ops/half.h's f16_bits_to_float: subnormals, infinities and
/// NaN payloads included), branch-free so that a loop calling it vectorises. The 15 bits below the sign,
/// shifted into a float's exponent and mantissa, are the value times 2^-112 for normal and subnormal halves
/// (a float denormal for the latter); one multiplication by 2^112 rebiases the exponent exactly (with the
/// default MXCSR, no denormals-are-zero). All exponent bits set (infinity, NaN) keeps the mantissa bits.
inline float f16_widen(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, em = h & 0x7fffu;
  const uint32_t scaled = std::bit_cast<uint32_t>(std::bit_cast<float>(em << 13) * 0x1p112f);
  const uint32_t special = 0u - static_cast<uint32_t>(em >= 0x7c00u);  // a mask, as in bf16_round
  return std::bit_cast<float>(sign | (scaled & ~special) | ((0x7f800000u | (em << 13)) & special));
}

/// One element of storage type S as compute_t<S>: bfloat16 and float16 widened branch-free (exact), float and
/// double as they are. With lane_store, the load and store lines of a kernel that runs on 16-bit tensors
/// natively (float32 inside), so that its loop vectorises (rms_norm, rotary_embedding, swiglu_backward).
template <class S>
inline compute_t<S> lane_load(S v) {
  if constexpr (std::is_same_v<S, bfloat16>)
    return bf16_widen(v.bits);
  else if constexpr (std::is_same_v<S, float16>)
    return f16_widen(v.bits);
  else
    return v;
}

/// v rounded once into storage type S: bfloat16 by bf16_round (branch-free), float16 by float16's own
/// conversion (nearest even; a call per element), float and double as they are.
template <class S>
inline S lane_store(compute_t<S> v) {
  if constexpr (std::is_same_v<S, bfloat16>)
    return bfloat16::from_bits(bf16_round(v));
  else if constexpr (std::is_same_v<S, float16>)
    return float16(v);
  else
    return v;
}

/// Row r of `to` (row stride ldt) = bf16_round of row r of `from` (row stride ldf), rows × cols, at the
/// machine's vector width (with_isa, once for all rows; bf16_lanes.cpp). The one loop behind the casts,
/// attention's stored heads and rounded tiles, and the bf16 GEMM's C.
void round_rows(const float* from, int64_t ldf, uint16_t* to, int64_t ldt, int64_t rows, int64_t cols);

/// Row r of `to` = bf16_widen of row r of `from` (exact), vectorised as round_rows.
void widen_rows(const uint16_t* from, int64_t ldf, float* to, int64_t ldt, int64_t rows, int64_t cols);

}  // namespace saccade::cpu
