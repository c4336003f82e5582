#pragma once
// The decoder cell of Bahdanau et al. 2015 ("Neural Machine Translation by Jointly Learning to Align and
// Translate", section 3.1 and appendix A.2.2; d2l section 11.4): at every step the previous hidden state
// queries the encoder states through additive attention, and the resulting context, concatenated with the
// embedded input, drives a GRU cell. Usable for seq2seq (attention over source tokens) and captioning
// (attention over CNN grid cells).
#include <cstdint>
#include <memory>

#include "autograd/variable.h"
#include "nn/attention.h"
#include "nn/module.h"
#include "nn/rnn.h"
#include "ops/random.h"

namespace saccade::nn {

/// One decoding step's results.
struct BahdanauStep {
  Variable hidden;   // (B, H): the new GRU state
  Variable context;  // (B, H'): the attention-weighted encoder state
  Variable weights;  // (B, Tk): the attention weights over the encoder states (differentiable)
};

/// A GRUCell with additive attention over encoder states (d2l 11.4, Seq2SeqAttentionDecoder's step):
///   context_t = Σ_j α(h_{t-1}, e_j) e_j,   α = softmax_j(w_vᵀ tanh(W_q h_{t-1} + W_k e_j)) over valid j,
///   h_t = GRU([context_t; x_t], h_{t-1})      (context first, as d2l's torch.cat((context, x), dim=-1)).
/// A decoder loop projects the encoder states once per sequence (project_keys) and passes them to every step.
/// Children: attention AdditiveAttention(key_size = enc_hiddens, query_size = num_hiddens, num_hiddens,
/// dropout), rnn GRUCell(enc_hiddens + embed_size, num_hiddens). enc_hiddens defaults (-1) to num_hiddens.
class BahdanauDecoderCell : public Module {
 public:
  /// Throws saccade::Error naming "BahdanauDecoderCell" for non-positive sizes. Init from `gen` (which also
  /// drives the attention's dropout and must outlive the cell).
  BahdanauDecoderCell(int64_t embed_size, int64_t num_hiddens, int64_t enc_hiddens = -1, double dropout = 0.0,
                      Generator* gen = nullptr);

  /// x (B, embed_size) the embedded input, hidden (B, num_hiddens) the previous state, enc_outputs
  /// (B, Tk, enc_hiddens), enc_valid_lens int64 (B) or a Bool mask (B, 1, Tk) or undefined -> the new hidden
  /// state, the context and the weights (B, Tk). Throws saccade::Error naming "BahdanauDecoderCell" and the
  /// shapes for inputs that do not fit.
  BahdanauStep step(const Variable& x, const Variable& hidden, const Variable& enc_outputs,
                    const Tensor& enc_valid_lens = Tensor());
  /// The encoder states as attention keys, W_k enc_outputs: enc_outputs (B, Tk, enc_hiddens) -> (B, Tk,
  /// num_hiddens). They do not change during a sequence: compute them once and pass them to every step.
  Variable project_keys(const Variable& enc_outputs) { return attention->project_keys(enc_outputs); }
  /// step with the keys already projected by project_keys (enc_keys (B, Tk, num_hiddens)); equal to
  /// step(x, hidden, enc_outputs, enc_valid_lens) without projecting the encoder states again. Throws as
  /// step.
  BahdanauStep step(const Variable& x, const Variable& hidden, const Variable& enc_outputs,
                    const Variable& enc_keys, const Tensor& enc_valid_lens);
  /// The weights (B, Tk) of the last step (undefined before the first).
  Tensor attention_weights() const { return weights_; }

  int64_t embed_size() const { return embed_size_; }
  int64_t num_hiddens() const { return num_hiddens_; }
  int64_t enc_hiddens() const { return enc_hiddens_; }

  std::shared_ptr<AdditiveAttention> attention;
  std::shared_ptr<GRUCell> rnn;

 private:
  int64_t embed_size_, num_hiddens_, enc_hiddens_;
  Tensor weights_;
};

}  // namespace saccade::nn
