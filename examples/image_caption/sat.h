#pragma once
// Show, attend and tell (Xu et al. 2015, "Show, Attend and Tell: Neural Image Caption Generation with Visual
// Attention", section 3.1.2 with soft attention): a GRU decoder that, before emitting each word, attends over
// the encoder's grid with additive attention (Bahdanau et al. 2015, eq. 6):
//   alpha_t = softmax_i(w_v^T tanh(W_k m_i + W_q h_{t-1})),   c_t = sum_i alpha_t,i m_i,
//   h_t = GRU([embed(y_{t-1}), c_t], h_{t-1}),                 logits_t = W_o [h_t, c_t] + b_o,
// with h_0 = tanh(W_init mean_i(m_i) + b_init) (eq. 5's initialisation from the mean annotation).
#include <cstdint>
#include <memory>

#include "examples/image_caption/captioner.h"
#include "examples/image_caption/encoder.h"

namespace saccade::examples {

class SatCaptioner : public Captioner {
 public:
  SatCaptioner(const CaptionConfig& config, uint64_t seed);
  Variable encode(const Tensor& images) override;
  Variable decode(const Variable& memory, const Tensor& tokens) override;
  GreedyOutput greedy(const Variable& memory, int64_t max_len) override;
  int64_t grid_size() const override { return encoder_->grid(); }

 private:
  struct Step {
    Variable h, context, alpha;
  };
  // One decoder step: attention with h_{t-1} over memory (keys = W_k memory, precomputed), then the GRU.
  Step step(const Variable& embedded, const Variable& h, const Variable& keys, const Variable& memory);
  Variable initial_state(const Variable& memory);

  std::shared_ptr<GridEncoder> encoder_;
  Variable embed_, init_w_, init_b_, att_wq_, att_wk_, att_wv_, gru_wih_, gru_bih_, gru_whh_, gru_bhh_,
      out_w_, out_b_;
};

}  // namespace saccade::examples
