#pragma once
// Show, attend and tell (Xu et al. 2015, "Show, Attend and Tell: Neural Image Caption Generation with Visual
// Attention", section 3.1.2 with soft attention): a GRU decoder that, before emitting each word, attends over
// the encoder's grid with additive attention (Bahdanau et al. 2015, eq. 6):
//   alpha_t = softmax_i(w_v^T tanh(W_k m_i + W_q h_{t-1})),   c_t = sum_i alpha_t,i m_i,
//   h_t = GRU([embed(y_{t-1}), c_t], h_{t-1}),                 logits_t = W_o [h_t, c_t] + b_o,
// with h_0 = tanh(W_init mean_i(m_i) + b_init) (eq. 5's initialisation from the mean annotation).
//
// The attention is an nn::AdditiveAttention (W_q, W_k, w_v). Its projection of the keys, W_k m_i, does not
// depend on the step: it is computed once per caption (AdditiveAttention::project_keys) and every step calls
// forward_projected, rather than forward, which would project the keys again: over a 49-position grid and ~20
// steps that saves ~3 GFLOP per training step of batch 64.
#include <cstdint>
#include <memory>

#include "examples/image_caption/captioner.h"
#include "examples/image_caption/encoder.h"
#include "nn/attention.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/rnn.h"

namespace saccade::examples {

/// The sat captioner. Children: encoder (GridEncoder), embedding, init_h (Linear d_model -> hidden),
/// attention (AdditiveAttention: key_size d_model, query_size hidden, attn_hidden), rnn (GRUCell embed +
/// d_model -> hidden), output (Linear hidden + d_model -> vocabulary).
class SatCaptioner : public Captioner {
 public:
  /// Throws saccade::Error for settings the layers reject (non-positive sizes, a grid other than 7 or 14).
  SatCaptioner(const CaptionConfig& config, uint64_t seed);
  Variable encode(const Tensor& images) override;
  Variable decode(const Variable& memory, const Tensor& tokens) override;
  GreedyOutput greedy(const Variable& memory, int64_t max_len) override;
  int64_t grid_size() const override { return encoder->grid(); }

  std::shared_ptr<GridEncoder> encoder;
  std::shared_ptr<nn::Embedding> embedding;
  std::shared_ptr<nn::Linear> init_h;
  std::shared_ptr<nn::AdditiveAttention> attention;
  std::shared_ptr<nn::GRUCell> rnn;
  std::shared_ptr<nn::Linear> output;

 private:
  struct Step {
    Variable h, context, alpha;
  };
  // One decoder step: embedded (B, E), h (B, H), keys = attention->project_keys(memory) (B, L, A),
  // memory (B, L, D).
  Step step(const Variable& embedded, const Variable& h, const Variable& keys, const Variable& memory);
  Generator gen_;  // the initial weights; held because layers keep a pointer to it (for dropout)
};

}  // namespace saccade::examples
