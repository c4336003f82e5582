#include "examples/image_caption/sat.h"

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "examples/common/scenes.h"
#include "nn/init.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/join.h"
#include "ops/reduce.h"

namespace saccade::examples {

SatCaptioner::SatCaptioner(const CaptionConfig& config, uint64_t seed) : Captioner("SatCaptioner") {
  config_ = config;
  Generator gen(seed);
  const int64_t V = Vocab().size(), D = config.d_model, E = config.embed, H = config.hidden,
                A = config.attn_hidden;
  encoder_ = register_module("encoder",
                             std::make_shared<GridEncoder>(config.conv1, config.conv2, config.grid, D, &gen));
  auto p = [&](const char* name, const Shape& shape) { return register_parameter(name, ops::empty(shape)); };
  embed_ = p("embedding", {V, E});
  nn::init::normal_(embed_.data(), 0, 1, &gen);
  init_w_ = p("init_weight", {H, D}), init_b_ = p("init_bias", {H});
  att_wq_ = p("att_wq", {A, H}), att_wk_ = p("att_wk", {A, D}), att_wv_ = p("att_wv", {1, A});
  gru_wih_ = p("gru_weight_ih", {3 * H, E + D}), gru_bih_ = p("gru_bias_ih", {3 * H});
  gru_whh_ = p("gru_weight_hh", {3 * H, H}), gru_bhh_ = p("gru_bias_hh", {3 * H});
  out_w_ = p("out_weight", {V, H + D}), out_b_ = p("out_bias", {V});
  nn::init::linear_default_init_(init_w_.data(), init_b_.data(), &gen);
  for (const Variable& w : {att_wq_, att_wk_, att_wv_})
    nn::init::linear_default_init_(w.data(), Tensor(), &gen);
  // torch.nn.GRUCell: every weight and bias ~ U(-1/sqrt(H), 1/sqrt(H)).
  double bound = 1 / std::sqrt(static_cast<double>(H));
  for (const Variable& w : {gru_wih_, gru_bih_, gru_whh_, gru_bhh_})
    nn::init::uniform_(w.data(), -bound, bound, &gen);
  nn::init::linear_default_init_(out_w_.data(), out_b_.data(), &gen);
}

Variable SatCaptioner::encode(const Tensor& images) { return encoder_->forward(images); }

Variable SatCaptioner::initial_state(const Variable& memory) {
  return tanh(linear(mean(memory, {1}), init_w_, init_b_));
}

SatCaptioner::Step SatCaptioner::step(const Variable& embedded, const Variable& h, const Variable& keys,
                                      const Variable& memory) {
  // embedded (B, E), h (B, H), keys (B, L, A), memory (B, L, D)
  const int64_t B = h.size(0), L = memory.size(1), D = memory.size(2), H = h.size(1);
  Variable q = unsqueeze(linear(h, att_wq_), 1);                       // (B, 1, A)
  Variable scores = reshape(linear(tanh(keys + q), att_wv_), {B, L});  // (B, L)
  Variable alpha = softmax(scores, 1);                                 // (B, L)
  Variable context = reshape(bmm(reshape(alpha, {B, 1, L}), memory), {B, D});
  // GRU cell (as torch.nn.GRUCell): r, z, n gates.
  Variable gi = linear(cat({embedded, context}, 1), gru_wih_, gru_bih_);  // (B, 3H)
  Variable gh = linear(h, gru_whh_, gru_bhh_);
  Variable r = sigmoid(narrow(gi, 1, 0, H) + narrow(gh, 1, 0, H));
  Variable z = sigmoid(narrow(gi, 1, H, H) + narrow(gh, 1, H, H));
  Variable n = tanh(narrow(gi, 1, 2 * H, H) + r * narrow(gh, 1, 2 * H, H));
  return {n + z * (h - n), context, alpha};
}

Variable SatCaptioner::decode(const Variable& memory, const Tensor& tokens) {
  // memory (B, L, D), tokens (B, T) -> logits (B, T, V)
  const int64_t T = tokens.size(1);
  Variable keys = linear(memory, att_wk_);  // (B, L, A), once for all steps
  Variable embedded = embedding(embed_, tokens);
  Variable h = initial_state(memory);
  std::vector<Variable> outputs;
  for (int64_t t = 0; t < T; ++t) {
    Step s = step(select(embedded, 1, t), h, keys, memory);
    h = s.h;
    outputs.push_back(cat({s.h, s.context}, 1));
  }
  return linear(stack(outputs, 1), out_w_, out_b_);
}

GreedyOutput SatCaptioner::greedy(const Variable& memory, int64_t max_len) {
  const int64_t B = memory.size(0);
  Variable keys = linear(memory, att_wk_);
  Variable h = initial_state(memory);
  Tensor current = ops::full({B}, static_cast<double>(Vocab::kBos), DType::Int64, memory.device());
  Tensor done = ops::zeros({B}, DType::Bool, memory.device());
  std::vector<Tensor> tokens, weights;
  for (int64_t t = 0; t < max_len; ++t) {
    Step s = step(embedding(embed_, current), h, keys, memory);
    h = s.h;
    Tensor next = ops::argmax(linear(cat({s.h, s.context}, 1), out_w_, out_b_).data(), 1);
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
