#pragma once
// Host<->device copies through pinned staging buffers. A copy from pageable host memory (what std::vector and
// the CPU tensors hold) cannot be read by the GPU's copy engine directly: the driver copies it into pinned
// memory of its own first, in small pieces. Above kStagingThreshold the backend does that itself, with two
// pinned buffers of kStagingChunk bytes each, so that the host's memcpy of one chunk overlaps the copy
// engine's transfer of the other (double buffering):
//
//   host -> device    for chunk i (buffer b = i % 2):  wait until the transfer that last read b is done
//                                                       memcpy(b, src_i); async copy b -> dst_i; record b
//   device -> host    issue the async copy of chunk 0 into buffer 0, record 0; then for chunk i:
//                       issue chunk i + 1 into buffer (i + 1) % 2 (its last chunk was copied out already)
//                       wait for buffer i % 2; memcpy(dst_i, buffer i % 2)
//
// Both end with the stream synchronised, as the pageable copies do: the caller may free or read its host
// buffer as soon as they return. Below the threshold (and when the pinned buffers cannot be had) the copy is
// one cudaMemcpyAsync from pageable memory, as before.
//
// The chunk loop is plain C++ over an abstract StagingEngine (the async copies and events of one stream), so
// it runs in every build and is tested on the CPU with a fake engine that defers its copies until they are
// waited for (tests/test_cuda_modules.cpp, [staging]); ops/cuda/backend.cpp gives it CUDA's calls.
#include <algorithm>
#include <cstddef>
#include <cstring>

namespace saccade::cuda {

/// Copies of at least this many bytes go through the pinned staging buffers (smaller ones stay pageable).
inline constexpr size_t kStagingThreshold = size_t{1} << 20;
/// The size of each of the two pinned staging buffers, and so of a chunk.
inline constexpr size_t kStagingChunk = size_t{4} << 20;

/// What the staging loop needs from a stream: asynchronous copies between a pinned buffer (slot 0 or 1) and
/// device memory, queued in order, and one event per slot.
class StagingEngine {
 public:
  virtual ~StagingEngine() = default;
  /// Queues a copy of n bytes from pinned buffer `slot` (its first n bytes) to device memory `dst`.
  virtual void async_to_device(void* dst, int slot, size_t n) = 0;
  /// Queues a copy of n bytes from device memory `src` into pinned buffer `slot`.
  virtual void async_to_host(int slot, const void* src, size_t n) = 0;
  /// Records slot's event after everything queued so far.
  virtual void record(int slot) = 0;
  /// Blocks until slot's last recorded event has happened (at once if it was never recorded).
  virtual void wait(int slot) = 0;
  /// Blocks until everything queued has run.
  virtual void synchronize() = 0;
  /// The host address of pinned buffer `slot` (kStagingChunk bytes).
  virtual char* buffer(int slot) = 0;
};

/// Copies n bytes from pageable host memory `src` to device memory `dst` in chunks of `chunk` bytes through
/// the engine's two pinned buffers (see the file comment). Returns when the copy is complete.
inline void staged_copy_from_host(StagingEngine& e, void* dst, const void* src, size_t n,
                                  size_t chunk = kStagingChunk) {
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  for (size_t off = 0, i = 0; off < n; off += chunk, ++i) {
    const int slot = static_cast<int>(i % 2);
    const size_t len = std::min(chunk, n - off);
    e.wait(slot);  // the transfer that last read this buffer (chunk i - 2) is done
    std::memcpy(e.buffer(slot), s + off, len);
    e.async_to_device(d + off, slot, len);
    e.record(slot);
  }
  e.synchronize();
}

/// Copies n bytes from device memory `src` to pageable host memory `dst` in chunks of `chunk` bytes through
/// the engine's two pinned buffers (see the file comment). Returns when the copy is complete.
inline void staged_copy_to_host(StagingEngine& e, void* dst, const void* src, size_t n,
                                size_t chunk = kStagingChunk) {
  if (n == 0) return;
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  const size_t chunks = (n + chunk - 1) / chunk;
  auto issue = [&](size_t i) {
    const int slot = static_cast<int>(i % 2);
    e.async_to_host(slot, s + i * chunk, std::min(chunk, n - i * chunk));
    e.record(slot);
  };
  issue(0);
  for (size_t i = 0; i < chunks; ++i) {
    // NOTE: buffer (i + 1) % 2 last held chunk i - 1, which the previous iteration already copied out
    if (i + 1 < chunks) issue(i + 1);
    const int slot = static_cast<int>(i % 2);
    e.wait(slot);
    std::memcpy(d + i * chunk, e.buffer(slot), std::min(chunk, n - i * chunk));
  }
  e.synchronize();
}

}  // namespace saccade::cuda
