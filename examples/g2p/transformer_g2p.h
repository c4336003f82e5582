#pragma once
// The `transformer` model (Vaswani et al. 2017, "Attention is all you need", section 3; d2l section 11.7):
// letter and phone embeddings scaled by √d_model plus sinusoidal positions, a stack of encoder blocks over
// the letters (padding masked by valid_lens), a stack of decoder blocks with causal self-attention and
// cross-attention to the letters, and a linear output layer. Decoding keeps each decoder block's
// self-attention keys and values in a KV cache.
#include <cstdint>
#include <memory>

#include "examples/g2p/model.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/positional.h"
#include "nn/transformer.h"
#include "ops/random.h"

namespace saccade::examples {

/// Children: src_embedding (29, d_model), src_pos, encoder TransformerEncoder(d_model, ffn, heads, layers),
/// tgt_embedding (V, d_model), tgt_pos, decoder TransformerDecoder(same), output Linear(d_model, V).
class TransformerG2P : public G2PModel {
 public:
  TransformerG2P(const G2PConfig& config, uint64_t seed);
  Variable forward(const Tensor& letters, const Tensor& lens, const Tensor& phones_in) override;
  Tensor last_alignment() const override;
  std::unique_ptr<DecodeState> start(const Tensor& letters, const Tensor& lens) override;
  Tensor step(DecodeState& state, const Tensor& tokens) override;
  void reorder(DecodeState& state, const Tensor& rows) override;

  std::shared_ptr<nn::Embedding> src_embedding, tgt_embedding;
  std::shared_ptr<nn::PositionalEncoding> src_pos, tgt_pos;
  std::shared_ptr<nn::TransformerEncoder> encoder;
  std::shared_ptr<nn::TransformerDecoder> decoder;
  std::shared_ptr<nn::Linear> output;

 private:
  Variable encode(const Tensor& letters, const Tensor& lens);
  Variable embed_phones(const Tensor& phones, int64_t offset);
  Generator gen_;
};

}  // namespace saccade::examples
