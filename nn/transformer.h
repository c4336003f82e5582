#pragma once
// The Transformer's encoder and decoder blocks (Vaswani et al. 2017, section 3.1; d2l section 11.7) and
// stacks of them over already-embedded inputs (as torch.nn.TransformerEncoder / TransformerDecoder: the
// caller adds the embedding, positional encoding and output layer).
//
// The decoder runs in two ways that give the same numbers:
//   - forward: the whole target sequence at once with causal self-attention (training; d2l instead feeds
//     the growing prefix through its state);
//   - step: greedy decoding one (or a few) positions at a time, keeping each layer's projected self-attention
//     keys and values in a KVCache, so step t costs O(t), not O(t²).
#include <cstdint>
#include <memory>
#include <vector>

#include "autograd/variable.h"
#include "nn/module.h"
#include "nn/multihead.h"
#include "nn/transformer_layers.h"
#include "ops/random.h"

namespace saccade::nn {

/// One encoder block (d2l 11.7.2, TransformerEncoderBlock):
///   Y = AddNorm(X, MultiHeadAttention(X, X, X, valid_lens)),   out = AddNorm(Y, PositionWiseFFN(Y)).
/// Children (d2l's names): attention, addnorm1, ffn (dense1, dense2), addnorm2. Linear layers of the
/// attention have a bias iff use_bias; init from `gen` (which also drives dropout and must outlive the
/// block).
class TransformerEncoderBlock : public Module {
 public:
  TransformerEncoderBlock(int64_t num_hiddens, int64_t ffn_num_hiddens, int64_t num_heads, double dropout,
                          bool use_bias = false, Generator* gen = nullptr);

  /// X (B, T, num_hiddens), valid_lens_or_mask as MultiHeadAttention::forward -> (B, T, num_hiddens).
  /// Throws saccade::Error naming "TransformerEncoderBlock" for an X of another shape; the attention's
  /// errors for a bad mask.
  Variable forward(const Variable& X, const Tensor& valid_lens_or_mask = Tensor());
  /// The self-attention weights (B, H, T, T) of the last forward (throws saccade::Error when not kept:
  /// MultiHeadAttention::attention_weights).
  Tensor attention_weights() const { return attention->attention_weights(); }
  /// Whether the attention layers keep their weights for the *_weights() accessors: true, false (always the
  /// fused kernel), or unset (the default: in eval mode only). See MultiHeadAttention::need_weights.
  void set_need_weights(std::optional<bool> need) { attention->need_weights = need; }

  std::shared_ptr<MultiHeadAttention> attention;
  std::shared_ptr<AddNorm> addnorm1;
  std::shared_ptr<PositionWiseFFN> ffn;
  std::shared_ptr<AddNorm> addnorm2;
};

/// One decoder block (d2l 11.7.3, TransformerDecoderBlock):
///   Y = AddNorm(X, causal self-attention(X)),   Z = AddNorm(Y, attention(Y, enc, enc, enc_valid_lens)),
///   out = AddNorm(Z, PositionWiseFFN(Z)).
/// Children (d2l's names): attention1 (self), addnorm1, attention2 (cross), addnorm2, ffn, addnorm3.
class TransformerDecoderBlock : public Module {
 public:
  TransformerDecoderBlock(int64_t num_hiddens, int64_t ffn_num_hiddens, int64_t num_heads, double dropout,
                          bool use_bias = false, Generator* gen = nullptr);

  /// The whole target sequence: X (B, T, D), enc_outputs (B, Tk, D), enc_valid_lens (int64 (B) or (B, T),
  /// or a Bool keep-mask, or undefined) -> (B, T, D). Position t sees X[:, :t+1] only.
  /// Throws saccade::Error naming "TransformerDecoderBlock" for shapes that do not fit.
  Variable forward(const Variable& X, const Variable& enc_outputs, const Tensor& enc_valid_lens = Tensor());
  /// The next positions X (B, Tn, D) after the cache.length() already seen (kept in `cache`, which grows by
  /// Tn) -> (B, Tn, D): equal to rows [t, t + Tn) of forward on the whole prefix. enc_valid_lens: (B) or a
  /// Bool mask broadcastable to (B, H, Tn, Tk), or undefined. Errors as forward.
  Variable step(const Variable& X, const Variable& enc_outputs, const Tensor& enc_valid_lens, KVCache& cache);

  /// The last self-attention weights (B, H, T, T) and encoder-decoder weights (B, H, T, Tk) (throw
  /// saccade::Error when not kept: MultiHeadAttention::attention_weights).
  Tensor self_attention_weights() const { return attention1->attention_weights(); }
  Tensor cross_attention_weights() const { return attention2->attention_weights(); }
  /// Whether the attention layers keep their weights for the *_weights() accessors: true, false (always the
  /// fused kernel), or unset (the default: in eval mode only). See MultiHeadAttention::need_weights.
  void set_need_weights(std::optional<bool> need) {
    attention1->need_weights = attention2->need_weights = need;
  }

  std::shared_ptr<MultiHeadAttention> attention1;
  std::shared_ptr<AddNorm> addnorm1;
  std::shared_ptr<MultiHeadAttention> attention2;
  std::shared_ptr<AddNorm> addnorm2;
  std::shared_ptr<PositionWiseFFN> ffn;
  std::shared_ptr<AddNorm> addnorm3;

 private:
  Variable finish(const Variable& X, const Variable& Y, const Variable& enc_outputs,
                  const Tensor& enc_valid_lens);
  void check(const Variable& X, const Variable& enc_outputs) const;
};

/// num_blks TransformerEncoderBlocks applied in turn to embedded inputs (d2l 11.7.4's TransformerEncoder
/// without its embedding and positional encoding). Children: blks.0, blks.1, ...
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(int64_t num_hiddens, int64_t ffn_num_hiddens, int64_t num_heads, int64_t num_blks,
                     double dropout, bool use_bias = false, Generator* gen = nullptr);
  /// X (B, T, num_hiddens) -> (B, T, num_hiddens); masks and errors as TransformerEncoderBlock::forward.
  Variable forward(const Variable& X, const Tensor& valid_lens_or_mask = Tensor());
  /// Each block's last self-attention weights (B, H, T, T).
  std::vector<Tensor> attention_weights() const;
  /// Whether the attention layers keep their weights for the *_weights() accessors: true, false (always the
  /// fused kernel), or unset (the default: in eval mode only). See MultiHeadAttention::need_weights.
  void set_need_weights(std::optional<bool> need) {
    for (auto& b : blks) b->set_need_weights(need);
  }

  std::vector<std::shared_ptr<TransformerEncoderBlock>> blks;
};

/// num_blks TransformerDecoderBlocks over embedded targets (d2l 11.7.5's TransformerDecoder without its
/// embedding, positional encoding and output layer). Children: blks.0, blks.1, ...
class TransformerDecoder : public Module {
 public:
  /// The decoding state of one sequence batch: one self-attention KVCache per block.
  using State = KVCaches;

  TransformerDecoder(int64_t num_hiddens, int64_t ffn_num_hiddens, int64_t num_heads, int64_t num_blks,
                     double dropout, bool use_bias = false, Generator* gen = nullptr);
  /// Whole sequence (training): X (B, T, D), enc_outputs (B, Tk, D) -> (B, T, D).
  Variable forward(const Variable& X, const Variable& enc_outputs, const Tensor& enc_valid_lens = Tensor());
  /// A fresh state (empty caches).
  State init_state() const { return State{std::vector<KVCache>(blks.size())}; }
  /// Incremental: X (B, Tn, D) at positions [state.length(), state.length() + Tn) -> (B, Tn, D), equal to the
  /// corresponding rows of forward on the whole prefix; appends to `state`.
  Variable step(const Variable& X, const Variable& enc_outputs, const Tensor& enc_valid_lens, State& state);
  /// Each block's last self- and cross-attention weights.
  std::vector<Tensor> self_attention_weights() const;
  std::vector<Tensor> cross_attention_weights() const;
  /// Whether the attention layers keep their weights for the *_weights() accessors: true, false (always the
  /// fused kernel), or unset (the default: in eval mode only). See MultiHeadAttention::need_weights.
  void set_need_weights(std::optional<bool> need) {
    for (auto& b : blks) b->set_need_weights(need);
  }

  std::vector<std::shared_ptr<TransformerDecoderBlock>> blks;
};

/// d2l names the stacked blocks of its TransformerEncoder/Decoder "block0", "block1", ... (its
/// `blks.add_module("block" + str(i), ...)`), so its state_dict has "blks.block0.attention.W_q.weight" where
/// ours (torch's ModuleList naming) has "blks.0.attention.W_q.weight". Returns `dict` with every
/// "blks.block<i>." in a key rewritten to "blks.<i>." (other keys unchanged, order kept), so that
///     encoder.load_state_dict(nn::from_d2l_names(d2l_dict));
/// loads a d2l checkpoint. Throws saccade::Error naming "from_d2l_names" if two keys map to one name.
StateDict from_d2l_names(const StateDict& dict);

}  // namespace saccade::nn
