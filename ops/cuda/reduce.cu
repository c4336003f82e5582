// CUDA reductions. a: contiguous, viewed as (outer, k, inner); out: (outer, inner); arg_reduce's values and
// int64 indices: (outer, inner).
//
// Two shapes of work, as on the CPU (ops/cpu/reduce.cpp):
//  - a row reduction (inner == 1): one block per row; each thread folds a strided slice of the row, then the
//    block combines its threads' partials with warp shuffles (block_reduce, loop.cuh).
//  - a column reduction (inner > 1): one thread per output column, walking k; neighbouring threads read
//    neighbouring columns (coalesced).
// Few outputs and a long k (reduce_plan.h decides): two passes. Pass 1 runs the same kernels over chunks of
// k, writing `splits` partial results per output (in the accumulator type) to a scratch buffer; pass 2 folds
// each output's partials with the row kernel. One pass is the readable version
// (cuda::set_readable_reductions). float32 sums and products accumulate in double, as on the CPU; max/min
// propagate NaN.
//
// arg_reduce (ties: the smallest index; NaN wins, the first NaN, as ops/cpu/reduce.cpp):
//  - readable: one thread per output walks its k elements in order, as the CPU does.
//  - rows of k ≥ kArgRowMinK (argmax over a vocabulary): one block per row; each thread keeps the best
//    (value, index) of its strided slice, then the block combines the pairs with warp shuffles. The
//    combination (better value; NaN beats any number; equal values or two NaNs: smaller index) is a total
//    order, so any order of combining picks the element the CPU's scan picks.
#include <limits>

#include "ops/cuda/api.h"
#include "ops/cuda/backend.h"
#include "ops/cuda/loop.cuh"
#include "ops/cuda/reduce_plan.h"

namespace saccade::cuda {

namespace {

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

// x: (rows, k) -> y: (rows · splits); work item p = r · splits + s folds chunk s of row r, elements
// [s · chunk, min(k, (s + 1) · chunk)), with one block (grid-strided over items). splits = 1, chunk = k: one
// block per row.
template <class In, class Out, class Acc, class F>
__global__ void reduce_rows_kernel(const In* x, Out* y, int64_t rows, int64_t k, int64_t splits,
                                   int64_t chunk, Acc init, F f) {
  for (int64_t p = blockIdx.x; p < rows * splits; p += gridDim.x) {
    const int64_t r = p / splits, begin = (p % splits) * chunk, end = min(k, begin + chunk);
    const In* row = x + r * k;
    Acc acc = init;
    for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) acc = f(acc, static_cast<Acc>(row[j]));
    acc = block_reduce(acc, f, init);
    if (threadIdx.x == 0) y[p] = static_cast<Out>(acc);
  }
}

// x: (outer, k, inner) -> y: (outer, splits, inner); one thread per output (o, s, i) folds chunk s of column
// (o, i), elements [s · chunk, min(k, (s + 1) · chunk)). splits = 1, chunk = k: one thread per column.
template <class In, class Out, class Acc, class F>
__global__ void reduce_cols_kernel(const In* x, Out* y, int64_t outer, int64_t k, int64_t inner,
                                   int64_t splits, int64_t chunk, Acc init, F f) {
  for (int64_t p = first_index(); p < outer * splits * inner; p += grid_stride()) {
    const int64_t i = p % inner, os = p / inner, o = os / splits, begin = (os % splits) * chunk,
                  end = min(k, begin + chunk);
    const In* src = x + o * k * inner + i;
    Acc acc = init;
    for (int64_t j = begin; j < end; ++j) acc = f(acc, static_cast<Acc>(src[j * inner]));
    y[p] = static_cast<Out>(acc);
  }
}

// One pass over x (outer, k, inner) into y (outer, splits, inner) on stream s.
template <class In, class Out, class Acc, class F>
void reduce_pass(const In* x, Out* y, int64_t outer, int64_t k, int64_t inner, SplitPlan plan, Acc init, F f,
                 cudaStream_t s) {
  if (inner == 1)
    reduce_rows_kernel<In, Out, Acc><<<blocks_for(outer * plan.splits, 1), kThreads, 0, s>>>(
        x, y, outer, k, plan.splits, plan.chunk, init, f);
  else
    reduce_cols_kernel<In, Out, Acc><<<blocks_for(outer * plan.splits * inner), kThreads, 0, s>>>(
        x, y, outer, k, inner, plan.splits, plan.chunk, init, f);
  SACCADE_CUDA_CHECK_LAUNCH("reduce");
}

// The GPU's multiprocessor count (asked once).
int sm_count() {
  static const int n = [] {
    int device = 0, count = 0;
    SACCADE_CUDA_CHECK("reduce", cudaGetDevice(&device));
    SACCADE_CUDA_CHECK("reduce", cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    return count;
  }();
  return n;
}

template <class T, class Acc, class F>
void reduce_launch(const Tensor& a, const Tensor& out, int64_t outer, int64_t k, int64_t inner, Acc init,
                   F f) {
  if (outer * inner == 0) return;
  cudaStream_t s = current_stream();
  const SplitPlan plan = readable_reductions() ? SplitPlan{1, k} : plan_reduce(outer, k, inner, sm_count());
  if (plan.splits == 1)
    return reduce_pass<T, T, Acc>(a.data<T>(), out.data<T>(), outer, k, inner, plan, init, f, s);
  // pass 1: (outer, k, inner) -> partials (outer, splits, inner) in Acc, in scratch memory from the caching
  // allocator (freed on this stream: reused only by kernels queued after pass 2); pass 2: the same reduction
  // of the partials over their splits dim, in one pass.
  const int64_t n = outer * plan.splits * inner;
  Tensor scratch = Tensor::empty({n * static_cast<int64_t>(sizeof(Acc))}, DType::Bool, a.device());
  Acc* partial = static_cast<Acc*>(scratch.raw_data());
  reduce_pass<T, Acc, Acc>(a.data<T>(), partial, outer, k, inner, plan, init, f, s);
  reduce_pass<Acc, T, Acc>(partial, out.data<T>(), outer, plan.splits, inner, SplitPlan{1, plan.splits}, init,
                           f, s);
}

template <class T>
void reduce_typed(ReduceOp op, const Tensor& a, const Tensor& out, int64_t outer, int64_t k, int64_t inner) {
  using Acc = acc_t<T>;  // never 16 bits: bfloat16 / float16 sum in float, rounded once on the store
  using C = compute_t<T>;
  using Lim = std::numeric_limits<C>;
  switch (op) {
    case ReduceOp::Sum:
      return reduce_launch<T, Acc>(a, out, outer, k, inner, Acc(0), Plus<Acc>{});
    case ReduceOp::Prod:
      return reduce_launch<T, Acc>(a, out, outer, k, inner, Acc(1), ProdOp<Acc>{});
    case ReduceOp::Max:
      return reduce_launch<T, C>(a, out, outer, k, inner,
                                 Lim::has_infinity ? -Lim::infinity() : Lim::lowest(), MaxOp<C>{});
    case ReduceOp::Min:
      return reduce_launch<T, C>(a, out, outer, k, inner, Lim::has_infinity ? Lim::infinity() : Lim::max(),
                                 MinOp<C>{});
  }
}

// x: (outer, k, inner) -> values, indices: (outer, inner); one thread per output, k >= 1.
template <class T>
__global__ void arg_reduce_kernel(const T* x, T* values, int64_t* indices, int64_t outer, int64_t k,
                                  int64_t inner, bool is_max) {
  for (int64_t oi = first_index(); oi < outer * inner; oi += grid_stride()) {
    const int64_t o = oi / inner, i = oi % inner;
    const T* src = x + o * k * inner + i;
    compute_t<T> best = src[0];
    int64_t arg = 0;
    for (int64_t j = 1; j < k && best == best; ++j) {  // stops at the first NaN: NaN wins
      const compute_t<T> c = src[j * inner];
      if (c != c || (is_max ? c > best : c < best)) best = c, arg = j;
    }
    values[oi] = static_cast<T>(best);
    indices[oi] = arg;
  }
}

// The better of two (value, index) candidates of arg_reduce: NaN beats any number, then the larger
// (is_max) or smaller value, then (equal values, or both NaN) the smaller index. A total order, so the
// combination is associative and commutative.
template <class T>
struct ArgBest {
  T value;
  int64_t index;
};
template <class T>
struct ArgBetter {
  bool is_max;
  __device__ ArgBest<T> operator()(ArgBest<T> a, ArgBest<T> b) const {
    const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
    bool take_b;
    if (a_nan || b_nan)
      take_b = a_nan && b_nan ? b.index < a.index : b_nan;
    else if (a.value == b.value)
      take_b = b.index < a.index;
    else
      take_b = is_max ? b.value > a.value : b.value < a.value;
    return take_b ? b : a;
  }
};
// A (value, index) pair through the warp shuffle of loop.cuh, one member at a time (found by warp_reduce).
template <class T>
__device__ ArgBest<T> shfl_xor(ArgBest<T> v, int offset) {
  return {cuda::shfl_xor(v.value, offset), cuda::shfl_xor(v.index, offset)};
}

// x: (rows, k) -> values, indices: (rows); one block per row (grid-strided over rows), k >= 1.
template <class T>
__global__ void arg_reduce_rows_kernel(const T* x, T* values, int64_t* indices, int64_t rows, int64_t k,
                                       bool is_max) {
  using C = compute_t<T>;  // 16-bit values compared as floats
  const ArgBetter<C> better{is_max};
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * k;
    // each thread: the best of its slice j = tid, tid + blockDim, ... (in order, as the CPU's scan); a
    // thread with no element starts from element 0, which every row has (k >= 1). Element 0 is also the
    // block reduction's filler: combining with a real candidate never changes the best.
    const ArgBest<C> first{static_cast<C>(row[0]), 0};
    ArgBest<C> best = first;
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x)
      best = better(best, ArgBest<C>{static_cast<C>(row[j]), j});
    best = block_reduce(best, better, first);
    if (threadIdx.x == 0) values[r] = static_cast<T>(best.value), indices[r] = best.index;
  }
}

}  // namespace

void CudaBackend::reduce(ReduceOp op, const Tensor& a, const Tensor& out, int64_t outer, int64_t k,
                         int64_t inner) {
  dispatch_all_and_half(a.dtype(), "reduce",
                        [&]<class T>() { reduce_typed<T>(op, a, out, outer, k, inner); });
}

void CudaBackend::arg_reduce(ReduceOp op, const Tensor& a, const Tensor& values, const Tensor& indices,
                             int64_t outer, int64_t k, int64_t inner) {
  if (outer * inner == 0) return;
  dispatch_all_and_half(a.dtype(), "arg_reduce", [&]<class T>() {
    const bool is_max = op == ReduceOp::Max;
    if (!readable_reductions() && arg_reduce_by_rows(k, inner))
      arg_reduce_rows_kernel<T><<<blocks_for(outer, 1), kThreads, 0, stream()>>>(
          a.data<T>(), values.data<T>(), indices.data<int64_t>(), outer, k, is_max);
    else
      arg_reduce_kernel<T><<<blocks_for(outer * inner), kThreads, 0, stream()>>>(
          a.data<T>(), values.data<T>(), indices.data<int64_t>(), outer, k, inner, is_max);
    SACCADE_CUDA_CHECK_LAUNCH("arg_reduce");
  });
}

}  // namespace saccade::cuda
