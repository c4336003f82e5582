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

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define SACCADE_BF16_LANES16 1
#endif

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

#if SACCADE_BF16_LANES16
/// bf16_widen on 16 lanes at once (AVX-512 F and BW): 16 bfloat16 bit patterns -> 16 floats (exact).
[[gnu::target("avx512f,avx512bw"), gnu::always_inline]] inline __m512 bf16_widen16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/// bf16_round on 16 lanes at once: the same integer steps (nearest even; NaN -> quiet NaN of the same sign),
/// so the same bits lane by lane. Not VCVTNEPS2BF16 (AVX512-BF16), which flushes denormals to zero.
[[gnu::target("avx512f,avx512bw"), gnu::always_inline]] inline __m256i bf16_round16(__m512 f) {
  const __m512i u = _mm512_castps_si512(f), hi = _mm512_srli_epi32(u, 16);
  const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __m512i nan = _mm512_or_si512(hi, _mm512_set1_epi32(0x40));
  const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                   _mm512_set1_epi32(0x7f800000));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, nan));
}

/// bf16_round16 by one VCVTNEPS2BF16 (AVX512-BF16; call it only where cpu_has_avx512_bf16(), simd.h): the
/// same rounding (nearest even; NaN -> the quiet NaN of its upper 16 bits), but the instruction flushes float
/// denormals to ±0, so a vector holding one (VFPCLASSPS) takes bf16_round16. In the SwiGLU loops the integer
/// rounding was a large share of the time, and the vector ALUs were the limit, not memory (bench/RESULTS.md,
/// "bfloat16 SwiGLU at 16 lanes").
[[gnu::target("avx512f,avx512bw,avx512dq,avx512bf16"), gnu::always_inline]] inline __m256i bf16_round16_bf16(
    __m512 f) {
  if (_mm512_fpclass_ps_mask(f, 0x20)) [[unlikely]]  // 0x20: denormal
    return bf16_round16(f);
  return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(f));
}
#endif

/// Row r of `to` (row stride ldt) = bf16_round of row r of `from` (row stride ldf), rows × cols, at the
/// machine's vector width (with_isa, once for all rows; bf16_lanes.cpp). The one loop behind the casts,
/// attention's stored heads and rounded tiles, and the bf16 GEMM's C.
void round_rows(const float* from, int64_t ldf, uint16_t* to, int64_t ldt, int64_t rows, int64_t cols);

/// Row r of `to` = bf16_widen of row r of `from` (exact), vectorised as round_rows.
void widen_rows(const uint16_t* from, int64_t ldf, float* to, int64_t ldt, int64_t rows, int64_t cols);

}  // namespace saccade::cpu
