#include "nn/transformer.h"

#include <cctype>
#include <string>

namespace saccade::nn {

namespace {

void check_x(const char* op, const Variable& X, int64_t d) {
  SACCADE_CHECK(X.defined() && X.dim() == 3 && X.size(2) == d, "{}: expected X of shape (B, T, {}), got {}",
                op, d, X.defined() ? X.shape() : Shape{});
}

// A child "blks" whose children are "0", "1", ... (torch's ModuleList naming: blks.0.attention.W_q.weight).
std::shared_ptr<Module> module_list(Module& parent) {
  return parent.register_module("blks", std::make_shared<Module>("ModuleList"));
}

}  // namespace

// ---- TransformerEncoderBlock ----

TransformerEncoderBlock::TransformerEncoderBlock(int64_t num_hiddens, int64_t ffn_num_hiddens,
                                                 int64_t num_heads, double dropout, bool use_bias,
                                                 Generator* gen)
    : Module("TransformerEncoderBlock") {
  ErrorScope scope(name());
  attention = register_module(
      "attention", std::make_shared<MultiHeadAttention>(
                       num_hiddens, num_heads,
                       MultiHeadAttentionOptions{.dropout = dropout, .bias = use_bias, .generator = gen}));
  addnorm1 = register_module("addnorm1", std::make_shared<AddNorm>(num_hiddens, dropout, gen));
  ffn = register_module("ffn",
                        std::make_shared<PositionWiseFFN>(num_hiddens, ffn_num_hiddens, num_hiddens, gen));
  addnorm2 = register_module("addnorm2", std::make_shared<AddNorm>(num_hiddens, dropout, gen));
}

// X: (B, T, D) -> (B, T, D)
Variable TransformerEncoderBlock::forward(const Variable& X, const Tensor& valid_lens_or_mask) {
  ErrorScope scope(name(), {shape_of(X), shape_of(valid_lens_or_mask)});
  check_x("TransformerEncoderBlock", X, attention->num_hiddens());
  Variable Y = addnorm1->forward(X, attention->forward(X, X, X, valid_lens_or_mask));
  return addnorm2->forward(Y, ffn->forward(Y));
}

// ---- TransformerDecoderBlock ----

TransformerDecoderBlock::TransformerDecoderBlock(int64_t num_hiddens, int64_t ffn_num_hiddens,
                                                 int64_t num_heads, double dropout, bool use_bias,
                                                 Generator* gen)
    : Module("TransformerDecoderBlock") {
  ErrorScope scope(name());
  attention1 = register_module(
      "attention1", std::make_shared<MultiHeadAttention>(
                        num_hiddens, num_heads,
                        MultiHeadAttentionOptions{.dropout = dropout, .bias = use_bias, .generator = gen}));
  addnorm1 = register_module("addnorm1", std::make_shared<AddNorm>(num_hiddens, dropout, gen));
  attention2 = register_module(
      "attention2", std::make_shared<MultiHeadAttention>(
                        num_hiddens, num_heads,
                        MultiHeadAttentionOptions{.dropout = dropout, .bias = use_bias, .generator = gen}));
  addnorm2 = register_module("addnorm2", std::make_shared<AddNorm>(num_hiddens, dropout, gen));
  ffn = register_module("ffn",
                        std::make_shared<PositionWiseFFN>(num_hiddens, ffn_num_hiddens, num_hiddens, gen));
  addnorm3 = register_module("addnorm3", std::make_shared<AddNorm>(num_hiddens, dropout, gen));
}

void TransformerDecoderBlock::check(const Variable& X, const Variable& enc_outputs) const {
  const char* op = "TransformerDecoderBlock";
  const int64_t d = attention1->num_hiddens();
  check_x(op, X, d);
  SACCADE_CHECK(enc_outputs.defined() && enc_outputs.dim() == 3 && enc_outputs.size(0) == X.size(0) &&
                    enc_outputs.size(2) == d,
                "{}: expected enc_outputs of shape ({}, Tk, {}) for X {}, got {}", op, X.size(0), d,
                X.shape(), enc_outputs.defined() ? enc_outputs.shape() : Shape{});
}

// X, Y: (B, T, D) (input and self-attention output), enc_outputs: (B, Tk, D) -> (B, T, D)
Variable TransformerDecoderBlock::finish(const Variable& X, const Variable& Y, const Variable& enc_outputs,
                                         const Tensor& enc_valid_lens) {
  Variable Y1 = addnorm1->forward(X, Y);
  Variable Z = addnorm2->forward(Y1, attention2->forward(Y1, enc_outputs, enc_outputs, enc_valid_lens));
  return addnorm3->forward(Z, ffn->forward(Z));
}

// X: (B, T, D), enc_outputs: (B, Tk, D) -> (B, T, D)
Variable TransformerDecoderBlock::forward(const Variable& X, const Variable& enc_outputs,
                                          const Tensor& enc_valid_lens) {
  ErrorScope scope(name(), {shape_of(X), shape_of(enc_outputs), shape_of(enc_valid_lens)});
  check(X, enc_outputs);
  return finish(X, attention1->forward(X, X, X, Tensor(), /*causal=*/true), enc_outputs, enc_valid_lens);
}

// X: (B, Tn, D) new positions, enc_outputs: (B, Tk, D), cache: (B, H, t, d) -> (B, Tn, D)
Variable TransformerDecoderBlock::step(const Variable& X, const Variable& enc_outputs,
                                       const Tensor& enc_valid_lens, KVCache& cache) {
  ErrorScope scope(name(), {shape_of(X), shape_of(enc_outputs), shape_of(enc_valid_lens)});
  check(X, enc_outputs);
  return finish(X, attention1->forward_cached(X, X, X, cache, Tensor(), /*causal=*/true), enc_outputs,
                enc_valid_lens);
}

// ---- stacks ----

TransformerEncoder::TransformerEncoder(int64_t num_hiddens, int64_t ffn_num_hiddens, int64_t num_heads,
                                       int64_t num_blks, double dropout, bool use_bias, Generator* gen)
    : Module("TransformerEncoder") {
  ErrorScope scope(name());
  SACCADE_CHECK(num_blks > 0, "TransformerEncoder: num_blks must be positive, got {}", num_blks);
  auto list = module_list(*this);
  for (int64_t i = 0; i < num_blks; ++i)
    blks.push_back(list->register_module(
        std::to_string(i), std::make_shared<TransformerEncoderBlock>(num_hiddens, ffn_num_hiddens, num_heads,
                                                                     dropout, use_bias, gen)));
}

Variable TransformerEncoder::forward(const Variable& X, const Tensor& valid_lens_or_mask) {
  ErrorScope scope(name(), {shape_of(X), shape_of(valid_lens_or_mask)});
  Variable Y = X;
  for (auto& b : blks) Y = b->forward(Y, valid_lens_or_mask);
  return Y;
}

std::vector<Tensor> TransformerEncoder::attention_weights() const {
  std::vector<Tensor> w;
  for (auto& b : blks) w.push_back(b->attention_weights());
  return w;
}

TransformerDecoder::TransformerDecoder(int64_t num_hiddens, int64_t ffn_num_hiddens, int64_t num_heads,
                                       int64_t num_blks, double dropout, bool use_bias, Generator* gen)
    : Module("TransformerDecoder") {
  ErrorScope scope(name());
  SACCADE_CHECK(num_blks > 0, "TransformerDecoder: num_blks must be positive, got {}", num_blks);
  auto list = module_list(*this);
  for (int64_t i = 0; i < num_blks; ++i)
    blks.push_back(list->register_module(
        std::to_string(i), std::make_shared<TransformerDecoderBlock>(num_hiddens, ffn_num_hiddens, num_heads,
                                                                     dropout, use_bias, gen)));
}

Variable TransformerDecoder::forward(const Variable& X, const Variable& enc_outputs,
                                     const Tensor& enc_valid_lens) {
  ErrorScope scope(name(), {shape_of(X), shape_of(enc_outputs), shape_of(enc_valid_lens)});
  Variable Y = X;
  for (auto& b : blks) Y = b->forward(Y, enc_outputs, enc_valid_lens);
  return Y;
}

Variable TransformerDecoder::step(const Variable& X, const Variable& enc_outputs,
                                  const Tensor& enc_valid_lens, State& state) {
  ErrorScope scope(name(), {shape_of(X), shape_of(enc_outputs), shape_of(enc_valid_lens)});
  SACCADE_CHECK(state.caches.size() == blks.size(),
                "TransformerDecoder: the state has {} caches for {} blocks", state.caches.size(),
                blks.size());
  Variable Y = X;
  for (size_t i = 0; i < blks.size(); ++i) Y = blks[i]->step(Y, enc_outputs, enc_valid_lens, state.caches[i]);
  return Y;
}

std::vector<Tensor> TransformerDecoder::self_attention_weights() const {
  std::vector<Tensor> w;
  for (auto& b : blks) w.push_back(b->self_attention_weights());
  return w;
}

std::vector<Tensor> TransformerDecoder::cross_attention_weights() const {
  std::vector<Tensor> w;
  for (auto& b : blks) w.push_back(b->cross_attention_weights());
  return w;
}

StateDict from_d2l_names(const StateDict& dict) {
  StateDict out;
  for (const auto& [key, t] : dict) {
    std::string k = key;
    for (size_t pos = 0; (pos = k.find("blks.block", pos)) != std::string::npos;) {
      const bool at_start = pos == 0 || k[pos - 1] == '.';
      size_t digits = pos + 10, end = digits;
      while (end < k.size() && std::isdigit(static_cast<unsigned char>(k[end]))) ++end;
      if (at_start && end > digits && end < k.size() && k[end] == '.')
        k.replace(pos, 10, "blks.");  // "blks.block3." -> "blks.3."
      pos += 5;
    }
    SACCADE_CHECK(!out.contains(k), "from_d2l_names: keys '{}' and another both map to '{}'", key, k);
    out.insert(k, t);
  }
  return out;
}

}  // namespace saccade::nn
