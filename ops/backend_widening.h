#pragma once
// The 16-bit route of every backend, in one place: Widening<Kernels> is the backend that
// backend(device) hands out (cpu/backend.cpp, cuda/backend.cpp). For each kernel of Kernel16 it calls
// the Kernels class's own kernel when no operand is bfloat16 / float16 or when Kernels::native_16bit says
// the kernel takes 16 bits itself; otherwise Backend::widen runs the float32 kernel on float32 copies and
// rounds each 16-bit output once. The ops in ops/*.cpp therefore call backend(device).kernel(...) with
// 16-bit tensors and never widen by hand.
#include "ops/backend.h"

namespace saccade {

/// `Kernels` (a Backend: CpuBackend, CudaBackend) with the 16-bit route of Kernel16 in front of its kernels.
/// Each override below names a kernel's 16-bit inputs (widened), in-out tensors (widened, rounded back)
/// and outputs (rounded back); float32 statistics and int64 indices pass as they are.
template <class Kernels>
class Widening final : public Kernels {
 public:
  using Kernels::Kernels;

  void softmax(const Tensor& x, const Tensor& out, bool log) override {
    if (native(Kernel16::Softmax, x)) return Kernels::softmax(x, out, log);
    Backend::widen({x}, {}, {out}, [&](const std::vector<Tensor>& t) { Kernels::softmax(t[0], t[1], log); });
  }
  void softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& gx, bool log) override {
    if (native(Kernel16::SoftmaxBackward, y)) return Kernels::softmax_backward(y, gy, gx, log);
    Backend::widen({y, gy}, {}, {gx},
                   [&](const std::vector<Tensor>& t) { Kernels::softmax_backward(t[0], t[1], t[2], log); });
  }
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                  const Tensor& mean, const Tensor& rstd) override {
    if (native(mean.defined() ? Kernel16::LayerNorm : Kernel16::RmsNorm, x))
      return Kernels::layer_norm(x, weight, bias, eps, out, mean, rstd);
    Backend::widen({x, weight, bias}, {}, {out, mean, rstd}, [&](const std::vector<Tensor>& t) {
      Kernels::layer_norm(t[0], t[1], t[2], eps, t[3], t[4], t[5]);
    });
  }
  void layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                           const Tensor& rstd, const Tensor& gx, const Tensor& gweight,
                           const Tensor& gbias) override {
    if (native(mean.defined() ? Kernel16::LayerNormBackward : Kernel16::RmsNormBackward, x))
      return Kernels::layer_norm_backward(gy, x, weight, mean, rstd, gx, gweight, gbias);
    Backend::widen({gy, x, weight, mean, rstd}, {}, {gx, gweight, gbias}, [&](const std::vector<Tensor>& t) {
      Kernels::layer_norm_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]);
    });
  }
  void additive_attention_scores(const Tensor& qp, const Tensor& kp, const Tensor& w_v,
                                 const Tensor& scores) override {
    if (native(Kernel16::AdditiveScores, qp)) return Kernels::additive_attention_scores(qp, kp, w_v, scores);
    Backend::widen({qp, kp, w_v}, {}, {scores}, [&](const std::vector<Tensor>& t) {
      Kernels::additive_attention_scores(t[0], t[1], t[2], t[3]);
    });
  }
  void additive_attention_scores_backward(const Tensor& gscores, const Tensor& qp, const Tensor& kp,
                                          const Tensor& w_v, const Tensor& gqp, const Tensor& gkp,
                                          const Tensor& gw_v) override {
    if (native(Kernel16::AdditiveScoresBackward, qp))
      return Kernels::additive_attention_scores_backward(gscores, qp, kp, w_v, gqp, gkp, gw_v);
    Backend::widen({gscores, qp, kp, w_v}, {}, {gqp, gkp, gw_v}, [&](const std::vector<Tensor>& t) {
      Kernels::additive_attention_scores_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6]);
    });
  }
  // NOTE: the sums of repeated indices (embedding's backward) accumulate in float32 and round once.
  void index_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t outer,
                 int64_t inner) override {
    if (native(Kernel16::IndexAdd, out)) return Kernels::index_add(out, index, src, outer, inner);
    Backend::widen({index, src}, {out}, {},
                   [&](const std::vector<Tensor>& t) { Kernels::index_add(t[2], t[0], t[1], outer, inner); });
  }
  // NOTE: the max of 16-bit values is one of them: widening max_pool2d is exact.
  void max_pool2d(const Tensor& x, const Tensor& out, const Tensor& indices, int kh, int kw, int sh, int sw,
                  int ph, int pw) override {
    if (native(Kernel16::MaxPool2d, x)) return Kernels::max_pool2d(x, out, indices, kh, kw, sh, sw, ph, pw);
    Backend::widen({x}, {}, {out, indices}, [&](const std::vector<Tensor>& t) {
      Kernels::max_pool2d(t[0], t[1], t[2], kh, kw, sh, sw, ph, pw);
    });
  }
  void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx) override {
    if (native(Kernel16::MaxPool2dBackward, gy)) return Kernels::max_pool2d_backward(gy, indices, gx);
    Backend::widen({gy, indices}, {}, {gx},
                   [&](const std::vector<Tensor>& t) { Kernels::max_pool2d_backward(t[0], t[1], t[2]); });
  }
  void avg_pool2d(const Tensor& x, const Tensor& out, int kh, int kw, int sh, int sw, int ph,
                  int pw) override {
    if (native(Kernel16::AvgPool2d, x)) return Kernels::avg_pool2d(x, out, kh, kw, sh, sw, ph, pw);
    Backend::widen({x}, {}, {out}, [&](const std::vector<Tensor>& t) {
      Kernels::avg_pool2d(t[0], t[1], kh, kw, sh, sw, ph, pw);
    });
  }
  void avg_pool2d_backward(const Tensor& gy, const Tensor& gx, int kh, int kw, int sh, int sw, int ph,
                           int pw) override {
    if (native(Kernel16::AvgPool2dBackward, gy))
      return Kernels::avg_pool2d_backward(gy, gx, kh, kw, sh, sw, ph, pw);
    Backend::widen({gy}, {}, {gx}, [&](const std::vector<Tensor>& t) {
      Kernels::avg_pool2d_backward(t[0], t[1], kh, kw, sh, sw, ph, pw);
    });
  }
  // NOTE: widened, the draws are float32's (compared with p in float32); out and the mask are rounded once.
  void dropout(const Tensor& x, uint64_t seed, uint64_t offset, double p, const Tensor& out,
               const Tensor& mask) override {
    if (native(Kernel16::Dropout, x)) return Kernels::dropout(x, seed, offset, p, out, mask);
    Backend::widen({x}, {}, {out, mask}, [&](const std::vector<Tensor>& t) {
      Kernels::dropout(t[0], seed, offset, p, t[1], t[2]);
    });
  }
  void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out,
                        bool interleaved, bool inverse) override {
    if (native(Kernel16::RotaryEmbedding, x))
      return Kernels::rotary_embedding(x, cos, sin, out, interleaved, inverse);
    Backend::widen({x, cos, sin}, {}, {out}, [&](const std::vector<Tensor>& t) {
      Kernels::rotary_embedding(t[0], t[1], t[2], t[3], interleaved, inverse);
    });
  }
  // NOTE: widened, the same counters give the float32 draws, each rounded once.
  void uniform(const Tensor& out, uint64_t seed, uint64_t offset, double low, double high) override {
    if (native(Kernel16::Uniform, out)) return Kernels::uniform(out, seed, offset, low, high);
    Backend::widen({}, {}, {out},
                   [&](const std::vector<Tensor>& t) { Kernels::uniform(t[0], seed, offset, low, high); });
  }
  void normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std) override {
    if (native(Kernel16::Normal, out)) return Kernels::normal(out, seed, offset, mean, std);
    Backend::widen({}, {}, {out},
                   [&](const std::vector<Tensor>& t) { Kernels::normal(t[0], seed, offset, mean, std); });
  }

 private:
  // True when the kernel runs as Kernels has it: `t` (the tensor whose dtype the kernel dispatches on) is
  // not 16-bit, or the backend declares `k` native in 16 bits.
  bool native(Kernel16 k, const Tensor& t) const { return !is_half(t.dtype()) || this->native_16bit(k); }
};

}  // namespace saccade
