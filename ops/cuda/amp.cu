// CUDA kernels of loss scaling (ops/amp.h), the twins of ops/cpu/amp.cpp, after PyTorch's
// multi_tensor_apply version of _amp_foreach_non_finite_check_and_unscale_.
//
//   grads: n contiguous tensors of one dtype per launch   found_inf, inv_scale, scale: float32 (1)
//
// The gradients' pointers and sizes travel in the kernel's parameters (a table of up to kTensorsPerLaunch
// tensors, passed by value), so nothing is copied to the device first and nothing is read back: one launch
// per group of kTensorsPerLaunch gradients of one dtype (a GPT's ~50 parameters: one launch), blockIdx.y
// picks the tensor, blocks grid-stride over its elements. A thread that meets a non-finite value stores 1
// into found_inf (every writer stores the same value, so the race is benign); inv_scale is read on the
// device.
#include <cstdint>

#include "ops/cuda/backend.h"
#include "ops/cuda/loop.cuh"

namespace saccade::cuda {

namespace {

constexpr int kTensorsPerLaunch = 64;

struct TensorTable {
  void* ptr[kTensorsPerLaunch];
  int64_t numel[kTensorsPerLaunch];
};

template <class T>
__global__ void unscale_kernel(TensorTable table, float* __restrict__ found_inf,
                               const float* __restrict__ inv_scale) {
  T* p = static_cast<T*>(table.ptr[blockIdx.y]);
  const int64_t n = table.numel[blockIdx.y];
  const T inv = static_cast<T>(*inv_scale);
  bool bad = false;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const T v = p[i];
    bad |= !isfinite(v);
    p[i] = v * inv;
  }
  if (bad) *found_inf = 1.0f;
}

__global__ void update_scale_kernel(float* scale, int64_t* tracker, const float* found_inf, float growth,
                                    float backoff, int64_t interval) {
  if (*found_inf != 0.0f) {
    *scale *= backoff;
    *tracker = 0;
    return;
  }
  const int64_t successful = *tracker + 1;
  if (successful == interval) {
    const float grown = *scale * growth;
    if (isfinite(grown)) *scale = grown;  // never grow into inf
    *tracker = 0;
  } else {
    *tracker = successful;
  }
}

}  // namespace

void CudaBackend::amp_non_finite_check_and_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                                   const Tensor& inv_scale) {
  constexpr const char* op = "amp_non_finite_check_and_unscale";
  std::vector<bool> done(grads.size(), false);
  for (size_t first = 0; first < grads.size(); ++first) {
    if (done[first]) continue;
    const DType dtype = grads[first].dtype();
    // every not-yet-done gradient of this dtype, kTensorsPerLaunch at a time
    for (size_t i = first; i < grads.size();) {
      TensorTable table{};
      int count = 0;
      int64_t largest = 0;
      for (; i < grads.size() && count < kTensorsPerLaunch; ++i) {
        if (done[i] || grads[i].dtype() != dtype) continue;
        done[i] = true;
        table.ptr[count] = grads[i].raw_data();
        table.numel[count] = grads[i].numel();
        largest = std::max(largest, grads[i].numel());
        ++count;
      }
      if (count == 0) break;
      const dim3 grid(blocks_for(largest), count);
      dispatch_floating(dtype, op, [&]<class T>() {
        unscale_kernel<T>
            <<<grid, kThreads, 0, stream()>>>(table, found_inf.data<float>(), inv_scale.data<float>());
      });
      SACCADE_CUDA_CHECK_LAUNCH(op);
    }
  }
}

void CudaBackend::amp_update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                   double growth_factor, double backoff_factor, int64_t growth_interval) {
  update_scale_kernel<<<1, 1, 0, stream()>>>(scale.data<float>(), growth_tracker.data<int64_t>(),
                                             found_inf.data<float>(), static_cast<float>(growth_factor),
                                             static_cast<float>(backoff_factor), growth_interval);
  SACCADE_CUDA_CHECK_LAUNCH("amp_update_scale");
}

}  // namespace saccade::cuda
