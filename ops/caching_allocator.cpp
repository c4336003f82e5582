// The caching allocator's bookkeeping (caching_allocator.h): plain C++, no CUDA, so that the CPU tests cover
// it.
#include "ops/caching_allocator.h"

#include <algorithm>

#include "core/error.h"

namespace saccade {

size_t CachePolicy::cache_limit(size_t peak_in_use) const {
  return std::min(max_cached_bytes, std::max(min_cached_bytes, peak_in_use));
}

size_t CachingAllocator::round_size(size_t nbytes) const {
  if (nbytes == 0) return 0;
  const size_t r = nbytes <= policy_.small_size ? policy_.small_round : policy_.large_round;
  return (nbytes + r - 1) / r * r;
}

CachingAllocator::~CachingAllocator() {
  try {
    empty_cache_locked();
  } catch (...) {  // NOTE: a destructor must not throw; what could not be given back is left to the process
  }
}

CachingAllocator::FreeList& CachingAllocator::free_list(StreamId stream, size_t size) {
  return free_[{stream, size > policy_.small_size}];
}

void* CachingAllocator::allocate(size_t nbytes, StreamId stream, const char* device) {
  if (nbytes == 0) return nullptr;
  const size_t size = round_size(nbytes);
  std::lock_guard<std::mutex> lock(mu_);
  void* p = nullptr;
  // 1. best fit from this stream's free list: the smallest cached block >= size, if not too large
  FreeList& fl = free_list(stream, size);
  auto it = fl.lower_bound(size);
  if (it != fl.end() && it->first <= size * policy_.max_oversize) {
    p = it->second;
    fl.erase(it);
    ++stats_.cache_hit_count;
    stats_.bytes_cached -= static_cast<int64_t>(blocks_.at(p).size);
  } else {
    // 2. a fresh raw block; 3. on failure give the whole cache back and try once more
    p = raw_.raw_alloc(size);
    if (p == nullptr && stats_.bytes_cached > 0) {
      empty_cache_locked();
      p = raw_.raw_alloc(size);
    }
    SACCADE_CHECK(
        p != nullptr,
        "allocate: out of memory on {}: requested {} bytes (rounded to {}), {} bytes in use, {} bytes "
        "cached (freed and retried)",
        device, nbytes, size, stats_.bytes_in_use, stats_.bytes_cached);
    ++stats_.raw_alloc_count;
    blocks_[p] = Block{size, stream, false};
  }
  Block& b = blocks_.at(p);
  b.in_use = true;
  ++stats_.alloc_count;
  stats_.bytes_in_use += static_cast<int64_t>(b.size);
  if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
  return p;
}

void CachingAllocator::deallocate(void* p) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(p);
  SACCADE_CHECK(it != blocks_.end() && it->second.in_use,
                "deallocate: pointer {} was not handed out by this caching allocator (or freed twice)", p);
  Block& b = it->second;
  b.in_use = false;
  stats_.bytes_in_use -= static_cast<int64_t>(b.size);
  if (static_cast<size_t>(stats_.bytes_cached) + b.size >
      policy_.cache_limit(static_cast<size_t>(stats_.peak_bytes_in_use))) {
    // the cache is full: this block goes back to its source
    raw_.raw_free(p, b.size);
    ++stats_.raw_free_count;
    blocks_.erase(it);
    return;
  }
  stats_.bytes_cached += static_cast<int64_t>(b.size);
  free_list(b.stream, b.size).emplace(b.size, p);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  empty_cache_locked();
}

void CachingAllocator::empty_cache_locked() {
  // NOTE: each block leaves the lists right after its raw_free succeeds, so that when a raw_free throws the
  // blocks already given back are gone from the books (a later call never frees them twice) and the one that
  // failed, with the rest, stays cached for the next try.
  for (auto& [key, fl] : free_) {
    while (!fl.empty()) {
      const auto [size, p] = *fl.begin();
      raw_.raw_free(p, size);
      fl.erase(fl.begin());
      blocks_.erase(p);
      ++stats_.raw_free_count;
      stats_.bytes_cached -= static_cast<int64_t>(size);
    }
  }
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace saccade
