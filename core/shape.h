#pragma once
// Shape: a small inline vector of int64 sizes (also used for strides), and the shape arithmetic every op
// shares: dim normalisation, contiguous strides, broadcasting.
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace saccade {

/// The most dimensions a tensor may have. Shapes live inline (no heap allocation per op).
constexpr int kMaxDims = 8;

/// A list of up to kMaxDims int64 values: a tensor's sizes or its strides (in elements).
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> v) { assign(v.begin(), v.end()); }
  explicit Shape(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }
  /// `n` copies of `value`.
  static Shape filled(int n, int64_t value) {
    Shape s;
    s.resize(n, value);
    return s;
  }

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t& operator[](int i) { return v_[i]; }
  int64_t operator[](int i) const { return v_[i]; }
  int64_t* begin() { return v_.data(); }
  int64_t* end() { return v_.data() + n_; }
  const int64_t* begin() const { return v_.data(); }
  const int64_t* end() const { return v_.data() + n_; }
  int64_t back() const { return v_[n_ - 1]; }
  void push_back(int64_t x) {
    SACCADE_CHECK(n_ < kMaxDims, "shape: at most {} dimensions are supported", kMaxDims);
    v_[n_++] = x;
  }
  void insert(int pos, int64_t x) {
    push_back(0);
    for (int i = n_ - 1; i > pos; --i) v_[i] = v_[i - 1];
    v_[pos] = x;
  }
  void erase(int pos) {
    for (int i = pos; i + 1 < n_; ++i) v_[i] = v_[i + 1];
    --n_;
  }
  void resize(int n, int64_t value = 0) {
    SACCADE_CHECK(n >= 0 && n <= kMaxDims, "shape: at most {} dimensions are supported, asked for {}",
                  kMaxDims, n);
    for (int i = n_; i < n; ++i) v_[i] = value;
    n_ = n;
  }
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  /// Product of the entries (1 for an empty shape).
  int64_t numel() const {
    int64_t p = 1;
    for (int i = 0; i < n_; ++i) p *= v_[i];
    return p;
  }
  friend bool operator==(const Shape& a, const Shape& b) {
    return a.n_ == b.n_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  template <class It>
  void assign(It first, It last) {
    n_ = 0;
    for (; first != last; ++first) push_back(*first);
  }
  std::array<int64_t, kMaxDims> v_{};
  int n_ = 0;
};

/// Row-major strides of a contiguous tensor of `shape`.
/// True when shapes `a` and `b` agree on dims [0, n) (both must have at least n dims).
inline bool same_leading_dims(const Shape& a, const Shape& b, int n) {
  for (int i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

inline Shape contiguous_strides(const Shape& shape) {
  Shape s = Shape::filled(shape.size(), 1);
  for (int i = shape.size() - 2; i >= 0; --i) s[i] = s[i + 1] * std::max<int64_t>(shape[i + 1], 1);
  return s;
}

/// Maps a possibly negative `dim` into [0, ndim); throws naming `op` when out of range.
inline int normalize_dim(int64_t dim, int ndim, const char* op) {
  int64_t lo = -std::max(ndim, 1), hi = std::max(ndim, 1) - 1;
  SACCADE_CHECK(dim >= lo && dim <= hi, "{}: dim {} out of range for a tensor of {} dimensions", op, dim,
                ndim);
  return static_cast<int>(dim < 0 ? dim + std::max(ndim, 1) : dim);
}

/// NumPy broadcasting: aligns trailing dims; sizes must match or be 1. Throws naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace saccade

template <>
struct fmt::formatter<saccade::Shape> {
  constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
  auto format(const saccade::Shape& s, format_context& ctx) const {
    return fmt::format_to(ctx.out(), "[{}]", fmt::join(s.begin(), s.end(), ", "));
  }
};

namespace saccade {

// ---- the checked size arithmetic every op, view, constructor and kernel entry uses on user sizes ----

/// a * b for sizes, element counts or byte counts; throws saccade::Error naming `op` ("size too large") when
/// the product overflows int64.
inline int64_t checked_mul(int64_t a, int64_t b, const char* op) {
  int64_t p = 0;
  SACCADE_CHECK(!__builtin_mul_overflow(a, b, &p), "{}: size too large ({} * {} overflows int64)", op, a, b);
  return p;
}

/// The number of elements of `shape`, checked: every size must be non-negative, and the product of the
/// nonzero sizes (which a contiguous tensor's strides reach) must fit int64. Throws saccade::Error naming
/// `op` and the shape otherwise ("negative size", "size too large").
inline int64_t checked_numel(const Shape& shape, const char* op) {
  int64_t reach = 1;
  bool zero = false;
  for (int64_t s : shape) {
    SACCADE_CHECK(s >= 0, "{}: negative size in shape {}", op, shape);
    zero = zero || s == 0;
    SACCADE_CHECK(!__builtin_mul_overflow(reach, std::max<int64_t>(s, 1), &reach),
                  "{}: size too large: shape {} has more than 2^63 elements", op, shape);
  }
  return zero ? 0 : reach;
}

/// Throws saccade::Error naming `op` unless `value > 0` ("{op}: {what} must be positive, got {value}"): for
/// sizes of layers, strides, kernel sizes, steps, counts.
inline void check_positive(int64_t value, const char* what, const char* op) {
  SACCADE_CHECK(value > 0, "{}: {} must be positive, got {}", op, what, value);
}

/// Throws saccade::Error naming `op` unless 0 <= value <= `max` ("{op}: {what} must be in [0, max]").
inline void check_range(int64_t value, int64_t max, const char* what, const char* op) {
  SACCADE_CHECK(value >= 0 && value <= max, "{}: {} must be in [0, {}], got {}", op, what, max, value);
}

}  // namespace saccade
