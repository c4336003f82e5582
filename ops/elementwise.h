#pragma once
// Elementwise ops with NumPy/PyTorch broadcasting and type promotion (bool < int64 < float32 < float64).
// Shapes: the result has broadcast_shapes(a.shape(), b.shape()); comparisons return Bool.
// Errors: saccade::Error naming the op and both shapes for unbroadcastable shapes, or the device for a mix of
// devices.
#include <optional>

#include "ops/backend.h"
#include "ops/tensor.h"

namespace saccade::ops {

// ---- binary (Tensor, Tensor) and (Tensor, scalar): a scalar takes the tensor's dtype ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double exponent);
/// b - a and b / a for a scalar b.
Tensor rsub(const Tensor& a, double b);
Tensor rdiv(const Tensor& a, double b);
Tensor maximum(const Tensor& a, double b);
Tensor minimum(const Tensor& a, double b);

// ---- comparisons -> Bool ----
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);

// ---- unary (float dtypes; neg, abs, sign, relu also int64) ----
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
/// Exact GELU, x Φ(x) (Hendrycks & Gimpel 2016), and its derivative Φ(x) + x φ(x).
Tensor gelu(const Tensor& a);
Tensor gelu_grad(const Tensor& a);
Tensor sign(const Tensor& a);
/// min(max(a, lo), hi); either bound may be absent.
Tensor clamp(const Tensor& a, std::optional<double> lo, std::optional<double> hi);

// ---- selection ----
/// cond ? a : b, all three broadcast together; cond must be Bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// a where mask is false, `value` where true; mask (Bool) broadcasts to a's shape.
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value);

// ---- in place (bump the version counter; b broadcasts to a's shape) ----
Tensor& add_(Tensor& a, const Tensor& b, double alpha = 1);  // a += alpha * b
Tensor& sub_(Tensor& a, const Tensor& b);
Tensor& mul_(Tensor& a, const Tensor& b);
Tensor& mul_(Tensor& a, double b);
Tensor& div_(Tensor& a, const Tensor& b);
Tensor& fill_(Tensor& a, double value);
Tensor& zero_(Tensor& a);
/// Copies src (broadcast to dst's shape, converted to dst's dtype) into dst; devices may differ.
Tensor& copy_(Tensor& dst, const Tensor& src);

/// The building blocks of the above (public for autograd and tests).
Tensor unary(UnaryOp op, const Tensor& a, double alpha = 0);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);

/// Throws naming `op` unless every defined tensor is on the same device as the first.
void check_same_device(const char* op, std::initializer_list<const Tensor*> ts);

}  // namespace saccade::ops

namespace saccade {
// ---- C++ operators (in saccade so that argument-dependent lookup finds them for Tensor) ----
inline Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return ops::div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return ops::add(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return ops::rsub(b, a); }
inline Tensor operator*(double a, const Tensor& b) { return ops::mul(b, a); }
inline Tensor operator/(double a, const Tensor& b) { return ops::rdiv(b, a); }
inline Tensor operator-(const Tensor& a) { return ops::neg(a); }

}  // namespace saccade
