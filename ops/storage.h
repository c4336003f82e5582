#pragma once
// Storage: the bytes behind one or more tensor views, on one device, with a version counter.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ops/device.h"

namespace saccade {

/// A block of device memory shared by every view of it. `version` counts in-place writes: autograd records
/// it when it saves a tensor for backward and refuses to run backward if it changed since.
class Storage {
 public:
  /// Allocates `nbytes` on `device` through that device's backend (uninitialised memory).
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace saccade
