#pragma once
// The one strided-index helper of the CUDA elementwise kernels, twin of ops/cpu/loop.h. Broadcasting was
// resolved by the op (inputs are expanded views, stride 0 on broadcast dims); this walks N operands of one
// shape together, one GPU thread per element:
//
//   for_each<N>("op", shape, {&t0, &t1, ...}, f)     // f: a functor with  __device__ void operator()(char**
//   p)
//
// As on the CPU, size-1 dims are dropped and dims contiguous in every operand merged, so a contiguous tensor
// is one dim and its byte offset is i * itemsize. Element i's offsets come from its multi-index, peeled off
// innermost dim first (64-bit: tensors past 2^31 elements are fine). The grid is 1-d and grid-strided: at
// most kMaxBlocks blocks, each thread takes every (blocks * threads)-th element.
//
// Also here: grid sizing (blocks_for), the shared launch check, and the block reductions (warp shuffles).
#include <cstdint>

#include "ops/cuda/backend.h"
#include "ops/cuda/error.h"
#include "ops/tensor.h"

namespace saccade::cuda {

constexpr int kThreads = 256;  ///< threads per block of the 1-d kernels
constexpr int64_t kMaxBlocks =
    65535;  ///< grid cap (the x limit is 2^31-1; more blocks than this buy nothing)

/// Blocks for n work items at `threads` per block, capped (kernels loop grid-strided past the cap); >= 1.
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

/// The grid-stride loop: for (int64_t i = first_index(); i < n; i += grid_stride()).
__device__ inline int64_t first_index() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ inline int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

/// N operands' pointers, passed by value to a kernel.
template <int N>
struct Ptrs {
  char* p[N];
};

/// The coalesced sizes and byte strides of N operands of one shape (built on the host, read on the device).
template <int N>
struct Indexer {
  int nd = 0;
  int64_t size[kMaxDims];
  int64_t stride[N][kMaxDims];  // bytes

  /// Byte offsets of element `linear` (row-major order over `size`) in each operand.
  __device__ void offsets(int64_t linear, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t i = linear % size[d];
      linear /= size[d];
      for (int k = 0; k < N; ++k) off[k] += i * stride[k][d];
    }
  }
};

/// The Indexer of `ts` over `shape` (the CPU's coalescing rule: merge a dim into the previous one when it
/// is contiguous with it in every operand).
template <int N>
Indexer<N> make_indexer(const Shape& shape, const Tensor* const (&ts)[N]) {
  Indexer<N> ix;
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = ix.nd > 0;
    for (int k = 0; k < N && merge; ++k)
      merge =
          ix.stride[k][ix.nd - 1] == ts[k]->strides()[d] * shape[d] * static_cast<int64_t>(ts[k]->itemsize());
    const int at = merge ? ix.nd - 1 : ix.nd;
    ix.size[at] = merge ? ix.size[at] * shape[d] : shape[d];
    for (int k = 0; k < N; ++k)
      ix.stride[k][at] = ts[k]->strides()[d] * static_cast<int64_t>(ts[k]->itemsize());
    if (!merge) ++ix.nd;
  }
  return ix;
}

template <int N, class F>
__global__ void for_each_kernel(int64_t n, Indexer<N> ix, Ptrs<N> base, F f) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    int64_t off[N];
    ix.offsets(i, off);
    char* p[N];
    for (int k = 0; k < N; ++k) p[k] = base.p[k] + off[k];
    f(p);
  }
}

/// Runs f(p) for every element of `shape` on the current stream, p[k] pointing at operand k's element.
/// `op` names the caller in a launch error. Empty shapes launch nothing.
template <int N, class F>
void for_each(const char* op, const Shape& shape, const Tensor* const (&ts)[N], F f) {
  const int64_t n = shape.numel();
  if (n == 0) return;  // before any stride arithmetic, as on the CPU
  Ptrs<N> base;
  for (int k = 0; k < N; ++k) base.p[k] = static_cast<char*>(ts[k]->raw_data());
  for_each_kernel<N>
      <<<blocks_for(n), kThreads, 0, current_stream()>>>(n, make_indexer<N>(shape, ts), base, f);
  SACCADE_CUDA_CHECK_LAUNCH(op);
}

// ---- block reductions ----

/// a + b: the sum, as a functor for warp_reduce / block_reduce.
template <class T>
struct Plus {
  __device__ T operator()(T a, T b) const { return a + b; }
};

/// The larger of a and b (b when neither is: NaN-blind, unlike the NaN-winning max of the reductions), as a
/// functor for warp_reduce / block_reduce: row ends (int64) and running score maxima.
template <class T>
struct Larger {
  __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};

/// The combination of all lanes' `v` under `op` (an associative functor), returned to every lane of the warp.
/// __shfl_xor_sync for any T it takes, and for one-byte types (bool) through int.
template <class T>
__device__ T shfl_xor(T v, int offset) {
  if constexpr (sizeof(T) < 4)
    return static_cast<T>(__shfl_xor_sync(0xffffffffu, static_cast<int>(v), offset));
  else
    return __shfl_xor_sync(0xffffffffu, v, offset);
}

/// With `lanes` = 16, 8, ... (a power of two), the combination over each aligned group of that many lanes.
template <class T, class Op>
__device__ T warp_reduce(T v, Op op, int lanes = 32) {
  for (int offset = lanes / 2; offset > 0; offset /= 2) v = op(v, shfl_xor(v, offset));
  return v;
}

/// The combination of all threads' `v` under `op`, returned to every thread of the block. blockDim.x must be
/// a multiple of 32 (at most 1024); every thread of the block must call it. Uses 32 T of shared memory.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_reduce(v, op);
  __syncthreads();  // partial may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : identity;
  return warp_reduce(v, op);
}

}  // namespace saccade::cuda
