// Transformer blocks and stacks (nn/transformer.h) and the Bahdanau decoder cell (nn/bahdanau.h): d2l's
// shape examples, permutation equivariance, causality, incremental = full-sequence decoding, gradchecks,
// bad input.
#include <cmath>

#include "helpers.h"
#include "nn/bahdanau.h"
#include "nn/transformer.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;

namespace attn_test {
// Defined in test_attention.cpp: gradcheck over the inputs and every parameter of `module`.
bool module_gradcheck(const std::function<Variable(const std::vector<Variable>&)>& f,
                      const std::vector<Variable>& inputs, nn::Module& module, double atol = 1e-5,
                      double rtol = 1e-3);
}  // namespace attn_test

namespace {

using attn_test::module_gradcheck;

Tensor i64(std::initializer_list<double> v, const Shape& s) { return ops::tensor(v, s, DType::Int64); }

}  // namespace

TEST_CASE("TransformerEncoderBlock reproduces d2l's shape example", "[transformer]") {
  nn::TransformerEncoderBlock blk(24, 48, 8, 0.5);
  blk.eval();
  Tensor X = ops::ones({2, 100, 24});
  REQUIRE(blk.forward(X, i64({3, 2}, {2})).shape() == Shape({2, 100, 24}));
  REQUIRE(blk.attention_weights().shape() == Shape({2, 8, 100, 100}));
  auto keys = blk.state_dict().keys();
  REQUIRE(keys.front() == "attention.W_q.weight");
  REQUIRE(std::find(keys.begin(), keys.end(), "ffn.dense1.weight") != keys.end());
  REQUIRE(std::find(keys.begin(), keys.end(), "addnorm2.ln.bias") != keys.end());
}

TEST_CASE("TransformerEncoderBlock is permutation equivariant without positional encoding", "[transformer]") {
  Generator g(1);
  nn::TransformerEncoderBlock blk(8, 12, 2, 0.0, true, &g);
  blk.to(DType::Float64);
  Tensor X = rand64({2, 5, 8}, 2);
  Tensor perm = ops::tensor({4, 2, 0, 3, 1}, DType::Int64);
  Tensor px = ops::index_select(X, 1, perm);
  REQUIRE(allclose(blk.forward(px).data(), ops::index_select(blk.forward(X).data(), 1, perm), 1e-12, 1e-12));
}

TEST_CASE("TransformerDecoderBlock output at t ignores targets after t", "[transformer]") {
  Generator g(3);
  nn::TransformerDecoderBlock blk(8, 16, 2, 0.0, false, &g);
  blk.to(DType::Float64);
  Tensor X = rand64({2, 6, 8}, 4), enc = rand64({2, 4, 8}, 5);
  Tensor Y = X.clone();
  Tensor tail = Y.narrow(1, 3, 3);
  ops::copy_(tail, rand64({2, 3, 8}, 6));
  Tensor lens = i64({4, 2}, {2});
  Tensor a = blk.forward(X, enc, lens).data(), b = blk.forward(Y, enc, lens).data();
  REQUIRE(allclose(a.narrow(1, 0, 3), b.narrow(1, 0, 3), 1e-13, 1e-13));
  REQUIRE_FALSE(allclose(a.narrow(1, 3, 3), b.narrow(1, 3, 3), 1e-6, 1e-6));
  // the encoder states beyond enc_valid_lens do not matter either
  Tensor enc2 = enc.clone();
  Tensor pad = enc2.select(0, 1).narrow(0, 2, 2);
  ops::copy_(pad, rand64({2, 8}, 7));
  REQUIRE(allclose(blk.forward(X, enc2, lens).data(), a, 1e-13, 1e-13));
  // in training mode the weights are kept only when asked for (need_weights); in eval mode by default
  REQUIRE_THROWS_WITH(blk.self_attention_weights(), Catch::Contains("need_weights = true"));
  blk.set_need_weights(true);
  REQUIRE(allclose(blk.forward(X, enc2, lens).data(), a, 1e-13, 1e-13));
  REQUIRE(blk.self_attention_weights().shape() == Shape({2, 2, 6, 6}));
  REQUIRE(blk.cross_attention_weights().shape() == Shape({2, 2, 6, 4}));
}

TEST_CASE("TransformerDecoder incremental decoding equals full-sequence decoding", "[transformer]") {
  Generator g(8);
  nn::TransformerDecoder dec(8, 16, 2, 3, 0.1, true, &g);
  dec.eval();
  dec.to(DType::Float64);
  Tensor X = rand64({2, 5, 8}, 9), enc = rand64({2, 4, 8}, 10);
  Tensor lens = i64({3, 4}, {2});
  Tensor full = dec.forward(X, enc, lens).data();
  auto state = dec.init_state();
  REQUIRE(state.caches.size() == 3);
  for (int64_t t = 0; t < 5; ++t) {
    Tensor y = dec.step(X.narrow(1, t, 1), enc, lens, state).data();
    REQUIRE(allclose(y, full.narrow(1, t, 1), 1e-12, 1e-12));
  }
  REQUIRE(state.length() == 5);
  REQUIRE(state.caches[2].keys().shape() == Shape({2, 2, 5, 4}));
  // several positions per step give the same numbers too
  auto state2 = dec.init_state();
  Tensor a = dec.step(X.narrow(1, 0, 2), enc, lens, state2).data();
  Tensor b = dec.step(X.narrow(1, 2, 3), enc, lens, state2).data();
  REQUIRE(allclose(ops::cat({a, b}, 1), full, 1e-12, 1e-12));
  auto keys = dec.state_dict().keys();
  REQUIRE(std::find(keys.begin(), keys.end(), "blks.2.attention2.W_o.bias") != keys.end());
  REQUIRE(dec.cross_attention_weights().size() == 3);
}

TEST_CASE("TransformerEncoder stacks its blocks", "[transformer]") {
  Generator g(11);
  nn::TransformerEncoder enc(8, 16, 4, 2, 0.0, false, &g);
  enc.to(DType::Float64);
  Tensor X = rand64({2, 3, 8}, 12);
  Tensor lens = i64({2, 3}, {2});
  Tensor expect = enc.blks[1]->forward(enc.blks[0]->forward(X, lens), lens).data();
  REQUIRE(allclose(enc.forward(X, lens).data(), expect, 1e-14, 1e-14));
  REQUIRE_THROWS_AS(enc.attention_weights(), saccade::Error);  // training mode ran the fused kernel
  enc.eval();
  enc.forward(X, lens);
  REQUIRE(enc.attention_weights().size() == 2);
  REQUIRE(enc.attention_weights()[1].shape() == Shape({2, 4, 3, 3}));
  REQUIRE(enc.state_dict().keys().front() == "blks.0.attention.W_q.weight");
}

TEST_CASE("Transformer blocks gradcheck", "[transformer][gradcheck]") {
  Generator g(13);
  nn::TransformerEncoderBlock eblk(4, 6, 2, 0.0, true, &g);
  eblk.to(DType::Float64);
  Variable X(rand64({2, 3, 4}, 14), true);
  Tensor lens = i64({3, 2}, {2});
  REQUIRE(
      module_gradcheck([&](const std::vector<Variable>& x) { return eblk.forward(x[0], lens); }, {X}, eblk));
  nn::TransformerDecoderBlock dblk(4, 6, 2, 0.0, false, &g);
  dblk.to(DType::Float64);
  Variable enc(rand64({2, 2, 4}, 15), true);
  REQUIRE(module_gradcheck(
      [&](const std::vector<Variable>& x) {
        return dblk.forward(x[0], x[1], i64({1, 2}, {2}));
      },
      {X, enc}, dblk));
}

// ---- Bahdanau decoder cell ----

TEST_CASE("BahdanauDecoderCell attends over valid encoder states and feeds the GRU",
          "[transformer][bahdanau]") {
  Generator g(21);
  nn::BahdanauDecoderCell cell(3, 4, 5, 0.0, &g);
  cell.to(DType::Float64);
  Tensor x = rand64({2, 3}, 22), h = rand64({2, 4}, 23), enc = rand64({2, 6, 5}, 24);
  Tensor lens = i64({2, 6}, {2});
  auto r = cell.step(x, h, enc, lens);
  REQUIRE(r.hidden.shape() == Shape({2, 4}));
  REQUIRE(r.context.shape() == Shape({2, 5}));
  REQUIRE(r.weights.shape() == Shape({2, 6}));
  auto w = r.weights.data().to_vector<double>();
  for (int j = 2; j < 6; ++j) REQUIRE(w[j] == 0.0);
  REQUIRE(w[0] + w[1] == Approx(1.0));
  // context = Σ_j α_j e_j, and the GRU gets [context; x]
  Tensor ctx = ops::sum(ops::mul(r.weights.data().unsqueeze(2), enc), {1});
  REQUIRE(allclose(r.context.data(), ctx, 1e-12, 1e-12));
  Tensor h2 = cell.rnn->forward(ops::cat({ctx, x}, 1), h).data();
  REQUIRE(allclose(r.hidden.data(), h2, 1e-12, 1e-12));
  REQUIRE(allclose(cell.attention_weights(), r.weights.data()));
  auto keys = cell.state_dict().keys();
  REQUIRE(keys.front() == "attention.W_k.weight");
  REQUIRE(cell.rnn->input_size() == 8);
}

TEST_CASE("BahdanauDecoderCell gradcheck", "[transformer][bahdanau][gradcheck]") {
  Generator g(31);
  nn::BahdanauDecoderCell cell(2, 3, 2, 0.0, &g);
  cell.to(DType::Float64);
  Variable x(rand64({2, 2}, 32), true), h(rand64({2, 3}, 33), true), enc(rand64({2, 3, 2}, 34), true);
  Tensor lens = i64({2, 3}, {2});
  REQUIRE(module_gradcheck(
      [&](const std::vector<Variable>& v) { return cell.step(v[0], v[1], v[2], lens).hidden; }, {x, h, enc},
      cell));
  // the weights are differentiable (for a regulariser on them)
  REQUIRE(gradcheck([&](const std::vector<Variable>& v) { return cell.step(v[0], v[1], v[2], lens).weights; },
                    {x, h, enc}));
}

// ---- additive attention over projected keys (AdditiveAttention::project_keys, forward_projected) ----

// The scoring as AdditiveAttention::forward and the sat captioner computed it before project_keys existed:
// scores = w_v tanh(W_q q (B, Tq, 1, h) + W_k k (B, 1, Tk, h)), masked softmax over Tk, weights @ values.
Variable additive_reference(nn::AdditiveAttention& a, const Variable& q, const Variable& k, const Variable& v,
                            const Tensor& valid_lens) {
  Variable f = tanh(add(unsqueeze(a.W_q->forward(q), 2), unsqueeze(a.W_k->forward(k), 1)));
  return matmul(masked_softmax(squeeze(a.w_v->forward(f), -1), valid_lens), v);
}

TEST_CASE("AdditiveAttention over projected keys equals the composed scoring, values and gradients",
          "[transformer][bahdanau]") {
  Generator g(41);
  nn::AdditiveAttention att(3, 4, 5, 0.0, &g);
  att.to(DType::Float64);
  Variable q(rand64({2, 3, 4}, 42), true), k(rand64({2, 6, 3}, 43), true), v(rand64({2, 6, 2}, 44), true);
  Tensor lens = i64({2, 5}, {2});
  Variable keys = att.project_keys(k);
  REQUIRE(keys.shape() == Shape({2, 6, 5}));
  nn::AttentionOutput r = att.forward_projected(q, keys, v, lens);
  Variable ref = additive_reference(att, q, k, v, lens);
  REQUIRE(allclose(r.output.data(), ref.data(), 1e-12, 1e-12));
  REQUIRE(allclose(att.forward(q, k, v, lens).data(), ref.data(), 1e-12, 1e-12));
  // the same gradients reach the inputs and W_k through the projected keys
  sum(r.output).backward();
  std::vector<Tensor> grads{q.grad(), k.grad(), v.grad(), att.W_k->weight.grad(), att.W_q->weight.grad()};
  for (Variable x : {q, k, v, att.W_k->weight, att.W_q->weight}) x.zero_grad();
  sum(ref).backward();
  std::vector<Tensor> ref_grads{q.grad(), k.grad(), v.grad(), att.W_k->weight.grad(), att.W_q->weight.grad()};
  for (size_t i = 0; i < grads.size(); ++i) REQUIRE(allclose(grads[i], ref_grads[i], 1e-12, 1e-12));

  // one query per step over keys projected once (the sat captioner's decoder): the old hand-written step
  // tanh(keys + q), w_v, softmax, bmm gives the same context and weights
  Variable h(rand64({2, 4}, 45));
  nn::AttentionOutput s = att.forward_projected(unsqueeze(h, 1), keys, v);
  Variable alpha =
      softmax(reshape(att.w_v->forward(tanh(keys + unsqueeze(att.W_q->forward(h), 1))), {2, 6}), 1);
  REQUIRE(allclose(squeeze(s.weights, 1).data(), alpha.data(), 1e-12, 1e-12));
  REQUIRE(allclose(squeeze(s.output, 1).data(), reshape(bmm(unsqueeze(alpha, 1), v), {2, 2}).data(), 1e-12,
                   1e-12));
}

TEST_CASE("BahdanauDecoderCell with keys projected once equals projecting at every step",
          "[transformer][bahdanau]") {
  Generator g(51);
  nn::BahdanauDecoderCell cell(3, 4, 5, 0.0, &g);
  cell.to(DType::Float64);
  Tensor enc = rand64({2, 6, 5}, 52), lens = i64({3, 6}, {2});
  Variable keys = cell.project_keys(enc);
  Variable h1(rand64({2, 4}, 53)), h2 = h1;
  for (int t = 0; t < 3; ++t) {
    Tensor x = rand64({2, 3}, 60 + t);
    nn::BahdanauStep a = cell.step(x, h1, enc, lens), b = cell.step(x, h2, enc, keys, lens);
    REQUIRE(allclose(a.hidden.data(), b.hidden.data(), 0, 0));
    REQUIRE(allclose(a.context.data(), b.context.data(), 0, 0));
    REQUIRE(allclose(a.weights.data(), b.weights.data(), 0, 0));
    h1 = a.hidden, h2 = b.hidden;
  }
  Variable xv(rand64({2, 3}, 70), true), hv(rand64({2, 4}, 71), true), ev(enc, true);
  REQUIRE(module_gradcheck(
      [&](const std::vector<Variable>& v) {
        return cell.step(v[0], v[1], v[2], cell.project_keys(v[2]), lens).hidden;
      },
      {xv, hv, ev}, cell));
}

TEST_CASE("Transformer blocks and the Bahdanau cell reject bad input naming themselves",
          "[transformer][errors]") {
  nn::TransformerEncoderBlock eblk(8, 16, 2, 0.0);
  REQUIRE_THROWS_SACCADE(eblk.forward(ops::randn({2, 3, 6})), "TransformerEncoderBlock");
  REQUIRE_THROWS_SACCADE(eblk.forward(ops::randn({3, 8})), "TransformerEncoderBlock");
  REQUIRE_THROWS_SACCADE(eblk.forward(ops::randn({2, 3, 8}), i64({1, 2, 3}, {3})), "MultiHeadAttention");
  nn::TransformerDecoderBlock dblk(8, 16, 2, 0.0);
  REQUIRE_THROWS_SACCADE(dblk.forward(ops::randn({2, 3, 8}), ops::randn({2, 4, 6})),
                         "TransformerDecoderBlock");
  REQUIRE_THROWS_SACCADE(dblk.forward(ops::randn({2, 3, 8}), ops::randn({3, 4, 8})),
                         "TransformerDecoderBlock");
  nn::TransformerDecoder dec(8, 16, 2, 2, 0.0);
  nn::TransformerDecoder::State bad;
  REQUIRE_THROWS_SACCADE(dec.step(ops::randn({2, 1, 8}), ops::randn({2, 4, 8}), Tensor(), bad),
                         "TransformerDecoder");
  REQUIRE_THROWS_SACCADE(nn::TransformerEncoder(8, 16, 2, 0, 0.0), "TransformerEncoder");

  nn::BahdanauDecoderCell cell(3, 4);
  Tensor x = ops::randn({2, 3}), h = ops::randn({2, 4}), enc = ops::randn({2, 5, 4});
  REQUIRE_THROWS_SACCADE(cell.step(ops::randn({2, 2}), h, enc), "BahdanauDecoderCell");
  REQUIRE_THROWS_SACCADE(cell.step(x, ops::randn({2, 5}), enc), "BahdanauDecoderCell");
  REQUIRE_THROWS_SACCADE(cell.step(x, h, ops::randn({2, 5, 3})), "BahdanauDecoderCell");
  REQUIRE_THROWS_SACCADE(cell.step(x, h, enc, i64({1, 2, 3}, {3})), "BahdanauDecoderCell");
  REQUIRE_THROWS_SACCADE(nn::BahdanauDecoderCell(0, 4), "BahdanauDecoderCell");
  Variable keys = cell.project_keys(enc);
  REQUIRE_THROWS_SACCADE(cell.step(x, h, enc, ops::randn({2, 5, 3}), Tensor()), "BahdanauDecoderCell");
  REQUIRE_THROWS_SACCADE(cell.step(x, h, enc, keys.data().narrow(1, 0, 4), Tensor()), "BahdanauDecoderCell");
  REQUIRE_THROWS_SACCADE(cell.step(x, h, enc, Variable(), Tensor()), "BahdanauDecoderCell");
  REQUIRE_THROWS_SACCADE(cell.project_keys(ops::randn({2, 5, 3})), "AdditiveAttention");
  REQUIRE_THROWS_SACCADE(cell.attention->forward_projected(h.unsqueeze(1), ops::randn({2, 5, 3}), enc),
                         "AdditiveAttention");
  REQUIRE_THROWS_SACCADE(cell.attention->forward_projected(h.unsqueeze(1), keys, enc.narrow(1, 0, 4)),
                         "AdditiveAttention");
}
