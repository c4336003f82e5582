// CUDA kernels of the fused optimizer ops (ops/optim.h), twins of ops/cpu/optim.cpp, after PyTorch's
// multi_tensor_apply (the _fused_adamw_ and _foreach_norm kernels).
//
//   adam_step:   params, grads, exp_avgs, exp_avg_sqs: n contiguous tensors, entry t of one dtype
//   pow_sum:     tensors: contiguous float32/float64 -> out float64 ()
//   foreach_mul: tensors: contiguous floating, scale float64 (1)
//
// As ops/cuda/amp.cu, the tensors' pointers and sizes travel in the kernel's parameters (a table of up to
// kTensors entries, passed by value: nothing is copied to the device first), one launch per group of
// kTensors tensors of one dtype, blockIdx.y picks the tensor and blocks grid-stride over its elements.
// pow_sum's blocks each write one float64 partial into a scratch vector (slot = tensor · gridDim.x + block,
// every slot written), which one block then combines in a fixed order: the same result on every run, no
// atomics.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/cuda/backend.h"
#include "ops/cuda/loop.cuh"
#include "ops/elementwise_math.h"
#include "ops/half.h"

namespace saccade::cuda {

namespace {

constexpr int kTensors = 48;  // 48 entries of 56 bytes: well inside a kernel's 4 KiB of parameters

struct AdamTable {
  void* p[kTensors];
  const void* g[kTensors];
  void* m[kTensors];
  void* v[kTensors];
  int64_t numel[kTensors];
  double step_size[kTensors];
  double bc2_sqrt[kTensors];
};

struct Table {
  void* ptr[kTensors];
  int64_t numel[kTensors];
};

template <class T>
__global__ void adam_kernel(AdamTable tab, math::AdamUpdate<T> update) {
  const int t = blockIdx.y;
  T* __restrict__ p = static_cast<T*>(tab.p[t]);
  const T* __restrict__ g = static_cast<const T*>(tab.g[t]);
  T* __restrict__ m = static_cast<T*>(tab.m[t]);
  T* __restrict__ v = static_cast<T*>(tab.v[t]);
  const int64_t n = tab.numel[t];
  update.neg_step = static_cast<T>(-tab.step_size[t]), update.bc2 = static_cast<T>(tab.bc2_sqrt[t]);
  for (int64_t i = first_index(); i < n; i += grid_stride()) update(p[i], g[i], m[i], v[i]);
}

struct NanMax {  // the larger, NaN winning (as ops::max)
  __device__ double operator()(double a, double b) const { return (a > b || a != a) ? a : b; }
};

// Each block's Σ |x|^p (or max |x|) over its grid-stride share of tensor blockIdx.y, into partial[slot].
template <class T>
__global__ void pow_sum_kernel(Table tab, double p, int mode, double* __restrict__ partial) {
  const T* __restrict__ x = static_cast<const T*>(tab.ptr[blockIdx.y]);
  const int64_t n = tab.numel[blockIdx.y];
  double acc = 0;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const double a = fabs(static_cast<double>(x[i]));
    if (mode == 0)
      acc += a * a;
    else if (mode == 1)
      acc += pow(a, p);
    else
      acc = (a > acc || a != a) ? a : acc;  // NaN wins, as ops::max
  }
  acc = mode == 2 ? block_reduce(acc, NanMax{}, 0.0) : block_reduce(acc, Plus<double>{}, 0.0);
  if (threadIdx.x == 0) partial[static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x] = acc;
}

// One block: out = the combination of partial[0, n) (each thread a strided share, then the block's).
__global__ void combine_kernel(const double* __restrict__ partial, int64_t n, int mode, double* out) {
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    acc = mode == 2 ? NanMax{}(acc, partial[i]) : acc + partial[i];
  acc = mode == 2 ? block_reduce(acc, NanMax{}, 0.0) : block_reduce(acc, Plus<double>{}, 0.0);
  if (threadIdx.x == 0) *out = acc;
}

template <class T>
__global__ void mul_kernel(Table tab, const double* __restrict__ scale) {
  T* __restrict__ x = static_cast<T*>(tab.ptr[blockIdx.y]);
  const int64_t n = tab.numel[blockIdx.y];
  const double s = *scale;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    if constexpr (std::is_floating_point_v<T>)
      x[i] = x[i] * static_cast<T>(s);
    else
      x[i] = T(static_cast<float>(x[i]) * static_cast<float>(s));
  }
}

// Calls launch(indices, largest numel) for each group of up to kTensors entries of one dtype, in order.
template <class F>
void for_groups(const std::vector<Tensor>& ts, F&& launch) {
  std::vector<bool> done(ts.size(), false);
  for (size_t first = 0; first < ts.size(); ++first) {
    if (done[first]) continue;
    const DType dtype = ts[first].dtype();
    for (size_t i = first; i < ts.size();) {
      std::vector<size_t> group;
      int64_t largest = 0;
      for (; i < ts.size() && group.size() < kTensors; ++i) {
        if (done[i] || ts[i].dtype() != dtype) continue;
        done[i] = true;
        group.push_back(i);
        largest = std::max(largest, ts[i].numel());
      }
      if (group.empty()) break;
      launch(group, largest, dtype);
    }
  }
}

}  // namespace

void CudaBackend::adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                            const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                            const std::vector<double>& step_size, const std::vector<double>& bc2_sqrt,
                            const ops::AdamStepArgs& a) {
  for_groups(params, [&](const std::vector<size_t>& group, int64_t largest, DType dtype) {
    AdamTable tab{};
    for (size_t k = 0; k < group.size(); ++k) {
      const size_t i = group[k];
      tab.p[k] = params[i].raw_data(), tab.g[k] = grads[i].raw_data(), tab.m[k] = exp_avgs[i].raw_data(),
      tab.v[k] = exp_avg_sqs[i].raw_data();
      tab.numel[k] = params[i].numel(), tab.step_size[k] = step_size[i], tab.bc2_sqrt[k] = bc2_sqrt[i];
    }
    const dim3 grid(blocks_for(largest), static_cast<unsigned>(group.size()));
    dispatch_floating(dtype, "adam_step", [&]<class T>() {
      adam_kernel<T><<<grid, kThreads, 0, stream()>>>(tab, math::AdamUpdate<T>::from(a));
    });
    SACCADE_CUDA_CHECK_LAUNCH("adam_step");
  });
}

void CudaBackend::pow_sum(const std::vector<Tensor>& tensors, double p, const Tensor& out) {
  const int mode = std::isinf(p) ? 2 : (p == 2 ? 0 : 1);
  constexpr unsigned kMaxPartials = 256;  // blocks per tensor: enough to fill the GPU, few to combine
  std::vector<std::pair<std::vector<size_t>, DType>> groups;
  int64_t slots = 0;
  for_groups(tensors, [&](const std::vector<size_t>& group, int64_t, DType dtype) {
    groups.emplace_back(group, dtype);
    slots += static_cast<int64_t>(kMaxPartials * group.size());
  });
  double* partial = static_cast<double*>(allocate(slots * sizeof(double)));
  int64_t at = 0;
  for (const auto& [group, dtype] : groups) {
    Table tab{};
    int64_t largest = 0;
    for (size_t k = 0; k < group.size(); ++k) {
      tab.ptr[k] = tensors[group[k]].raw_data(), tab.numel[k] = tensors[group[k]].numel();
      largest = std::max(largest, tab.numel[k]);
    }
    const unsigned blocks = std::min(blocks_for(largest), kMaxPartials);
    const dim3 grid(blocks, static_cast<unsigned>(group.size()));
    dispatch_floating(dtype, "pow_sum", [&]<class T>() {
      pow_sum_kernel<T><<<grid, kThreads, 0, stream()>>>(tab, p, mode, partial + at);
    });
    SACCADE_CUDA_CHECK_LAUNCH("pow_sum");
    at += static_cast<int64_t>(blocks) * static_cast<int64_t>(group.size());
  }
  combine_kernel<<<1, 1024, 0, stream()>>>(partial, at, mode, out.data<double>());
  SACCADE_CUDA_CHECK_LAUNCH("pow_sum");
  deallocate(partial, slots * sizeof(double));  // stream-ordered: reused only by later work on this stream
}

void CudaBackend::foreach_mul(const std::vector<Tensor>& tensors, const Tensor& scale) {
  for_groups(tensors, [&](const std::vector<size_t>& group, int64_t largest, DType dtype) {
    Table tab{};
    for (size_t k = 0; k < group.size(); ++k)
      tab.ptr[k] = tensors[group[k]].raw_data(), tab.numel[k] = tensors[group[k]].numel();
    const dim3 grid(blocks_for(largest), static_cast<unsigned>(group.size()));
    dispatch_floating_and_half(dtype, "foreach_mul", [&]<class T>() {
      mul_kernel<T><<<grid, kThreads, 0, stream()>>>(tab, scale.data<double>());
    });
    SACCADE_CUDA_CHECK_LAUNCH("foreach_mul");
  });
}

}  // namespace saccade::cuda
