#pragma once
// The caching allocator of the CUDA backend: device memory is expensive to get (cudaMalloc synchronises the
// device and costs tens of microseconds), so a freed block is kept in a free list and handed out again. After
// the first step of a training loop every request is served from the cache: no cudaMalloc/cudaFree in the
// steady state. The design follows PyTorch's CUDACachingAllocator (c10/cuda), without block splitting:
//
//   request n bytes on stream s
//     -> rounded size r = round_size(n)                  (small pool: n <= 1 MiB, large pool above)
//     -> best fit among s's free blocks of that pool     (a cached block at most kMaxOversize times r)
//     -> else a new raw block of r bytes                 (out of memory: empty_cache(), retry once, throw)
//   free  -> back on the free list of the stream it was allocated on (never to another stream's list: a
//            kernel queued on that stream may still read it; the stream's order makes reuse on it safe)
//
// The bookkeeping is plain C++ over an abstract RawMemory, so it is tested on the CPU with a fake source
// (tests/test_cuda.cpp, [allocator]); ops/cuda/backend.cpp gives it cudaMalloc/cudaFree. Thread-safe.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

namespace saccade::cuda {

/// Where raw blocks come from: cudaMalloc / cudaFree on a GPU, malloc / free (or a fake) in tests.
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  /// `nbytes` (> 0) of fresh memory, or nullptr when the device is out of memory (must not throw for that).
  virtual void* raw_alloc(size_t nbytes) = 0;
  /// Returns a block raw_alloc gave.
  virtual void raw_free(void* p, size_t nbytes) = 0;
};

/// The allocator's counters (all in bytes unless named *_count).
struct AllocatorStats {
  int64_t raw_alloc_count = 0;  ///< raw blocks obtained from RawMemory (cudaMalloc calls that succeeded)
  int64_t raw_free_count = 0;   ///< raw blocks returned to RawMemory (by empty_cache)
  int64_t alloc_count = 0;      ///< allocate() calls served (cache hits + raw allocations)
  int64_t cache_hit_count = 0;  ///< allocate() calls served from a free list
  int64_t bytes_in_use = 0;     ///< rounded bytes of the blocks handed out and not yet freed
  int64_t bytes_cached = 0;     ///< rounded bytes of the blocks on free lists
  int64_t peak_bytes_in_use = 0;
};

/// A stream, as the allocator sees it: an opaque id (a cudaStream_t's value; 0 = the legacy default stream).
using StreamId = uintptr_t;

/// The size-bucketed, per-stream caching allocator (see the file comment). Not copyable.
class CachingAllocator {
 public:
  static constexpr size_t kSmallSize = size_t{1} << 20;   ///< requests up to 1 MiB use the small pool
  static constexpr size_t kSmallRound = 512;              ///< small requests round up to a multiple of this
  static constexpr size_t kLargeRound = size_t{2} << 20;  ///< large requests round up to a multiple of 2 MiB
  static constexpr size_t kMaxOversize =
      2;  ///< a cached block serves requests down to 1/kMaxOversize its size

  explicit CachingAllocator(RawMemory& raw) : raw_(raw) {}
  ~CachingAllocator();  ///< returns every cached block; blocks still in use are leaked (their owner outlives
                        ///< us)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// The bucket size of a request: 0 -> 0; up to kSmallSize: the next multiple of 512 bytes; above: the next
  /// multiple of 2 MiB (PyTorch's kMinBlockSize and kRoundLarge).
  static size_t round_size(size_t nbytes);

  /// A block of at least `nbytes` usable on `stream` (nullptr for 0 bytes). Throws saccade::Error
  /// ("allocate: out of memory on <device> ...", naming the request, the bytes in use and cached) when
  /// RawMemory fails even after the cache was emptied. `device` names the device in that message only.
  void* allocate(size_t nbytes, StreamId stream = 0, const char* device = "cuda");
  /// Puts a block from allocate() back on its stream's free list (nullptr: nothing). Throws saccade::Error on
  /// a pointer this allocator did not hand out.
  void deallocate(void* p);
  /// Returns every cached (free) block to RawMemory; blocks in use are untouched.
  void empty_cache();
  AllocatorStats stats() const;

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
  mutable std::mutex mu_;
  std::map<std::pair<StreamId, bool>, FreeList> free_;  // (stream, large pool?) -> free blocks
  std::unordered_map<void*, Block> blocks_;             // every block we own: in use or cached
  AllocatorStats stats_;
};

}  // namespace saccade::cuda
