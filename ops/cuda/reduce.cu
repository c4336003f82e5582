// CUDA reductions. a: contiguous, viewed as (outer, k, inner); out: (outer, inner); arg_reduce's values and
// int64 indices: (outer, inner).
//
// Two shapes of work, as on the CPU (ops/cpu/reduce.cpp):
//  - a row reduction (inner == 1): one block per row; each thread folds a strided slice of the row, then the
//    block combines its threads' partials with warp shuffles (block_reduce, loop.cuh).
//  - a column reduction (inner > 1): one thread per output column, walking k; neighbouring threads read
//    neighbouring columns (coalesced).
// float32 sums and products accumulate in double, as on the CPU; max/min propagate NaN.
// arg_reduce is the readable version only: one thread per output walks its k elements (ties: first index).
#include <limits>

#include "ops/cuda/backend.h"
#include "ops/cuda/loop.cuh"

namespace saccade::cuda {

namespace {

template <class Acc>
struct SumOp {
  __device__ Acc operator()(Acc s, Acc v) const { return s + v; }
};
template <class Acc>
struct ProdOp {
  __device__ Acc operator()(Acc s, Acc v) const { return s * v; }
};
template <class T>
struct MaxOp {  // NaN wins: once m is NaN it stays (v > NaN is false); a NaN v replaces m
  __device__ T operator()(T m, T v) const { return (v > m || v != v) ? v : m; }
};
template <class T>
struct MinOp {
  __device__ T operator()(T m, T v) const { return (v < m || v != v) ? v : m; }
};

// x: (rows, k) -> y: (rows); one block per row (grid-strided over rows).
template <class T, class Acc, class F>
__global__ void reduce_rows_kernel(const T* x, T* y, int64_t rows, int64_t k, Acc init, F f) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * k;
    Acc acc = init;
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) acc = f(acc, static_cast<Acc>(row[j]));
    acc = block_reduce(acc, f, init);
    if (threadIdx.x == 0) y[r] = static_cast<T>(acc);
  }
}

// x: (outer, k, inner) -> y: (outer, inner); one thread per output.
template <class T, class Acc, class F>
__global__ void reduce_cols_kernel(const T* x, T* y, int64_t outer, int64_t k, int64_t inner, Acc init, F f) {
  for (int64_t oi = first_index(); oi < outer * inner; oi += grid_stride()) {
    const int64_t o = oi / inner, i = oi % inner;
    const T* src = x + o * k * inner + i;
    Acc acc = init;
    for (int64_t j = 0; j < k; ++j) acc = f(acc, static_cast<Acc>(src[j * inner]));
    y[oi] = static_cast<T>(acc);
  }
}

template <class T, class Acc, class F>
void reduce_launch(const Tensor& a, const Tensor& out, int64_t outer, int64_t k, int64_t inner, Acc init,
                   F f) {
  if (outer * inner == 0) return;
  cudaStream_t s = current_stream();
  if (inner == 1)
    reduce_rows_kernel<T, Acc>
        <<<blocks_for(outer, 1), kThreads, 0, s>>>(a.data<T>(), out.data<T>(), outer, k, init, f);
  else
    reduce_cols_kernel<T, Acc>
        <<<blocks_for(outer * inner), kThreads, 0, s>>>(a.data<T>(), out.data<T>(), outer, k, inner, init, f);
  SACCADE_CUDA_CHECK_LAUNCH("reduce");
}

template <class T>
void reduce_typed(ReduceOp op, const Tensor& a, const Tensor& out, int64_t outer, int64_t k, int64_t inner) {
  using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
  using Lim = std::numeric_limits<T>;
  switch (op) {
    case ReduceOp::Sum:
      return reduce_launch<T, Acc>(a, out, outer, k, inner, Acc(0), SumOp<Acc>{});
    case ReduceOp::Prod:
      return reduce_launch<T, Acc>(a, out, outer, k, inner, Acc(1), ProdOp<Acc>{});
    case ReduceOp::Max:
      return reduce_launch<T, T>(a, out, outer, k, inner,
                                 Lim::has_infinity ? -Lim::infinity() : Lim::lowest(), MaxOp<T>{});
    case ReduceOp::Min:
      return reduce_launch<T, T>(a, out, outer, k, inner, Lim::has_infinity ? Lim::infinity() : Lim::max(),
                                 MinOp<T>{});
  }
}

// x: (outer, k, inner) -> values, indices: (outer, inner); one thread per output, k >= 1.
template <class T>
__global__ void arg_reduce_kernel(const T* x, T* values, int64_t* indices, int64_t outer, int64_t k,
                                  int64_t inner, bool is_max) {
  for (int64_t oi = first_index(); oi < outer * inner; oi += grid_stride()) {
    const int64_t o = oi / inner, i = oi % inner;
    const T* src = x + o * k * inner + i;
    T best = src[0];
    int64_t arg = 0;
    for (int64_t j = 1; j < k && best == best; ++j) {  // stops at the first NaN: NaN wins
      const T c = src[j * inner];
      if (c != c || (is_max ? c > best : c < best)) best = c, arg = j;
    }
    values[oi] = best;
    indices[oi] = arg;
  }
}

}  // namespace

void CudaBackend::reduce(ReduceOp op, const Tensor& a, const Tensor& out, int64_t outer, int64_t k,
                         int64_t inner) {
  dispatch_all(a.dtype(), "reduce", [&]<class T>() { reduce_typed<T>(op, a, out, outer, k, inner); });
}

void CudaBackend::arg_reduce(ReduceOp op, const Tensor& a, const Tensor& values, const Tensor& indices,
                             int64_t outer, int64_t k, int64_t inner) {
  if (outer * inner == 0) return;
  dispatch_all(a.dtype(), "arg_reduce", [&]<class T>() {
    arg_reduce_kernel<T><<<blocks_for(outer * inner), kThreads, 0, stream()>>>(
        a.data<T>(), values.data<T>(), indices.data<int64_t>(), outer, k, inner, op == ReduceOp::Max);
    SACCADE_CUDA_CHECK_LAUNCH("arg_reduce");
  });
}

}  // namespace saccade::cuda
