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

TEST_CASE("checkpoint: the recomputation runs in the forward's autocast state (issue 37, 1)",
          "[autograd][checkpoint][autocast]") {
  // A segment returning bfloat16 (lin(x)) threw in backward ("matmul: expected two floating tensors of one
  // dtype"), and one returning float32 (x + lin(x), a GPT block's shape) gave other weight gradients than
  // the same run without checkpointing: the recomputation ran with autocast off.
  nn::Linear lin(8, 8);
  const Tensor x0 = rand64({6, 8}, 4).to(DType::Float32);
  for (bool residual : {false, true}) {
    auto seg = [&](const std::vector<Variable>& in) {
      return residual ? in[0] + lin.forward(in[0]) : lin.forward(in[0]);
    };
    auto run = [&](bool ckpt) {
      lin.weight.zero_grad(), lin.bias.zero_grad();
      Variable x(x0, true);
      Variable loss;
      {
        AutocastGuard autocast(DType::BFloat16);
        Variable y = ckpt ? checkpoint(seg, {x}) : seg({x});
        CHECK(y.dtype() == (residual ? DType::Float32 : DType::BFloat16));
        loss = sum(mul(y, y));
      }
      loss.backward();  // outside the guard, as PyTorch recommends
      return std::vector<Tensor>{x.grad(), lin.weight.grad(), lin.bias.grad()};
    };
    std::vector<Tensor> plain = run(false), ckpt = run(true);
    for (size_t i = 0; i < plain.size(); ++i) {
      INFO("residual " << residual << ", gradient " << i);
      REQUIRE(ckpt[i].dtype() == DType::Float32);
      REQUIRE(saccade::testing::allclose(ckpt[i], plain[i], 0, 0));
    }
  }
  // a segment checkpointed outside any guard recomputes without autocast, even when backward runs inside one
  Variable x(x0, true);
  Variable y = checkpoint([&](const std::vector<Variable>& in) { return lin.forward(in[0]); }, {x});
  AutocastGuard autocast(DType::BFloat16);
  lin.weight.zero_grad();
  sum(y).backward();
  CHECK(lin.weight.grad().dtype() == DType::Float32);
  Tensor expected = ops::sum(x0, {0});  // d sum(x W^T + b) / dW = column sums of x, every row alike
  for (int64_t r = 0; r < 8; ++r)
    REQUIRE(saccade::testing::allclose(lin.weight.grad().select(0, r), expected, 1e-6, 1e-6));
}

TEST_CASE(
    "checkpoint: grad() through a segment returns what it returns without, writes no .grad (issue 37, 4)",
    "[autograd][checkpoint]") {
  Generator gen(3);
  Segment seg(&gen);
  Variable x(rand64({5, 4}, 1).to(DType::Float32), true), s(rand64({5, 4}, 2).to(DType::Float32), true);
  // fc1's weight is also used outside the segment: its gradient has a part from each side
  auto loss_of = [&](bool ckpt) {
    gen.manual_seed(11);
    Variable y = ckpt ? checkpoint(seg, {x, s}, {&gen}) : seg({x, s});
    return sum(mul(y, y)) + sum(seg.fc1->weight);
  };
  const std::vector<Variable> wanted{x, seg.fc1->weight, seg.fc2->bias};
  std::vector<Variable> plain = grad({loss_of(false)}, wanted);
  std::vector<Variable> ckpt = grad({loss_of(true)}, wanted);
  for (size_t i = 0; i < wanted.size(); ++i) {
    INFO("input " << i);
    REQUIRE(ckpt[i].defined());
    REQUIRE(saccade::testing::allclose(ckpt[i].data(), plain[i].data(), 0, 0));
  }
  // only a parameter inside the segment (was "input 0 was not used"), and only the segment's input (wrote
  // the parameters' .grad)
  std::vector<Variable> w = grad({loss_of(true)}, {seg.fc2->weight});
  REQUIRE(saccade::testing::allclose(w[0].data(), grad({loss_of(false)}, {seg.fc2->weight})[0].data(), 0, 0));
  std::vector<Variable> gx = grad({loss_of(true)}, {x});
  REQUIRE(saccade::testing::allclose(gx[0].data(), plain[0].data(), 0, 0));
  for (const Variable& p : seg.params()) CHECK_FALSE(p.grad().defined());
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(s.grad().defined());
  // an unused input is still refused, or undefined with allow_unused
  Variable unused(rand64({2}), true);
  REQUIRE_THROWS_SACCADE(grad({loss_of(true)}, {unused}), "input 0 (shape [2]) was not used");
  CHECK_FALSE(grad({loss_of(true)}, {unused}, {}, std::nullopt, false, true)[0].defined());
  // nested segments: the inner one's parameters reach the outer grad() call too
  auto outer = [&](const std::vector<Variable>& in) { return checkpoint(seg, in, {&gen}) * 2.0; };
  gen.manual_seed(11);
  Variable nested = sum(mul(checkpoint(outer, {x, s}, {&gen}), checkpoint(outer, {x, s}, {&gen})));
  gen.manual_seed(11);
  Variable y1 = seg({x, s}) * 2.0;
  Variable y2 = seg({x, s}) * 2.0;
  Variable flat = sum(mul(y1, y2));
  REQUIRE(saccade::testing::allclose(grad({nested}, {seg.fc1->weight})[0].data(),
                                     grad({flat}, {seg.fc1->weight})[0].data(), 1e-6, 1e-6));
  for (const Variable& p : seg.params()) CHECK_FALSE(p.grad().defined());
  // and backward() through a checkpoint still accumulates into the parameters
  gen.manual_seed(11);
  sum(checkpoint(seg, {x, s}, {&gen})).backward();
  for (const Variable& p : seg.params()) CHECK(p.grad().defined());
}
