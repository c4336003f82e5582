// nn losses: MSELoss, CrossEntropyLoss, SequenceLoss, MaskedSoftmaxCELoss. Agreement with PyTorch 1.13
// (fixtures from tests/fixtures/make_layers.py; the sequence losses against d2l's own formulas run in torch),
// padding that neither counts nor gets gradient, float64 gradchecks, and bad input.
#include <cmath>

#include "helpers.h"
#include "module_gradcheck.h"
#include "torch_case.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::leaf64;
using saccade::testing::module_gradcheck;
using saccade::testing::rand64;
using saccade::testing::TorchCase;

namespace {

// Compares loss(logits, target) and d(Σ loss ⊙ gy)/dlogits with the torch case.
template <class F>
void agree(const std::string& name, F loss) {
  TorchCase c("layers_losses.safetensors", name);
  Variable logits(c.in("logits"), true);
  Variable y = loss(logits, c.in("target"));
  CHECK(c.compare("loss", y.data(), c.out()) <= 1e-5);
  c.backward({y});
  CHECK(c.compare("grad logits", logits.grad(), c.at("gin", "logits")) <= 1e-5);
}

}  // namespace

TEST_CASE("losses: CrossEntropyLoss and MSELoss agree with torch", "[nn][loss][torch]") {
  nn::CrossEntropyLoss ce;
  agree("ce", [&](const Variable& z, const Tensor& t) { return ce.forward(z, t); });
  nn::CrossEntropyLoss smooth(2, 0.1);
  agree("ce_ignore_smooth", [&](const Variable& z, const Tensor& t) { return smooth.forward(z, t); });
  nn::CrossEntropyLoss sum(-100, 0.2, Reduction::Sum);
  agree("ce_sum", [&](const Variable& z, const Tensor& t) { return sum.forward(z, t); });
  nn::CrossEntropyLoss none(-100, 0.0, Reduction::None);
  agree("ce_none", [&](const Variable& z, const Tensor& t) { return none.forward(z, t); });
  nn::CrossEntropyLoss spatial(0);  // (N, C, d) logits
  agree("ce_spatial", [&](const Variable& z, const Tensor& t) { return spatial.forward(z, t); });

  // Unbatched logits (C) with a 0-d target: the one-row batch's loss.
  Tensor row = ops::tensor({0.5, -1, 2});
  Tensor t1 = ops::from_vector<int64_t>({2}, {1});
  Variable l1 = nn::CrossEntropyLoss(-100, 0.0, Reduction::None).forward(Variable(row), t1.view({}));
  CHECK(l1.shape() == Shape{});
  CHECK(l1.item() == Approx(ce.forward(Variable(row.view({1, 3})), t1).item()).epsilon(1e-6));

  TorchCase c("layers_losses.safetensors", "mse");
  Variable a(c.in("a"), true), b(c.in("b"), true);
  Variable y = nn::MSELoss().forward(a, b);
  CHECK(c.compare("loss", y.data(), c.out()) <= 1e-5);
  c.backward({y});
  CHECK(c.compare("grad a", a.grad(), c.at("gin", "a")) <= 1e-5);
  CHECK(c.compare("grad b", b.grad(), c.at("gin", "b")) <= 1e-5);
}

TEST_CASE("losses: sequence losses agree with d2l in torch", "[nn][loss][torch]") {
  TorchCase m("layers_losses.safetensors", "masked_ce");
  nn::MaskedSoftmaxCELoss masked;
  Tensor valid_lens = m.in("valid_lens");
  agree("masked_ce", [&](const Variable& z, const Tensor& t) { return masked.forward(z, t, valid_lens); });
  // d2l 10.7: the mean over non-pad targets (pad id 0), by pad id and by the equivalent valid_lens.
  nn::SequenceLoss by_pad(0);
  agree("seq_pad", [&](const Variable& z, const Tensor& t) { return by_pad.forward(z, t); });
  nn::SequenceLoss by_lens;
  agree("seq_pad", [&](const Variable& z, const Tensor& t) { return by_lens.forward(z, t, valid_lens); });
}

TEST_CASE("losses: SequenceLoss ignores padding", "[nn][loss]") {
  Generator g(1);
  const int64_t B = 2, T = 4, V = 5;
  Tensor logits = ops::randn({B, T, V}, DType::Float32, Device::cpu(), &g);
  Tensor targets = ops::from_vector<int64_t>({1, 2, 3, 0, 4, 0, 0, 0}, {B, T});  // pad id 0
  Tensor valid_lens = ops::from_vector<int64_t>({3, 1}, {B});

  for (int mode = 0; mode < 3; ++mode) {
    nn::SequenceLoss loss(mode == 1 ? std::optional<int64_t>() : std::optional<int64_t>(0));
    Tensor lens = mode == 0 ? Tensor() : valid_lens;
    Variable z(logits.clone(), true);
    Variable l = loss.forward(z, targets, lens);
    l.backward();
    // Changing the logits at padded positions changes neither the loss nor gets gradient.
    Tensor changed = logits.clone();
    {
      Tensor pad1 = changed.select(0, 0).select(0, 3), pad2 = changed.select(0, 1).narrow(0, 1, 3);
      ops::fill_(pad1, 100.0);
      ops::fill_(pad2, -7.0);
    }
    Variable l2 = loss.forward(Variable(changed), targets, lens);
    CHECK(l2.item() == Approx(l.item()).epsilon(1e-6));
    CHECK(allclose(z.grad().select(0, 0).select(0, 3), ops::zeros({V}), 0, 0));
    CHECK(allclose(z.grad().select(0, 1).narrow(0, 1, 3), ops::zeros({3, V}), 0, 0));
    // The mean is over the 4 real tokens: 4 × l = Σ of the per-token losses there.
    Tensor lp = ops::log_softmax(logits, -1);
    double ref = 0;
    for (auto [b, t] : {std::pair{0, 0}, {0, 1}, {0, 2}, {1, 0}}) {
      int64_t y = targets.select(0, b).select(0, t).item<int64_t>();
      ref -= lp.select(0, b).select(0, t).select(0, y).item() / 4;
    }
    CHECK(l.item() == Approx(ref).epsilon(1e-5));
  }
  // None: (B, T) with zeros at padding; Sum: their sum.
  nn::SequenceLoss none(0, 0.0, Reduction::None), sum(0, 0.0, Reduction::Sum);
  Tensor per = none.forward(Variable(logits), targets).data();
  CHECK(per.shape() == Shape{B, T});
  CHECK(per.select(0, 1).select(0, 2).item() == 0);
  CHECK(sum.forward(Variable(logits), targets).item() == Approx(ops::sum(per).item()).epsilon(1e-6));
  // Every position padded: Mean is NaN (0 / 0, as torch), Sum is 0.
  Tensor all_pad = ops::zeros({B, T}, DType::Int64);
  CHECK(std::isnan(nn::SequenceLoss(0).forward(Variable(logits), all_pad).item()));
  CHECK(sum.forward(Variable(logits), all_pad).item() == 0);

  // MaskedSoftmaxCELoss: the same per-token losses, averaged over all T steps per sequence.
  Tensor per_seq = nn::MaskedSoftmaxCELoss().forward(Variable(logits), targets, valid_lens).data();
  CHECK(allclose(per_seq, ops::mean(per, {1}), 1e-6, 1e-7));
}

TEST_CASE("losses: gradcheck of the losses", "[nn][loss][gradcheck]") {
  Variable z = leaf64({4, 3}, 1);
  Tensor t = ops::from_vector<int64_t>({0, 2, 1, 2}, {4});
  nn::CrossEntropyLoss ce(1, 0.3);
  CHECK(module_gradcheck([&] { return ce.forward(z, t); }, {z}));
  nn::CrossEntropyLoss none(-100, 0.0, Reduction::None);
  Variable zs = Variable(rand64({2, 2, 3}, 2).permute({0, 2, 1}), true);  // (N, C=3, d=2), non-contiguous
  Tensor ts = ops::from_vector<int64_t>({0, 2, 1, 1}, {2, 2});
  CHECK(module_gradcheck([&] { return none.forward(zs, ts); }, {zs}));
  Variable a = leaf64({2, 3}, 3), b = leaf64({2, 3}, 4);
  nn::MSELoss mse(Reduction::Sum);
  CHECK(module_gradcheck([&] { return mse.forward(a, b); }, {a, b}));

  Variable zq = leaf64({2, 3, 4}, 5);
  Tensor tq = ops::from_vector<int64_t>({1, 3, 0, 2, 0, 0}, {2, 3});
  Tensor lens = ops::from_vector<int64_t>({2, 1}, {2});
  nn::SequenceLoss seq(0, 0.1);
  CHECK(module_gradcheck([&] { return seq.forward(zq, tq, lens); }, {zq}));
  nn::MaskedSoftmaxCELoss masked;
  CHECK(module_gradcheck([&] { return masked.forward(zq, tq, lens); }, {zq}));
}

TEST_CASE("losses: bad input names the module", "[nn][loss][errors]") {
  Variable z(ops::ones({4, 3}));
  nn::CrossEntropyLoss ce;
  REQUIRE_THROWS_SACCADE(ce.forward(z, ops::from_vector<int64_t>({0, 1, 2}, {3})), "CrossEntropyLoss");
  REQUIRE_THROWS_SACCADE(ce.forward(z, ops::from_vector<int64_t>({0, 1, 2, 3}, {4})), "CrossEntropyLoss");
  REQUIRE_THROWS_SACCADE(ce.forward(z, ops::zeros({4})), "CrossEntropyLoss");
  REQUIRE_THROWS_SACCADE(ce.forward(z, Tensor()), "CrossEntropyLoss");
  REQUIRE_THROWS_SACCADE(nn::CrossEntropyLoss(-100, 1.5), "CrossEntropyLoss");
  REQUIRE_THROWS_SACCADE(nn::MSELoss().forward(z, Variable(ops::ones({3, 4}))), "MSELoss");

  nn::SequenceLoss seq(0);
  Variable zq(ops::ones({2, 3, 4}));
  Tensor tq = ops::zeros({2, 3}, DType::Int64);
  REQUIRE_THROWS_SACCADE(seq.forward(z, tq), "SequenceLoss");                                  // rank
  REQUIRE_THROWS_SACCADE(seq.forward(zq, ops::zeros({3, 2}, DType::Int64)), "SequenceLoss");   // targets
  REQUIRE_THROWS_SACCADE(seq.forward(zq, tq, ops::zeros({3}, DType::Int64)), "SequenceLoss");  // lens
  REQUIRE_THROWS_SACCADE(seq.forward(zq, tq, ops::from_vector<int64_t>({-1, 2}, {2})), "SequenceLoss");
  REQUIRE_THROWS_SACCADE(seq.forward(zq, ops::full({2, 3}, 4, DType::Int64)), "SequenceLoss");  // class
  REQUIRE_THROWS_SACCADE(nn::MaskedSoftmaxCELoss().forward(zq, tq, Tensor()), "MaskedSoftmaxCELoss");
}
