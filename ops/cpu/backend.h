#pragma once
// The CPU backend: OpenBLAS for GEMM, our own kernels (threads: thread_pool.h) for the rest. Each family has
// its own file beside this one (attention.cpp, additive_attention.cpp, memory.cpp, elementwise.cpp,
// reduce.cpp, linalg.cpp, nn.cpp, index.cpp, conv_pool.cpp, random.cpp).
#include "ops/backend.h"
#include "ops/tensor.h"

namespace saccade::cpu {

/// The CPU's kernels. backend(Device::cpu()) hands out Widening<CpuBackend> (ops/backend_widening.h), which
/// widens the 16-bit operands of the kernels that native_16bit does not name.
class CpuBackend : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  /// 16 bits natively where native_16bit_on (ops/kernel16.h) says so for the CPU: dropout (converts block by
  /// block), layer norm and RMSNorm forward and backward (row by row, nn.cpp) and the rotary embedding
  /// (rotary.cpp). Flash attention widens head by head itself (attention_half.cpp); the other kernels of
  /// Kernel16 run on float32 copies.
  bool native_16bit(Kernel16 k) const override { return native_16bit_on(k).cpu; }
  bool keeps_dropout_flags() const override { return true; }
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
  void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out,
                        bool interleaved, bool inverse) override;
  void swiglu_backward(const Tensor& g, const Tensor& gate, const Tensor& up, const Tensor& dgate,
                       const Tensor& dup) override;
  void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const ops::AttentionMask& mask, double scale,
                               const ops::AttentionDropout& dropout, const Tensor& out,
                               const Tensor& lse) override;
  void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                const Tensor& gout, const Tensor& lse, const ops::AttentionMask& mask,
                                double scale, const ops::AttentionDropout& dropout, const Tensor& gq,
                                const Tensor& gk, const Tensor& gv) override;
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
  void dropout(const Tensor& x, uint64_t seed, uint64_t offset, double p, const Tensor& out,
               const Tensor& mask) override;
  void normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std) override;
  void gru_gates(const Tensor& gi, const Tensor& gh, const Tensor& h, const Tensor& out,
                 const Tensor& saved) override;
  void gru_gates_backward(const Tensor& gy, const Tensor& gh, const Tensor& h, const Tensor& saved,
                          const Tensor& ggi, const Tensor& ggh, const Tensor& gx_h) override;
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
};

}  // namespace saccade::cpu
