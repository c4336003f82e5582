// The caching allocator (ops/caching_allocator.h) both backends use: its bookkeeping over a fake raw-memory
// source with the CUDA policy and the CPU policy, and the CPU backend's allocator as users see it
// (memory_stats, empty_cache). Plain C++: these run in every build, GPU or not.
#include <limits>
#include <map>
#include <vector>

#include "helpers.h"
#include "ops/caching_allocator.h"
#include "ops/creation.h"
#include "ops/tensor.h"

using namespace saccade;

namespace {

// Hands out fake addresses (never dereferenced), counts calls, and can be told to fail past a byte budget.
class FakeMemory final : public RawMemory {
 public:
  size_t budget = SIZE_MAX;  // raw bytes that may be live at once
  size_t live = 0;
  int allocs = 0, frees = 0;
  int fail_free_at = -1;  // raw_free throws (freeing nothing) when `frees` equals this
  std::map<void*, size_t> blocks;

  void* raw_alloc(size_t n) override {
    if (live + n > budget) return nullptr;
    void* p = reinterpret_cast<void*>(next_);
    next_ += n + 4096;
    live += n;
    ++allocs;
    blocks[p] = n;
    return p;
  }
  void raw_free(void* p, size_t n) override {
    if (frees == fail_free_at) throw Error("raw_free: the fake device refused");
    REQUIRE(blocks.count(p) == 1);  // never a block freed twice, or one never handed out
    REQUIRE(blocks[p] == n);
    blocks.erase(p);
    live -= n;
    ++frees;
  }

 private:
  uintptr_t next_ = 0x10000;
};

}  // namespace

TEST_CASE("caching allocator: sizes round to 512 B (small pool) or 2 MiB (large pool)", "[allocator]") {
  FakeMemory raw;
  CachingAllocator a(raw);
  auto round_size = [&](size_t n) { return a.round_size(n); };
  CHECK(round_size(0) == 0);
  CHECK(round_size(1) == 512);
  CHECK(round_size(512) == 512);
  CHECK(round_size(513) == 1024);
  CHECK(round_size(size_t{1} << 20) == (size_t{1} << 20));        // 1 MiB: still small
  CHECK(round_size((size_t{1} << 20) + 1) == (size_t{2} << 20));  // just above: 2 MiB
  CHECK(round_size((size_t{5} << 20) + 7) == (size_t{6} << 20));
  void* p = a.allocate(1000);
  CHECK(raw.blocks.at(p) == 1024);
  CHECK(a.stats().bytes_in_use == 1024);
  CHECK(a.allocate(0) == nullptr);
  a.deallocate(nullptr);  // nothing
  a.deallocate(p);
}

TEST_CASE("caching allocator: a training loop's steady state makes no raw allocations", "[allocator]") {
  FakeMemory raw;
  CachingAllocator a(raw);
  // One "step": parameters live throughout; activations allocated in the forward, freed in the backward in
  // reverse order, with gradients of the parameters' sizes in between. Sizes as a small model's would be.
  const std::vector<size_t> params = {4096, 300000, 4 << 20, 128};
  const std::vector<size_t> acts = {100, 7000, 65536, 1 << 20, (3 << 20) + 5, 12345, 2 << 20};
  std::vector<void*> p;
  for (size_t n : params) p.push_back(a.allocate(n));
  auto step = [&] {
    std::vector<void*> live;
    for (size_t n : acts) live.push_back(a.allocate(n));
    std::vector<void*> grads;
    for (size_t n : params) grads.push_back(a.allocate(n));
    for (auto it = live.rbegin(); it != live.rend(); ++it) a.deallocate(*it);
    for (void* g : grads) a.deallocate(g);
  };
  step();
  const int after_first = raw.allocs;
  const auto s1 = a.stats();
  for (int i = 0; i < 20; ++i) step();
  CHECK(raw.allocs == after_first);  // every later request was a cache hit
  const auto s2 = a.stats();
  CHECK(s2.raw_alloc_count == s1.raw_alloc_count);
  CHECK(s2.cache_hit_count - s1.cache_hit_count == 20 * static_cast<int64_t>(acts.size() + params.size()));
  CHECK(s2.bytes_cached == s1.bytes_cached);
  // bytes in use: the parameters only, rounded
  int64_t want = 0;
  for (size_t n : params) want += static_cast<int64_t>(a.round_size(n));
  CHECK(s2.bytes_in_use == want);
  CHECK(s2.peak_bytes_in_use >= want);
  for (void* q : p) a.deallocate(q);
}

TEST_CASE("caching allocator: empty_cache returns every free block and keeps blocks in use", "[allocator]") {
  FakeMemory raw;
  CachingAllocator a(raw);
  void* keep = a.allocate(3 << 20);
  std::vector<void*> ps;
  for (size_t n : {size_t{10}, size_t{5000}, size_t{1} << 21, size_t{77}}) ps.push_back(a.allocate(n));
  for (void* q : ps) a.deallocate(q);
  CHECK(a.stats().bytes_cached > 0);
  a.empty_cache();
  CHECK(a.stats().bytes_cached == 0);
  CHECK(raw.frees == 4);
  CHECK(raw.blocks.size() == 1);  // only `keep`
  CHECK(raw.live == (size_t{4} << 20));
  CHECK(a.stats().raw_free_count == 4);
  a.deallocate(keep);
  a.empty_cache();
  CHECK(raw.live == 0);
}

TEST_CASE("caching allocator: best fit within 2x, pools and streams kept apart", "[allocator]") {
  FakeMemory raw;
  CachingAllocator a(raw);
  void* big = a.allocate(10 << 20);
  a.deallocate(big);
  // a 3 MiB request (rounded to 4 MiB) does not take the 10 MiB block (more than twice its size) ...
  void* small = a.allocate(3 << 20);
  CHECK(small != big);
  // ... a 5 MiB one (rounded to 6 MiB) does
  void* mid = a.allocate(5 << 20);
  CHECK(mid == big);
  a.deallocate(small);
  a.deallocate(mid);
  // a block freed on stream 1 is not handed to stream 2, but is to stream 1
  void* s1 = a.allocate(1000, 1);
  a.deallocate(s1);
  void* s2 = a.allocate(1000, 2);
  CHECK(s2 != s1);
  void* s1b = a.allocate(1000, 1);
  CHECK(s1b == s1);
  a.deallocate(s2);
  a.deallocate(s1b);
  // small and large pools are separate: a 1 MiB (small) request never takes a 2 MiB (large) block
  void* l = a.allocate(2 << 20);
  a.deallocate(l);
  void* sm = a.allocate(1 << 20);
  CHECK(sm != l);
  a.deallocate(sm);
}

TEST_CASE("caching allocator: out of memory frees the cache, retries once, then throws with the sizes",
          "[allocator]") {
  FakeMemory raw;
  raw.budget = 6 << 20;
  CachingAllocator a(raw);
  void* x = a.allocate(4 << 20);
  a.deallocate(x);  // 4 MiB cached
  // 4 MiB cached + 2 MiB would fit; a 5 MiB request does not fit beside the cache: the cache is emptied
  void* y = a.allocate(5 << 20);
  REQUIRE(y != nullptr);
  CHECK(raw.frees == 1);
  CHECK(a.stats().bytes_cached == 0);
  // nothing left to free: the error names the request and the state
  REQUIRE_THROWS_SACCADE(a.allocate(3 << 20), "out of memory");
  REQUIRE_THROWS_SACCADE(a.allocate(3 << 20), "3145728 bytes");
  CHECK(a.stats().bytes_in_use == (6 << 20));
  a.deallocate(y);
  // a pointer it never gave, or one freed twice
  int local = 0;
  REQUIRE_THROWS_SACCADE(a.deallocate(&local), "not handed out");
  REQUIRE_THROWS_SACCADE(a.deallocate(y), "not handed out");
}

TEST_CASE("caching allocator, CPU policy: 64-byte rounding, exact sizes only, a cap on what it keeps",
          "[allocator]") {
  FakeMemory raw;
  CachingAllocator a(raw, CachePolicy::cpu(size_t{1} << 20, size_t{1} << 20));  // keeps at most 1 MiB
  CHECK(a.round_size(1) == 64);
  CHECK(a.round_size(65537) == 65600);
  CHECK(a.round_size((size_t{3} << 20) + 1) == (size_t{3} << 20) + 64);
  // a freed block serves the same rounded size only (not a smaller request, as the CUDA policy would)
  void* p = a.allocate(100000);
  a.deallocate(p);
  void* smaller = a.allocate(90000);
  CHECK(smaller != p);
  void* same = a.allocate(100000 - 10);  // rounds to the same 100032 bytes
  CHECK(same == p);
  a.deallocate(smaller);
  a.deallocate(same);
  CHECK(a.stats().bytes_cached == static_cast<int64_t>(a.round_size(90000) + a.round_size(100000)));
  // past the cap, a freed block goes straight back to its source
  const int frees = raw.frees;
  void* big = a.allocate(size_t{2} << 20);
  a.deallocate(big);
  CHECK(raw.frees == frees + 1);
  CHECK(raw.blocks.count(big) == 0);
  CHECK(a.stats().raw_free_count == 1);
  CHECK(a.stats().bytes_cached <= (int64_t{1} << 20));
  // a cap of 0 (AddressSanitizer builds) keeps nothing
  FakeMemory raw0;
  CachingAllocator none(raw0, CachePolicy::cpu(0, 0));
  none.deallocate(none.allocate(70000));
  CHECK(raw0.live == 0);
  CHECK(none.stats().bytes_cached == 0);
}

TEST_CASE("caching allocator, CPU policy: beyond its floor it holds up to the peak bytes in use, under a cap",
          "[allocator]") {
  FakeMemory raw;
  const size_t MiB = size_t{1} << 20;
  CachingAllocator a(raw, CachePolicy::cpu(MiB, 16 * MiB));
  CHECK(a.policy().cache_limit(0) == MiB);
  CHECK(a.policy().cache_limit(9 * MiB) == 9 * MiB);
  CHECK(a.policy().cache_limit(40 * MiB) == 16 * MiB);
  // a step's big block (past the 1 MiB floor) is kept for the next step: the peak in use was as large
  void* x = a.allocate(8 * MiB);
  a.deallocate(x);
  CHECK(raw.frees == 0);
  CHECK(a.allocate(8 * MiB) == x);  // served again, no fault of fresh memory
  a.deallocate(x);
  // 3 + 6 MiB in use: the peak is 9 MiB, so with 8 cached the 6 MiB block would pass it and goes back
  void* y = a.allocate(3 * MiB);
  void* z = a.allocate(6 * MiB);
  CHECK(a.stats().peak_bytes_in_use == static_cast<int64_t>(9 * MiB));
  a.deallocate(z);
  CHECK(raw.frees == 1);
  CHECK(raw.blocks.count(z) == 0);
  a.deallocate(y);  // and 8 + 3 MiB would pass it too
  CHECK(raw.frees == 2);
  // however large the peak, never more than the cap: 8 + 20 MiB > 16 MiB
  void* w = a.allocate(20 * MiB);
  a.deallocate(w);
  CHECK(raw.frees == 3);
  CHECK(a.stats().bytes_cached == static_cast<int64_t>(8 * MiB));
  // the CUDA policy has no limit
  CHECK(CachePolicy::cuda().cache_limit(0) == std::numeric_limits<size_t>::max());
}

TEST_CASE("CPU memory_stats and empty_cache: large blocks are counted, cached and given back",
          "[allocator]") {
  empty_cache(Device::cpu());
  const AllocatorStats before = memory_stats();
  CHECK(before.bytes_cached == 0);
  {
    Tensor t = ops::zeros({1 << 18}, DType::Float32);  // 1 MiB: through the caching allocator
    const AllocatorStats during = memory_stats(Device::cpu());
    CHECK(during.bytes_in_use - before.bytes_in_use == int64_t{1} << 20);
    CHECK(during.alloc_count == before.alloc_count + 1);
  }
  Tensor small = ops::zeros({16}, DType::Float32);  // 64 bytes: malloc, not counted
  const AllocatorStats after = memory_stats();
  CHECK(after.alloc_count == before.alloc_count + 1);
  CHECK(after.bytes_in_use == before.bytes_in_use);
#if !defined(SACCADE_ASAN)  // AddressSanitizer builds cache nothing
  CHECK(after.bytes_cached == int64_t{1} << 20);
#endif
  empty_cache();
  CHECK(memory_stats().bytes_cached == 0);
  // a device this build or machine lacks is an error, not a crash
  if (!cuda_is_available()) REQUIRE_THROWS_SACCADE(memory_stats(Device::cuda()), "backend");
}

TEST_CASE("caching allocator: empty_cache that fails partway frees nothing twice on the next call",
          "[allocator]") {
  FakeMemory raw;
  CachingAllocator a(raw);
  std::vector<void*> ps;
  for (size_t n : {size_t{512}, size_t{1024}, size_t{4096}, size_t{8192}, size_t{4} << 20})
    ps.push_back(a.allocate(n));
  for (void* p : ps) a.deallocate(p);
  REQUIRE(a.stats().bytes_cached > 0);
  raw.fail_free_at = 2;  // the third raw_free throws
  CHECK_THROWS_AS(a.empty_cache(), Error);
  CHECK(raw.frees == 2);
  CHECK(a.stats().raw_free_count == 2);
  CHECK(raw.blocks.size() == 3);
  // what the books still hold is exactly what the fake device still has
  int64_t live = 0;
  for (const auto& [p, n] : raw.blocks) live += static_cast<int64_t>(n);
  CHECK(a.stats().bytes_cached == live);
  raw.fail_free_at = -1;
  a.empty_cache();  // FakeMemory REQUIREs that no block is freed twice
  CHECK(raw.blocks.empty());
  CHECK(a.stats().bytes_cached == 0);
  CHECK(a.stats().raw_free_count == 5);
  // the cache still works afterwards
  void* p = a.allocate(1000);
  a.deallocate(p);
  CHECK(a.stats().bytes_cached == 1024);
}
