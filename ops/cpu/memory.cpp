// CPU memory, copy (with dtype conversion) and fill.
//
// Shapes: copy: src, dst (one shape, any strides, any dtypes); fill: out (any strides); arange: out (n)
// contiguous. Memory: raw byte blocks, 64-byte aligned above 4 KiB; freed blocks of 64 KiB and more are kept
// for reuse (block_cache).
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ops/cpu/backend.h"
#include "ops/cpu/loop.h"

namespace saccade {

namespace cpu {

namespace {

// Freed blocks of kCacheMin bytes or more are kept, by size, for the next allocation of that size (up to
// kCacheBytes in all), instead of going back to glibc. Why: glibc serves such blocks by mmap or from the top
// of its heap and returns them to the kernel when freed (munmap, trim), so a training step that allocates
// the same tensors every step touched fresh pages every step: bench/caption_step took ~10⁴ page faults per
// step (perf stat), a fifth of its time in the kernel's fault path (perf record), and the faults of two
// threads serialise on the process's memory map. A step allocates the same sizes each time, so exact sizes
// are reused almost always.
constexpr size_t kCacheMin = size_t{64} << 10;
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kCacheBytes =
    0;  // NOTE: AddressSanitizer builds keep nothing: it must see every use after free
#else
constexpr size_t kCacheBytes = size_t{256} << 20;
#endif

struct BlockCache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free;  // rounded size -> free blocks of that size
  size_t bytes = 0;                                     // Σ sizes of the free blocks held
};

// NOTE: never destroyed: tensors held by other static objects may be freed after static destruction.
BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache;
  return *cache;
}

size_t rounded(size_t nbytes) { return (nbytes + 63) / 64 * 64; }

}  // namespace

void* CpuBackend::allocate(size_t nbytes) {
  // Small blocks: plain malloc (16-byte aligned, glibc's fast path; aligned_alloc's slow path costs more than
  // a small op's arithmetic). Large blocks: 64-byte alignment for full-width vector loads; the largest from
  // the block cache when one of that size was freed.
  void* p = nullptr;
  if (nbytes >= kCacheMin) {
    BlockCache& c = block_cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.free.find(rounded(nbytes));
    if (it != c.free.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      c.bytes -= rounded(nbytes);
      return p;
    }
  }
  p = nbytes <= 4096 ? std::malloc(nbytes) : std::aligned_alloc(64, rounded(nbytes));
  SACCADE_CHECK(p != nullptr, "allocate: out of memory allocating {} bytes on cpu", nbytes);
  return p;
}

void CpuBackend::deallocate(void* p, size_t nbytes) {
  if (nbytes >= kCacheMin) {
    BlockCache& c = block_cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.bytes + rounded(nbytes) <= kCacheBytes) {
      c.free[rounded(nbytes)].push_back(p);
      c.bytes += rounded(nbytes);
      return;
    }
  }
  std::free(p);
}

void CpuBackend::copy_to_host(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }
void CpuBackend::copy_from_host(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); }

// src, dst: same shape, any strides and dtypes.
void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    std::memcpy(dst.raw_data(), src.raw_data(), src.numel() * src.itemsize());
    return;
  }
  dispatch_all(src.dtype(), "copy", [&]<class S>() {
    dispatch_all(dst.dtype(), "copy", [&]<class D>() {
      for_each<2>(dst.shape(), {&src, &dst}, [](char** p, const int64_t* s, int64_t n) {
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
  dispatch_all(out.dtype(), "fill", [&]<class T>() {
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
