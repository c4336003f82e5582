// CUDA random kernels over Philox (ops/philox.h), the same function the CPU calls: element i is made from
// counter offset + i under `seed`, so the same seed and offset give the same numbers on both devices (uniform
// bit for bit; normal up to the last bit of the device's log/cos). ops::dropout draws its mask from uniform:
// the same generator state gives the same mask on the CPU and the GPU.
//
// Shapes: out (n) contiguous float32 or float64; element i uses Philox counter offset + i.
#include "ops/cuda/backend.h"
#include "ops/cuda/loop.cuh"
#include "ops/philox.h"

namespace saccade::cuda {

namespace {

template <class T>
__global__ void uniform_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, double low, double high) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const uint32_t w = philox4x32_10(seed, offset + static_cast<uint64_t>(i)).w[0];
    const double u = std::is_same_v<T, float> ? uniform_float(w) : uniform_double(w);
    out[i] = static_cast<T>(low + (high - low) * u);
  }
}

// Box-Muller: sqrt(-2 ln u1) cos(2 pi u2) ~ N(0, 1), in double as on the CPU.
template <class T>
__global__ void normal_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, double mean, double std) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const Philox4 r = philox4x32_10(seed, offset + static_cast<uint64_t>(i));
    const double z = ::sqrt(-2.0 * ::log(uniform_open0(r.w[0]))) * ::cos(kTwoPi * uniform_double(r.w[1]));
    out[i] = static_cast<T>(mean + std * z);
  }
}

}  // namespace

void CudaBackend::uniform(const Tensor& out, uint64_t seed, uint64_t offset, double low, double high) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_floating(out.dtype(), "uniform", [&]<class T>() {
    uniform_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(out.data<T>(), n, seed, offset, low, high);
    SACCADE_CUDA_CHECK_LAUNCH("uniform");
  });
}

void CudaBackend::normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_floating(out.dtype(), "normal", [&]<class T>() {
    normal_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(out.data<T>(), n, seed, offset, mean, std);
    SACCADE_CUDA_CHECK_LAUNCH("normal");
  });
}

}  // namespace saccade::cuda
