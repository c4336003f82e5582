#include "examples/g2p/bahdanau_g2p.h"

#include "autograd/functions/elementwise.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "examples/g2p/data.h"
#include "ops/index.h"
#include "ops/join.h"
#include "ops/nn.h"

namespace saccade::examples {
namespace {

struct BahdanauState : DecodeState {
  Variable memory, hidden;  // (N, S, 2H), (N, H)
  Variable keys;            // (N, S, H): W_k memory, projected once per word
  Tensor lens;              // (N)
};

}  // namespace

BahdanauG2P::BahdanauG2P(const G2PConfig& config, uint64_t seed) : G2PModel("BahdanauG2P"), gen_(seed) {
  config_ = config;
  const int64_t E = config.embed, H = config.hidden;
  const int64_t V = G2PVocab::from_string(config.phones).num_phones();
  src_embedding = register_module(
      "src_embedding", std::make_shared<nn::Embedding>(G2PVocab::num_letters(), E, std::nullopt, &gen_));
  encoder = register_module("encoder",
                            std::make_shared<nn::GRU>(E, H, nn::GRUOptions{.bidirectional = true}, &gen_));
  init_state = register_module("init_state", std::make_shared<nn::Linear>(2 * H, H, true, &gen_));
  tgt_embedding =
      register_module("tgt_embedding", std::make_shared<nn::Embedding>(V, E, std::nullopt, &gen_));
  decoder = register_module("decoder",
                            std::make_shared<nn::BahdanauDecoderCell>(E, H, 2 * H, config.dropout, &gen_));
  output = register_module("output", std::make_shared<nn::Linear>(3 * H, V, true, &gen_));
}

// letters (B, S), lens (B) -> memory (B, S, 2H), s_0 (B, H)
BahdanauG2P::Encoded BahdanauG2P::encode(const Tensor& letters, const Tensor& lens) {
  Variable x = dropout(src_embedding->forward(letters), config_.dropout, is_training(), &gen_);
  nn::GRUOutput o = encoder->forward(x, Variable(), lens);
  Variable last =
      cat({select(o.h_n, 0, 0), select(o.h_n, 0, 1)}, 1);  // [h→ at the last letter; h← at the first]
  return {o.output, tanh(init_state->forward(last))};
}

// letters (B, S), lens (B), phones_in (B, T) -> logits (B, T, V)
Variable BahdanauG2P::forward(const Tensor& letters, const Tensor& lens, const Tensor& phones_in) {
  Encoded enc = encode(letters, lens);
  Variable embedded = dropout(tgt_embedding->forward(phones_in), config_.dropout, is_training(), &gen_);
  Variable h = enc.hidden;
  // W_k memory once for all steps (it was projected again at every step: half the step's GEMM FLOPs)
  Variable keys = decoder->project_keys(enc.memory);
  std::vector<Variable> outs;
  std::vector<Tensor> weights;
  for (int64_t t = 0; t < phones_in.size(1); ++t) {
    nn::BahdanauStep s = decoder->step(select(embedded, 1, t), h, enc.memory, keys, lens);
    h = s.hidden;
    outs.push_back(cat({s.hidden, s.context}, 1));
    weights.push_back(s.weights.data());
  }
  alignment_ = ops::stack(weights, 1);  // (B, T, S)
  // One (B T, 3H) x (3H, V) product for all steps.
  return output->forward(dropout(stack(outs, 1), config_.dropout, is_training(), &gen_));
}

std::unique_ptr<DecodeState> BahdanauG2P::start(const Tensor& letters, const Tensor& lens) {
  auto s = std::make_unique<BahdanauState>();
  Encoded enc = encode(letters, lens);
  s->memory = enc.memory;
  s->hidden = enc.hidden;
  s->keys = decoder->project_keys(enc.memory);
  s->lens = lens;
  return s;
}

// tokens (N) -> log-probabilities (N, V)
Tensor BahdanauG2P::step(DecodeState& state, const Tensor& tokens) {
  auto& s = dynamic_cast<BahdanauState&>(state);
  nn::BahdanauStep r = decoder->step(tgt_embedding->forward(tokens), s.hidden, s.memory, s.keys, s.lens);
  s.hidden = r.hidden;
  Tensor logits = output->forward(cat({r.hidden, r.context}, 1)).data();
  return ops::log_softmax(logits, 1).to(Device::cpu()).contiguous();
}

void BahdanauG2P::reorder(DecodeState& state, const Tensor& rows) {
  auto& s = dynamic_cast<BahdanauState&>(state);
  Tensor r = rows.to(s.hidden.device());
  s.memory = Variable(ops::index_select(s.memory.data(), 0, r));
  s.hidden = Variable(ops::index_select(s.hidden.data(), 0, r));
  s.keys = Variable(ops::index_select(s.keys.data(), 0, r));
  s.lens = ops::index_select(s.lens, 0, rows.to(s.lens.device()));
}

}  // namespace saccade::examples
