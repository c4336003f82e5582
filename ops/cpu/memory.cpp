// CPU memory, copy (with dtype conversion) and fill.
//
// Shapes: copy: src, dst (one shape, any strides, any dtypes); fill: out (any strides); arange: out (n)
// contiguous. Memory: raw byte blocks, 64-byte aligned above 4 KiB.
#include <cstdlib>
#include <cstring>

#include "ops/cpu/backend.h"
#include "ops/cpu/loop.h"

namespace saccade {

namespace cpu {

void* CpuBackend::allocate(size_t nbytes) {
  // Small blocks: plain malloc (16-byte aligned, glibc's fast path; aligned_alloc's slow path costs more than
  // a small op's arithmetic). Large blocks: 64-byte alignment for full-width vector loads.
  void* p = nbytes <= 4096 ? std::malloc(nbytes) : std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
  SACCADE_CHECK(p != nullptr, "allocate: out of memory allocating {} bytes on cpu", nbytes);
  return p;
}

void CpuBackend::deallocate(void* p, size_t) { std::free(p); }

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
