#pragma once
// The kernels of fused attention, as every backend implements them: one row per kernel (row format:
// ops/backend.h), its contract above it. CPU: ops/cpu/attention.cpp and additive_attention.cpp; CUDA:
// ops/cuda/attention.cu and additive_attention.cu. The ops that call them: ops/attention.h. A contract header
// includes no op header (scripts/check_layers).
#include <cstdint>

#include "ops/tensor.h"

namespace saccade::ops {

// The masks and the dropout of the attention kernels' arguments (ops::attention_mask builds the masks).

/// How a causal mask is aligned when Tq != Tk.
///  - TopLeft:     query i attends to keys j <= i (torch's is_causal, triu(ones(Tq, Tk), 1) masked).
///  - BottomRight: query i attends to keys j <= i + (Tk - Tq): the queries are the last Tq positions of the
///                 key sequence (d2l's decoder with a KV cache; nn::causal_mask). Equal to TopLeft when
///                 Tq == Tk.
enum class CausalAlign { None, TopLeft, BottomRight };

/// The one form of an attention mask that the kernels take. A key j is attended by query i of batch row b
/// and head h iff all of:  key_starts[b, i] <= j < valid_lens[b] (or [b, i]);  the causal rule;  the window;
/// keep[b, h, i, j]. Packed documents (ops::with_documents) are the per-query pair [key_starts[b, i],
/// valid_lens[b, i]): the keys of query i's own document, two numbers a query, no (Tq, Tk) mask.
/// The window (sliding-window or local causal attention: Beltagy et al. 2020, Longformer; Jiang et al.
/// 2023, Mistral), W = window > 0, only with a causal rule: with c = i + (Tk - Tq) (BottomRight) or c = i
/// (TopLeft) the last key the causal rule lets query i see, the window keeps keys c - W < j <= c, the last
/// W. window = 0: no window.
/// NOTE: a negative valid_len counts as 0 (the row attends to nothing and gives zeros); it is not checked
/// on the host because that would read the tensor (a device synchronisation on every forward).
struct AttentionMask {
  Tensor valid_lens;  ///< int64 (B) or (B, Tq), contiguous; undefined = no length limit
  Tensor key_starts;  ///< int64 (B, Tq), contiguous: the first key each query may see; undefined = 0
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

}  // namespace saccade::ops

#define SACCADE_ATTENTION_KERNELS(K, K16)                                                                         \
  /* Fused attention (CPU: ops/cpu/attention.cpp, attention_half.cpp). q (B, H, Tq, D), k (B, H_kv, Tk, D),       \
   * v (B, H_kv, Tk, Dv), out (B, H, Tq, Dv) with H = G·H_kv (grouped-query attention: query head h reads        \
   * key/value head h / G, on the CPU and on CUDA): any strides with unit stride on the last dim; lse (B, H,      \
   * Tq) contiguous. mask.keep, when defined, is a Bool (B, H, Tq, Tk) view; mask.valid_lens contiguous           \
   * int64 (B) or (B, Tq); mask.key_starts contiguous int64 (B, Tq). Writes out and lse (-inf for a fully         \
   * masked row). */                                                                                              \
  K(flash_attention_forward,                                                                                      \
    (const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionMask& mask, double scale,             \
     const ops::AttentionDropout& dropout, const Tensor& out, const Tensor& lse),                                 \
    (q, k, v, mask, scale, dropout, out, lse))                                                                    \
  /* Shapes as flash_attention_forward; gout like out; gq, gk, gv like q, k, v (unit last stride),                \
   * written. */                                                                                                  \
  K(flash_attention_backward,                                                                                     \
    (const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& gout,                    \
     const Tensor& lse, const ops::AttentionMask& mask, double scale, const ops::AttentionDropout& dropout,       \
     const Tensor& gq, const Tensor& gk, const Tensor& gv),                                                       \
    (q, k, v, out, gout, lse, mask, scale, dropout, gq, gk, gv))                                                  \
  /* Fused additive-attention scores (CPU: ops/cpu/additive_attention.cpp). qp (B, Tq, A), kp (B, L, A),          \
   * w_v (A), scores (B, Tq, L), all contiguous, one float dtype: scores[b, i, l] = Σ_a w_v[a] tanh(qp[b, i,     \
   * a] + kp[b, l, a]), written. */                                                                               \
  K16(additive_attention_scores,                                                                                  \
      (const Tensor& qp, const Tensor& kp, const Tensor& w_v, const Tensor& scores), (qp, kp, w_v, scores),       \
      Kernel16::AdditiveScores, OutFrom<3>)                                                                       \
  /* gscores (B, Tq, L) and the inputs as above; writes gqp, gkp, gw_v (contiguous, the inputs' shapes),          \
   * with t = tanh(qp + kp) recomputed: gw_v = Σ g t, gqp = Σ_l g w_v (1 - t²), gkp = Σ_i g w_v (1 - t²). */ \
  K16(additive_attention_scores_backward,                                                                         \
      (const Tensor& gscores, const Tensor& qp, const Tensor& kp, const Tensor& w_v, const Tensor& gqp,           \
       const Tensor& gkp, const Tensor& gw_v),                                                                    \
      (gscores, qp, kp, w_v, gqp, gkp, gw_v), Kernel16::AdditiveScoresBackward, OutFrom<4>)
