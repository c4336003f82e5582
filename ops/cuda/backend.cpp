// The CUDA backend's host side: finding the GPU, device memory through the caching allocator, host<->device
// byte copies (pinned staging above 1 MiB), the cuBLAS handle, error messages, and the user-facing controls
// of api.h. No kernels here.
#include "ops/cuda/backend.h"

#include <atomic>

#include "ops/backend_widening.h"
#include "ops/cuda/api.h"
#include "ops/cuda/error.h"
#include "ops/cuda/staging.h"

namespace saccade {

namespace cuda {

// ---- errors ----

void throw_cuda_error(const char* op, const char* call, cudaError_t err) {
  (void)cudaGetLastError();  // clear a non-sticky error so that the next call starts clean
  throw Error(fmt::format("{}: CUDA call {} failed: {} ({})", op, call, cudaGetErrorName(err),
                          cudaGetErrorString(err)));
}

void throw_cublas_error(const char* op, const char* call, cublasStatus_t status) {
  throw Error(fmt::format("{}: cuBLAS call {} failed: {} ({})", op, call, cublasGetStatusName(status),
                          cublasGetStatusString(status)));
}

namespace {

// Raw device memory for the caching allocator: cudaMalloc / cudaFree. Out of memory gives nullptr (the
// allocator then empties its cache and retries); any other failure throws.
class CudaRawMemory final : public RawMemory {
 public:
  void* raw_alloc(size_t nbytes) override {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    check(err, "allocate", "cudaMalloc(&p, nbytes)");
    return p;
  }
  void raw_free(void* p, size_t) override { SACCADE_CUDA_CHECK("empty_cache", cudaFree(p)); }
};

}  // namespace

// The two pinned buffers and their events, driven by the chunk loop of staging.h on the current stream.
struct PinnedStaging final : StagingEngine {
  char* buffers[2] = {nullptr, nullptr};
  cudaEvent_t events[2] = {nullptr, nullptr};
  cudaStream_t stream = nullptr;

  // Throws (after freeing what it made) when the driver refuses pinned memory or events.
  PinnedStaging() {
    try {
      for (int i = 0; i < 2; ++i) {
        void* p = nullptr;
        SACCADE_CUDA_CHECK("to", cudaHostAlloc(&p, kStagingChunk, cudaHostAllocDefault));
        buffers[i] = static_cast<char*>(p);
        SACCADE_CUDA_CHECK("to", cudaEventCreateWithFlags(&events[i], cudaEventDisableTiming));
      }
    } catch (const Error&) {
      release();
      throw;
    }
  }
  ~PinnedStaging() override { release(); }
  void release() {
    for (int i = 0; i < 2; ++i) {
      if (buffers[i]) (void)cudaFreeHost(buffers[i]);
      if (events[i]) (void)cudaEventDestroy(events[i]);
      buffers[i] = nullptr, events[i] = nullptr;
    }
  }

  void async_to_device(void* dst, int slot, size_t n) override {
    SACCADE_CUDA_CHECK("to", cudaMemcpyAsync(dst, buffers[slot], n, cudaMemcpyHostToDevice, stream));
  }
  void async_to_host(int slot, const void* src, size_t n) override {
    SACCADE_CUDA_CHECK("to", cudaMemcpyAsync(buffers[slot], src, n, cudaMemcpyDeviceToHost, stream));
  }
  void record(int slot) override { SACCADE_CUDA_CHECK("to", cudaEventRecord(events[slot], stream)); }
  void wait(int slot) override { SACCADE_CUDA_CHECK("to", cudaEventSynchronize(events[slot])); }
  void synchronize() override { SACCADE_CUDA_CHECK("to", cudaStreamSynchronize(stream)); }
  char* buffer(int slot) override { return buffers[slot]; }
};

// The staging buffers, made on first use (nullptr, and pageable copies from then on, when the driver refuses
// pinned memory). Called with staging_mu_ held.
static PinnedStaging* staging_for(std::unique_ptr<PinnedStaging>& staging, bool& tried, cudaStream_t stream) {
  if (!tried) {
    tried = true;
    try {
      staging = std::make_unique<PinnedStaging>();
    } catch (const Error&) {
      staging.reset();
    }
  }
  if (staging) staging->stream = stream;
  return staging.get();
}

// ---- the backend object ----

CudaBackend::CudaBackend()
    : raw_(std::make_unique<CudaRawMemory>()),
      allocator_(std::make_unique<CachingAllocator>(*raw_, CachePolicy::cuda())) {
  SACCADE_CUDA_CHECK("cuda", cudaSetDevice(0));
}

CudaBackend::~CudaBackend() {
  if (cublas_) cublasDestroy(cublas_);
}

cublasHandle_t CudaBackend::cublas(const char* op) {
  std::lock_guard<std::mutex> lock(cublas_mu_);
  if (!cublas_) SACCADE_CUBLAS_CHECK(op, cublasCreate(&cublas_));
  SACCADE_CUBLAS_CHECK(op, cublasSetStream(cublas_, stream_));
  return cublas_;
}

void* CudaBackend::allocate(size_t nbytes) {
  return allocator_->allocate(nbytes, reinterpret_cast<StreamId>(stream_), "cuda:0");
}

void CudaBackend::deallocate(void* p, size_t) { allocator_->deallocate(p); }
AllocatorStats CudaBackend::memory_stats() const { return allocator_->stats(); }
void CudaBackend::empty_cache() { allocator_->empty_cache(); }

// ---- host<->device copies ----

// Both copies wait for the stream: the host buffer may be read or freed as soon as they return. Small copies
// go from pageable memory; large ones through the pinned staging buffers (staging.h).
void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  if (nbytes >= kStagingThreshold) {
    std::lock_guard<std::mutex> lock(staging_mu_);
    if (PinnedStaging* s = staging_for(staging_, staging_tried_, stream_))
      return staged_copy_to_host(*s, host_dst, src, nbytes);
  }
  SACCADE_CUDA_CHECK("to", cudaMemcpyAsync(host_dst, src, nbytes, cudaMemcpyDeviceToHost, stream_));
  SACCADE_CUDA_CHECK("to", cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_from_host(void* dst, const void* host_src, size_t nbytes) {
  if (nbytes == 0) return;
  if (nbytes >= kStagingThreshold) {
    std::lock_guard<std::mutex> lock(staging_mu_);
    if (PinnedStaging* s = staging_for(staging_, staging_tried_, stream_))
      return staged_copy_from_host(*s, dst, host_src, nbytes);
  }
  SACCADE_CUDA_CHECK("to", cudaMemcpyAsync(dst, host_src, nbytes, cudaMemcpyHostToDevice, stream_));
  SACCADE_CUDA_CHECK("to", cudaStreamSynchronize(stream_));
}

namespace {
CudaBackend* instance = nullptr;
}

CudaBackend& the_backend() { return *instance; }

// ---- api.h ----

namespace {
CudaBackend& require(const char* op) {
  SACCADE_CHECK(detail::cuda_backend() != nullptr, "{}: no CUDA GPU is present", op);
  return the_backend();
}
}  // namespace

AllocatorStats memory_stats() { return require("memory_stats").memory_stats(); }
void empty_cache() { require("empty_cache").empty_cache(); }
void synchronize() {
  SACCADE_CUDA_CHECK("synchronize", cudaStreamSynchronize(require("synchronize").stream()));
}

}  // namespace cuda

// The backend exists iff the runtime finds a device. Without a driver or a GPU, cudaGetDeviceCount fails (or
// says 0) and this returns nullptr: cuda_is_available() is false and nothing throws. The object is never
// destroyed: tensors held in static storage may free device memory during exit.
Backend* detail::cuda_backend() {
  static cuda::CudaBackend* made = []() -> cuda::CudaBackend* {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      (void)cudaGetLastError();
      return nullptr;
    }
    try {
      cuda::instance = new Widening<cuda::CudaBackend>();
    } catch (const Error&) {
      cuda::instance = nullptr;
    }
    return cuda::instance;
  }();
  return made;
}

}  // namespace saccade
