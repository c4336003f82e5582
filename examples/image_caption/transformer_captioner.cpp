#include "examples/image_caption/transformer_captioner.h"

#include <cmath>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/shape.h"
#include "examples/common/scenes.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/join.h"
#include "ops/reduce.h"

namespace saccade::examples {

TransformerCaptioner::TransformerCaptioner(const CaptionConfig& config, uint64_t seed)
    : Captioner("TransformerCaptioner"), gen_(seed) {
  config_ = config;
  const int64_t V = Vocab().size(), D = config.d_model;
  encoder = register_module("encoder",
                            std::make_shared<GridEncoder>(config.conv1, config.conv2, config.grid, D, &gen_));
  embedding = register_module("embedding", std::make_shared<nn::Embedding>(V, D, std::nullopt, &gen_));
  pos = register_module(
      "pos", std::make_shared<nn::PositionalEncoding>(D, config.dropout, kMaxCaptionTokens, &gen_));
  decoder = register_module("decoder", std::make_shared<nn::TransformerDecoder>(D, config.ffn, config.heads,
                                                                                config.layers, config.dropout,
                                                                                /*use_bias=*/true, &gen_));
  output = register_module("output", std::make_shared<nn::Linear>(D, V, true, &gen_));
}

Variable TransformerCaptioner::encode(const Tensor& images) { return encoder->forward(images); }

Variable TransformerCaptioner::embed(const Tensor& tokens, int64_t offset) {
  const double scale = std::sqrt(static_cast<double>(config_.d_model));
  return pos->forward(embedding->forward(tokens) * scale, offset);
}

Variable TransformerCaptioner::decode(const Variable& memory, const Tensor& tokens) {
  // memory (B, L, D), tokens (B, T) -> logits (B, T, V); the decoder's self-attention is causal.
  return output->forward(decoder->forward(embed(tokens, 0), memory));
}

GreedyOutput TransformerCaptioner::greedy(const Variable& memory, int64_t max_len) {
  const int64_t B = memory.size(0);
  nn::TransformerDecoder::State state = decoder->init_state();
  Tensor current = ops::full({B, 1}, static_cast<double>(Vocab::kBos), DType::Int64, memory.device());
  Tensor done = ops::zeros({B, 1}, DType::Bool, memory.device());
  std::vector<Tensor> tokens, weights;
  // the cross-attention maps are returned: ask the last block to keep them (need_weights) during the call
  auto& cross = decoder->blks.back()->attention2;
  const std::optional<bool> kept = cross->need_weights;
  cross->need_weights = true;
  for (int64_t t = 0; t < max_len; ++t) {
    Variable y = decoder->step(embed(current, t), memory, Tensor(), state);  // (B, 1, D)
    Tensor next = ops::argmax(output->forward(y).data(), 2);                 // (B, 1)
    next = ops::where(done, ops::full_like(next, static_cast<double>(Vocab::kPad)), next);
    tokens.push_back(next.reshape({B}));
    // The last block's cross-attention (B, heads, 1, L), averaged over the heads -> (B, L).
    weights.push_back(ops::mean(cross->attention_weights(), {1, 2}));
    done = ops::logical_or(done, ops::eq(next, static_cast<double>(Vocab::kEos)));
    current = next;
    if (ops::min(done.to(DType::Int64)).item<int64_t>() == 1) break;
  }
  cross->need_weights = kept;
  return {ops::stack(tokens, 1), ops::stack(weights, 1)};
}

}  // namespace saccade::examples
