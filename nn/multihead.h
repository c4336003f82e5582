#pragma once
// Multi-head attention (Vaswani et al. 2017, section 3.2.2; d2l section 11.5): one module,
// MultiHeadAttention, with two parameter layouts (ParameterLayout) and two calling conventions:
//   - Split (the default): d2l's four Linear layers W_q, W_k, W_v, W_o (bias optional);
//   - Packed: torch.nn.MultiheadAttention's (batch_first=True) in_proj_weight (3E, E), in_proj_bias (3E),
//     out_proj.weight (E, E), out_proj.bias (E), so torch state dicts load one to one;
//   - forward(q, k, v, valid_lens_or_mask, causal): d2l's (int64 valid_lens or a Bool keep-mask, causal
//     aligned bottom-right, as a key/value cache needs; forward_cached decodes incrementally);
//   - forward(q, k, v, {.key_padding_mask, .need_weights, .attn_mask, .average_attn_weights, .is_causal}):
//     torch.nn.MultiheadAttention.forward's (its masks, true = not allowed; is_causal top-left).
// Either way num_hiddens splits into num_heads heads of num_hiddens / num_heads features, and the heads go
// through scaled_dot_product_attention on (B, H, T, d_head) tensors; key/value heads may be grouped
// (num_kv_heads) and queries and keys rotated (rotary), through GroupedHeads, which LlamaAttention
// (nn/llama.h) shares.
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "nn/attention.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/positional.h"
#include "nn/unary_module.h"
#include "ops/random.h"

namespace saccade::nn {

/// The projected keys and values of the positions seen so far, per key/value head: keys(), values() (B, H_kv,
/// t, d_head) (H_kv = H without grouped-query attention; keys rotated when the layer is rotary). Empty
/// (undefined) until the first cached forward. One cache per self-attention layer.
///
/// Two ways to grow, chosen at each append:
///   - decoding (no input needs a gradient: under NoGradGuard): the new positions are written in place into
///     a buffer (B, H_kv, capacity, d_head), and keys()/values() are views of its first t positions. The
///     buffer holds reserve()'s positions, or grows by doubling when a sequence outgrows it; reset() keeps
///     it. So a decoding step copies only its own Tn positions, and once the buffer holds the sequence a step
///     allocates nothing for the cache (transformers' StaticCache, llama.cpp's KV cache);
///   - with a graph (grad mode on and an input that needs a gradient): the cache concatenates, so the
///     gradient flows through every cached position; the Variables keep the earlier steps' graphs alive.
class KVCache {
 public:
  /// The cached keys and values (B, H_kv, t, d_head); undefined while empty.
  const Variable& keys() const { return keys_; }
  const Variable& values() const { return values_; }
  /// t, the number of cached positions.
  int64_t length() const { return keys_.defined() ? keys_.size(2) : 0; }
  /// The positions the buffer holds before it grows (0 before the first in-place append).
  int64_t capacity() const { return key_buffer_.defined() ? key_buffer_.size(2) : 0; }
  /// The bytes the cached positions take: B · t · 2 · H_kv · d_head · the dtype's size (0 when empty); the
  /// buffer's capacity() may hold more.
  int64_t bytes() const;
  /// Makes the next in-place buffer hold at least `positions` (its allocation waits for the first append,
  /// which knows B, H_kv, d_head and the dtype): a decoder reserves its prompt plus the new tokens, so no
  /// step reallocates. Throws saccade::Error naming "KVCache::reserve" for a negative count.
  void reserve(int64_t positions);
  /// Empties the cache (length() becomes 0) and keeps the buffer: call before decoding a new sequence.
  void reset() { keys_ = values_ = Variable(); }
  /// Appends new keys and values (B, H_kv, Tn, d_head) along the positions and returns the whole cache
  /// (keys, values) (B, H_kv, t + Tn, d_head). Throws saccade::Error naming `op` (the module decoding) and
  /// both shapes when the new keys differ from the cached ones in B, H_kv, d_head, dtype or device, or the
  /// values from the keys.
  std::pair<Variable, Variable> append(const Variable& new_keys, const Variable& new_values, const char* op);
  /// Beam search's reordering (transformers' Cache.reorder_cache): row b of the cache becomes row
  /// beam_idx[b] of the old one; beam_idx int64 (B') of rows in [0, B), B' may differ from B. Throws
  /// saccade::Error naming "KVCache::reorder" for another index. Nothing to do while empty.
  void reorder(const Tensor& beam_idx);

 private:
  Variable keys_, values_;            // (B, H_kv, t, d_head): views of the buffers when decoding in place
  Tensor key_buffer_, value_buffer_;  // (B, H_kv, capacity, d_head), or undefined
  int64_t reserved_ = 0;
};

/// The decoding state of one batch of sequences: one self-attention KVCache per decoder layer (the State of
/// GPT, LlamaForCausalLM and TransformerDecoder).
struct KVCaches {
  std::vector<KVCache> caches;
  /// Positions decoded so far (each layer's cache holds as many).
  int64_t length() const { return caches.empty() ? 0 : caches[0].length(); }
  /// KVCache::reserve on every layer's cache.
  void reserve(int64_t positions);
  /// KVCache::reset on every layer's cache (their buffers stay for the next sequence).
  void reset();
};

/// Packed documents at the model level (transformers' packing, whose position_ids restart at each document;
/// FlashAttention-2's variable-length batches, Dao 2023): several documents share one row of a batch, each
/// attending only to itself, its positions restarting at 0 at its first token. Built once a forward by
/// PackedDocuments::of and handed to every layer, so the ids are read (on the host) once.
struct PackedDocuments {
  Tensor positions;  ///< int64 (B, T): each token's position in its own document
  /// key_starts and valid_lens (B, T) of ops::with_documents: each query's document [start, end)
  ops::AttentionMask bounds;
  /// From document ids int64 (B, T) on `device` (non-decreasing along T, each document one run). Throws
  /// saccade::Error naming `op` as ops::with_documents does.
  static PackedDocuments of(const Tensor& document_ids, Device device, const char* op);
  /// `mask`, for scores (B, H, T, T), restricted to each query's own document (it must have no valid_lens).
  ops::AttentionMask restrict(ops::AttentionMask mask) const;
};

/// The hidden states (B, T, E) of the last `logits_to_keep` positions, for the output layer of a decoding
/// step (transformers' logits_to_keep: the prefill of a prompt needs only its last position's logits, not a
/// (B, T, vocab) product): a view (B, logits_to_keep, E); 0, or a count >= T, keeps all T. Throws
/// saccade::Error naming `op` for a negative count or hidden states of another rank.
Variable keep_last_positions(const Variable& hidden, int64_t logits_to_keep, const char* op);

/// Rotary position embedding of a MultiHeadAttention's queries and keys (RoPE, Su et al. 2021; the settings
/// of nn::RotaryEmbedding, under Hugging Face's config names in the comments).
struct RotaryConfig {
  ops::RotaryStyle style = ops::RotaryStyle::Half;  ///< Half: GPT-NeoX and HF Llama; Interleaved: GPT-J
  double theta = 10000.0;                           ///< the base (rope_theta)
  double fraction = 1.0;  ///< the share of head_dim rotated, in (0, 1] (partial_rotary_factor)
};

/// The head arithmetic of grouped-query attention (Ainslie et al. 2023) with optional rotary positions (Su et
/// al. 2021), shared by MultiHeadAttention and LlamaAttention: H = num_heads query heads and H_kv =
/// num_kv_heads key/value heads of head_dim features each, query head h reading key/value head h / (H / H_kv)
/// (scaled_dot_product_attention's enable_gqa: K and V are never repeated in memory). A view of its module's
/// settings; `rotary` is the module's child (null: no rotary positions), and so are `q_norm` and `k_norm`
/// (null: none), norms over head_dim applied to each head's query and key vectors before the rotation
/// (Qwen3's per-head RMSNorm). The module checks the sizes.
struct GroupedHeads {
  int64_t num_heads, num_kv_heads, head_dim;
  RotaryEmbedding* rotary = nullptr;
  UnaryModule *q_norm = nullptr, *k_norm = nullptr;

  /// Projected queries (B, T, H · head_dim) -> (B, H, T, head_dim), each head normed by q_norm when set, then
  /// rotated at positions offset .. offset + T - 1 when rotary.
  Variable queries(const Variable& projected, int64_t offset) const;
  /// Projected keys (B, T, H_kv · head_dim) -> (B, H_kv, T, head_dim), normed by k_norm and rotated as the
  /// queries.
  Variable keys(const Variable& projected, int64_t offset) const;
  /// The same for packed documents: each token rotated at its position in its own document (docs.positions).
  Variable queries(const Variable& projected, const PackedDocuments& docs) const;
  Variable keys(const Variable& projected, const PackedDocuments& docs) const;
  /// Projected values (B, T, H_kv · head_dim) -> (B, H_kv, T, head_dim).
  Variable values(const Variable& projected) const;
  /// Attention of q (B, H, Tq, head_dim) over k, v (B, H_kv, Tk, head_dim) under `mask` (ops::attention_mask
  /// for scores (B, H, Tq, Tk)), through scaled_dot_product_attention (the dropout, generator, scale and
  /// need_weights of `options`; enable_gqa set here when H_kv != H; errors naming `op`) -> output (B, Tq, H ·
  /// head_dim) with the heads merged, weights (B, H, Tq, Tk) when kept.
  AttentionOutput attend(const Variable& q, const Variable& k, const Variable& v,
                         const ops::AttentionMask& mask, const AttentionOptions& options,
                         const char* op) const;
  /// The KV cache's bytes per cached position and batch row: 2 · H_kv · head_dim · sizeof(dtype) (keys and
  /// values), H / H_kv times less than multi-head attention's.
  int64_t kv_cache_bytes_per_token(DType dtype) const;
};

/// How MultiHeadAttention holds its projections: the names and order of its state_dict.
enum class ParameterLayout {
  /// d2l's (and Hugging Face's q_proj ... o_proj): four Linear children W_q, W_k, W_v, W_o, initialised as
  /// torch.nn.Linear.
  Split,
  /// torch.nn.MultiheadAttention's: in_proj_weight (3E, E) = [W_q; W_k; W_v] (xavier_uniform), in_proj_bias
  /// (3E) (zeros) when bias, and the child out_proj Linear(E, E) (torch's Linear init, its bias zeros), in
  /// torch's state_dict order. Needs query, key and value sizes equal to num_hiddens = E and num_kv_heads =
  /// num_heads (torch packs only that case).
  Packed,
};

/// MultiHeadAttention's settings beyond its sizes, by name (C++20 designated initializers, in this order):
///   nn::MultiHeadAttention mha(512, 8, {.dropout = 0.1, .bias = true, .num_kv_heads = 2, .generator =
///   &gen});
///   nn::MultiHeadAttention torch_mha(512, 8, {.bias = true, .layout = nn::ParameterLayout::Packed});
struct MultiHeadAttentionOptions {
  double dropout = 0.0;  ///< dropout on the attention weights, in [0, 1) (d2l's DotProductAttention)
  bool bias = false;     ///< biases on W_q, W_k, W_v and W_o (d2l: no biases)
  /// The feature sizes of the queries, keys and values given to forward (-1: num_hiddens; d2l's LazyLinear
  /// infers them, torch.nn.MultiheadAttention calls the last two kdim and vdim).
  int64_t query_size = -1, key_size = -1, value_size = -1;
  /// H_kv, the key/value heads (grouped-query attention; -1: num_heads, multi-head; 1: multi-query).
  int64_t num_kv_heads = -1;
  std::optional<RotaryConfig> rotary = std::nullopt;  ///< rotary positions of queries and keys (none: unset)
  ParameterLayout layout = ParameterLayout::Split;    ///< d2l's four Linear layers, or torch's packed one
  /// Drives the parameters' initialisation and the dropout (it must outlive the module); nullptr: the
  /// global generator.
  Generator* generator = nullptr;
};

/// torch.nn.MultiheadAttention.forward's keyword arguments, by name, in torch's order (its masks: true = NOT
/// allowed):
///   auto [out, weights] = mha.forward(q, k, v, {.key_padding_mask = pad, .need_weights = true});
struct MultiHeadAttentionArgs {
  /// Bool (B, Tk): true marks a key to ignore (padding); undefined: none.
  Tensor key_padding_mask{};
  /// Return the weights, (B, Tq, Tk) averaged over heads or (B, H, Tq, Tk) per head (the composed path,
  /// O(T²) memory); false (the default, as AttentionOptions' and unlike torch's forward, whose default is
  /// true: ask for them by name) takes the fused kernel and leaves them undefined.
  bool need_weights = false;
  /// Bool (Tq, Tk) or (B * H, Tq, Tk): true marks a (query, key) pair not allowed; undefined: none. Float
  /// (additive) masks are not supported.
  Tensor attn_mask{};
  /// With need_weights: average the weights over the heads (torch's default) or keep them per head.
  bool average_attn_weights = true;
  /// Exactly torch's is_causal, top-left aligned: as an attn_mask of triu(ones(Tq, Tk), 1) (query i sees keys
  /// j <= i, also when Tq != Tk; d2l's forward aligns bottom-right instead).
  bool is_causal = false;
};

/// Multi-head attention as d2l section 11.5 (Vaswani et al. 2017, section 3.2.2):
///   head_i = attention(W_q^(i) q, W_k^(i) k, W_v^(i) v),   output = W_o [head_1; ...; head_H],
/// with attention = scaled_dot_product_attention (dropout on the weights, as d2l's DotProductAttention).
/// Children in the Split layout (the default): W_q Linear(query_size, num_hiddens), W_k Linear(key_size,
/// H_kv · d_head), W_v Linear(value_size, H_kv · d_head), W_o Linear(num_hiddens, num_hiddens), each with a
/// bias iff options.bias; in the Packed layout torch.nn.MultiheadAttention's in_proj_weight, in_proj_bias and
/// out_proj (ParameterLayout) instead; then rotary_emb RotaryEmbedding (no state) when options.rotary.
/// d_head = num_hiddens / num_heads; the rest: MultiHeadAttentionOptions.
///
/// Grouped-query attention (Ainslie et al. 2023): options.num_kv_heads = H_kv key/value heads (-1: H,
/// multi-head attention; 1: multi-query attention), query head h attending with key/value head h / (H /
/// H_kv); the KV cache holds H_kv heads, 2 · H_kv · d_head values per position (kv_cache_bytes_per_token).
/// Rotary positions (Su et al. 2021): options.rotary rotates the queries and keys after their projection; a
/// key's position is its index in the (cached) key sequence, the Tq queries are the last Tq positions of it
/// (the bottom-right alignment of `causal` below), so self-attention puts position i at row i.
class MultiHeadAttention : public Module {
 public:
  /// Throws saccade::Error naming "MultiHeadAttention" and the sizes unless num_heads > 0 divides
  /// num_hiddens > 0 and is a multiple of num_kv_heads > 0, or for a Packed layout with other sizes, or
  /// (naming "RotaryEmbedding" after it) for a rotary fraction outside (0, 1], rotated dims that are not even
  /// and positive (an odd d_head with fraction 1), theta <= 1, or a dropout outside [0, 1). Init as
  /// torch.nn.Linear's from options.generator.
  MultiHeadAttention(int64_t num_hiddens, int64_t num_heads, const MultiHeadAttentionOptions& options = {});

  /// queries (B, Tq, query_size), keys (B, Tk, key_size), values (B, Tk, value_size) -> (B, Tq, num_hiddens).
  /// valid_lens_or_mask: int64 valid_lens (B) or (B, Tq), the same for every head (d2l repeats them per
  /// head; here they broadcast); or a Bool keep-mask (true = attend) of shape (Tq, Tk), (B, Tq, Tk) or
  /// (B, H, Tq, Tk) (or broadcastable to those); or undefined. causal: masked self-attention aligned
  /// bottom-right (query i sees keys j <= i + Tk - Tq: the queries are the last Tq positions, as incremental
  /// decoding with a KV cache needs; equal to torch's is_causal only when Tq == Tk), combined with the mask.
  /// With `window` (the member) set, causal attention is sliding-window attention over the last `window`
  /// keys. Takes the fused kernel unless the weights are kept (need_weights). Throws saccade::Error naming
  /// "MultiHeadAttention" and the shapes for wrong ranks, feature sizes, mismatched B or Tk, a mask of the
  /// wrong shape, a window without causal, or (rotary) more queries than keys.
  Variable forward(const Variable& queries, const Variable& keys, const Variable& values,
                   const Tensor& valid_lens_or_mask = Tensor(), bool causal = false);

  /// Incremental attention: projects the new keys and values (B, Tn, ·) (rotated at positions t .. t + Tn - 1
  /// when rotary), appends them to `cache`, and attends from queries (B, Tq, query_size) (positions t + Tn -
  /// Tq ..) to all cached positions (B, H_kv, t + Tn, d_head). With
  /// causal = true and the queries being the new positions, the outputs equal the corresponding rows of a
  /// full-sequence forward(..., causal = true). Masks as forward, over the t + Tn cached keys.
  Variable forward_cached(const Variable& queries, const Variable& new_keys, const Variable& new_values,
                          KVCache& cache, const Tensor& valid_lens_or_mask = Tensor(), bool causal = true);

  /// Packed documents (PackedDocuments; FlashAttention-2's variable-length batches): causal self-attention of
  /// x (B, T, query_size) over itself, each query seeing the earlier keys of its own document only (the
  /// fused kernel's per-query key bounds: no (T, T) mask is formed; `window` applies within the document),
  /// rotary positions, when set, restarting at each document -> (B, T, num_hiddens), each document's rows
  /// equal to its own causal forward's. Throws saccade::Error naming "MultiHeadAttention" and the shapes as
  /// forward does, and for documents of another (B, T).
  Variable forward(const Variable& x, const PackedDocuments& docs);

  /// torch.nn.MultiheadAttention.forward (batch_first=True), in either layout: query (B, Tq, query_size),
  /// key (B, Tk, key_size), value (B, Tk, value_size) -> output (B, Tq, num_hiddens) and the weights as
  /// args.need_weights and args.average_attn_weights say (MultiHeadAttentionArgs: torch's masks and
  /// is_causal). Rotary positions, when set, are 0 .. Tq - 1 for the queries and 0 .. Tk - 1 for the keys
  /// (top-left, as is_causal); `window` (the member) needs is_causal, as in d2l's forward. Differences from
  /// torch: a query with every key masked gets zero output instead of NaN; the weights are those before
  /// dropout. attention_weights() then holds the per-head weights (B, H, Tq, Tk) when need_weights. Throws
  /// saccade::Error naming "MultiHeadAttention" and the shapes for bad input, masks of another dtype or shape
  /// included.
  AttentionOutput forward(const Variable& query, const Variable& key, const Variable& value,
                          const MultiHeadAttentionArgs& args);

  /// The weights (B, H, Tq, Tk) of the last forward, per head; undefined before the first. Throws
  /// saccade::Error naming "MultiHeadAttention::attention_weights" when the last forward did not keep them
  /// (a training-mode forward ran the fused kernel): call eval() or set need_weights = true first.
  Tensor attention_weights() const;

  int64_t num_hiddens() const { return num_hiddens_; }
  int64_t num_heads() const { return heads_.num_heads; }
  /// H_kv, the key/value heads (num_heads() unless grouped).
  int64_t num_kv_heads() const { return heads_.num_kv_heads; }
  int64_t head_dim() const { return heads_.head_dim; }
  /// The KV cache's bytes per cached position and batch row, 2 · H_kv · d_head · sizeof(dtype), for the
  /// dtype of the key projection's weight (the cache's dtype outside autocast): the figure to compare
  /// layouts by (multi-head, grouped, multi-query).
  int64_t kv_cache_bytes_per_token() const;

  /// The Split layout's projections (null in the Packed layout, but W_o, which is then out_proj).
  std::shared_ptr<Linear> W_q, W_k, W_v, W_o;
  /// The Packed layout's (torch's names): in_proj_weight (3E, E), in_proj_bias (3E) when bias, out_proj
  /// (the same module as W_o); undefined and null in the Split layout.
  Variable in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;
  std::shared_ptr<RotaryEmbedding> rotary_emb;  ///< null unless rotary
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
  // queries (B, Tq, ·) projected and split into heads at positions offset ..; k, v (B, H_kv, Tk, d) already
  // split -> the heads' output (B, Tq, num_hiddens) before W_o and the weights, kept as `keep` says
  AttentionOutput attend(const Variable& queries, int64_t offset, const Variable& k, const Variable& v,
                         const ops::AttentionMask& mask, bool keep);
  // the same from queries already split into heads (B, H, Tq, d) (and rotated)
  AttentionOutput attend_heads(const Variable& q, const Variable& k, const Variable& v,
                               const ops::AttentionMask& mask, bool keep);
  // x (B, T, ·) -> its projection `which` (0 queries, 1 keys, 2 values), by W_q/W_k/W_v or in_proj_weight
  Variable project(const Variable& x, int which) const;
  Variable attend_d2l(const Variable& queries, const Variable& k, const Variable& v, const Tensor& mask,
                      bool causal);
  int64_t num_hiddens_, query_size_, key_size_, value_size_;
  GroupedHeads heads_;
  Generator* gen_;
  Tensor weights_;
  bool weights_skipped_ = false;  // the last forward took the fused kernel
};

}  // namespace saccade::nn
