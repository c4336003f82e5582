#pragma once
// The decoder-only Transformer block of GPT-2 (Radford et al. 2019, section 2.3; the pre-LayerNorm block of
// Xiong et al. 2020): masked multi-head self-attention and a GELU MLP, each behind its own LayerNorm, each
// added to the residual stream.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "autograd/checkpoint.h"
#include "nn/activation.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/multihead.h"
#include "nn/normalization.h"

namespace saccade::nn {

/// GPT-2's MLP: c_proj(GELU(c_fc(x))) (Radford et al. 2018/2019; nanoGPT's MLP without its dropout, which
/// GPTBlock applies). Children: c_fc Linear(d, 4d), gelu, c_proj Linear(4d, d), both with biases.
/// forward: x (*, d) -> (*, d). Errors as Linear's.
class GPTMLP : public UnaryModule {
 public:
  GPTMLP(int64_t d_model, int64_t hidden, Generator* gen = nullptr);
  Variable forward(const Variable& x) override;

  std::shared_ptr<Linear> c_fc;
  std::shared_ptr<GELU> gelu;
  std::shared_ptr<Linear> c_proj;
};

/// One GPT-2 block over the residual stream x (B, T, d):
///   x = x + Dropout(attn(ln_1(x)))   (causal self-attention),   x = x + Dropout(mlp(ln_2(x))).
/// Children (GPT-2 / nanoGPT names, with d2l's four attention projections): ln_1 LayerNorm(d),
/// attn MultiHeadAttention(d, n_head, dropout on the weights, biases), ln_2, mlp GPTMLP(d, 4d), and the
/// residual dropout `dropout`. Weights start as torch.nn.Linear's defaults; a model applies GPT-2's own init
/// (gpt2_init_). `gen` draws the init and the dropout masks and must outlive the block.
class GPTBlock : public Module {
 public:
  /// Throws saccade::Error naming "GPTBlock" unless n_head > 0 divides d_model > 0 and dropout is in [0, 1).
  GPTBlock(int64_t d_model, int64_t n_head, double dropout = 0.0, Generator* gen = nullptr);

  /// The whole sequence: x (B, T, d) -> (B, T, d); position t sees positions <= t. Takes the fused attention
  /// kernel unless the attention keeps its weights (MultiHeadAttention::need_weights). Throws saccade::Error
  /// naming "GPTBlock" and the shape for an x that is not (B, T, d_model).
  Variable forward(const Variable& x);
  /// Packed documents (PackedDocuments): x (B, T, d) holding several documents a row -> (B, T, d), each
  /// document's rows equal to its own forward's (MultiHeadAttention's packed forward). Errors as forward, and
  /// MultiHeadAttention's for documents of another (B, T).
  Variable forward(const Variable& x, const PackedDocuments& docs);
  /// Incremental decoding: x (B, Tn, d) holds the positions after the cache.length() already in `cache`
  /// (which grows by Tn) -> (B, Tn, d), equal to those rows of forward over the whole prefix. Errors as
  /// forward.
  Variable step(const Variable& x, KVCache& cache);

  /// The last forward's self-attention weights (B, H, T, T) (MultiHeadAttention::attention_weights: throws
  /// when that forward ran the fused kernel).
  Tensor attention_weights() const { return attn->attention_weights(); }

  std::shared_ptr<LayerNorm> ln_1;
  std::shared_ptr<MultiHeadAttention> attn;
  std::shared_ptr<LayerNorm> ln_2;
  std::shared_ptr<GPTMLP> mlp;
  std::shared_ptr<Dropout> dropout;
  /// Activation checkpointing (autograd/checkpoint.h): when set, forward under grad mode keeps only the
  /// block's input and recomputes the block during backward (same results, dropout masks included; less
  /// memory, one more forward).
  bool checkpoint_activations = false;
  /// The generators the block draws from besides its own (LoRA's dropout: apply_lora's), replayed in the
  /// recomputation so that it drops what the forward dropped.
  std::vector<Generator*> checkpoint_generators;

 private:
  Generator* gen_ = nullptr;  // the dropout masks' generator (null: the default one)
  Variable finish(const Variable& x, const Variable& attended);
  void check(const Variable& x) const;
  // forward's body, packed when `docs` is given, checkpointed as checkpoint_activations says
  Variable run(const Variable& x, const PackedDocuments* docs);
};

/// GPT-2's initialisation (Radford et al. 2019, section 2.3; as nanoGPT's _init_weights) of one block:
/// every Linear weight ~ N(0, 0.02²) and bias 0, except the residual projections (attn.W_o, mlp.c_proj),
/// whose weights are N(0, (0.02 / √(2 n_layer))²); LayerNorms 1 and 0. Draws from `gen`. Throws
/// saccade::Error for n_layer < 1.
void gpt2_init_(GPTBlock& block, int64_t n_layer, Generator* gen = nullptr);

}  // namespace saccade::nn
