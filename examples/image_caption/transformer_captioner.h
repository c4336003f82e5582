#pragma once
// The transformer captioner: the sat model's CNN grid encoder (with its 2-d sinusoidal grid encoding) and a
// transformer decoder (Vaswani et al. 2017, section 3.1; d2l section 11.7.3): embedded caption tokens
// scaled by sqrt(d_model) plus 1-d sinusoidal positions, then `layers` blocks of causal masked multi-head
// self-attention, multi-head cross-attention to the grid, and a position-wise FFN, each with residual +
// layer norm, and a linear layer to the vocabulary. Greedy decoding steps the decoder incrementally
// (nn::TransformerDecoder::step with its key/value caches). The attention reported per token (for the
// pictures and the localization metric) is the last block's cross-attention averaged over its heads.
#include <cstdint>
#include <memory>

#include "examples/image_caption/captioner.h"
#include "examples/image_caption/encoder.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/positional.h"
#include "nn/transformer.h"

namespace saccade::examples {

/// Children: encoder (GridEncoder), embedding, pos (PositionalEncoding), decoder (TransformerDecoder with
/// biases), output (Linear d_model -> vocabulary).
class TransformerCaptioner : public Captioner {
 public:
  /// Throws saccade::Error for settings the layers reject (e.g. heads not dividing d_model).
  TransformerCaptioner(const CaptionConfig& config, uint64_t seed);
  Variable encode(const Tensor& images) override;
  Variable decode(const Variable& memory, const Tensor& tokens) override;
  GreedyOutput greedy(const Variable& memory, int64_t max_len) override;
  int64_t grid_size() const override { return encoder->grid(); }

  std::shared_ptr<GridEncoder> encoder;
  std::shared_ptr<nn::Embedding> embedding;
  std::shared_ptr<nn::PositionalEncoding> pos;
  std::shared_ptr<nn::TransformerDecoder> decoder;
  std::shared_ptr<nn::Linear> output;

 private:
  // tokens (B, T) at positions offset.. -> (B, T, D): embedding * sqrt(D) + positions.
  Variable embed(const Tensor& tokens, int64_t offset);
  Generator gen_;  // drives dropout; must outlive the children that hold a pointer to it
};

}  // namespace saccade::examples
