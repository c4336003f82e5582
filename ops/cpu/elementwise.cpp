// CPU elementwise kernels: unary, binary, where. Operands arrive expanded to out's shape.
#include <cmath>

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
          case BinaryOp::Mul: for (int64_t i = 0; i < n; ++i) z[i] = x[i] * c; return;
          default: for (int64_t i = 0; i < n; ++i) z[i] = binary_scalar<T>(op, x[i], c); return;
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
