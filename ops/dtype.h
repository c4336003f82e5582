#pragma once
// Element types. Bool is its own dtype, stored as one byte (0 or 1), and is what comparisons return.
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>
#include <type_traits>

#include "core/error.h"
#include "ops/half.h"

namespace saccade {

/// The element type of a tensor: float32, float64, int64, bool (one byte per element, 0 or 1), and the two
/// 16-bit floating types bfloat16 and float16 (storage types: kernels compute in float, see compute_t).
/// New values go at the end: the enum's value indexes kDTypes.
enum class DType : uint8_t { Float32, Float64, Int64, Bool, BFloat16, Float16 };

/// Everything saccade knows about a dtype, in one row: a new dtype is a row here, not a hunt through
/// switches.
struct DTypeInfo {
  DType dtype;
  std::string_view name;         ///< PyTorch's name: "float32", "bfloat16"
  size_t size;                   ///< bytes per element
  std::string_view safetensors;  ///< the safetensors dtype code ("F32", "BF16")
  int safetensors_order;         ///< position in the reference implementation's Dtype enum (sorts the file)
  std::string_view npy;          ///< the .npy descr ("<f4"); empty when numpy has no such dtype (bfloat16)
  int promotion_rank;  ///< bool < int64 < {bfloat16, float16} < float32 < float64 (PyTorch's lattice)
  bool floating;
};

/// The table, indexed by the DType's value. The safetensors order is the reference Rust crate's enum
/// (BOOL 0, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16 7, BF16 8, I32, U32, F32 11, F64 12, I64 13, U64): files
/// list tensors by decreasing order, so larger alignments come first.
inline constexpr DTypeInfo kDTypes[] = {
    {DType::Float32, "float32", 4, "F32", 11, "<f4", 3, true},
    {DType::Float64, "float64", 8, "F64", 12, "<f8", 4, true},
    {DType::Int64, "int64", 8, "I64", 13, "<i8", 1, false},
    {DType::Bool, "bool", 1, "BOOL", 0, "|b1", 0, false},
    {DType::BFloat16, "bfloat16", 2, "BF16", 8, "", 2, true},
    {DType::Float16, "float16", 2, "F16", 7, "<f2", 2, true},
};
inline constexpr size_t kNumDTypes = sizeof(kDTypes) / sizeof(kDTypes[0]);

/// The row of `t`.
constexpr const DTypeInfo& dtype_info(DType t) { return kDTypes[static_cast<size_t>(t)]; }

constexpr size_t dtype_size(DType t) { return dtype_info(t).size; }
constexpr std::string_view dtype_name(DType t) { return dtype_info(t).name; }
/// float32, float64, bfloat16, float16.
constexpr bool is_floating(DType t) { return dtype_info(t).floating; }
/// bfloat16 or float16.
constexpr bool is_half(DType t) { return t == DType::BFloat16 || t == DType::Float16; }
/// The dtype kernels compute in for elements of `t` (compute_t below): float32 for bfloat16 and float16, `t`
/// itself otherwise. Also the dtype of the statistics an op keeps for 16-bit inputs (layer_norm's mean and
/// rstd, attention's lse).
constexpr DType compute_dtype(DType t) { return is_half(t) ? DType::Float32 : t; }

/// The dtype of `a op b` under PyTorch's promotion: bool < int64 < 16-bit floats < float32 < float64; the two
/// 16-bit types together give float32 (neither holds the other: bfloat16 has the range, float16 the digits).
constexpr DType promote_types(DType a, DType b) {
  const int ra = dtype_info(a).promotion_rank, rb = dtype_info(b).promotion_rank;
  if (ra == rb && a != b) return DType::Float32;
  return ra >= rb ? a : b;
}

/// The dtype whose safetensors code is `code` (false when none is).
constexpr bool dtype_from_safetensors(std::string_view code, DType& out) {
  for (const DTypeInfo& i : kDTypes)
    if (i.safetensors == code) return out = i.dtype, true;
  return false;
}

/// The dtype whose .npy descr is `descr` (false when none is).
constexpr bool dtype_from_npy(std::string_view descr, DType& out) {
  for (const DTypeInfo& i : kDTypes)
    if (!i.npy.empty() && i.npy == descr) return out = i.dtype, true;
  return false;
}

/// C++ type <-> DType.
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::Float32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::Float64;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::Int64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::Bool;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::Bool;
}  // bool's storage type
template <>
constexpr DType dtype_of<bfloat16>() {
  return DType::BFloat16;
}
template <>
constexpr DType dtype_of<float16>() {
  return DType::Float16;
}

/// The type a kernel computes in for elements of T: T itself, except float for the 16-bit storage types
/// (a kernel loads a T, converts to compute_t<T>, computes, and converts back only on the store).
template <class T>
struct compute_type {
  using type = T;
};
template <>
struct compute_type<bfloat16> {
  using type = float;
};
template <>
struct compute_type<float16> {
  using type = float;
};
template <class T>
using compute_t = typename compute_type<T>::type;

/// The type a reduction over elements of T accumulates in: double for float32 and float64 (a float sum of
/// 10^7 terms would lose digits), int64 for int64, and float (never 16 bits) for the 16-bit types: a bfloat16
/// accumulator stops growing at 256 when summing ones (256 + 1 rounds back to 256 with 8 significant bits).
template <class T>
struct acc_type {
  using type = std::conditional_t<std::is_floating_point_v<T>, double, T>;
};
template <>
struct acc_type<bfloat16> {
  using type = float;
};
template <>
struct acc_type<float16> {
  using type = float;
};
template <class T>
using acc_t = typename acc_type<T>::type;

[[noreturn]] inline void dispatch_refused(DType t, const char* op, const char* expected) {
  throw Error(fmt::format("{}: expected {} tensor, got {}", op, expected, dtype_name(t)));
}

/// The bit of a dtype in a dispatch set.
constexpr uint32_t dtype_bit(DType t) { return uint32_t{1} << static_cast<int>(t); }

/// Calls `f.template operator()<T>()` with T the C++ type of `t` (bool is stored as uint8_t; bfloat16 and
/// float16 are the storage types of half.h) when `t` is in the set `Allowed` (dtype_bit's or'ed); otherwise
/// throws naming `op`, what it `expected` and the dtype. Only the allowed types are instantiated.
template <uint32_t Allowed, class F>
decltype(auto) dispatch_in(DType t, const char* op, const char* expected, F&& f) {
  switch (t) {
    case DType::Float32:
      if constexpr ((Allowed & dtype_bit(DType::Float32)) != 0) return f.template operator()<float>();
      break;
    case DType::Float64:
      if constexpr ((Allowed & dtype_bit(DType::Float64)) != 0) return f.template operator()<double>();
      break;
    case DType::Int64:
      if constexpr ((Allowed & dtype_bit(DType::Int64)) != 0) return f.template operator()<int64_t>();
      break;
    case DType::Bool:
      if constexpr ((Allowed & dtype_bit(DType::Bool)) != 0) return f.template operator()<uint8_t>();
      break;
    case DType::BFloat16:
      if constexpr ((Allowed & dtype_bit(DType::BFloat16)) != 0) return f.template operator()<bfloat16>();
      break;
    case DType::Float16:
      if constexpr ((Allowed & dtype_bit(DType::Float16)) != 0) return f.template operator()<float16>();
      break;
  }
  dispatch_refused(t, op, expected);
}

inline constexpr uint32_t kFloat32And64 = dtype_bit(DType::Float32) | dtype_bit(DType::Float64);
inline constexpr uint32_t kNumeric = kFloat32And64 | dtype_bit(DType::Int64);
inline constexpr uint32_t kHalves = dtype_bit(DType::BFloat16) | dtype_bit(DType::Float16);

/// Calls `f.template operator()<T>()` with T the C++ type of `t` for float32, float64, int64 and bool (stored
/// as uint8_t); a 16-bit dtype throws naming `op` (kernels opt in through the *_and_half dispatchers).
/// Use as: dispatch_all(t, "op", [&]<class T>() { ... });
template <class F>
decltype(auto) dispatch_all(DType t, const char* op, F&& f) {
  return dispatch_in<kNumeric | dtype_bit(DType::Bool)>(t, op, "a float32, float64, int64 or bool", f);
}
/// dispatch_all and the 16-bit types (T = bfloat16, float16): kernels that only move elements (copy, fill,
/// where, index) and kernels that load -> compute_t -> store.
template <class F>
decltype(auto) dispatch_all_and_half(DType t, const char* op, F&& f) {
  return dispatch_in<kNumeric | dtype_bit(DType::Bool) | kHalves>(t, op, "a", f);
}
/// Like dispatch_all, but only float32 and float64; any other dtype throws naming `op`.
template <class F>
decltype(auto) dispatch_floating(DType t, const char* op, F&& f) {
  return dispatch_in<kFloat32And64>(t, op, "a float32 or float64", f);
}
/// float32, float64, bfloat16 and float16 (bfloat16 / float16 are storage types: compute in compute_t<T>).
template <class F>
decltype(auto) dispatch_floating_and_half(DType t, const char* op, F&& f) {
  return dispatch_in<kFloat32And64 | kHalves>(t, op, "a floating-point", f);
}
/// float32, float64 and int64 (no bool).
template <class F>
decltype(auto) dispatch_numeric(DType t, const char* op, F&& f) {
  return dispatch_in<kNumeric>(t, op, "a float32, float64 or int64", f);
}
/// dispatch_numeric and the 16-bit types.
template <class F>
decltype(auto) dispatch_numeric_and_half(DType t, const char* op, F&& f) {
  return dispatch_in<kNumeric | kHalves>(t, op, "a numeric", f);
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
