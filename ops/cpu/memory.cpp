// CPU memory, copy (with dtype conversion) and fill.
//
// Shapes: copy: src, dst (one shape, any strides, any dtypes); fill: out (any strides); arange: out (n)
// contiguous. Memory: raw byte blocks, 64-byte aligned above 4 KiB; blocks of 64 KiB and more come from the
// caching allocator (ops/caching_allocator.h, CachePolicy::cpu), which keeps freed ones for reuse.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ops/caching_allocator.h"
#include "ops/cpu/backend.h"
#include "ops/cpu/bf16_lanes.h"
#include "ops/cpu/loop.h"
#include "ops/cpu/simd.h"

namespace saccade {

namespace cpu {

namespace {

// Blocks of kCacheMin bytes or more go through the caching allocator, which keeps freed ones (by exact
// rounded size) for the next allocation of that size instead of giving them back to glibc. Why: glibc serves
// such blocks by mmap or from the top of its heap and returns them to the kernel when freed (munmap, trim),
// so a training step that allocates the same tensors every step touched fresh pages every step:
// bench/caption_step spent much of its time in the kernel's fault path (perf record; bench/RESULTS.md,
// "2026-11-23 — caption_step and flash_tiles", has the figures), and the faults of two threads serialise on
// the process's memory map. A step allocates the same sizes each time, so exact sizes are reused almost
// always. The cache holds kCacheBytes, or as much as the peak bytes in use so far (a model's logits and its
// embedding's gradient are hundreds of MB each: with a fixed 256 MiB they went back to the kernel every step,
// and each step of bench/moe_step faulted them in again; bench/RESULTS.md, "2026-12-07 (MoE)", has
// the figures), but never more than a quarter of the machine's memory. Smaller blocks stay with
// malloc (its thread caches are faster than a lock and two map lookups).
constexpr size_t kCacheMin = size_t{64} << 10;
#if defined(SACCADE_ASAN)
constexpr size_t kCacheBytes =
    0;  // NOTE: AddressSanitizer builds keep nothing: it must see every use after free
#else
constexpr size_t kCacheBytes = size_t{256} << 20;
#endif

// A quarter of the physical memory (kCacheBytes when it cannot be read); 0 under AddressSanitizer.
size_t max_cache_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (kCacheBytes == 0 || pages <= 0 || page <= 0) return kCacheBytes;
  return std::max(kCacheBytes, static_cast<size_t>(pages) * static_cast<size_t>(page) / 4);
}

// Raw CPU memory: 64-byte aligned blocks from glibc (nullptr when out of memory, as RawMemory asks).
class AlignedRawMemory final : public RawMemory {
 public:
  void* raw_alloc(size_t nbytes) override { return std::aligned_alloc(64, nbytes); }
  void raw_free(void* p, size_t) override { std::free(p); }
};

// NOTE: never destroyed: tensors held by other static objects may be freed after static destruction.
CachingAllocator& large_blocks() {
  static CachingAllocator* allocator =
      new CachingAllocator(*new AlignedRawMemory, CachePolicy::cpu(kCacheBytes, max_cache_bytes()));
  return *allocator;
}

}  // namespace

void* CpuBackend::allocate(size_t nbytes) {
  // Large blocks: 64-byte aligned (full-width vector loads), cached. Small blocks: plain malloc (16-byte
  // aligned, glibc's fast path; aligned_alloc's slow path costs more than a small op's arithmetic); 4 KiB to
  // 64 KiB: aligned_alloc.
  if (nbytes >= kCacheMin) return large_blocks().allocate(nbytes, 0, "cpu");
  void* p = nbytes <= 4096 ? std::malloc(nbytes) : std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
  SACCADE_CHECK(p != nullptr, "allocate: out of memory allocating {} bytes on cpu", nbytes);
  return p;
}

void CpuBackend::deallocate(void* p, size_t nbytes) {
  if (nbytes >= kCacheMin) {
    large_blocks().deallocate(p);
    return;
  }
  std::free(p);
}

AllocatorStats CpuBackend::memory_stats() const { return large_blocks().stats(); }
void CpuBackend::empty_cache() { large_blocks().empty_cache(); }

void CpuBackend::copy_to_host(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }
void CpuBackend::copy_from_host(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }

// src, dst: same shape, any strides and dtypes.
void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    std::memcpy(dst.raw_data(), src.raw_data(), src.numel() * src.itemsize());
    return;
  }
  // 16-bit values convert through float (exact when widening; one rounding to nearest even when narrowing)
  dispatch_all_and_half(src.dtype(), "copy", [&]<class S>() {
    dispatch_all_and_half(dst.dtype(), "copy", [&]<class D>() {
      for_each<2>(dst.shape(), {&src, &dst}, [](char** p, const int64_t* s, int64_t n) {
        if constexpr (!std::is_same_v<D, uint8_t>) {
          if (s[0] == sizeof(S) && s[1] == sizeof(D)) {  // contiguous runs: vectorised (the 16-bit casts)
            const S* x = reinterpret_cast<const S*>(p[0]);
            D* y = reinterpret_cast<D*>(p[1]);
            // autocast's casts (bf16_lanes.h). The casts to float* name the types the branch is taken for:
            // clang 14 checks the calls of a discarded branch here too (S = double, int64_t, bool ...).
            if constexpr (std::is_same_v<S, bfloat16> && std::is_same_v<D, float>) {
              widen_rows(reinterpret_cast<const uint16_t*>(x), 0, reinterpret_cast<float*>(y), 0, 1, n);
            } else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, bfloat16>) {
              round_rows(reinterpret_cast<const float*>(x), 0, reinterpret_cast<uint16_t*>(y), 0, 1, n);
            } else {
              with_isa([&] {
                for (int64_t i = 0; i < n; ++i) y[i] = static_cast<D>(x[i]);
              });
            }
            return;
          }
        }
        for (int64_t i = 0; i < n; ++i) {
          S v = *reinterpret_cast<const S*>(p[0] + i * s[0]);
          if constexpr (std::is_same_v<D, uint8_t>) {
            *reinterpret_cast<D*>(p[1] + i * s[1]) = v != S(0);
          } else {
            *reinterpret_cast<D*>(p[1] + i * s[1]) = static_cast<D>(v);
          }
        }
      });
    });
  });
}

void CpuBackend::fill(const Tensor& out, double value) {
  dispatch_all_and_half(out.dtype(), "fill", [&]<class T>() {
    const T v = static_cast<T>(value);
    for_each<1>(out.shape(), {&out}, [v](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
    });
  });
}

void CpuBackend::arange(const Tensor& out, double start, double step) {
  dispatch_numeric(out.dtype(), "arange", [&]<class T>() {
    T* o = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
}

}  // namespace cpu
}  // namespace saccade
