#pragma once
// The CUDA backend: cuBLAS for GEMM, our own kernels for the rest, memory from the caching allocator
// (ops/caching_allocator.h), every call checked (error.h). Each kernel family has its own file beside this
// one, named like its CPU twin in ops/cpu/ (memory.cu, elementwise.cu, reduce.cu, linalg.cpp, nn.cu,
// index.cu, conv_pool.cu, random.cu, attention.cu, additive_attention.cu, rotary.cu); loop.cuh is the twin of
// ops/cpu/loop.h.
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
  void* allocate(size_t nbytes) override;
  void deallocate(void* p, size_t nbytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t nbytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t nbytes) override;
  AllocatorStats memory_stats() const override;
  void empty_cache() override;
  void copy(const Tensor& src, const Tensor& dst) override;
  void fill(const Tensor& out, double value) override;
  void arange(const Tensor& out, double start, double step) override;
  void unary(UnaryOp op, const Tensor& a, const Tensor& out, double alpha) override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void reduce(ReduceOp op, const Tensor& a, const Tensor& out, int64_t outer, int64_t k,
              int64_t inner) override;
  void arg_reduce(ReduceOp op, const Tensor& a, const Tensor& values, const Tensor& indices, int64_t outer,
                  int64_t k, int64_t inner) override;
  void bmm(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void softmax(const Tensor& x, const Tensor& out, bool log) override;
  void softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& gx, bool log) override;
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                  const Tensor& mean, const Tensor& rstd) override;
  void layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                           const Tensor& rstd, const Tensor& gx, const Tensor& gweight,
                           const Tensor& gbias) override;
  void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const ops::AttentionMask& mask, double scale,
                               const ops::AttentionDropout& dropout, const Tensor& out,
                               const Tensor& lse) override;
  void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                const Tensor& gout, const Tensor& lse, const ops::AttentionMask& mask,
                                double scale, const ops::AttentionDropout& dropout, const Tensor& gq,
                                const Tensor& gk, const Tensor& gv) override;
  void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out,
                        bool interleaved, bool inverse) override;
  void additive_attention_scores(const Tensor& qp, const Tensor& kp, const Tensor& w_v,
                                 const Tensor& scores) override;
  void additive_attention_scores_backward(const Tensor& gscores, const Tensor& qp, const Tensor& kp,
                                          const Tensor& w_v, const Tensor& gqp, const Tensor& gkp,
                                          const Tensor& gw_v) override;
  void index_select(const Tensor& a, const Tensor& index, const Tensor& out, int64_t outer,
                    int64_t inner) override;
  void index_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t outer,
                 int64_t inner) override;
  void gather(const Tensor& a, const Tensor& index, const Tensor& out, int64_t outer, int64_t inner) override;
  void scatter_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t outer,
                   int64_t inner) override;
  void im2col(const Tensor& x, const Tensor& cols, int kh, int kw, int sh, int sw, int ph, int pw) override;
  void col2im(const Tensor& cols, const Tensor& x, int kh, int kw, int sh, int sw, int ph, int pw) override;
  void max_pool2d(const Tensor& x, const Tensor& out, const Tensor& indices, int kh, int kw, int sh, int sw,
                  int ph, int pw) override;
  void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx) override;
  void avg_pool2d(const Tensor& x, const Tensor& out, int kh, int kw, int sh, int sw, int ph,
                  int pw) override;
  void avg_pool2d_backward(const Tensor& gy, const Tensor& gx, int kh, int kw, int sh, int sw, int ph,
                           int pw) override;
  void uniform(const Tensor& out, uint64_t seed, uint64_t offset, double low, double high) override;
  void normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std) override;
  void amp_non_finite_check_and_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                        const Tensor& inv_scale) override;
  void amp_update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                        double growth_factor, double backoff_factor, int64_t growth_interval) override;
  void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const std::vector<double>& step_size, const std::vector<double>& bc2_sqrt,
                 const ops::AdamStepArgs& args) override;
  void pow_sum(const std::vector<Tensor>& tensors, double p, const Tensor& out) override;
  void foreach_mul(const std::vector<Tensor>& tensors, const Tensor& scale) override;

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
