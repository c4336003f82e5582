// CUDA index kernels. All operands contiguous; indices already bounds-checked by the op (ops/index.cpp).
// Shapes follow ops/backend.h: the indexed dim sits between `outer` and `inner`.
//   index_select: a (outer, n, inner), index (m) -> out (outer, m, inner)
//   index_add:    out (outer, n, inner) += src (outer, m, inner) at index (m)
//   gather:       a (outer, n, inner), index (outer, m, inner) -> out (outer, m, inner)
//   scatter_add:  out (outer, n, inner) += src (outer, m, inner) at index (outer, m, inner)
// One thread per element of out (select, gather) or of src (the adds). The adds use atomicAdd: two src
// elements may hit one out element, so unlike the CPU the order of the additions (and float rounding) is not
// fixed from run to run.
#include "ops/cuda/backend.h"
#include "ops/cuda/loop.cuh"

namespace saccade::cuda {

namespace {

// atomicAdd for the dtypes the adds take (int64 through the unsigned 64-bit overload: two's complement).
__device__ inline void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ inline void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ inline void atomic_add(int64_t* p, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

template <class T>
__global__ void index_select_kernel(const T* a, const int64_t* index, T* out, int64_t total, int64_t n,
                                    int64_t m, int64_t inner) {
  for (int64_t t = first_index(); t < total; t += grid_stride()) {  // t = (o, j, i) of out
    const int64_t i = t % inner, j = (t / inner) % m, o = t / (inner * m);
    out[t] = a[(o * n + index[j]) * inner + i];
  }
}

template <class T>
__global__ void index_add_kernel(T* out, const int64_t* index, const T* src, int64_t total, int64_t n,
                                 int64_t m, int64_t inner) {
  for (int64_t t = first_index(); t < total; t += grid_stride()) {  // t = (o, j, i) of src
    const int64_t i = t % inner, j = (t / inner) % m, o = t / (inner * m);
    atomic_add(out + (o * n + index[j]) * inner + i, src[t]);
  }
}

template <class T>
__global__ void gather_kernel(const T* a, const int64_t* index, T* out, int64_t total, int64_t n, int64_t m,
                              int64_t inner) {
  for (int64_t t = first_index(); t < total; t += grid_stride()) {  // t = (o, j, i) of out and index
    const int64_t i = t % inner, o = t / (inner * m);
    out[t] = a[(o * n + index[t]) * inner + i];
  }
}

template <class T>
__global__ void scatter_add_kernel(T* out, const int64_t* index, const T* src, int64_t total, int64_t n,
                                   int64_t m, int64_t inner) {
  for (int64_t t = first_index(); t < total; t += grid_stride()) {  // t = (o, j, i) of src and index
    const int64_t i = t % inner, o = t / (inner * m);
    atomic_add(out + (o * n + index[t]) * inner + i, src[t]);
  }
}

}  // namespace

void CudaBackend::index_select(const Tensor& a, const Tensor& index, const Tensor& out, int64_t outer,
                               int64_t inner) {
  const int64_t m = index.numel(), total = out.numel();
  if (total == 0) return;
  const int64_t n = a.numel() / (outer * inner);
  dispatch_all_and_half(a.dtype(), "index_select", [&]<class T>() {
    index_select_kernel<T><<<blocks_for(total), kThreads, 0, stream()>>>(a.data<T>(), index.data<int64_t>(),
                                                                         out.data<T>(), total, n, m, inner);
    SACCADE_CUDA_CHECK_LAUNCH("index_select");
  });
}

void CudaBackend::index_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t outer,
                            int64_t inner) {
  const int64_t m = index.numel(), total = src.numel();
  if (total == 0) return;
  const int64_t n = out.numel() / (outer * inner);
  dispatch_numeric(out.dtype(), "index_add", [&]<class T>() {
    index_add_kernel<T><<<blocks_for(total), kThreads, 0, stream()>>>(out.data<T>(), index.data<int64_t>(),
                                                                      src.data<T>(), total, n, m, inner);
    SACCADE_CUDA_CHECK_LAUNCH("index_add");
  });
}

void CudaBackend::gather(const Tensor& a, const Tensor& index, const Tensor& out, int64_t outer,
                         int64_t inner) {
  const int64_t total = out.numel();
  if (total == 0) return;
  const int64_t m = total / (outer * inner), n = a.numel() / (outer * inner);
  dispatch_all_and_half(a.dtype(), "gather", [&]<class T>() {
    gather_kernel<T><<<blocks_for(total), kThreads, 0, stream()>>>(a.data<T>(), index.data<int64_t>(),
                                                                   out.data<T>(), total, n, m, inner);
    SACCADE_CUDA_CHECK_LAUNCH("gather");
  });
}

void CudaBackend::scatter_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t outer,
                              int64_t inner) {
  const int64_t total = src.numel();
  if (total == 0) return;
  const int64_t m = total / (outer * inner), n = out.numel() / (outer * inner);
  dispatch_numeric(out.dtype(), "scatter_add", [&]<class T>() {
    scatter_add_kernel<T><<<blocks_for(total), kThreads, 0, stream()>>>(out.data<T>(), index.data<int64_t>(),
                                                                        src.data<T>(), total, n, m, inner);
    SACCADE_CUDA_CHECK_LAUNCH("scatter_add");
  });
}

}  // namespace saccade::cuda
