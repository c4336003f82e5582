#pragma once
// The per-element math of the elementwise kernels, one small functor per op, shared by every device: the CPU
// kernels (cpu/elementwise.cpp) hand them to their loops, the CUDA kernels (cuda/elementwise.cu) call
// the same functors from device code, so the CPU tests cover the math and the GPU tests only the launch. At
// the end, with_unary_functor / with_binary_functor: the one switch from an op enum to its functor.
//
// x, y: one element each of a or b (T = float, double or int64_t unless stated); the result is one element of
// out (T, or uint8_t 0/1 for comparisons and logic). NaN handling follows PyTorch: relu, maximum and minimum
// propagate NaN.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ops/backend.h"
#if !defined(__CUDA_ARCH__)
#include <bit>
#endif

// Marks a function callable from host and device code under nvcc; empty in a CPU build.
#if defined(__CUDACC__)
#define SACCADE_HOST_DEVICE __host__ __device__
#else
#define SACCADE_HOST_DEVICE
#endif

namespace saccade::math {

// ---- helpers ----

/// The IEEE-754 bits of a float, and back (std::bit_cast on the host, CUDA's intrinsics on the device).
SACCADE_HOST_DEVICE inline uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return std::bit_cast<uint32_t>(x);
#endif
}
SACCADE_HOST_DEVICE inline float bits_float(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  return std::bit_cast<float>(b);
#endif
}

/// tanh for float as Eigen's ptanh_float: a [13/6] rational approximation, x P(x^2) / Q(x^2), on x clamped to
/// +-7.99881 (where it is within 3.5e-7 of +-1, and never beyond); within 3.5e-7 relative of tanh over every
/// float (denormals included), NaN propagates. Why: libm's tanhf is a scalar call per element and dominated
/// training the captioning example (additive attention takes tanh of a (B, L, A) tensor at every decoder
/// step); this loop vectorises. The clamp selects on the bits as integers: GCC will not if-convert float
/// compares or a division used on one branch only (-ftrapping-math), and the loop would stay scalar.
SACCADE_HOST_DEVICE inline float tanh_float(float x) {
  constexpr float a1 = 4.89352455891786e-03f, a3 = 6.37261928875436e-04f, a5 = 1.48572235717979e-05f,
                  a7 = 5.12229709037114e-08f, a9 = -8.60467152213735e-11f, a11 = 2.00018790482477e-13f,
                  a13 = -2.76076847742355e-16f;
  constexpr float b0 = 4.89352518554385e-03f, b2 = 2.26843463243900e-03f, b4 = 1.18534705686654e-04f,
                  b6 = 1.19825839466702e-06f;
  constexpr uint32_t kClamp = 0x40fff644u, kInf = 0x7f800000u;  // the bits of 7.99881172180175781f and +inf
#if !defined(__CUDA_ARCH__)
  static_assert(std::bit_cast<uint32_t>(7.99881172180175781f) == kClamp);
#endif
  const uint32_t bits = float_bits(x), mag = bits & 0x7fffffffu;
  // NaN (mag > kInf) passes through
  const uint32_t clamped = ((mag > kClamp) & (mag <= kInf)) ? kClamp : mag;
  const float c = bits_float((bits & 0x80000000u) | clamped), c2 = c * c;
  const float p = (((((a13 * c2 + a11) * c2 + a9) * c2 + a7) * c2 + a5) * c2 + a3) * c2 + a1;
  const float q = ((b6 * c2 + b4) * c2 + b2) * c2 + b0;
  return c * (p / q);
}

/// e^x for float x <= 0, written so that a loop of it vectorises (no libm call, no branch: GCC 12 does not
/// if-convert a float select): x = n ln2 + r with n = round(x / ln2) and ln2 split in two (Cody-Waite), e^r
/// by Cephes' expf polynomial (relative error about 1e-7), times 2^n built in the exponent bits. x < -87,
/// -inf and NaN give exactly 0 (`keep` selects them away); x > 0 is outside the contract.
SACCADE_HOST_DEVICE inline float exp_nonpositive(float x) {
  const uint32_t keep = 0u - static_cast<uint32_t>(x >= -87.0f);
  const float xc = bits_float((float_bits(x) & keep) | (float_bits(-87.0f) & ~keep));
  const int32_t n = static_cast<int32_t>(xc * 1.44269504088896341f - 0.5f);
  const float nf = static_cast<float>(n);
  const float r = xc - nf * 0.693359375f + nf * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const float two_n = bits_float(static_cast<uint32_t>(n + 127) << 23);
  return bits_float(float_bits(e * two_n) & keep);
}

/// The rational x P(x²) / Q(x²) of Eigen's generic_fast_erf_float (a [13/8] minimax fit, as in TensorFlow and
/// XLA) on x clamped to +-4 (where erf rounds to +-1 in float), evaluated in R (double or float). NaN
/// propagates. The clamp selects on the bits as integers, as tanh_float does.
template <class R>
SACCADE_HOST_DEVICE inline float erf_fit(float x) {
  constexpr R a1 = R(-1.60960333262415e-02), a3 = R(-2.95459980854025e-03), a5 = R(-7.34990630326855e-04),
              a7 = R(-5.69250639462346e-05), a9 = R(-2.10102402082508e-06), a11 = R(2.77068142495902e-08),
              a13 = R(-2.72614225801306e-10);
  constexpr R b0 = R(-1.42647390514189e-02), b2 = R(-7.37332916720468e-03), b4 = R(-1.68282697438203e-03),
              b6 = R(-2.13374055278905e-04), b8 = R(-1.45660718464996e-05);
  constexpr uint32_t kClamp = 0x40800000u, kInf = 0x7f800000u;  // the bits of 4.0f and +inf
  const uint32_t bits = float_bits(x), mag = bits & 0x7fffffffu;
  // NaN (mag > kInf) passes through
  const uint32_t clamped = ((mag > kClamp) & (mag <= kInf)) ? kClamp : mag;
  const R c = bits_float((bits & 0x80000000u) | clamped), c2 = c * c;
  const R p = c * ((((((a13 * c2 + a11) * c2 + a9) * c2 + a7) * c2 + a5) * c2 + a3) * c2 + a1);
  const R q = (((b8 * c2 + b6) * c2 + b4) * c2 + b2) * c2 + b0;
  return static_cast<float>(p / q);
}

/// erf for float, vectorisable: erf_fit evaluated in double. In float its rounding errors reach 4.7e-7 (8 ulp
/// near 1); in double the result is within 1e-7 of erf over every float (the fit's own 6.5e-8 plus the final
/// rounding; tests/test_cpu_fast_paths.cpp). Why: libm's erff is a scalar call per element, a large share of
/// examples/gpt's training step (GELU, forward and backward; bench/RESULTS.md, "2026-11-24 — gpt_step against
/// PyTorch 1.13 and 2.x", has the profile).
SACCADE_HOST_DEVICE inline float erf_float(float x) { return erf_fit<double>(x); }

/// erf_fit evaluated in float: within 5e-7 of erf (8 float ulp near 1) and faster, with no double division
/// (bench/RESULTS.md, "figures moved out of code comments"). Enough for a result stored in 16 bits
/// (bfloat16's half ulp is 2^-9 relative, float16's 2^-12): the CPU's 16-bit GELU kernels use it (Gelu16,
/// GeluGrad16 below).
SACCADE_HOST_DEVICE inline float erf_float_single(float x) { return erf_fit<float>(x); }

// ---- unary: out = f(x) ----

template <class T>
struct Neg {
  SACCADE_HOST_DEVICE T operator()(T x) const { return -x; }
};
template <class T>
struct Exp {
  SACCADE_HOST_DEVICE T operator()(T x) const { return std::exp(x); }
};
template <class T>
struct Log {
  SACCADE_HOST_DEVICE T operator()(T x) const { return std::log(x); }
};
template <class T>
struct Sqrt {
  SACCADE_HOST_DEVICE T operator()(T x) const { return std::sqrt(x); }
};
template <class T>
struct Rsqrt {
  SACCADE_HOST_DEVICE T operator()(T x) const { return T(1) / std::sqrt(x); }
};
/// |x|; for int64 without libm.
template <class T>
struct Abs {
  SACCADE_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_integral_v<T>)
      return x < 0 ? -x : x;
    else
      return std::abs(x);
  }
};
template <class T>
struct Sin {
  SACCADE_HOST_DEVICE T operator()(T x) const { return std::sin(x); }
};
template <class T>
struct Cos {
  SACCADE_HOST_DEVICE T operator()(T x) const { return std::cos(x); }
};
/// tanh; float uses the vectorisable tanh_float above.
template <class T>
struct Tanh {
  SACCADE_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>)
      return tanh_float(x);
    else
      return std::tanh(x);
  }
};
/// 1 / (1 + e^-x).
template <class T>
struct Sigmoid {
  SACCADE_HOST_DEVICE T operator()(T x) const { return T(1) / (T(1) + std::exp(-x)); }
};
/// max(x, 0); NaN propagates, as torch.relu: !(x <= 0) is true for NaN.
template <class T>
struct Relu {
  SACCADE_HOST_DEVICE T operator()(T x) const { return !(x <= T(0)) ? x : T(0); }
};
/// Whether T's math takes the vectorisable float functions above (erf_float, exp_nonpositive): float on the
/// host. CUDA keeps its own erff / expf (erf_float's double arithmetic is slow on most GPUs).
template <class T>
inline constexpr bool kVectorFloat =
#if defined(__CUDA_ARCH__)
    false;
#else
    std::is_same_v<T, float>;
#endif
/// Exact gelu, x Φ(x) = x (1 + erf(x / √2)) / 2 (Hendrycks & Gimpel 2016, eq. 1).
template <class T>
struct Gelu {
  SACCADE_HOST_DEVICE T operator()(T x) const {
    const T u = x * T(0.70710678118654752440);
    return T(0.5) * x * (T(1) + (kVectorFloat<T> ? T(erf_float(float(u))) : std::erf(u)));
  }
};
/// d/dx [x Φ(x)] = Φ(x) + x φ(x).
template <class T>
struct GeluGrad {
  SACCADE_HOST_DEVICE T operator()(T x) const {
    const T u = x * T(0.70710678118654752440), h = T(-0.5) * x * x;
    return T(0.5) * (T(1) + (kVectorFloat<T> ? T(erf_float(float(u))) : std::erf(u))) +
           x * T(0.39894228040143267794) * (kVectorFloat<T> ? T(exp_nonpositive(float(h))) : std::exp(h));
  }
};
/// g · gelu'(x): GELU's backward in one pass (the composed g ⊙ gelu_grad(x) rounds gelu'(x) to the tensor's
/// dtype first and takes a second pass over memory).
template <class T>
struct GeluBackward {
  SACCADE_HOST_DEVICE T operator()(T g, T x) const { return g * GeluGrad<T>{}(x); }
};
/// σ(x) = 1 / (1 + e^-x) in float, written so that a loop of it vectorises (no libm call, no branch): with
/// e = e^-|x| (exp_nonpositive), σ(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, the same value
/// without overflowing e^-x; NaN propagates. Relative error about 1e-7 (exp_nonpositive's).
SACCADE_HOST_DEVICE inline float sigmoid_float(float x) {
  const float e = exp_nonpositive(-bits_float(float_bits(x) & 0x7fffffffu));
  const float inv = 1.0f / (1.0f + e);
  const uint32_t neg = 0u - static_cast<uint32_t>(x < 0.0f), nan = 0u - static_cast<uint32_t>(x != x);
  const uint32_t s = (float_bits(inv) & ~neg) | (float_bits(e * inv) & neg);
  return bits_float((s & ~nan) | (float_bits(x) & nan));
}
/// σ(x) for the SiLU family: sigmoid_float for float on the host (kVectorFloat), 1 / (1 + e^-x) otherwise.
template <class T>
SACCADE_HOST_DEVICE inline T silu_sigmoid(T x) {
  if constexpr (kVectorFloat<T>)
    return sigmoid_float(x);
  else
    return T(1) / (T(1) + std::exp(-x));
}
/// SiLU (swish), x σ(x) = x / (1 + e^-x) (Elfwing et al. 2018; Ramachandran et al. 2017).
template <class T>
struct Silu {
  SACCADE_HOST_DEVICE T operator()(T x) const { return x * silu_sigmoid(x); }
};
/// g · silu'(x) = g σ(x) (1 + x (1 - σ(x))): SiLU's backward in one pass.
template <class T>
struct SiluBackward {
  SACCADE_HOST_DEVICE T operator()(T g, T x) const {
    const T s = silu_sigmoid(x);
    return g * s * (T(1) + x * (T(1) - s));
  }
};
/// silu(gate) · up: the SwiGLU feed-forward's gating in one pass (Shazeer 2020, eq. 6 with Swish_1).
template <class T>
struct Swiglu {
  SACCADE_HOST_DEVICE T operator()(T gate, T up) const { return gate * silu_sigmoid(gate) * up; }
};
/// SwiGLU's backward in one pass, from g = dL/d(silu(gate) · up): with s = σ(gate),
///   dgate = (g · up) s (1 + gate (1 - s)),   dup = gate s g
/// (the products in silu_backward's and Swiglu's order, so that float32 and float64 give their numbers).
// (by value: through reference outputs GCC kept both in memory inside the vectorised loop)
template <class T>
struct SwigluBackward {
  struct Grads {
    T dgate, dup;
  };
  SACCADE_HOST_DEVICE Grads operator()(T g, T gate, T up) const {
    const T s = silu_sigmoid(gate), gu = g * up;
    return {gu * s * (T(1) + gate * (T(1) - s)), gate * s * g};
  }
};
/// Gelu and GeluGrad in float for results stored in 16 bits (erf_float_single): the CPU's bfloat16 and
/// float16 kernels (ops/cpu/elementwise.cpp).
struct Gelu16 {
  float operator()(float x) const {
    return 0.5f * x * (1.0f + erf_float_single(x * 0.70710678118654752440f));
  }
};
struct GeluGrad16 {
  float operator()(float x) const {
    return 0.5f * (1.0f + erf_float_single(x * 0.70710678118654752440f)) +
           x * 0.39894228040143267794f * exp_nonpositive(-0.5f * x * x);
  }
};
struct GeluBackward16 {
  float operator()(float g, float x) const { return g * GeluGrad16{}(x); }
};
/// -1, 0 or 1 (0 for NaN).
template <class T>
struct Sign {
  SACCADE_HOST_DEVICE T operator()(T x) const { return T((x > T(0)) - (x < T(0))); }
};
/// x ** e for float x.
template <class T>
struct PowScalar {
  T e;
  SACCADE_HOST_DEVICE T operator()(T x) const { return std::pow(x, e); }
};
/// x * x (PowScalar with exponent 2, which vectorises).
template <class T>
struct Square {
  SACCADE_HOST_DEVICE T operator()(T x) const { return x * x; }
};
/// x ** e for int64 x and integral e >= 0: exact, by squaring; an overflowing power wraps (as torch) because
/// the arithmetic is unsigned, instead of being undefined behaviour.
struct PowInt {
  uint64_t e;
  SACCADE_HOST_DEVICE int64_t operator()(int64_t x) const {
    uint64_t r = 1, b = static_cast<uint64_t>(x);
    for (uint64_t k = e; k; k >>= 1) {
      if (k & 1) r *= b;
      b *= b;
    }
    return static_cast<int64_t>(r);
  }
};
/// !x on bool (stored as uint8_t 0/1).
struct LogicalNot {
  SACCADE_HOST_DEVICE uint8_t operator()(uint8_t x) const { return !x; }
};

// ---- binary: out = f(x, y) ----

template <class T>
struct Add {
  SACCADE_HOST_DEVICE T operator()(T x, T y) const { return x + y; }
};
template <class T>
struct Sub {
  SACCADE_HOST_DEVICE T operator()(T x, T y) const { return x - y; }
};
template <class T>
struct Mul {
  SACCADE_HOST_DEVICE T operator()(T x, T y) const { return x * y; }
};
template <class T>
struct Div {
  SACCADE_HOST_DEVICE T operator()(T x, T y) const { return x / y; }
};
/// x ** y (for int64 through double, as the op's contract allows).
template <class T>
struct Pow {
  SACCADE_HOST_DEVICE T operator()(T x, T y) const { return static_cast<T>(std::pow(x, y)); }
};
/// max(x, y); NaN propagates, as torch.maximum.
template <class T>
struct Maximum {
  SACCADE_HOST_DEVICE T operator()(T x, T y) const { return (x != x || x > y) ? x : y; }
};
/// min(x, y); NaN propagates, as torch.minimum.
template <class T>
struct Minimum {
  SACCADE_HOST_DEVICE T operator()(T x, T y) const { return (x != x || x < y) ? x : y; }
};
template <class T>
struct Eq {
  SACCADE_HOST_DEVICE uint8_t operator()(T x, T y) const { return x == y; }
};
template <class T>
struct Ne {
  SACCADE_HOST_DEVICE uint8_t operator()(T x, T y) const { return x != y; }
};
template <class T>
struct Lt {
  SACCADE_HOST_DEVICE uint8_t operator()(T x, T y) const { return x < y; }
};
template <class T>
struct Le {
  SACCADE_HOST_DEVICE uint8_t operator()(T x, T y) const { return x <= y; }
};
template <class T>
struct Gt {
  SACCADE_HOST_DEVICE uint8_t operator()(T x, T y) const { return x > y; }
};
template <class T>
struct Ge {
  SACCADE_HOST_DEVICE uint8_t operator()(T x, T y) const { return x >= y; }
};
template <class T>
struct LogicalAnd {
  SACCADE_HOST_DEVICE uint8_t operator()(T x, T y) const { return x && y; }
};
template <class T>
struct LogicalOr {
  SACCADE_HOST_DEVICE uint8_t operator()(T x, T y) const { return x || y; }
};

// ---- from the op enums (ops/backend.h) to the functors: the one switch every device's kernels use ----

/// Calls run(f) with the functor of unary `op` on elements of type T (float, double or int64_t; `alpha` is
/// PowScalar's exponent) and returns true; returns false, calling nothing, when `op` is not defined for T
/// (the caller throws naming the op and dtype). LogicalNot (bool only) is the caller's.
template <class T, class Run>
bool with_unary_functor(UnaryOp op, double alpha, Run&& run) {
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case UnaryOp::Neg:
        return run(Neg<T>{}), true;
      case UnaryOp::Abs:
        return run(Abs<T>{}), true;
      case UnaryOp::Relu:
        return run(Relu<T>{}), true;
      case UnaryOp::Sign:
        return run(Sign<T>{}), true;
      case UnaryOp::PowScalar:  // exponent checked non-negative and integral by the op
        return run(PowInt{static_cast<uint64_t>(alpha)}), true;
      default:
        return false;
    }
  } else {
    switch (op) {
      case UnaryOp::Neg:
        return run(Neg<T>{}), true;
      case UnaryOp::Exp:
        return run(Exp<T>{}), true;
      case UnaryOp::Log:
        return run(Log<T>{}), true;
      case UnaryOp::Sqrt:
        return run(Sqrt<T>{}), true;
      case UnaryOp::Rsqrt:
        return run(Rsqrt<T>{}), true;
      case UnaryOp::Abs:
        return run(Abs<T>{}), true;
      case UnaryOp::Sin:
        return run(Sin<T>{}), true;
      case UnaryOp::Cos:
        return run(Cos<T>{}), true;
      case UnaryOp::Tanh:
        return run(Tanh<T>{}), true;
      case UnaryOp::Sigmoid:
        return run(Sigmoid<T>{}), true;
      case UnaryOp::Relu:
        return run(Relu<T>{}), true;
      case UnaryOp::Gelu:
        return run(Gelu<T>{}), true;
      case UnaryOp::GeluGrad:
        return run(GeluGrad<T>{}), true;
      case UnaryOp::Silu:
        return run(Silu<T>{}), true;
      case UnaryOp::Sign:
        return run(Sign<T>{}), true;
      case UnaryOp::PowScalar:
        if (alpha == 2) return run(Square<T>{}), true;
        return run(PowScalar<T>{static_cast<T>(alpha)}), true;
      case UnaryOp::LogicalNot:
        return false;
    }
  }
  return false;
}

/// Calls arith(f) with the functor of binary `op` on elements of type T when its result is a T (+ - * / pow
/// maximum minimum), or test(f) when it is a bool stored as uint8_t (comparisons, logical and/or).
template <class T, class Arith, class Test>
void with_binary_functor(BinaryOp op, Arith&& arith, Test&& test) {
  switch (op) {
    case BinaryOp::Add:
      return arith(Add<T>{});
    case BinaryOp::Sub:
      return arith(Sub<T>{});
    case BinaryOp::Mul:
      return arith(Mul<T>{});
    case BinaryOp::Div:
      return arith(Div<T>{});
    case BinaryOp::Pow:
      return arith(Pow<T>{});
    case BinaryOp::Maximum:
      return arith(Maximum<T>{});
    case BinaryOp::Minimum:
      return arith(Minimum<T>{});
    case BinaryOp::GeluBackward:
      if constexpr (std::is_floating_point_v<T>) return arith(GeluBackward<T>{});
      return;  // ops::gelu_backward takes floating tensors only
    case BinaryOp::SiluBackward:
      if constexpr (std::is_floating_point_v<T>) return arith(SiluBackward<T>{});
      return;  // floating tensors only (ops::silu_backward)
    case BinaryOp::Swiglu:
      if constexpr (std::is_floating_point_v<T>) return arith(Swiglu<T>{});
      return;  // floating tensors only (ops::swiglu)
    case BinaryOp::Eq:
      return test(Eq<T>{});
    case BinaryOp::Ne:
      return test(Ne<T>{});
    case BinaryOp::Lt:
      return test(Lt<T>{});
    case BinaryOp::Le:
      return test(Le<T>{});
    case BinaryOp::Gt:
      return test(Gt<T>{});
    case BinaryOp::Ge:
      return test(Ge<T>{});
    case BinaryOp::LogicalAnd:
      return test(LogicalAnd<T>{});
    case BinaryOp::LogicalOr:
      return test(LogicalOr<T>{});
  }
}

// ---- 16-bit storage ----
// A functor written for compute_t<T> applied to elements stored as T: the load and the store are the only
// lines that see the 16-bit type (bfloat16 / float16 widen exactly to float; the store rounds once, to
// nearest even). For float32, float64 and int64 (T == compute_t<T>) the functor is used as it is.

/// f(x...) computed in compute_t<T>, stored as T (arithmetic).
template <class T, class F>
struct StoreAs {
  F f;
  template <class... X>
  SACCADE_HOST_DEVICE T operator()(X... x) const {
    return static_cast<T>(f(static_cast<compute_t<T>>(x)...));
  }
};

/// f(x...) computed in compute_t<T>, its result kept (comparisons: uint8_t 0/1).
template <class T, class F>
struct LoadAs {
  F f;
  template <class... X>
  SACCADE_HOST_DEVICE auto operator()(X... x) const {
    return f(static_cast<compute_t<T>>(x)...);
  }
};

/// `f` itself when T is its own compute type, else f wrapped to load and store T.
template <class T, class F>
auto store_as(F f) {
  if constexpr (std::is_same_v<T, compute_t<T>>)
    return f;
  else
    return StoreAs<T, F>{f};
}
template <class T, class F>
auto load_as(F f) {
  if constexpr (std::is_same_v<T, compute_t<T>>)
    return f;
  else
    return LoadAs<T, F>{f};
}

// ---- optimizers ----

/// One element of Adam / AdamW (ops::adam_foreach_step_, both devices), in T, in the order of operations of
/// the composed update in nn/optim.cpp:
///   AdamW: p = p · decay (decay = 1 - lr·wd)     Adam: g = g + p · wd
///   m = m·β1 + g·(1-β1),  v = v·β2 + g·g·(1-β2),  p = p + m / (√v / bc2 + eps) · neg_step
/// with bc2 = √(1 - β2^t) and neg_step = -lr / (1 - β1^t), set per tensor.
template <class T>
struct AdamUpdate {
  T decay, wd, b1, b2, c1, c2, eps, bc2, neg_step;
  bool decoupled;
  SACCADE_HOST_DEVICE void operator()(T& p, T g, T& m, T& v) const {
    if (decoupled)
      p = p * decay;
    else
      g = g + p * wd;
    m = m * b1 + g * c1;
    v = v * b2 + g * g * c2;
    p = p + m / (std::sqrt(v) / bc2 + eps) * neg_step;
  }
  /// The constants of `a` (lr, betas, eps, weight decay) in T; bc2 and neg_step left for the caller.
  static AdamUpdate from(const ops::AdamStepArgs& a) {
    return {static_cast<T>(1 - a.lr * a.weight_decay),
            static_cast<T>(a.weight_decay),
            static_cast<T>(a.beta1),
            static_cast<T>(a.beta2),
            static_cast<T>(1 - a.beta1),
            static_cast<T>(1 - a.beta2),
            static_cast<T>(a.eps),
            T(1),
            T(0),
            a.decoupled};
  }
};

}  // namespace saccade::math
