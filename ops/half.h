#pragma once
// The two 16-bit floating-point storage types, usable in host and device code:
//
//   bfloat16: 1 sign, 8 exponent, 7 mantissa bits: the top half of a float32 (same range, 8 significant
//             bits, about 2-3 decimal digits). Google Brain's format; what TPUs, AVX512-BF16 and Ampere+ run.
//   float16:  IEEE 754 binary16: 1 sign, 5 exponent, 10 mantissa bits (11 significant bits, largest finite
//             65504, smallest normal 2^-14, subnormals down to 2^-24).
//
// They are storage types only: a kernel loads one, widens it to float (compute_t, ops/dtype.h), computes
// there and rounds once on the store. Widening is exact (every 16-bit value is a float). Narrowing rounds to
// nearest, ties to even; NaN stays NaN (made quiet, sign kept); a float beyond float16's range becomes ±inf
// (bfloat16 has float's range, so only values within half an ulp of float's maximum round up to inf).
// Conversions from double go through float (as PyTorch's c10::BFloat16 / c10::Half do): a double that lies
// within 2^-29 relative of a 16-bit tie can round differently than a direct rounding would (double rounding).
//
// Sources: IEEE 754-2008 section 3.6 (binary16); the bfloat16 format as in Kalamkar et al., "A Study of
// BFLOAT16 for Deep Learning Training" (2019); the float -> half rounding follows F. Giesen's
// float_to_half_fast3_rtne (public domain), which rounds subnormals by one float addition of 0.5.
#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <bit>
#endif

#if defined(__CUDACC__)
#define SACCADE_HALF_HD __host__ __device__ inline
#else
#define SACCADE_HALF_HD inline
#endif

namespace saccade {

namespace half_detail {
SACCADE_HALF_HD uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return std::bit_cast<uint32_t>(x);
#endif
}
SACCADE_HALF_HD float float_of(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  return std::bit_cast<float>(b);
#endif
}
}  // namespace half_detail

/// float -> bfloat16 bits, round to nearest even; NaN -> quiet NaN of the same sign.
SACCADE_HALF_HD uint16_t float_to_bf16_bits(float f) {
  const uint32_t u = half_detail::bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN: quiet
  // add half an ulp of the kept part (0x7fff), plus one when the kept part is odd (ties to even)
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// bfloat16 bits -> float, exactly.
SACCADE_HALF_HD float bf16_bits_to_float(uint16_t h) { return half_detail::float_of(uint32_t(h) << 16); }

/// float -> IEEE binary16 bits, round to nearest even; beyond the range -> ±inf; NaN -> quiet NaN.
SACCADE_HALF_HD uint16_t float_to_f16_bits(float f) {
  uint32_t u = half_detail::bits_of(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  uint32_t h;
  if (u >= 0x47800000u) {  // |f| >= 2^16 (or inf, NaN): all exponent bits set
    h = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (u < 0x38800000u) {  // |f| < 2^-14: a subnormal or zero half
    // |f| + 0.5 has an ulp of 2^-24, the subnormal step: the float addition itself rounds to nearest even,
    // and the mantissa bits of the sum are the half's (0x400 when it rounds up to the smallest normal).
    h = half_detail::bits_of(half_detail::float_of(u) + 0.5f) - 0x3f000000u;
  } else {  // normal: rebias the exponent (127 -> 15), round the 13 dropped mantissa bits to even
    const uint32_t odd = (u >> 13) & 1u;
    u += 0xc8000fffu + odd;  // 0xc8000000 = (15 - 127) << 23 (mod 2^32); 0xfff = half an ulp minus one
    h = u >> 13;  // a carry out of the mantissa bumps the exponent; out of 30 it gives 0x7c00 (inf)
  }
  return static_cast<uint16_t>(h | sign);
}

/// IEEE binary16 bits -> float, exactly (subnormals, infinities and NaN payloads included).
SACCADE_HALF_HD float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return half_detail::float_of(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    const float mag = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return half_detail::float_of(sign | half_detail::bits_of(mag));
  }
  return half_detail::float_of(sign | ((exp + 112u) << 23) | (mant << 13));
}

/// A bfloat16 value: its 16 bits. Converts to float implicitly (exact) and from float explicitly (rounds).
struct bfloat16 {
  uint16_t bits;
  bfloat16() = default;
  SACCADE_HALF_HD explicit bfloat16(float f) : bits(float_to_bf16_bits(f)) {}
  SACCADE_HALF_HD operator float() const { return bf16_bits_to_float(bits); }
  /// The value with these bits (no rounding).
  SACCADE_HALF_HD static constexpr bfloat16 from_bits(uint16_t b) {
    bfloat16 h{};
    h.bits = b;
    return h;
  }
};

/// An IEEE float16 value: its 16 bits. Converts to float implicitly (exact) and from float explicitly.
struct float16 {
  uint16_t bits;
  float16() = default;
  SACCADE_HALF_HD explicit float16(float f) : bits(float_to_f16_bits(f)) {}
  SACCADE_HALF_HD operator float() const { return f16_bits_to_float(bits); }
  SACCADE_HALF_HD static constexpr float16 from_bits(uint16_t b) {
    float16 h{};
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(bfloat16) == 2 && sizeof(float16) == 2, "16-bit storage types");

}  // namespace saccade
