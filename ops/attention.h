#pragma once
// Fused scaled dot-product attention (FlashAttention: Dao et al. 2022, Algorithms 1 and 2, with the work
// split of FlashAttention-2, Dao 2023): softmax(q kᵀ · scale, masked) v computed tile by tile with an online
// softmax, never materialising the (Tq, Tk) scores. Forward saves only the per-row log-sum-exp; backward
// recomputes the probabilities tile by tile. Memory O(B·H·T·D).
//
// Shapes: q (B, ..., Tq, D), k (B, ..., Tk, D), v (B, ..., Tk, Dv): one rank >= 3, the same leading dims, one
// float dtype (float32 or float64), any strides. The dims between B and Tq (heads) are flattened into H.
//
// Masks reach the kernel in one form, AttentionMask, built (and checked) once by attention_mask() where the
// user hands a mask in; the composed reference path turns the same AttentionMask into a Bool keep-mask with
// attention_keep_mask(). Neither reads tensor values on the host (no device synchronisation).
#include <cstdint>

#include "ops/random.h"
#include "ops/tensor.h"

namespace saccade::ops {

/// How a causal mask is aligned when Tq != Tk.
///  - TopLeft:     query i attends to keys j <= i (torch's is_causal, triu(ones(Tq, Tk), 1) masked).
///  - BottomRight: query i attends to keys j <= i + (Tk - Tq): the queries are the last Tq positions of the
///                 key sequence (d2l's decoder with a KV cache; nn::causal_mask). Equal to TopLeft when
///                 Tq == Tk.
enum class CausalAlign { None, TopLeft, BottomRight };

/// The one form of an attention mask that the kernels take. A key j is attended by query i of batch row b
/// and head h iff all of:  j < valid_lens[b] (or [b, i]);  the causal rule;  keep[b, h, i, j].
/// NOTE: a negative valid_len counts as 0 (the row attends to nothing and gives zeros); it is not checked
/// on the host because that would read the tensor (a device synchronisation on every forward).
struct AttentionMask {
  Tensor valid_lens;  ///< int64 (B) or (B, Tq), contiguous; undefined = no length limit
  Tensor keep;        ///< Bool expanded to the scores' shape (B, ..., Tq, Tk) (stride 0 on broadcast dims)
  CausalAlign causal = CausalAlign::None;
};

/// Checks `valid_lens_or_mask` against scores of shape (B, ..., Tq, Tk) and converts it once:
/// int64 valid_lens (B) or (B, Tq) (keys k >= valid_len masked, d2l 11.3.1), a Bool keep-mask broadcastable
/// to the scores (true = attend, as torch's boolean attn_mask), or undefined (no mask); `causal` is added as
/// is. Throws saccade::Error naming `op` (the function or module the user called) and the shapes for any
/// other dtype, a shape that does not fit, or another device than `device`.
AttentionMask attention_mask(const Tensor& valid_lens_or_mask, const Shape& scores_shape, CausalAlign causal,
                             Device device, const char* op);

/// The Bool keep-mask (true = attend) equal to `mask` for scores of shape (B, ..., Tq, Tk), broadcastable to
/// it; undefined when `mask` masks nothing. Used by the composed (reference) path's masked_softmax.
Tensor attention_keep_mask(const AttentionMask& mask, const Shape& scores_shape, Device device);

/// Dropout on the attention probabilities inside the kernel (inverted dropout, p in [0, 1); p = 0: none).
/// Element (b, h, i, j) of the (B, ..., Tq, Tk) probabilities is kept iff u >= p, with u the uniform that
/// ops::rand of that shape draws at counter offset + ((b·H + h)·Tq + i)·Tk + j under `seed`, and kept ones
/// are scaled by 1/(1-p): exactly the numbers ops::dropout draws for the composed path with the same
/// generator state.
struct AttentionDropout {
  double p = 0.0;
  uint64_t seed = 0, offset = 0;
};

/// flash_attention_forward's results: out (B, ..., Tq, Dv) and lse (B, ..., Tq), the per-row
/// log Σ_j exp(s_ij) of the masked scaled scores (-inf for a row with nothing to attend), q's dtype.
struct FlashAttentionForward {
  Tensor out, lse;
};

/// out = dropout(softmax(q kᵀ · scale with masked entries excluded)) v, fused (shapes in the file comment).
/// A row with nothing to attend gives zeros. Throws saccade::Error naming "flash_attention" and the shapes
/// for mismatched ranks, leading dims, D or Tk, dtypes or devices, or a mask of the wrong shape.
FlashAttentionForward flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const AttentionMask& mask, double scale,
                                              const AttentionDropout& dropout = {});

/// Gradients of flash_attention_forward: gq, gk, gv of q's, k's and v's shapes.
struct FlashAttentionGrads {
  Tensor gq, gk, gv;
};

/// The backward of flash_attention_forward (Dao et al. 2022, Algorithm 2 / FlashAttention-2's backward):
/// from gout = dL/d(out) (out's shape), the inputs, out and lse, recomputes the probabilities tile by tile:
///   dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ⊙ (dP - rowsum(dO ⊙ O)),  dQ = scale dS K,  dK = scale dSᵀ Q
/// (with the dropout mask applied to P and dP). Rows with nothing to attend give zero gradients.
FlashAttentionGrads flash_attention_backward(const Tensor& gout, const Tensor& q, const Tensor& k,
                                             const Tensor& v, const Tensor& out, const Tensor& lse,
                                             const AttentionMask& mask, double scale,
                                             const AttentionDropout& dropout = {});

}  // namespace saccade::ops
