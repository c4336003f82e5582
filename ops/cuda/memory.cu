// CUDA copy (with dtype conversion), fill and arange. (Raw device memory and host<->device bytes are in
// backend.cpp.)
//
// Shapes: copy: src, dst (one shape, any strides, any dtypes); fill: out (any strides); arange: out (n)
// contiguous.
#include "ops/cuda/backend.h"
#include "ops/cuda/loop.cuh"

namespace saccade::cuda {

namespace {

// dst = cast(src); a bool destination stores 0/1 (as on the CPU: any nonzero is true).
template <class S, class D>
struct CastCopy {
  __device__ void operator()(char** p) const {
    const S v = *reinterpret_cast<const S*>(p[0]);
    if constexpr (std::is_same_v<D, uint8_t>)
      *reinterpret_cast<D*>(p[1]) = v != S(0);
    else
      *reinterpret_cast<D*>(p[1]) = static_cast<D>(v);
  }
};

template <class T>
struct Fill {
  T value;
  __device__ void operator()(char** p) const { *reinterpret_cast<T*>(p[0]) = value; }
};

template <class T>
__global__ void arange_kernel(T* out, int64_t n, double start, double step) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    out[i] = static_cast<T>(start + static_cast<double>(i) * step);
}

}  // namespace

void CudaBackend::copy(const Tensor& src, const Tensor& dst) {
  if (src.numel() == 0) return;
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    SACCADE_CUDA_CHECK("copy", cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.numel() * src.itemsize(),
                                               cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  const Tensor* ts[2] = {&src, &dst};
  dispatch_all_and_half(src.dtype(), "copy", [&]<class S>() {
    dispatch_all_and_half(dst.dtype(), "copy",
                          [&]<class D>() { for_each<2>("copy", dst.shape(), ts, CastCopy<S, D>{}); });
  });
}

void CudaBackend::fill(const Tensor& out, double value) {
  const Tensor* ts[1] = {&out};
  dispatch_all_and_half(out.dtype(), "fill", [&]<class T>() {
    for_each<1>("fill", out.shape(), ts, Fill<T>{static_cast<T>(value)});
  });
}

void CudaBackend::arange(const Tensor& out, double start, double step) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_numeric(out.dtype(), "arange", [&]<class T>() {
    arange_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(out.data<T>(), n, start, step);
    SACCADE_CUDA_CHECK_LAUNCH("arange");
  });
}

}  // namespace saccade::cuda
