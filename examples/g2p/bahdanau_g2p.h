#pragma once
// The `bahdanau` model (Bahdanau, Cho and Bengio 2015, "Neural Machine Translation by Jointly Learning to
// Align and Translate", section 3; d2l section 11.4): a bidirectional GRU reads the letters, and a GRU
// decoder emits the phones, at each step querying the letters' encodings with its previous state through
// additive attention (nn::BahdanauDecoderCell). Padding is masked through valid_lens in the encoder (the
// reverse direction starts at each word's last letter) and in the attention.
#include <cstdint>
#include <memory>

#include "examples/g2p/model.h"
#include "nn/bahdanau.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/rnn.h"
#include "ops/random.h"

namespace saccade::examples {

/// Children: src_embedding (29, embed), encoder GRU(embed, hidden, bidirectional), init_state Linear(2
/// hidden, hidden) (s_0 = tanh(W [h→_S; h←_1]), as Bahdanau et al.'s appendix A.2.2 with both directions),
/// tgt_embedding (V, embed), decoder BahdanauDecoderCell(embed, hidden, enc_hiddens = 2 hidden), output
/// Linear(hidden + 2 hidden, V) over [s_t; c_t]. Dropout on the embeddings and before the output layer.
class BahdanauG2P : public G2PModel {
 public:
  BahdanauG2P(const G2PConfig& config, uint64_t seed);
  Variable forward(const Tensor& letters, const Tensor& lens, const Tensor& phones_in) override;
  Tensor last_alignment() const override { return alignment_; }
  std::unique_ptr<DecodeState> start(const Tensor& letters, const Tensor& lens) override;
  Tensor step(DecodeState& state, const Tensor& tokens) override;
  void reorder(DecodeState& state, const Tensor& rows) override;

  std::shared_ptr<nn::Embedding> src_embedding, tgt_embedding;
  std::shared_ptr<nn::GRU> encoder;
  std::shared_ptr<nn::Linear> init_state;
  std::shared_ptr<nn::BahdanauDecoderCell> decoder;
  std::shared_ptr<nn::Linear> output;

 private:
  struct Encoded {
    Variable memory;  // (B, S, 2H)
    Variable hidden;  // (B, H): s_0
  };
  Encoded encode(const Tensor& letters, const Tensor& lens);
  Generator gen_;
  Tensor alignment_;
};

}  // namespace saccade::examples
