#pragma once
// The caching allocator, one for every backend: getting memory from its source is expensive (cudaMalloc
// synchronises the device and costs tens of microseconds; glibc serves large blocks by mmap and gives them
// back on free, so every reuse page-faults), so a freed block is kept in a free list and handed out again.
// After the first step of a training loop every request is served from the cache: no raw allocation in the
// steady state. The design follows PyTorch's CUDACachingAllocator (c10/cuda), without block splitting:
//
//   request n bytes on stream s
//     -> rounded size r = round_size(n)                  (small pool: n <= small_size, large pool above)
//     -> best fit among s's free blocks of that pool     (a cached block at most max_oversize times r)
//     -> else a new raw block of r bytes                 (out of memory: empty_cache(), retry once, throw)
//   free  -> back on the free list of the stream it was allocated on (never to another stream's list: a
//            kernel queued on that stream may still read it; the stream's order makes reuse on it safe),
//            or straight back to the source when the cache would pass its limit (CachePolicy::cache_limit)
//
// What differs between devices is a CachePolicy: CUDA rounds to 512 B / 2 MiB and reuses a block for any
// request down to half its size, without a cap (cuda/backend.cpp); the CPU rounds to 64 B, reuses only
// exact sizes and holds 256 MiB, or up to the peak bytes in use and at most a quarter of the machine's memory
// (ops/cpu/memory.cpp, which leaves blocks under 64 KiB to malloc).
// The bookkeeping is plain C++ over an abstract RawMemory, so it is tested with a fake source
// (tests/test_caching_allocator.cpp). Thread-safe.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>

#include "ops/device.h"

namespace saccade {

/// Where raw blocks come from: cudaMalloc / cudaFree on a GPU, aligned_alloc / free on the CPU, a fake in
/// tests.
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  /// `nbytes` (> 0) of fresh memory, or nullptr when the device is out of memory (must not throw for that).
  virtual void* raw_alloc(size_t nbytes) = 0;
  /// Returns a block raw_alloc gave.
  virtual void raw_free(void* p, size_t nbytes) = 0;
};

/// A caching allocator's counters (all in bytes unless named *_count), as torch.cuda.memory_stats.
struct AllocatorStats {
  int64_t raw_alloc_count = 0;  ///< raw blocks obtained from RawMemory (cudaMalloc calls that succeeded)
  int64_t raw_free_count = 0;   ///< raw blocks returned to RawMemory (empty_cache, or past the cache's cap)
  int64_t alloc_count = 0;      ///< allocate() calls served (cache hits + raw allocations)
  int64_t cache_hit_count = 0;  ///< allocate() calls served from a free list
  int64_t bytes_in_use = 0;     ///< rounded bytes of the blocks handed out and not yet freed
  int64_t bytes_cached = 0;     ///< rounded bytes of the blocks on free lists
  int64_t peak_bytes_in_use = 0;
};

/// How a device's allocator rounds and reuses (see the file comment). Sizes in bytes.
struct CachePolicy {
  size_t small_size = size_t{1} << 20;   ///< requests up to this use the small pool
  size_t small_round = 512;              ///< small requests round up to a multiple of this
  size_t large_round = size_t{2} << 20;  ///< large requests round up to a multiple of this
  size_t max_oversize = 2;  ///< a cached block serves requests down to 1/max_oversize its size (1: exact)
  /// What the cache may hold: up to min_cached_bytes always; beyond that no more than the peak bytes in use
  /// so far (a training step's freed blocks never exceed what it had in use, and the process never holds more
  /// than twice its own peak), and never more than max_cached_bytes. A freed block that would pass the limit
  /// goes back to its source.
  size_t min_cached_bytes = std::numeric_limits<size_t>::max();
  size_t max_cached_bytes = std::numeric_limits<size_t>::max();

  /// PyTorch's CUDA policy: 512 B and 2 MiB rounding (kMinBlockSize, kRoundLarge), reuse within 2×, no cap.
  static CachePolicy cuda() { return {}; }
  /// The CPU's: 64-byte rounding (the alignment of full-width vector loads), exact sizes only (a training
  /// step asks for the same sizes every step), holding `min_cached` bytes, or up to the peak in use but at
  /// most `max_cached` bytes.
  static CachePolicy cpu(size_t min_cached, size_t max_cached) {
    return {size_t{1} << 20, 64, 64, 1, min_cached, max_cached};
  }
  /// The bytes a cache may hold when `peak_in_use` bytes were in use at most (see min_cached_bytes).
  size_t cache_limit(size_t peak_in_use) const;
};

/// A stream, as the allocator sees it: an opaque id (a cudaStream_t's value; 0 = the legacy default stream,
/// and the CPU's only one).
using StreamId = uintptr_t;

/// The size-bucketed, per-stream caching allocator (see the file comment). Not copyable.
class CachingAllocator {
 public:
  explicit CachingAllocator(RawMemory& raw, CachePolicy policy = CachePolicy::cuda())
      : raw_(raw), policy_(policy) {}
  ~CachingAllocator();  ///< returns every cached block; blocks still in use are leaked (their owner outlives
                        ///< us)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// The bucket size of a request: 0 -> 0; up to small_size: the next multiple of small_round; above: the
  /// next multiple of large_round.
  size_t round_size(size_t nbytes) const;

  /// A block of at least `nbytes` usable on `stream` (nullptr for 0 bytes). Throws saccade::Error
  /// ("allocate: out of memory on <device> ...", naming the request, the bytes in use and cached) when
  /// RawMemory fails even after the cache was emptied. `device` names the device in that message only.
  void* allocate(size_t nbytes, StreamId stream = 0, const char* device = "cuda");
  /// Puts a block from allocate() back on its stream's free list, or returns it to RawMemory when the cache
  /// is full (nullptr: nothing). Throws saccade::Error on a pointer this allocator did not hand out.
  void deallocate(void* p);
  /// Returns every cached (free) block to RawMemory; blocks in use are untouched.
  void empty_cache();
  AllocatorStats stats() const;
  const CachePolicy& policy() const { return policy_; }

 private:
  struct Block {
    size_t size;  // rounded size
    StreamId stream;
    bool in_use;
  };
  using FreeList = std::multimap<size_t, void*>;  // size -> block, for best fit with lower_bound
  FreeList& free_list(StreamId stream, size_t size);
  void empty_cache_locked();

  RawMemory& raw_;
  const CachePolicy policy_;
  mutable std::mutex mu_;
  std::map<std::pair<StreamId, bool>, FreeList> free_;  // (stream, large pool?) -> free blocks
  std::unordered_map<void*, Block> blocks_;             // every block we own: in use or cached
  AllocatorStats stats_;
};

/// The counters of `device`'s caching allocator (torch.cuda.memory_stats()). On the CPU they count the blocks
/// of 64 KiB and more only (smaller ones go to malloc). Throws saccade::Error when the device is not
/// available (a CUDA device in a build without CUDA, or without a GPU).
AllocatorStats memory_stats(Device device = Device::cpu());
/// Returns the cached, unused blocks of `device`'s allocator to their source (torch.cuda.empty_cache());
/// blocks in use are untouched. Throws as memory_stats.
void empty_cache(Device device = Device::cpu());

}  // namespace saccade
