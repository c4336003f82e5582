#pragma once
// Element types. Bool is its own dtype, stored as one byte (0 or 1), and is what comparisons return.
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>

#include "ops/error.h"

namespace saccade {

/// The element type of a tensor: float32, float64, int64, or bool (one byte per element, 0 or 1).
enum class DType : uint8_t { Float32, Float64, Int64, Bool };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "?";
}

constexpr bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }

/// The dtype of `a op b` under PyTorch's ordering bool < int64 < float32 < float64.
constexpr DType promote_types(DType a, DType b) {
  auto rank = [](DType t) {
    switch (t) {
      case DType::Bool: return 0;
      case DType::Int64: return 1;
      case DType::Float32: return 2;
      case DType::Float64: return 3;
    }
    return 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

/// C++ type <-> DType.
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::Float32; }
template <>
constexpr DType dtype_of<double>() { return DType::Float64; }
template <>
constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <>
constexpr DType dtype_of<bool>() { return DType::Bool; }
template <>
constexpr DType dtype_of<uint8_t>() { return DType::Bool; }  // bool's storage type

/// Calls `f.template operator()<T>()` with T the C++ type of `t` (bool is stored as uint8_t).
/// Use as: dispatch_all(t, "op", [&]<class T>() { ... });
template <class F>
decltype(auto) dispatch_all(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::Int64: return f.template operator()<int64_t>();
    case DType::Bool: return f.template operator()<uint8_t>();
  }
  throw Error(fmt::format("{}: unknown dtype", op));
}

/// Like dispatch_all, but only float32 and float64; any other dtype throws naming `op`.
template <class F>
decltype(auto) dispatch_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    default: break;
  }
  throw Error(fmt::format("{}: expected a float32 or float64 tensor, got {}", op, dtype_name(t)));
}

/// float32, float64 and int64 (no bool).
template <class F>
decltype(auto) dispatch_numeric(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::Int64: return f.template operator()<int64_t>();
    default: break;
  }
  throw Error(fmt::format("{}: expected a numeric tensor, got {}", op, dtype_name(t)));
}

/// Prints the dtype's name ("float32"), as fmt's "{}" does.
inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace saccade

template <>
struct fmt::formatter<saccade::DType> : fmt::formatter<std::string_view> {
  auto format(saccade::DType t, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(saccade::dtype_name(t), ctx);
  }
};
