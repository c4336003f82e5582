#include "examples/g2p/transformer_g2p.h"

#include <cmath>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/shape.h"
#include "examples/g2p/data.h"
#include "nn/init.h"
#include "ops/index.h"
#include "ops/nn.h"

namespace saccade::examples {
namespace {

// Positions a word or pronunciation can reach (the longest word has 22 letters, pronunciation 20 phones).
constexpr int64_t kMaxPositions = 64;

struct TransformerState : DecodeState {
  Variable memory;  // (N, S, D)
  Tensor lens;      // (N)
  nn::TransformerDecoder::State decoder;
};

}  // namespace

TransformerG2P::TransformerG2P(const G2PConfig& config, uint64_t seed)
    : G2PModel("TransformerG2P"), gen_(seed) {
  config_ = config;
  const int64_t D = config.d_model;
  const int64_t V = G2PVocab::from_string(config.phones).num_phones();
  src_embedding = register_module(
      "src_embedding", std::make_shared<nn::Embedding>(G2PVocab::num_letters(), D, std::nullopt, &gen_));
  src_pos = register_module(
      "src_pos", std::make_shared<nn::PositionalEncoding>(D, config.dropout, kMaxPositions, &gen_));
  encoder = register_module(
      "encoder", std::make_shared<nn::TransformerEncoder>(D, config.ffn, config.heads, config.layers,
                                                          config.dropout, false, &gen_));
  tgt_embedding =
      register_module("tgt_embedding", std::make_shared<nn::Embedding>(V, D, std::nullopt, &gen_));
  tgt_pos = register_module(
      "tgt_pos", std::make_shared<nn::PositionalEncoding>(D, config.dropout, kMaxPositions, &gen_));
  decoder = register_module(
      "decoder", std::make_shared<nn::TransformerDecoder>(D, config.ffn, config.heads, config.layers,
                                                          config.dropout, false, &gen_));
  output = register_module("output", std::make_shared<nn::Linear>(D, V, true, &gen_));
  // Embeddings drawn from N(0, 1/D), so that after the ×√D of encode/embed_phones they have unit scale, as
  // the sinusoidal positions do (Vaswani et al. 2017 §3.4; fairseq's init). nn::Embedding's N(0, 1), times
  // √128 ≈ 11, drowns the positions: measured with the default setting, validation WER 0.94 / 0.86 after
  // 500 / 1000 steps with N(0, 1), 0.67 / 0.55 with N(0, 1/D).
  nn::init::normal_(src_embedding->weight.data(), 0, 1 / std::sqrt(static_cast<double>(D)), &gen_);
  nn::init::normal_(tgt_embedding->weight.data(), 0, 1 / std::sqrt(static_cast<double>(D)), &gen_);
}

// letters (B, S), lens (B) -> memory (B, S, D)
Variable TransformerG2P::encode(const Tensor& letters, const Tensor& lens) {
  const double scale = std::sqrt(static_cast<double>(config_.d_model));
  return encoder->forward(src_pos->forward(src_embedding->forward(letters) * scale), lens);
}

// phones (B, T) at positions offset.. -> (B, T, D)
Variable TransformerG2P::embed_phones(const Tensor& phones, int64_t offset) {
  const double scale = std::sqrt(static_cast<double>(config_.d_model));
  return tgt_pos->forward(tgt_embedding->forward(phones) * scale, offset);
}

// letters (B, S), lens (B), phones_in (B, T) -> logits (B, T, V)
Variable TransformerG2P::forward(const Tensor& letters, const Tensor& lens, const Tensor& phones_in) {
  Variable memory = encode(letters, lens);
  return output->forward(decoder->forward(embed_phones(phones_in, 0), memory, lens));
}

Tensor TransformerG2P::last_alignment() const { return decoder->blks.back()->cross_attention_weights(); }

std::unique_ptr<DecodeState> TransformerG2P::start(const Tensor& letters, const Tensor& lens) {
  auto s = std::make_unique<TransformerState>();
  s->memory = encode(letters, lens);
  s->lens = lens;
  s->decoder = decoder->init_state();
  return s;
}

// tokens (N) -> log-probabilities (N, V)
Tensor TransformerG2P::step(DecodeState& state, const Tensor& tokens) {
  auto& s = dynamic_cast<TransformerState&>(state);
  Variable x = embed_phones(tokens.unsqueeze(1), s.decoder.length());  // (N, 1, D)
  Variable y = decoder->step(x, s.memory, s.lens, s.decoder);          // (N, 1, D)
  Tensor logits = output->forward(select(y, 1, 0)).data();             // (N, V)
  return ops::log_softmax(logits, 1).to(Device::cpu()).contiguous();
}

void TransformerG2P::reorder(DecodeState& state, const Tensor& rows) {
  auto& s = dynamic_cast<TransformerState&>(state);
  Tensor r = rows.to(s.memory.device());
  s.memory = Variable(ops::index_select(s.memory.data(), 0, r));
  s.lens = ops::index_select(s.lens, 0, rows.to(s.lens.device()));
  for (nn::KVCache& c : s.decoder.caches) c.reorder(r);
}

}  // namespace saccade::examples
