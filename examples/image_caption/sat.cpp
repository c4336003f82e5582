#include "examples/image_caption/sat.h"

#include "autograd/functions/elementwise.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "examples/common/scenes.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/join.h"
#include "ops/reduce.h"

namespace saccade::examples {

SatCaptioner::SatCaptioner(const CaptionConfig& config, uint64_t seed)
    : Captioner("SatCaptioner"), gen_(seed) {
  config_ = config;
  Generator& gen = gen_;
  const int64_t V = Vocab().size(), D = config.d_model, E = config.embed, H = config.hidden;
  encoder = register_module("encoder",
                            std::make_shared<GridEncoder>(config.conv1, config.conv2, config.grid, D, &gen));
  embedding = register_module("embedding", std::make_shared<nn::Embedding>(V, E, std::nullopt, &gen));
  init_h = register_module("init_h", std::make_shared<nn::Linear>(D, H, true, &gen));
  attention = register_module("attention",
                              std::make_shared<nn::AdditiveAttention>(D, H, config.attn_hidden, 0.0, &gen));
  rnn = register_module("rnn", std::make_shared<nn::GRUCell>(E + D, H, true, &gen));
  output = register_module("output", std::make_shared<nn::Linear>(H + D, V, true, &gen));
}

Variable SatCaptioner::encode(const Tensor& images) { return encoder->forward(images); }

SatCaptioner::Step SatCaptioner::step(const Variable& embedded, const Variable& h, const Variable& keys,
                                      const Variable& memory) {
  // embedded (B, E), h (B, H), keys (B, L, A) = attention->project_keys(memory), memory (B, L, D)
  // h is the one query: output (B, 1, D), weights (B, 1, L)
  nn::AttentionOutput a = attention->forward_projected(unsqueeze(h, 1), keys, memory);
  Variable context = squeeze(a.output, 1), alpha = squeeze(a.weights, 1);  // (B, D), (B, L)
  return {rnn->forward(cat({embedded, context}, 1), h), context, alpha};
}

Variable SatCaptioner::decode(const Variable& memory, const Tensor& tokens) {
  // memory (B, L, D), tokens (B, T) -> logits (B, T, V)
  const int64_t T = tokens.size(1);
  Variable keys = attention->project_keys(memory);  // (B, L, A), once for all steps
  Variable embedded = embedding->forward(tokens);   // (B, T, E)
  Variable h = tanh(init_h->forward(mean(memory, {1})));
  std::vector<Variable> outputs;
  for (int64_t t = 0; t < T; ++t) {
    Step s = step(select(embedded, 1, t), h, keys, memory);
    h = s.h;
    outputs.push_back(cat({s.h, s.context}, 1));
  }
  return output->forward(stack(outputs, 1));  // one (B T, H + D) x (H + D, V) product for all steps
}

GreedyOutput SatCaptioner::greedy(const Variable& memory, int64_t max_len) {
  const int64_t B = memory.size(0);
  Variable keys = attention->project_keys(memory);
  Variable h = tanh(init_h->forward(mean(memory, {1})));
  Tensor current = ops::full({B}, static_cast<double>(Vocab::kBos), DType::Int64, memory.device());
  Tensor done = ops::zeros({B}, DType::Bool, memory.device());
  std::vector<Tensor> tokens, weights;
  for (int64_t t = 0; t < max_len; ++t) {
    Step s = step(embedding->forward(current), h, keys, memory);
    h = s.h;
    Tensor next = ops::argmax(output->forward(cat({s.h, s.context}, 1)).data(), 1);
    // Rows that already ended emit <pad>.
    next = ops::where(done, ops::full_like(next, static_cast<double>(Vocab::kPad)), next);
    tokens.push_back(next);
    weights.push_back(s.alpha.data());
    done = ops::logical_or(done, ops::eq(next, static_cast<double>(Vocab::kEos)));
    current = next;
    if (ops::min(done.to(DType::Int64)).item<int64_t>() == 1) break;
  }
  return {ops::stack(tokens, 1), ops::stack(weights, 1)};
}

}  // namespace saccade::examples
