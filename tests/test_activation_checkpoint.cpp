// Activation checkpointing (autograd/checkpoint.h, issue 28): the same gradients as without, dropout
// included; parameter hooks fire; the bad-input cases. (The tiny GPT trained 20 steps bit-identically with
// and without checkpointing is in tests/test_gpt.cpp, which is compiled only with the examples.)
#include "helpers.h"

using namespace saccade;
using saccade::testing::rand64;

namespace {

// A segment with parameters, a dropout drawing from `gen`, and a nonlinearity: (N, 4) -> (N, 4)
struct Segment {
  std::shared_ptr<nn::Linear> fc1 = std::make_shared<nn::Linear>(4, 6, true, nullptr);
  std::shared_ptr<nn::Linear> fc2 = std::make_shared<nn::Linear>(6, 4, true, nullptr);
  Generator* gen;
  explicit Segment(Generator* g) : gen(g) {}
  Variable operator()(const std::vector<Variable>& in) const {
    return fc2->forward(dropout(tanh(fc1->forward(in[0])), 0.3, true, gen)) * in[1];
  }
  std::vector<Variable> params() const { return {fc1->weight, fc1->bias, fc2->weight, fc2->bias}; }
};

}  // namespace

TEST_CASE("checkpoint: the same gradients as without, dropout repeated exactly", "[autograd][checkpoint]") {
  Generator gen(3);
  Segment seg(&gen);
  Variable x(rand64({5, 4}, 1).to(DType::Float32), true), s(rand64({5, 4}, 2).to(DType::Float32), true);
  int hook_calls = 0;
  seg.fc1->weight.register_hook([&](const Tensor& g) {
    ++hook_calls;
    return g;
  });
  auto run = [&](bool ckpt) {
    for (const Variable& p : seg.params()) Variable(p).zero_grad();
    x.zero_grad(), s.zero_grad();
    gen.manual_seed(11);
    Variable y = ckpt ? checkpoint(seg, {x, s}, {&gen}) : seg({x, s});
    const uint64_t offset_after_forward = gen.offset();
    sum(mul(y, y)).backward();
    CHECK(gen.offset() == offset_after_forward);  // the recomputation left the stream where it was
    std::vector<Tensor> out{y.data(), x.grad(), s.grad()};
    for (const Variable& p : seg.params()) out.push_back(p.grad());
    return out;
  };
  std::vector<Tensor> plain = run(false), ckpt = run(true);
  REQUIRE(hook_calls == 2);  // a parameter's hook fires in the recomputed backward too (DDP's hooks)
  for (size_t i = 0; i < plain.size(); ++i) REQUIRE(saccade::testing::allclose(ckpt[i], plain[i], 0, 0));
}

TEST_CASE("checkpoint: bad input", "[autograd][checkpoint]") {
  Variable x(rand64({3}), true);
  Variable c(rand64({3}, 2));
  auto f = [](const std::vector<Variable>& in) { return exp(in[0]); };
  REQUIRE_THROWS_SACCADE(checkpoint(f, {c}), "checkpoint: no input requires grad");
  REQUIRE_THROWS_SACCADE(checkpoint(f, {Variable()}),
                         "checkpoint: got an undefined Variable (argument 1, element 0)");
  // a function that changes its input in place
  Variable x2(rand64({3}).clone(), true);
  auto in_place = [](const std::vector<Variable>& in) {
    Tensor t = in[0].data();
    ops::add_(t, ops::ones_like(t));
    return exp(in[0]);
  };
  REQUIRE_THROWS_SACCADE(checkpoint(in_place, {x2}), "modified by an in-place operation");
  // an input changed between forward and backward
  Variable x3(rand64({3}).clone(), true);
  Variable y = checkpoint(f, {x3});
  Tensor t = x3.data();
  ops::add_(t, ops::ones_like(t));
  REQUIRE_THROWS_SACCADE(sum(y).backward(),
                         "checkpoint: a tensor of shape [3] saved for backward was modified");
  // no second derivative through a checkpointed segment
  Variable z = checkpoint(f, {x});
  REQUIRE_THROWS_SACCADE(grad({sum(z)}, {x}, {}, std::nullopt, true), "checkpoint: create_graph");
}
