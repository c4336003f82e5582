#pragma once
// Multi-head attention (Vaswani et al. 2017, section 3.2.2; d2l section 11.5), in two parameter layouts:
//   - MultiHeadAttention: d2l's, with four Linear layers W_q, W_k, W_v, W_o (bias optional), int64
//     valid_lens or a Bool keep-mask, a causal flag, and a key/value cache for incremental decoding;
//   - MultiheadAttention: torch.nn.MultiheadAttention's (batch_first=True), with in_proj_weight (3E, E),
//     in_proj_bias (3E), out_proj.weight (E, E), out_proj.bias (E), so torch state dicts load one to one.
// Both split num_hiddens into num_heads heads of num_hiddens / num_heads features and call
// scaled_dot_product_attention on (B, H, T, d_head) tensors.
#include <cstdint>
#include <memory>
#include <optional>

#include "autograd/variable.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "ops/random.h"

namespace saccade::nn {

/// The projected keys and values of the positions seen so far, per head: keys, values (B, H, t, d_head).
/// Empty (undefined) until the first cached forward. One cache per self-attention layer. Decode under
/// NoGradGuard: with grad mode on, the cached Variables keep the graphs of the earlier steps alive.
struct KVCache {
  Variable keys, values;
  /// t, the number of cached positions.
  int64_t length() const { return keys.defined() ? keys.size(2) : 0; }
  /// Empties the cache (length() becomes 0): call before decoding a new sequence.
  void reset() { keys = values = Variable(); }
};

/// Multi-head attention as d2l section 11.5 (Vaswani et al. 2017, section 3.2.2):
///   head_i = attention(W_q^(i) q, W_k^(i) k, W_v^(i) v),   output = W_o [head_1; ...; head_H],
/// with attention = scaled_dot_product_attention (dropout on the weights, as d2l's DotProductAttention).
/// Children: W_q Linear(query_size, num_hiddens), W_k Linear(key_size, num_hiddens),
/// W_v Linear(value_size, num_hiddens), W_o Linear(num_hiddens, num_hiddens), each with a bias iff `bias`;
/// query/key/value sizes default (-1) to num_hiddens (d2l uses LazyLinear; here they are given).
class MultiHeadAttention : public Module {
 public:
  /// Throws saccade::Error naming "MultiHeadAttention" unless num_heads > 0 divides num_hiddens > 0.
  /// Init as torch.nn.Linear's from `gen`, which also drives dropout (it must outlive the module).
  MultiHeadAttention(int64_t num_hiddens, int64_t num_heads, double dropout = 0.0, bool bias = false,
                     int64_t query_size = -1, int64_t key_size = -1, int64_t value_size = -1,
                     Generator* gen = nullptr);

  /// queries (B, Tq, query_size), keys (B, Tk, key_size), values (B, Tk, value_size) -> (B, Tq, num_hiddens).
  /// valid_lens_or_mask: int64 valid_lens (B) or (B, Tq), the same for every head (d2l repeats them per
  /// head; here they broadcast); or a Bool keep-mask (true = attend) of shape (Tq, Tk), (B, Tq, Tk) or
  /// (B, H, Tq, Tk) (or broadcastable to those); or undefined. causal: masked self-attention aligned
  /// bottom-right (query i sees keys j <= i + Tk - Tq: the queries are the last Tq positions, as incremental
  /// decoding with a KV cache needs; equal to torch's is_causal only when Tq == Tk), combined with the mask.
  /// With `window` (the member) set, causal attention is sliding-window attention over the last `window`
  /// keys. Takes the fused kernel unless the weights are kept (need_weights). Throws saccade::Error naming
  /// "MultiHeadAttention" and the shapes for wrong ranks, feature sizes, mismatched B or Tk, a mask of the
  /// wrong shape, or a window without causal.
  Variable forward(const Variable& queries, const Variable& keys, const Variable& values,
                   const Tensor& valid_lens_or_mask = Tensor(), bool causal = false);

  /// Incremental attention: projects the new keys and values (B, Tn, ·), appends them to `cache`, and
  /// attends from queries (B, Tq, query_size) to all cached positions (B, H, t + Tn, d_head). With
  /// causal = true and the queries being the new positions, the outputs equal the corresponding rows of a
  /// full-sequence forward(..., causal = true). Masks as forward, over the t + Tn cached keys.
  Variable forward_cached(const Variable& queries, const Variable& new_keys, const Variable& new_values,
                          KVCache& cache, const Tensor& valid_lens_or_mask = Tensor(), bool causal = true);

  /// The weights (B, H, Tq, Tk) of the last forward, per head; undefined before the first. Throws
  /// saccade::Error naming "MultiHeadAttention::attention_weights" when the last forward did not keep them
  /// (a training-mode forward ran the fused kernel): call eval() or set need_weights = true first.
  Tensor attention_weights() const;

  int64_t num_hiddens() const { return num_hiddens_; }
  int64_t num_heads() const { return num_heads_; }

  std::shared_ptr<Linear> W_q, W_k, W_v, W_o;
  double dropout;
  /// Keep the weights of each forward for attention_weights() (true), never (false: always the fused
  /// kernel), or only in eval mode (unset, the default: d2l's plot-after-eval works, training is fused).
  std::optional<bool> need_weights;
  /// Sliding-window (local) causal attention (Beltagy et al. 2020, Longformer; Jiang et al. 2023, Mistral's
  /// sliding_window): a causal forward attends from each query to the last `window` keys up to its causal
  /// limit only (scaled_dot_product_attention's window; forward_cached too, over the cached keys, which it
  /// still keeps in full). 0 (the default): no window. A negative value, or a window on a forward without
  /// causal, throws saccade::Error naming "MultiHeadAttention" at that forward.
  int64_t window = 0;

 private:
  Variable attend(const Variable& queries, const Variable& k, const Variable& v, const Tensor& mask,
                  bool causal);
  int64_t num_hiddens_, num_heads_;
  Generator* gen_;
  Tensor weights_;
  bool weights_skipped_ = false;  // the last forward took the fused kernel
};

/// The result of MultiheadAttention::forward: output (B, Tq, E) and the weights, (B, Tq, Tk) averaged over
/// heads or (B, H, Tq, Tk) per head (undefined when not asked for).
struct MultiheadAttentionOutput {
  Variable output;
  Variable weights;
};

/// torch.nn.MultiheadAttention (torch 1.13) with batch_first=True and kdim = vdim = embed_dim: the same
/// computation as MultiHeadAttention with torch's parameter layout and mask conventions.
/// Parameters: in_proj_weight (3E, E) = [W_q; W_k; W_v] (xavier_uniform), in_proj_bias (3E) (zeros) when
/// `bias`, child out_proj Linear(E, E, bias) (torch's Linear init, bias zeros): the names and order of
/// torch's state_dict.
class MultiheadAttention : public Module {
 public:
  /// Throws saccade::Error naming "MultiheadAttention" unless num_heads > 0 divides embed_dim > 0.
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     Generator* gen = nullptr);

  /// query (B, Tq, E), key (B, Tk, E), value (B, Tk, E). Masks use torch's convention, true = NOT allowed:
  /// key_padding_mask Bool (B, Tk); attn_mask Bool (Tq, Tk) or (B * H, Tq, Tk); either may be undefined.
  /// causal: exactly torch's is_causal, top-left aligned: as an attn_mask of triu(ones(Tq, Tk), 1) (query i
  /// sees keys j <= i, also when Tq != Tk; MultiHeadAttention aligns bottom-right instead).
  /// need_weights / average_attn_weights: as torch; need_weights = false takes the fused kernel.
  /// Differences from torch: a query with every key masked gets zero output instead of NaN; float
  /// (additive) attn_masks are not supported; the returned weights are those before dropout.
  /// Throws saccade::Error naming "MultiheadAttention" and the shapes for bad input.
  MultiheadAttentionOutput forward(const Variable& query, const Variable& key, const Variable& value,
                                   const Tensor& key_padding_mask = Tensor(),
                                   const Tensor& attn_mask = Tensor(), bool need_weights = true,
                                   bool average_attn_weights = true, bool causal = false);
  /// The per-head weights (B, H, Tq, Tk) of the last forward (undefined before the first and after a forward
  /// with need_weights = false).
  Tensor attention_weights() const { return weights_; }

  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return num_heads_; }

  Variable in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;
  double dropout;

 private:
  int64_t embed_dim_, num_heads_;
  Generator* gen_;
  Tensor weights_;
};

}  // namespace saccade::nn
