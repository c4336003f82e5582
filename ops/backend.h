#pragma once
// The dispatch table: one Backend per device type holds that device's kernels. An op in ops/*.cpp checks its
// arguments, works out shapes and dtypes, allocates the result, then calls backend(device).kernel(...).
// Kernels assume their arguments were checked: same device, shapes as documented here.
// CPU kernels live in cpu/, CUDA kernels in cuda/ (beside this file).
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "ops/caching_allocator.h"
#include "ops/device.h"
#include "ops/dtype.h"
#include "ops/kernel16.h"
#include "ops/optim.h"
#include "ops/tensor.h"

namespace saccade {

class Tensor;

/// The elementwise ops of one input (Backend::unary); each one's per-element math is a functor of the same
/// name in ops/elementwise_math.h. Names for messages: unary_op_name.
enum class UnaryOp {
  Neg,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Abs,
  Sin,
  Cos,
  Tanh,
  Sigmoid,
  Relu,
  Gelu,
  GeluGrad,  // d gelu(x) / dx (exact, erf-based gelu)
  Silu,      // x · sigmoid(x)
  Sign,
  PowScalar,   // x ** alpha
  LogicalNot,  // bool -> bool
};

/// The elementwise ops of two inputs (Backend::binary); math in ops/elementwise_math.h; names from
/// binary_op_name.
enum class BinaryOp {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,  // out is Bool
  LogicalAnd,
  LogicalOr,     // Bool x Bool -> Bool
  GeluBackward,  // g · d gelu(x) / dx, with g the first operand and x the second (floating only)
  SiluBackward,  // g · d silu(x) / dx, g first, x second (floating only)
  Swiglu,        // silu(gate) · up, gate first, up second (floating only)
};

/// The reductions along one dim (Backend::reduce); Max and Min also drive Backend::arg_reduce.
enum class ReduceOp { Sum, Max, Min, Prod };

/// The op's name as users call it ("neg", "gelu_grad", "pow", ...), for error messages.
std::string_view unary_op_name(UnaryOp op);
/// The op's name as users call it ("add", "maximum", "logical_or", ...), for error messages.
std::string_view binary_op_name(BinaryOp op);

namespace ops {

// The fused attention kernels' contract (ops/attention.h builds these; every backend reads them).

/// How a causal mask is aligned when Tq != Tk.
///  - TopLeft:     query i attends to keys j <= i (torch's is_causal, triu(ones(Tq, Tk), 1) masked).
///  - BottomRight: query i attends to keys j <= i + (Tk - Tq): the queries are the last Tq positions of the
///                 key sequence (d2l's decoder with a KV cache; nn::causal_mask). Equal to TopLeft when
///                 Tq == Tk.
enum class CausalAlign { None, TopLeft, BottomRight };

/// The one form of an attention mask that the kernels take. A key j is attended by query i of batch row b
/// and head h iff all of:  j < valid_lens[b] (or [b, i]);  the causal rule;  the window;  keep[b, h, i, j].
/// The window (sliding-window or local causal attention: Beltagy et al. 2020, Longformer; Jiang et al.
/// 2023, Mistral), W = window > 0, only with a causal rule: with c = i + (Tk - Tq) (BottomRight) or c = i
/// (TopLeft) the last key the causal rule lets query i see, the window keeps keys c - W < j <= c, the last
/// W. window = 0: no window.
/// NOTE: a negative valid_len counts as 0 (the row attends to nothing and gives zeros); it is not checked
/// on the host because that would read the tensor (a device synchronisation on every forward).
struct AttentionMask {
  Tensor valid_lens;  ///< int64 (B) or (B, Tq), contiguous; undefined = no length limit
  Tensor keep;        ///< Bool expanded to the scores' shape (B, ..., Tq, Tk) (stride 0 on broadcast dims)
  CausalAlign causal = CausalAlign::None;
  int64_t window = 0;  ///< keys a query sees at most, the last ones up to its causal limit; 0 = no window
};

/// Dropout on the attention probabilities inside the kernel (inverted dropout, p in [0, 1); p = 0: none).
/// Element (b, h, i, j) of the (B, ..., Tq, Tk) probabilities is kept iff u >= p, with u the uniform that
/// ops::rand of that shape draws at counter offset + ((b·H + h)·Tq + i)·Tk + j under `seed`, and kept ones
/// are scaled by 1/(1-p): exactly the numbers ops::dropout draws for the composed path with the same
/// generator state.
/// `kept`, optional: the keep flags of one forward, for its backward to read instead of drawing them again
/// (ops::flash_attention_forward allocates it where it is worth its memory, FlashAttentionForward::kept).
/// Int64 (B·H·Tq, ⌈Tk/64⌉) contiguous, zeroed: bit j % 64 of word j / 64 of row (b·H + h)·Tq + i is set iff
/// weight (b, h, i, j) is kept. A backend that keeps flags (the CPU) writes those of every key a query row
/// sees in the forward and reads them in the backward; one that does not (CUDA) ignores the field. Either
/// way the numbers are the ones drawn above.
struct AttentionDropout {
  double p = 0.0;
  uint64_t seed = 0, offset = 0;
  Tensor kept;
};

}  // namespace ops

/// One device's kernels: a virtual function per kernel, each documented below with its contract (shapes,
/// strides, dtypes). A kernel of Kernel16 takes bfloat16 / float16 operands on every backend: natively, or
/// widened by Widening<> (ops/backend_widening.h). An op checks its arguments and allocates the result, then
/// calls backend(device).kernel(...). Every backend implements every kernel (they are pure virtual; CPU:
/// ops/cpu/backend.h), except the few whose default composes other kernels (dropout, gru_gates,
/// gru_gates_backward, rotary_embedding). A device saccade was built without has no backend at all
/// (backend(device) throws).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // ---- the 16-bit route ----
  /// Whether this backend's kernel `k` takes bfloat16 / float16 tensors itself (loads and stores 16 bits,
  /// computes in float32). The default: no kernel does, Widening<> widens them all; the CPU and CUDA backends
  /// answer from native_16bit_on (ops/kernel16.h), the table the op table's 16-bit columns read too. A kernel
  /// outside Kernel16 (copy, GEMM, elementwise, reductions, flash attention, ...) is native on every backend
  /// or throws.
  virtual bool native_16bit(Kernel16 k) const;
  /// The one widening of the 16-bit route: runs `f32_kernel` on float32 copies of the bfloat16 / float16
  /// tensors among `in` and `inout`, and into float32 buffers standing in for those among `out` and `inout`
  /// (an `inout` buffer starts as its copy), then rounds each buffer into the tensor it stands for (once, to
  /// nearest even, as Tensor::to). Tensors of other dtypes (float32 statistics, int64 indices) and undefined
  /// ones are passed as they are. `f32_kernel` gets the tensors in the order in, inout, out. Widening
  /// is exact (float32 holds every bfloat16 and float16), so the numbers are the float32 kernel's rounded
  /// once.
  static void widen(std::initializer_list<Tensor> in, std::initializer_list<Tensor> inout,
                    std::initializer_list<Tensor> out,
                    const std::function<void(const std::vector<Tensor>&)>& f32_kernel);

  // ---- memory ----
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* p, size_t nbytes) = 0;
  /// Raw byte copies between this device and host memory.
  virtual void copy_to_host(void* host_dst, const void* src, size_t nbytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, size_t nbytes) = 0;
  /// The counters of the device's caching allocator (ops/caching_allocator.h).
  virtual AllocatorStats memory_stats() const = 0;
  /// Returns the allocator's cached, unused blocks to their source (cudaFree, free).
  virtual void empty_cache() = 0;

  // ---- copy and fill ----
  /// dst[i] = cast(src[i]); same shape, any strides, any dtypes (both on this device).
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
  /// every element of `out` (any strides) = value.
  virtual void fill(const Tensor& out, double value) = 0;
  /// out (contiguous, numel n): out[i] = start + i * step.
  virtual void arange(const Tensor& out, double start, double step) = 0;

  // ---- elementwise: a, b, cond are already expanded to out's shape (stride 0 on broadcast dims) ----
  /// out = op(a) (alpha is the exponent for PowScalar). a and out share a dtype, except LogicalNot (Bool).
  virtual void unary(UnaryOp op, const Tensor& a, const Tensor& out, double alpha) = 0;
  /// out = a op b; a and b share a dtype; out has it too, or Bool for comparisons. out may alias a.
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  /// out = cond ? a : b; cond Bool; a, b, out share a dtype.
  virtual void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) = 0;

  // ---- reductions: a contiguous, viewed as (outer, k, inner); out contiguous (outer, inner) ----
  virtual void reduce(ReduceOp op, const Tensor& a, const Tensor& out, int64_t outer, int64_t k,
                      int64_t inner) = 0;
  /// values (outer, inner) and int64 indices (outer, inner) of the max (Max) or min (Min) along k;
  /// ties give the first index; NaN wins.
  virtual void arg_reduce(ReduceOp op, const Tensor& a, const Tensor& values, const Tensor& indices,
                          int64_t outer, int64_t k, int64_t inner) = 0;

  // ---- linear algebra ----
  /// out (B, M, N) contiguous = a (B, M, K) @ b (B, K, N). a and b may have any strides for which
  /// matrix_layout(...).ok holds (row- or column-major matrices, see MatrixLayout); batch stride may be 0.
  virtual void bmm(const Tensor& a, const Tensor& b, const Tensor& out) = 0;

  // ---- nn primitives (all contiguous) ----
  /// x, out: (rows, n). Softmax (or log-softmax) of each row. A row that is all -inf gives zeros.
  virtual void softmax(const Tensor& x, const Tensor& out, bool log) = 0;
  /// y = softmax(x) (or log_softmax), gy = dL/dy, gx = dL/dx; all (rows, n).
  virtual void softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& gx, bool log) = 0;
  /// x, out: (rows, n); weight, bias: (n) or undefined; mean, rstd: (rows), compute_dtype(x) (float32 for
  /// 16-bit x), written. mean undefined: RMSNorm (μ = 0, rstd = 1 / sqrt(mean(x²) + eps)).
  virtual void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                          const Tensor& out, const Tensor& mean, const Tensor& rstd) = 0;
  /// gx (rows, n); gweight, gbias (n) or undefined (then not computed). mean undefined: RMSNorm's backward
  /// (μ = 0, and no mean(ĝ) term).
  virtual void layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& weight,
                                   const Tensor& mean, const Tensor& rstd, const Tensor& gx,
                                   const Tensor& gweight, const Tensor& gbias) = 0;

  // ---- fused attention (ops/attention.h; CPU: ops/cpu/attention.cpp, attention_half.cpp) ----
  /// q (B, H, Tq, D), k (B, H_kv, Tk, D), v (B, H_kv, Tk, Dv), out (B, H, Tq, Dv) with H = G·H_kv
  /// (grouped-query attention: query head h reads key/value head h / G, on the CPU and on CUDA): any
  /// strides with unit stride on the last dim; lse (B, H, Tq) contiguous.
  /// mask.keep, when defined, is a Bool (B, H, Tq, Tk) view; mask.valid_lens contiguous int64 (B) or (B, Tq).
  /// Writes out and lse (-inf for a fully masked row).
  virtual void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const ops::AttentionMask& mask, double scale,
                                       const ops::AttentionDropout& dropout, const Tensor& out,
                                       const Tensor& lse) = 0;
  /// Whether flash_attention_forward writes the dropout keep flags (ops::AttentionDropout::kept) for the
  /// backward to read; ops::flash_attention_forward allocates them only for such a backend (the CPU).
  virtual bool keeps_dropout_flags() const { return false; }
  /// Shapes as flash_attention_forward; gout like out; gq, gk, gv like q, k, v (unit last stride), written.
  virtual void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                        const Tensor& gout, const Tensor& lse, const ops::AttentionMask& mask,
                                        double scale, const ops::AttentionDropout& dropout, const Tensor& gq,
                                        const Tensor& gk, const Tensor& gv) = 0;

  // ---- fused additive-attention scores (ops/attention.h; CPU: ops/cpu/additive_attention.cpp) ----
  /// qp (B, Tq, A), kp (B, L, A), w_v (A), scores (B, Tq, L), all contiguous, one float dtype:
  /// scores[b, i, l] = Σ_a w_v[a] tanh(qp[b, i, a] + kp[b, l, a]), written.
  virtual void additive_attention_scores(const Tensor& qp, const Tensor& kp, const Tensor& w_v,
                                         const Tensor& scores) = 0;
  /// gscores (B, Tq, L) and the inputs as above; writes gqp, gkp, gw_v (contiguous, the inputs' shapes), with
  /// t = tanh(qp + kp) recomputed: gw_v = Σ g t, gqp = Σ_l g w_v (1 - t²), gkp = Σ_i g w_v (1 - t²).
  virtual void additive_attention_scores_backward(const Tensor& gscores, const Tensor& qp, const Tensor& kp,
                                                  const Tensor& w_v, const Tensor& gqp, const Tensor& gkp,
                                                  const Tensor& gw_v) = 0;

  // ---- indexing (index is contiguous int64; bounds already checked by the op) ----
  /// a viewed as (outer, n, inner) contiguous; index (m); out (outer, m, inner): out[o,j,i] =
  /// a[o,index[j],i].
  virtual void index_select(const Tensor& a, const Tensor& index, const Tensor& out, int64_t outer,
                            int64_t inner) = 0;
  /// out viewed as (outer, n, inner); src (outer, m, inner): out[o,index[j],i] += src[o,j,i].
  virtual void index_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t outer,
                         int64_t inner) = 0;
  /// a (outer, n, inner), index and out (outer, m, inner): out[o,j,i] = a[o, index[o,j,i], i].
  virtual void gather(const Tensor& a, const Tensor& index, const Tensor& out, int64_t outer,
                      int64_t inner) = 0;
  /// out (outer, n, inner), index and src (outer, m, inner): out[o, index[o,j,i], i] += src[o,j,i].
  virtual void scatter_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t outer,
                           int64_t inner) = 0;

  // ---- convolution and pooling (NCHW, contiguous) ----
  /// x (N, C, H, W) -> cols (N, C*kh*kw, OH*OW).
  virtual void im2col(const Tensor& x, const Tensor& cols, int kh, int kw, int sh, int sw, int ph,
                      int pw) = 0;
  /// cols (N, C*kh*kw, OH*OW) -> x (N, C, H, W), summing overlaps; x is zeroed first.
  virtual void col2im(const Tensor& cols, const Tensor& x, int kh, int kw, int sh, int sw, int ph,
                      int pw) = 0;
  /// out (N, C, OH, OW); indices int64 (N, C, OH, OW): flat h*W+w of each max. Padding counts as -inf.
  virtual void max_pool2d(const Tensor& x, const Tensor& out, const Tensor& indices, int kh, int kw, int sh,
                          int sw, int ph, int pw) = 0;
  /// gx (N, C, H, W) zeroed then gx[n,c,indices] += gy.
  virtual void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx) = 0;
  /// out (N, C, OH, OW): mean over each window, padding counted (PyTorch's count_include_pad=True).
  virtual void avg_pool2d(const Tensor& x, const Tensor& out, int kh, int kw, int sh, int sw, int ph,
                          int pw) = 0;
  virtual void avg_pool2d_backward(const Tensor& gy, const Tensor& gx, int kh, int kw, int sh, int sw, int ph,
                                   int pw) = 0;

  // ---- GRU gates (ops::gru_gates) ----
  /// gi, gh, saved: (B, 3H) contiguous, h, out: (B, H) contiguous, one float dtype: out = h', saved = [r, z,
  /// n] as ops::gru_gates defines them. The default composes the elementwise kernels; the CPU makes it in one
  /// pass.
  virtual void gru_gates(const Tensor& gi, const Tensor& gh, const Tensor& h, const Tensor& out,
                         const Tensor& saved);
  /// gy, h, gx_h: (B, H), gh, saved, ggi, ggh: (B, 3H), all contiguous, one float dtype: the gradients of
  /// ops::gru_gates_backward into ggi, ggh and gx_h. Default composed, CPU one pass.
  virtual void gru_gates_backward(const Tensor& gy, const Tensor& gh, const Tensor& h, const Tensor& saved,
                                  const Tensor& ggi, const Tensor& ggh, const Tensor& gx_h);

  // ---- rotary position embedding (ops::rotary_embedding) ----
  /// x, out (N, T, D) floating, cos, sin (T, R/2) compute_dtype(x) (f32 for 16 bits), contiguous:
  /// out = x with the first R dims of each row rotated (pairs (i, i + R/2), or (2i, 2i + 1) when
  /// `interleaved`) by the angles of its position t, by their negatives when `inverse`; the rest copied. The
  /// default composes the elementwise kernels on strided views; the CPU makes it in one pass.
  virtual void rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out,
                                bool interleaved, bool inverse);

  // ---- SwiGLU's backward (ops::swiglu_backward) ----
  /// g, gate, up, dgate, dup: one shape, contiguous, one floating dtype (16-bit: float32 inside, each output
  /// rounded once): math::SwigluBackward's dgate and dup, written. The default composes the elementwise
  /// kernels (three passes); the CPU makes it in one.
  virtual void swiglu_backward(const Tensor& g, const Tensor& gate, const Tensor& up, const Tensor& dgate,
                               const Tensor& dup);

  // ---- random numbers: counter-based Philox4x32-10 (ops/philox.h); element i uses counter offset + i ----
  /// out (contiguous float) = U[low, high).
  virtual void uniform(const Tensor& out, uint64_t seed, uint64_t offset, double low, double high) = 0;
  /// out (contiguous float) = N(mean, std^2) by Box-Muller.
  virtual void normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std) = 0;
  /// Inverted dropout of contiguous float x: mask[i] = 1/(1-p) in x's dtype where u_i >= p (u_i = U[0, 1) of
  /// counter offset + i as `uniform` draws it, compared in x's dtype), else 0; out = x ⊙ mask (out and mask
  /// contiguous, x's shape and dtype). The default composes `uniform` with the elementwise kernels (every
  /// device draws the same mask); the CPU makes it in one pass.
  virtual void dropout(const Tensor& x, uint64_t seed, uint64_t offset, double p, const Tensor& out,
                       const Tensor& mask);

  // ---- loss scaling (ops/amp.h; CPU: ops/cpu/amp.cpp) ----
  /// grads: contiguous floating tensors, numel > 0; found_inf, inv_scale: float32 (1). Every g *= inv_scale
  /// in place; found_inf = 1 when any element is NaN or ±inf (left as it is otherwise). Read on the device
  /// only.
  virtual void amp_non_finite_check_and_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                                const Tensor& inv_scale) = 0;
  /// scale float32 (1), growth_tracker int64 (1), found_inf float32 (1): ops::amp_update_scale_'s rule.
  virtual void amp_update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                double growth_factor, double backoff_factor, int64_t growth_interval) = 0;

  // ---- fused optimizer kernels (ops/optim.h; CPU: ops/cpu/optim.cpp) ----
  /// Lists of one length, entry i of one shape and dtype (float32 or float64), all contiguous, numel > 0;
  /// step_size[i] = lr / (1 - β1^t_i), bc2_sqrt[i] = √(1 - β2^t_i). ops::adam_foreach_step_'s update.
  virtual void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                         const std::vector<double>& step_size, const std::vector<double>& bc2_sqrt,
                         const ops::AdamStepArgs& args) = 0;
  /// tensors: contiguous float32/float64, numel > 0; out: float64 (), set to Σ |t|^p (max |t| for p = inf).
  virtual void pow_sum(const std::vector<Tensor>& tensors, double p, const Tensor& out) = 0;
  /// tensors: contiguous floating, numel > 0; scale: float64 (1) on their device. t *= scale.
  virtual void foreach_mul(const std::vector<Tensor>& tensors, const Tensor& scale) = 0;
};

/// The backend of `device` (ops/backend.cpp). Throws saccade::Error naming "backend" and the device when
/// saccade was built without that device's backend or no such device is present.
Backend& backend(Device device);

/// How the last two dims (rows R, cols C) of a strided tensor are handed to a row-major GEMM (cblas, cuBLAS)
/// without a copy: row-major (`trans` false; element (r, c) at r * ld + c) or a transposed column-major
/// matrix (`trans` true; element (r, c) at c * ld + r). `ok` is false when neither fits (then the op copies
/// to contiguous before calling Backend::bmm). Part of bmm's contract, shared by every backend.
struct MatrixLayout {
  bool ok = false;
  bool trans = false;
  int64_t ld = 1;
};
/// The layout of `t`'s last two dims (t has at least 2 dims). A size-1 dim may have any stride.
MatrixLayout matrix_layout(const Tensor& t);

namespace detail {
Backend* cpu_backend();   // ops/cpu/backend.cpp
Backend* cuda_backend();  // cuda/backend.cpp when built with CUDA; nullptr when no GPU is present
}  // namespace detail

}  // namespace saccade
