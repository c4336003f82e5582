// CPU elementwise kernels: unary, binary, where. Operands arrive expanded to out's shape.
#include <bit>
#include <cmath>
#include <cstdint>

#include "ops/cpu/backend.h"
#include "ops/cpu/loop.h"

namespace saccade::cpu {

namespace {

template <class T>
T unary_scalar(UnaryOp op, T x, double alpha) {
  using std::abs, std::exp, std::log, std::sqrt, std::sin, std::cos, std::tanh, std::pow, std::erf;
  if constexpr (std::is_floating_point_v<T>) {
    constexpr T kInvSqrt2 = T(0.70710678118654752440), kInvSqrt2Pi = T(0.39894228040143267794);
    switch (op) {
      case UnaryOp::Neg: return -x;
      case UnaryOp::Exp: return exp(x);
      case UnaryOp::Log: return log(x);
      case UnaryOp::Sqrt: return sqrt(x);
      case UnaryOp::Rsqrt: return T(1) / sqrt(x);
      case UnaryOp::Abs: return abs(x);
      case UnaryOp::Sin: return sin(x);
      case UnaryOp::Cos: return cos(x);
      case UnaryOp::Tanh: return tanh(x);
      case UnaryOp::Sigmoid: return T(1) / (T(1) + exp(-x));
      case UnaryOp::Relu: return x > T(0) ? x : T(0);
      case UnaryOp::Gelu: return T(0.5) * x * (T(1) + erf(x * kInvSqrt2));
      // d/dx [x Φ(x)] = Φ(x) + x φ(x)
      case UnaryOp::GeluGrad: return T(0.5) * (T(1) + erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * exp(T(-0.5) * x * x);
      case UnaryOp::Sign: return T((x > T(0)) - (x < T(0)));
      case UnaryOp::PowScalar: return pow(x, static_cast<T>(alpha));
      case UnaryOp::LogicalNot: break;
    }
  } else {
    switch (op) {
      case UnaryOp::Neg: return -x;
      case UnaryOp::Abs: return x < 0 ? -x : x;
      case UnaryOp::Relu: return x > 0 ? x : 0;
      case UnaryOp::Sign: return T((x > 0) - (x < 0));
      case UnaryOp::PowScalar: return static_cast<T>(std::pow(static_cast<double>(x), alpha));
      case UnaryOp::LogicalNot: return !x;
      default: break;
    }
  }
  throw Error(fmt::format("{}: not defined for this dtype", unary_op_name(op)));
}

template <class T>
T binary_scalar(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Pow: return static_cast<T>(std::pow(a, b));
    case BinaryOp::Maximum: return (a != a || a > b) ? a : b;  // NaN propagates, as in PyTorch
    case BinaryOp::Minimum: return (a != a || a < b) ? a : b;
    default: return T(0);
  }
}

template <class T>
bool compare_scalar(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::Eq: return a == b;
    case BinaryOp::Ne: return a != b;
    case BinaryOp::Lt: return a < b;
    case BinaryOp::Le: return a <= b;
    case BinaryOp::Gt: return a > b;
    case BinaryOp::Ge: return a >= b;
    case BinaryOp::LogicalAnd: return a && b;
    case BinaryOp::LogicalOr: return a || b;
    default: return false;
  }
}

bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq; }

// tanh for float as Eigen's ptanh_float: a [13/6] rational approximation, x P(x^2) / Q(x^2), on x clamped to
// +-7.99881 (where it is within 3.5e-7 of +-1, and never beyond); within 3.5e-7 relative of tanh over every
// float (denormals included), NaN propagates. Why: libm's tanhf is a scalar call per element and dominated training
// the captioning example (additive attention takes tanh of a (B, L, A) tensor at every decoder step); this
// loop vectorises. The clamp selects on the bits as integers: GCC will not if-convert float compares or a
// division used on one branch only (-ftrapping-math), and the loop would stay scalar.
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

}  // namespace

void CpuBackend::unary(UnaryOp op, const Tensor& a, const Tensor& out, double alpha) {
  dispatch_all(a.dtype(), unary_op_name(op).data(), [&]<class T>() {
    if (op == UnaryOp::LogicalNot || std::is_same_v<T, uint8_t>) {
      SACCADE_CHECK(op == UnaryOp::LogicalNot && a.dtype() == DType::Bool, "{}: not defined for bool tensors",
                    unary_op_name(op));
    }
    for_each<2>(out.shape(), {&a, &out}, [op, alpha](char** p, const int64_t* s, int64_t n) {
      if (s[0] == sizeof(T) && s[1] == sizeof(T)) {
        const T* x = reinterpret_cast<const T*>(p[0]);
        T* y = reinterpret_cast<T*>(p[1]);
        switch (op) {  // the hot ones get their own loops, so that the compiler vectorises them
          case UnaryOp::Neg:
            for (int64_t i = 0; i < n; ++i) y[i] = -x[i];
            return;
          case UnaryOp::Relu:
            for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
            return;
          case UnaryOp::Tanh:
            if constexpr (std::is_same_v<T, float>) {
              for (int64_t i = 0; i < n; ++i) y[i] = tanh_float(x[i]);
              return;
            }
            [[fallthrough]];
          default:
            for (int64_t i = 0; i < n; ++i) y[i] = unary_scalar<T>(op, x[i], alpha);
            return;
        }
      }
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<T*>(p[1] + i * s[1]) = unary_scalar<T>(op, *reinterpret_cast<const T*>(p[0] + i * s[0]), alpha);
    });
  });
}

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_all(a.dtype(), binary_op_name(op).data(), [&]<class T>() {
    if (is_comparison(op)) {
      for_each<3>(out.shape(), {&a, &b, &out}, [op](char** p, const int64_t* s, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<uint8_t*>(p[2] + i * s[2]) =
              compare_scalar<T>(op, *reinterpret_cast<const T*>(p[0] + i * s[0]),
                                *reinterpret_cast<const T*>(p[1] + i * s[1]));
      });
      return;
    }
    for_each<3>(out.shape(), {&a, &b, &out}, [op](char** p, const int64_t* s, int64_t n) {
      constexpr int64_t w = sizeof(T);
      const T* x = reinterpret_cast<const T*>(p[0]);
      const T* y = reinterpret_cast<const T*>(p[1]);
      T* z = reinterpret_cast<T*>(p[2]);
      if (s[0] == w && s[1] == w && s[2] == w) {  // contiguous
        switch (op) {
          case BinaryOp::Add: for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i]; return;
          case BinaryOp::Sub: for (int64_t i = 0; i < n; ++i) z[i] = x[i] - y[i]; return;
          case BinaryOp::Mul: for (int64_t i = 0; i < n; ++i) z[i] = x[i] * y[i]; return;
          case BinaryOp::Div: for (int64_t i = 0; i < n; ++i) z[i] = x[i] / y[i]; return;
          default: for (int64_t i = 0; i < n; ++i) z[i] = binary_scalar<T>(op, x[i], y[i]); return;
        }
      }
      if (s[0] == w && s[1] == 0 && s[2] == w) {  // tensor op scalar (bias, scaling)
        const T c = y[0];
        switch (op) {
          case BinaryOp::Add: for (int64_t i = 0; i < n; ++i) z[i] = x[i] + c; return;
          case BinaryOp::Sub: for (int64_t i = 0; i < n; ++i) z[i] = x[i] - c; return;
          case BinaryOp::Mul: for (int64_t i = 0; i < n; ++i) z[i] = x[i] * c; return;
          case BinaryOp::Div: for (int64_t i = 0; i < n; ++i) z[i] = x[i] / c; return;
          default: for (int64_t i = 0; i < n; ++i) z[i] = binary_scalar<T>(op, x[i], c); return;
        }
      }
      if (s[0] == 0 && s[1] == w && s[2] == w) {  // scalar op tensor (rsub, rdiv: e.g. tanh's 1 - y^2)
        const T c = x[0];
        switch (op) {
          case BinaryOp::Sub: for (int64_t i = 0; i < n; ++i) z[i] = c - y[i]; return;
          case BinaryOp::Div: for (int64_t i = 0; i < n; ++i) z[i] = c / y[i]; return;
          default: for (int64_t i = 0; i < n; ++i) z[i] = binary_scalar<T>(op, c, y[i]); return;
        }
      }
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<T*>(p[2] + i * s[2]) = binary_scalar<T>(
            op, *reinterpret_cast<const T*>(p[0] + i * s[0]), *reinterpret_cast<const T*>(p[1] + i * s[1]));
    });
  });
}

void CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_all(a.dtype(), "where", [&]<class T>() {
    for_each<4>(out.shape(), {&cond, &a, &b, &out}, [](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<T*>(p[3] + i * s[3]) = *reinterpret_cast<const uint8_t*>(p[0] + i * s[0])
                                                     ? *reinterpret_cast<const T*>(p[1] + i * s[1])
                                                     : *reinterpret_cast<const T*>(p[2] + i * s[2]);
    });
  });
}

}  // namespace saccade::cpu
