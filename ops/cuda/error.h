#pragma once
// Every CUDA runtime and cuBLAS call of the backend goes through one of these checks: a failure becomes a
// saccade::Error naming the saccade op, the call and CUDA's own message, e.g.
//   "softmax: CUDA call cudaGetLastError() failed: cudaErrorInvalidConfiguration (invalid configuration
//   argument)"
//
//   SACCADE_CUDA_CHECK("copy", cudaMemcpyAsync(...));   // a runtime call
//   SACCADE_CUBLAS_CHECK("bmm", cublasGemmStridedBatchedEx(...));
//   kernel<<<grid, block, 0, stream>>>(...); SACCADE_CUDA_CHECK_LAUNCH("softmax");
// A kernel launch returns nothing: the launch check reads cudaGetLastError() (bad grid, too much shared
// memory); faults inside a kernel surface at the next synchronising call, which is checked too. While a
// profile is active the launch check also times the kernel (ops/cuda/profile_kernels.cpp).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "profiler/profiler.h"

namespace saccade::cuda {

/// Throws saccade::Error "<op>: CUDA call <call> failed: <name> (<message>)".
[[noreturn]] void throw_cuda_error(const char* op, const char* call, cudaError_t err);
/// Throws saccade::Error "<op>: cuBLAS call <call> failed: <status> (<message>)".
[[noreturn]] void throw_cublas_error(const char* op, const char* call, cublasStatus_t status);

/// While a profile is active: marks the end of the kernel `op` just queued (ops/cuda/profile_kernels.cpp).
void profile_launch(const char* op);

inline void check(cudaError_t err, const char* op, const char* call) {
  if (err != cudaSuccess) [[unlikely]]
    throw_cuda_error(op, call, err);
}
inline void check(cublasStatus_t status, const char* op, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) [[unlikely]]
    throw_cublas_error(op, call, status);
}

}  // namespace saccade::cuda

#define SACCADE_CUDA_CHECK(op, call) ::saccade::cuda::check((call), (op), #call)
#define SACCADE_CUBLAS_CHECK(op, call) ::saccade::cuda::check((call), (op), #call)
#define SACCADE_CUDA_CHECK_LAUNCH(op)                                 \
  (::saccade::cuda::check(cudaGetLastError(), (op), "kernel launch"), \
   ::saccade::profiler::is_active() ? ::saccade::cuda::profile_launch(op) : void())
