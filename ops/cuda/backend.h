#pragma once
// The CUDA backend: cuBLAS for GEMM, our own kernels for the rest, memory from the caching allocator
// (ops/caching_allocator.h), every call checked (error.h). Each kernel family has its own file beside this
// one, named like its CPU twin in ops/cpu/ (memory.cu, elementwise.cu, reduce.cu, linalg.cpp, nn.cu,
// index.cu, conv_pool.cu, random.cu, optim.cu, amp.cu, attention.cu, additive_attention.cu, rotary.cu);
// attention_fast.cu and attention_mma.cu hold the fused attention's tiled and tensor-core kernels, api.cpp
// the flags every build has (and the throwing stand-ins without CUDA), backend.cpp the backend's object and
// memory, profile_kernels.cpp the profiler's kernel timing; loop.cuh is the twin of ops/cpu/loop.h.
// scripts/check_docs keeps this list whole.
//
// One device (cuda:0) and one current stream (a global; the legacy default stream unless set_stream was
// called): every kernel is queued on it, so kernels run in the order the ops were called and a block the
// allocator reuses on that stream is never still being read. Copies to the host synchronise the stream;
// copies of 1 MiB or more go through two pinned staging buffers (staging.h).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>

#include "ops/backend.h"
#include "ops/caching_allocator.h"
#include "ops/tensor.h"

namespace saccade::cuda {

struct PinnedStaging;  // backend.cpp: the two pinned buffers of large host<->device copies (staging.h)

/// The GPU's kernels. backend(cuda) hands out Widening<CudaBackend> (ops/backend_widening.h), which widens
/// the 16-bit operands of the kernels that native_16bit does not name.
class CudaBackend : public Backend {
 public:
  CudaBackend();
  ~CudaBackend() override;
  const char* name() const override { return "cuda"; }
  /// 16 bits natively where native_16bit_on (ops/kernel16.h) says so for CUDA: rms_norm and its backward
  /// (nn.cu), rotary_embedding (rotary.cu). Flash attention (outside Kernel16) picks for itself: the
  /// tensor-core kernel while tensor_core_attention() is on and it applies, else float32 copies through
  /// Backend::widen (attention.cu).
  bool native_16bit(Kernel16 k) const override { return native_16bit_on(k).cuda; }
  SACCADE_BACKEND_MEMORY(SACCADE_MEMBER_OVERRIDE)
  // Every kernel of the families' lists (ops/kernels/*.h); none of the fused ones a backend may leave out
  // (Backend::fuses is false: the ops compose dropout, the GRU gates, SwiGLU's backward and linear_q8_0).
  SACCADE_BACKEND_KERNELS(SACCADE_KERNEL_OVERRIDE, SACCADE_KERNEL_OVERRIDE)

  /// The stream every kernel is queued on.
  cudaStream_t stream() const { return stream_; }
  void set_stream(cudaStream_t s) { stream_ = s; }
  /// The cuBLAS handle (made on first use), bound to the current stream. `op` names the caller in errors.
  cublasHandle_t cublas(const char* op);

 private:
  std::unique_ptr<RawMemory> raw_;
  std::unique_ptr<CachingAllocator> allocator_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::mutex cublas_mu_;
  std::unique_ptr<PinnedStaging> staging_;  // made on the first large copy; null: pinned memory refused
  bool staging_tried_ = false;
  std::mutex staging_mu_;  // one staged copy at a time (they share the buffers)
};

/// The one CudaBackend; only call it after detail::cuda_backend() returned non-null (the kernels do: an op
/// reaches them only through backend(device)).
CudaBackend& the_backend();
/// The current stream of the one device.
inline cudaStream_t current_stream() { return the_backend().stream(); }

}  // namespace saccade::cuda
