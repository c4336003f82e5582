// CPU elementwise kernels: unary, binary, where. Operands arrive expanded to out's shape (stride 0 on
// broadcast dims); for_each (loop.h) walks them in runs.
//
// Each op is a small lambda; the switch on the op sits outside the loops, so every op gets its own loop
// instantiation and the contiguous (and tensor-op-scalar) runs vectorise where the op allows (+ - * /,
// max/min, comparisons, neg/abs/relu, ...; transcendental ones call libm per element, except float tanh).
#include <bit>
#include <cmath>
#include <cstdint>

#include "ops/cpu/backend.h"
#include "ops/cpu/loop.h"

namespace saccade::cpu {

namespace {

template <class T>
const T& at(char* p, int64_t stride, int64_t i) {
  return *reinterpret_cast<const T*>(p + i * stride);
}

// a, out: (shape of out); out[i] = f(a[i]).
template <class T, class R, class F>
void unary_loop(const Tensor& a, const Tensor& out, F f) {
  for_each<2>(out.shape(), {&a, &out}, [f](char** p, const int64_t* s, int64_t n) {
    const T* x = reinterpret_cast<const T*>(p[0]);
    R* y = reinterpret_cast<R*>(p[1]);
    if (s[0] == sizeof(T) && s[1] == sizeof(R)) {
      for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
      return;
    }
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<R*>(p[1] + i * s[1]) = f(at<T>(p[0], s[0], i));
  });
}

// a, b, out: (shape of out); out[i] = f(a[i], b[i]). Fast paths: all contiguous, and one side a scalar.
template <class T, class R, class F>
void binary_loop(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  for_each<3>(out.shape(), {&a, &b, &out}, [f](char** p, const int64_t* s, int64_t n) {
    constexpr int64_t w = sizeof(T), wr = sizeof(R);
    const T* x = reinterpret_cast<const T*>(p[0]);
    const T* y = reinterpret_cast<const T*>(p[1]);
    R* z = reinterpret_cast<R*>(p[2]);
    if (s[0] == w && s[1] == w && s[2] == wr) {
      for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
    } else if (s[0] == w && s[1] == 0 && s[2] == wr) {  // tensor op scalar (bias, scaling)
      const T c = y[0];
      for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], c);
    } else if (s[0] == 0 && s[1] == w && s[2] == wr) {  // scalar op tensor (rsub, rdiv)
      const T c = x[0];
      for (int64_t i = 0; i < n; ++i) z[i] = f(c, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<R*>(p[2] + i * s[2]) = f(at<T>(p[0], s[0], i), at<T>(p[1], s[1], i));
    }
  });
}

// tanh for float as Eigen's ptanh_float: a [13/6] rational approximation, x P(x^2) / Q(x^2), on x clamped to
// +-7.99881 (where it is within 3.5e-7 of +-1, and never beyond); within 3.5e-7 relative of tanh over every
// float (denormals included), NaN propagates. Why: libm's tanhf is a scalar call per element and dominated
// training the captioning example (additive attention takes tanh of a (B, L, A) tensor at every decoder
// step); this loop vectorises. The clamp selects on the bits as integers: GCC will not if-convert float
// compares or a division used on one branch only (-ftrapping-math), and the loop would stay scalar.
inline float tanh_float(float x) {
  constexpr float a1 = 4.89352455891786e-03f, a3 = 6.37261928875436e-04f, a5 = 1.48572235717979e-05f,
                  a7 = 5.12229709037114e-08f, a9 = -8.60467152213735e-11f, a11 = 2.00018790482477e-13f,
                  a13 = -2.76076847742355e-16f;
  constexpr float b0 = 4.89352518554385e-03f, b2 = 2.26843463243900e-03f, b4 = 1.18534705686654e-04f,
                  b6 = 1.19825839466702e-06f;
  constexpr uint32_t kClamp = std::bit_cast<uint32_t>(7.99881172180175781f), kInf = 0x7f800000u;
  const uint32_t bits = std::bit_cast<uint32_t>(x), mag = bits & 0x7fffffffu;
  const uint32_t clamped = (mag > kClamp) & (mag <= kInf) ? kClamp : mag;  // NaN (mag > kInf) passes through
  const float c = std::bit_cast<float>((bits & 0x80000000u) | clamped), c2 = c * c;
  const float p = (((((a13 * c2 + a11) * c2 + a9) * c2 + a7) * c2 + a5) * c2 + a3) * c2 + a1;
  const float q = ((b6 * c2 + b4) * c2 + b2) * c2 + b0;
  return c * (p / q);
}

template <class T>
void unary_float(UnaryOp op, const Tensor& a, const Tensor& out, double alpha) {
  constexpr T kInvSqrt2 = T(0.70710678118654752440), kInvSqrt2Pi = T(0.39894228040143267794);
  auto run = [&](auto f) { unary_loop<T, T>(a, out, f); };
  switch (op) {
    case UnaryOp::Neg:
      return run([](T x) { return -x; });
    case UnaryOp::Exp:
      return run([](T x) { return std::exp(x); });
    case UnaryOp::Log:
      return run([](T x) { return std::log(x); });
    case UnaryOp::Sqrt:
      return run([](T x) { return std::sqrt(x); });
    case UnaryOp::Rsqrt:
      return run([](T x) { return T(1) / std::sqrt(x); });
    case UnaryOp::Abs:
      return run([](T x) { return std::abs(x); });
    case UnaryOp::Sin:
      return run([](T x) { return std::sin(x); });
    case UnaryOp::Cos:
      return run([](T x) { return std::cos(x); });
    case UnaryOp::Tanh:
      if constexpr (std::is_same_v<T, float>) return run([](T x) { return tanh_float(x); });
      return run([](T x) { return std::tanh(x); });
    case UnaryOp::Sigmoid:
      return run([](T x) { return T(1) / (T(1) + std::exp(-x)); });
    // NaN propagates, as torch.relu: !(x <= 0) is true for NaN
    case UnaryOp::Relu:
      return run([](T x) { return !(x <= T(0)) ? x : T(0); });
    case UnaryOp::Gelu:
      return run([=](T x) { return T(0.5) * x * (T(1) + std::erf(x * kInvSqrt2)); });
    // d/dx [x Φ(x)] = Φ(x) + x φ(x)
    case UnaryOp::GeluGrad:
      return run([=](T x) {
        return T(0.5) * (T(1) + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(T(-0.5) * x * x);
      });
    case UnaryOp::Sign:
      return run([](T x) { return T((x > T(0)) - (x < T(0))); });
    case UnaryOp::PowScalar: {
      const T e = static_cast<T>(alpha);
      if (alpha == 2) return run([](T x) { return x * x; });
      return run([e](T x) { return std::pow(x, e); });
    }
    case UnaryOp::LogicalNot:
      break;
  }
  throw Error(fmt::format("{}: not defined for {} tensors", unary_op_name(op), a.dtype()));
}

void unary_int(UnaryOp op, const Tensor& a, const Tensor& out, double alpha) {
  using T = int64_t;
  auto run = [&](auto f) { unary_loop<T, T>(a, out, f); };
  switch (op) {
    case UnaryOp::Neg:
      return run([](T x) { return -x; });
    case UnaryOp::Abs:
      return run([](T x) { return x < 0 ? -x : x; });
    case UnaryOp::Relu:
      return run([](T x) { return x > 0 ? x : T(0); });
    case UnaryOp::Sign:
      return run([](T x) { return T((x > 0) - (x < 0)); });
    case UnaryOp::PowScalar: {
      // exact integer power by squaring (exponent checked non-negative and integral by the op)
      const auto e = static_cast<uint64_t>(alpha);
      // unsigned arithmetic: an overflowing power wraps (as torch) instead of being undefined behaviour
      return run([e](T x) {
        uint64_t r = 1, b = static_cast<uint64_t>(x);
        for (uint64_t k = e; k; k >>= 1) {
          if (k & 1) r *= b;
          b *= b;
        }
        return static_cast<T>(r);
      });
    }
    default:
      break;
  }
  throw Error(fmt::format("{}: not defined for int64 tensors", unary_op_name(op)));
}

// NaN propagates through maximum / minimum, as in PyTorch.
template <class T>
T max_nan(T a, T b) {
  return (a != a || a > b) ? a : b;
}
template <class T>
T min_nan(T a, T b) {
  return (a != a || a < b) ? a : b;
}

template <class T>
void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  auto arith = [&](auto f) { binary_loop<T, T>(a, b, out, f); };
  auto test = [&](auto f) { binary_loop<T, uint8_t>(a, b, out, f); };
  switch (op) {
    case BinaryOp::Add:
      return arith([](T x, T y) { return x + y; });
    case BinaryOp::Sub:
      return arith([](T x, T y) { return x - y; });
    case BinaryOp::Mul:
      return arith([](T x, T y) { return x * y; });
    case BinaryOp::Div:
      return arith([](T x, T y) { return x / y; });
    case BinaryOp::Pow:
      return arith([](T x, T y) { return static_cast<T>(std::pow(x, y)); });
    case BinaryOp::Maximum:
      return arith([](T x, T y) { return max_nan(x, y); });
    case BinaryOp::Minimum:
      return arith([](T x, T y) { return min_nan(x, y); });
    case BinaryOp::Eq:
      return test([](T x, T y) -> uint8_t { return x == y; });
    case BinaryOp::Ne:
      return test([](T x, T y) -> uint8_t { return x != y; });
    case BinaryOp::Lt:
      return test([](T x, T y) -> uint8_t { return x < y; });
    case BinaryOp::Le:
      return test([](T x, T y) -> uint8_t { return x <= y; });
    case BinaryOp::Gt:
      return test([](T x, T y) -> uint8_t { return x > y; });
    case BinaryOp::Ge:
      return test([](T x, T y) -> uint8_t { return x >= y; });
    case BinaryOp::LogicalAnd:
      return test([](T x, T y) -> uint8_t { return x && y; });
    case BinaryOp::LogicalOr:
      return test([](T x, T y) -> uint8_t { return x || y; });
  }
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const Tensor& a, const Tensor& out, double alpha) {
  switch (a.dtype()) {
    case DType::Float32:
      return unary_float<float>(op, a, out, alpha);
    case DType::Float64:
      return unary_float<double>(op, a, out, alpha);
    case DType::Int64:
      return unary_int(op, a, out, alpha);
    case DType::Bool:
      SACCADE_CHECK(op == UnaryOp::LogicalNot, "{}: not defined for bool tensors", unary_op_name(op));
      return unary_loop<uint8_t, uint8_t>(a, out, [](uint8_t x) -> uint8_t { return !x; });
  }
}

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_all(a.dtype(), binary_op_name(op).data(), [&]<class T>() { binary_typed<T>(op, a, b, out); });
}

void CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_all(a.dtype(), "where", [&]<class T>() {
    for_each<4>(out.shape(), {&cond, &a, &b, &out}, [](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<T*>(p[3] + i * s[3]) =
            at<uint8_t>(p[0], s[0], i) ? at<T>(p[1], s[1], i) : at<T>(p[2], s[2], i);
    });
  });
}

}  // namespace saccade::cpu
