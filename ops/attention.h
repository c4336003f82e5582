#pragma once
// Fused scaled dot-product attention (FlashAttention: Dao et al. 2022, Algorithms 1 and 2, with the work
// split of FlashAttention-2, Dao 2023): softmax(q kᵀ · scale, masked) v computed tile by tile with an online
// softmax, never materialising the (Tq, Tk) scores. Forward saves only the per-row log-sum-exp; backward
// recomputes the probabilities tile by tile. Memory O(B·H·T·D).
//
// Shapes: q (B, ..., H, Tq, D), k (B, ..., H_kv, Tk, D), v (B, ..., H_kv, Tk, Dv): one rank >= 3, the same
// leading dims but H_kv, one float dtype (float32, float64, bfloat16, float16), any strides. H_kv = H is
// multi-head attention; H = G·H_kv (rank >= 4, the dim before T) is grouped-query attention (GQA, Ainslie et
// al. 2023; multi-query attention when H_kv = 1): query head h reads key/value head h / G, and the backward
// sums dK and dV over each group inside the kernel; K and V are never repeated in memory. The dims between B
// and T are flattened into H (and H_kv); query head m·H + h of the flat heads then reads flat key head (m·H +
// h) / G.
//
// Masks reach the kernel in one form, AttentionMask (declared with the kernels' rows in
// ops/kernels/attention.h, as AttentionDropout and CausalAlign are), built (and checked) once by
// attention_mask() where the user hands a mask in; the composed reference path turns the same AttentionMask
// into a Bool keep-mask with attention_keep_mask(). Neither reads tensor values on the host (no device
// synchronisation).
#include <cstdint>

#include "ops/kernels/attention.h"
#include "ops/random.h"
#include "ops/tensor.h"

namespace saccade::ops {

/// Checks the inputs of the attention op `op` (the function or module the user called): q, k, v defined,
/// shapes as in the file comment, one float dtype, one device. Grouped heads (H_kv != H) only with
/// `enable_gqa` (torch's name, scaled_dot_product_attention(enable_gqa=True)), and then H a multiple of H_kv
/// and k, v with the same H_kv. Throws saccade::Error naming `op` and the three shapes. Every dot-product
/// attention (fused or composed) checks its inputs here, once.
void check_attention_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                            bool enable_gqa = false);

/// The scores' shape (B, ..., H, Tq, Tk) of q (B, ..., H, Tq, D) against k (B, ..., H_kv, Tk, D): q's
/// leading dims, one row of scores a query head also with grouped heads (shapes checked by
/// check_attention_inputs).
Shape attention_scores_shape(const Shape& q, const Shape& k);

/// Checks `valid_lens_or_mask` against scores of shape (B, ..., Tq, Tk) and converts it once:
/// int64 valid_lens (B) or (B, Tq) (keys k >= valid_len masked, d2l 11.3.1), a Bool keep-mask broadcastable
/// to the scores (true = attend, as torch's boolean attn_mask), or undefined (no mask); `causal` is added as
/// is, and so is `window` (sliding-window causal attention, AttentionMask::window: query i sees only the last
/// `window` keys up to its causal limit; Beltagy et al. 2020, Longformer; Jiang et al. 2023, Mistral's
/// sliding_window; 0 = none). Throws saccade::Error naming `op` (the function or module the user called) and
/// the shapes for any other dtype, a shape that does not fit, another device than `device`, a negative
/// window, or a window without a causal rule (a local window is defined here only as the causal one).
AttentionMask attention_mask(const Tensor& valid_lens_or_mask, const Shape& scores_shape, CausalAlign causal,
                             Device device, const char* op, int64_t window = 0);

/// Packed documents (FlashAttention-2's variable-length batches, Dao 2023, given as a document-id vector, as
/// transformers packs with its DataCollatorWithFlattening): several documents share one row of the batch and
/// query i attends only to keys of its own document. document_ids: int64 (B, T) with T = Tq = Tk
/// (self-attention), non-decreasing along T (each document one contiguous run; padding may be a document of
/// its own). Returns `mask` with key_starts (B, Tq), the first position of each query's document, and
/// valid_lens (B, Tq), one past its last (the smaller where `mask` had valid_lens already): the kernels read
/// two numbers a query and never form the block-diagonal (T, T) mask; attention_keep_mask forms it for the
/// composed path. Undefined document_ids: `mask` unchanged. Reads the ids (and valid_lens) on the host: a
/// device synchronisation on CUDA. Throws saccade::Error naming `op` and the shapes for ids of another
/// dtype, shape or device, scores with Tq != Tk, or ids that decrease along T (the row, position and ids).
AttentionMask with_documents(AttentionMask mask, const Tensor& document_ids, const Shape& scores_shape,
                             Device device, const char* op);

/// Checks a window against scores of shape `scores_shape` under `causal` (the rules of attention_mask):
/// throws saccade::Error naming `op` and the shape when window < 0, or window > 0 with CausalAlign::None.
void check_attention_window(const char* op, int64_t window, CausalAlign causal, const Shape& scores_shape);

/// The Bool keep-mask (true = attend) equal to `mask` for scores of shape (B, ..., Tq, Tk), broadcastable to
/// it; undefined when `mask` masks nothing. Used by the composed (reference) path's masked_softmax.
Tensor attention_keep_mask(const AttentionMask& mask, const Shape& scores_shape, Device device);

/// The dropout multipliers (0 or 1/(1-p)) that the fused kernels (CPU and CUDA) apply to the attention
/// weights of shape (B, ..., Tq, Tk) under `dropout`, materialised in `dtype` on `device`: element (b, ...,
/// i, j) is drawn from Philox counter dropout.offset + its flat index, as ops::dropout draws a tensor of that
/// shape from a generator at (dropout.seed, dropout.offset). The composed reference (flash attention's second
/// derivative) multiplies its weights by it, so it drops what the kernel dropped. Undefined when dropout.p is
/// 0. For a 16-bit dtype the draws are float32's and 1/(1-p) is rounded to it.
Tensor attention_dropout_mask(const AttentionDropout& dropout, const Shape& scores_shape, DType dtype,
                              Device device);

/// flash_attention_forward's results: out (B, ..., Tq, Dv) and lse (B, ..., Tq), the per-row
/// log Σ_j exp(s_ij) of the masked scaled scores (-inf for a row with nothing to attend), q's dtype (float32
/// for 16-bit q, k, v: computed in float32, out rounded once; on a CPU with AVX512-BF16, bfloat16 q, k, v
/// take P (and, in the backward, dS) rounded to bfloat16 for their products with v, dO, q and k, as PyTorch's
/// CPU flash attention does: ops/cpu/attention_half.cpp).
/// `kept`: when dropout.p > 0 on a backend that keeps flags (the CPU: Backend::keeps_dropout_flags) and the
/// flags take no more memory than out (⌈Tk/64⌉ · 8 bytes a query row against Dv · itemsize: Tk up to 16·Dv in
/// 16 bits, 32·Dv in float32, so memory stays O(B·H·T·D)), the keep flags the kernel drew
/// (AttentionDropout::kept), for flash_attention_backward to take in its `dropout.kept` instead of drawing
/// the numbers a second time; undefined otherwise.
struct FlashAttentionForward {
  Tensor out, lse, kept;
};

/// out = dropout(softmax(q kᵀ · scale with masked entries excluded)) v, fused (FlashAttention, Dao 2022 and
/// 2023; shapes in the file comment, grouped heads included: q (B, ..., H, Tq, D), k (B, ..., H_kv, Tk, D),
/// v (B, ..., H_kv, Tk, Dv) -> out (B, ..., H, Tq, Dv)). `mask` and `dropout` are those of the scores
/// (B, ..., H, Tq, Tk). A row with nothing to attend gives zeros. With a window (mask.window = W > 0) the
/// CPU and CUDA kernels skip the key tiles wholly outside every query's window, so time grows as O(Tq·W),
/// not O(Tq·Tk). Throws saccade::Error naming "flash_attention" and the shapes for mismatched ranks, leading
/// dims, D or Tk, H not a multiple of H_kv, dtypes or devices, a mask of the wrong shape, or a bad window
/// (check_attention_window).
FlashAttentionForward flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const AttentionMask& mask, double scale,
                                              const AttentionDropout& dropout = {});

/// Gradients of flash_attention_forward: gq, gk, gv of q's, k's and v's shapes (gk, gv: summed over the G
/// query heads of each key/value head).
struct FlashAttentionGrads {
  Tensor gq, gk, gv;
};

/// The backward of flash_attention_forward (Dao et al. 2022, Algorithm 2 / FlashAttention-2's backward):
/// from gout = dL/d(out) (out's shape), the inputs, out and lse, recomputes the probabilities tile by tile:
///   dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ⊙ (dP - rowsum(dO ⊙ O)),  dQ = scale dS K,  dK = scale dSᵀ Q
/// (with the dropout mask applied to P and dP; with grouped heads dK and dV sum over the group). Rows with
/// nothing to attend give zero gradients. Shapes and errors as flash_attention_forward's. A defined
/// dropout.kept must be the forward's FlashAttentionForward::kept (shape checked: Int64 (B·H·Tq, ⌈Tk/64⌉)
/// on q's device, else saccade::Error naming "flash_attention_backward" and the shapes).
FlashAttentionGrads flash_attention_backward(const Tensor& gout, const Tensor& q, const Tensor& k,
                                             const Tensor& v, const Tensor& out, const Tensor& lse,
                                             const AttentionMask& mask, double scale,
                                             const AttentionDropout& dropout = {});

// ---- additive attention scores (Bahdanau et al. 2015, eq. 6; d2l 11.3.2) ----

/// scores[b, i, l] = Σ_a w_v[a] tanh(qp[b, i, a] + kp[b, l, a]): the additive-attention scores of projected
/// queries qp = W_q q (B, Tq, A) against projected keys kp = W_k k (B, L, A), fused: one pass over
/// (B, Tq, L, A) that never materialises the broadcast sum or its tanh. Returns (B, Tq, L) of qp's dtype
/// (float32 or float64); any strides (copied to contiguous when not). The mask and the softmax come after,
/// as in the composed path. Throws saccade::Error naming "additive_attention_scores" and the shapes for
/// ranks other than 3/3/1, mismatched B or A, dtypes or devices.
Tensor additive_attention_scores(const Tensor& qp, const Tensor& kp, const Tensor& w_v);

/// The argument checks of additive_attention_scores, for it and the composed reference path: throws
/// saccade::Error naming `op` and the shapes unless qp (B, Tq, A), kp (B, L, A), w_v (A) are defined, of one
/// float dtype and on one device.
void check_additive_scores(const char* op, const Tensor& qp, const Tensor& kp, const Tensor& w_v);

/// Gradients of additive_attention_scores: gqp (B, Tq, A), gkp (B, L, A), gw_v (A).
struct AdditiveScoresGrads {
  Tensor gqp, gkp, gw_v;
};

/// The backward of additive_attention_scores from gscores = dL/d(scores) (B, Tq, L); with t = tanh(qp + kp)
/// recomputed, not stored:
///   gw_v[a] = Σ_{b,i,l} g t,   gqp[b,i,a] = Σ_l g w_v[a] (1 - t²),   gkp[b,l,a] = Σ_i g w_v[a] (1 - t²).
/// Throws as additive_attention_scores, naming "additive_attention_scores_backward", also for a gscores
/// that is not (B, Tq, L).
AdditiveScoresGrads additive_attention_scores_backward(const Tensor& gscores, const Tensor& qp,
                                                       const Tensor& kp, const Tensor& w_v);

}  // namespace saccade::ops
