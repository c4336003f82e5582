#pragma once
// Tensor: shared Storage + shape + strides + offset + dtype. Views share storage; nothing here knows
// gradients.
//
// Read this file first: every op in ops/ takes and returns Tensors, and autograd's Variable wraps one.
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

#include "ops/device.h"
#include "ops/dtype.h"
#include "core/shape.h"
#include "ops/storage.h"

namespace saccade {

/// An n-dimensional strided view of a Storage. Copying a Tensor copies the view, not the data (like
/// torch.Tensor). A default-constructed Tensor is "undefined" (`defined()` is false).
///
/// shape: sizes per dim (kMaxDims at most); strides: in elements; offset: in elements from storage start.
class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype);
  /// A new contiguous tensor of `shape` with uninitialised memory. Throws saccade::Error naming `op` (the
  /// public op that asked) for a negative size, a shape of more than 2^63 elements, or more bytes than the
  /// device holds (the CPU: its physical memory), never std::bad_alloc; when the allocator then runs out
  /// anyway, its error gets `op` in front ("linspace > allocate: out of memory on cpu: ...").
  static Tensor empty(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu(),
                      const char* op = "empty");

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int dim() const { return shape_.size(); }
  /// Size of dim `d` (negative counts from the end); throws when out of range or the tensor is 0-d.
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t offset() const { return offset_; }
  int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  Device device() const;
  size_t itemsize() const { return dtype_size(dtype_); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  /// Pointer to the first element (storage start + offset). Checks that T matches the dtype
  /// (uint8_t or bool for Bool).
  template <class T>
  T* data() const;
  void* raw_data() const;

  /// The single element of a one-element tensor, converted to T (copied from the device when needed).
  template <class T = double>
  T item() const;
  /// All elements in row-major order, converted to T (copied from the device when needed).
  template <class T>
  std::vector<T> to_vector() const;

  /// In-place writes bump the storage's version counter, which autograd checks.
  uint64_t version() const { return storage_ ? storage_->version() : 0; }
  void bump_version() const {
    if (storage_) storage_->bump_version();
  }

  // ---- views (share storage; no copy) ----
  /// Same data, new shape; one size may be -1. Throws if the strides cannot express it (use reshape).
  Tensor view(const Shape& shape) const;
  /// view() when possible, otherwise a contiguous copy.
  Tensor reshape(const Shape& shape) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  /// 2-d transpose.
  Tensor t() const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t d) const;
  Tensor unsqueeze(int64_t d) const;
  /// Broadcast to `shape` (size-1 dims get stride 0; -1 keeps a size).
  Tensor expand(const Shape& shape) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  /// Elements [start, start + length) of dim d.
  Tensor narrow(int64_t d, int64_t start, int64_t length) const;
  /// Python's a[..., start:end:step, ...] on dim d (negative start/end count from the end; clamped).
  Tensor slice(int64_t d, int64_t start, int64_t end, int64_t step = 1) const;
  /// Index `i` of dim d, removing that dim.
  Tensor select(int64_t d, int64_t i) const;

  // ---- copies ----
  /// This tensor if contiguous, else a contiguous copy.
  Tensor contiguous() const;
  Tensor clone() const;
  /// Converted copy (or this tensor when the dtype already matches).
  Tensor to(DType dtype) const;
  /// Copy on `device` (or this tensor when already there).
  Tensor to(Device device) const;

 private:
  // Throws saccade::Error naming `op` when this tensor is undefined. Every method that reads data or the
  // storage calls it, so an undefined tensor never dereferences a null Storage.
  void check_defined(const char* op) const;
  std::shared_ptr<Storage> storage_;
  Shape shape_, strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::Float32;
};

/// Checks that a tensor of `shape` and `dtype` could be allocated on `device`: sizes non-negative, at most
/// 2^63 elements, at most the device's memory in bytes (the CPU: its physical memory). Returns the bytes.
/// Throws saccade::Error naming `op` otherwise. Tensor::empty calls it.
int64_t check_allocation(const Shape& shape, DType dtype, Device device, const char* op);

/// `count` tensors of `shape`: one entry of the list the overload below checks.
struct TensorCount {
  int64_t count;
  Shape shape;
};
/// Checks, before any of them is allocated, that all of `tensors` (each entry: `count` tensors of `shape`,
/// e.g. one weight per layer) could be held together on `device`: counts and sizes non-negative, the total
/// bytes within int64 and within the device's memory. Returns the total bytes. The one check of a module's
/// parameters against memory, made before anything is allocated or initialised (nn/rnn.cpp). Throws
/// saccade::Error naming `op`: "GRU: cannot allocate 1099511627776 bytes for 3 x [3, 4], 2 x [3] of float32
/// on cpu (the device holds 24000000000 bytes)", or "GRU: size too large (...)" on overflow.
int64_t check_allocation(std::initializer_list<TensorCount> tensors, DType dtype, Device device,
                         const char* op);

namespace detail {
[[noreturn]] void dtype_mismatch(const char* what, DType have, DType want);
[[noreturn]] void undefined_tensor(const char* what);
}  // namespace detail

template <class T>
T* Tensor::data() const {
  constexpr DType want = dtype_of<std::remove_const_t<T>>();
  if (!storage_) [[unlikely]]
    detail::undefined_tensor("data");
  if (dtype_ != want) detail::dtype_mismatch("data", dtype_, want);
  return reinterpret_cast<T*>(static_cast<char*>(storage_->data()) +
                              offset_ * static_cast<int64_t>(itemsize()));
}

inline void* Tensor::raw_data() const {
  if (!storage_) [[unlikely]]
    detail::undefined_tensor("raw_data");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(itemsize());
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  check_defined("to_vector");
  Tensor c = to(Device::cpu()).contiguous();
  std::vector<T> out(static_cast<size_t>(c.numel()));
  dispatch_all_and_half(c.dtype_, "to_vector", [&]<class S>() {
    const S* p = c.data<S>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(p[i]);
  });
  return out;
}

template <class T>
T Tensor::item() const {
  check_defined("item");
  SACCADE_CHECK(numel() == 1, "item: expected a tensor with one element, got shape {}", shape_);
  return to_vector<T>()[0];
}

}  // namespace saccade
