// nn recurrent layers: GRUCell, GRU, LSTMCell. Agreement with PyTorch 1.13 (fixtures from
// tests/fixtures/make_layers.py), the gate equations by hand, float64 gradchecks, and bad input.
#include <cmath>

#include "helpers.h"
#include "module_gradcheck.h"
#include "torch_case.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::leaf64;
using saccade::testing::leaves;
using saccade::testing::module_gradcheck;
using saccade::testing::rand64;
using saccade::testing::TorchCase;

namespace {

// Fills every parameter of m with values from the seeded generator, in float64.
void randomize(nn::Module& m, uint64_t seed) {
  m.to(DType::Float64);
  NoGradGuard ng;
  for (Variable& p : m.parameters()) {
    Tensor t = p.data();
    ops::copy_(t, ops::mul(saccade::testing::rand64(t.shape(), seed++), 0.5));
  }
}

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

}  // namespace

TEST_CASE("rnn: parameter names shapes and init as torch", "[nn][rnn]") {
  Generator g(1);
  nn::GRUCell cell(5, 4, true, &g);
  auto sd = cell.state_dict();
  REQUIRE(sd.keys() == std::vector<std::string>{"weight_ih", "weight_hh", "bias_ih", "bias_hh"});
  CHECK(sd.at("weight_ih").shape() == Shape{12, 5});
  CHECK(sd.at("weight_hh").shape() == Shape{12, 4});
  CHECK(sd.at("bias_ih").shape() == Shape{12});
  for (const auto& [k, t] : sd)
    for (double v : t.to_vector<double>()) CHECK(std::abs(v) <= 0.5);  // U(±1/√4)

  nn::GRU gru(5, 4, {.num_layers = 2}, &g);
  CHECK(gru.state_dict().keys() == std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0",
                                                            "bias_hh_l0", "weight_ih_l1", "weight_hh_l1",
                                                            "bias_ih_l1", "bias_hh_l1"});
  CHECK(gru.state_dict().at("weight_ih_l1").shape() == Shape{12, 4});
  CHECK(nn::GRU(5, 4, {.bidirectional = true}).state_dict().keys() ==
        std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                 "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse",
                                 "bias_hh_l0_reverse"});
  CHECK(nn::GRU(5, 4, {.num_layers = 2, .bidirectional = true}).state_dict().at("weight_ih_l1").shape() ==
        Shape{12, 8});
  CHECK(nn::GRU(5, 4, {.bias = false}).state_dict().keys() ==
        std::vector<std::string>{"weight_ih_l0", "weight_hh_l0"});

  nn::LSTMCell lstm(3, 2, true, &g);
  CHECK(lstm.state_dict().keys() == std::vector<std::string>{"weight_ih", "weight_hh", "bias_ih", "bias_hh"});
  CHECK(lstm.state_dict().at("weight_ih").shape() == Shape{8, 3});
  CHECK(nn::LSTMCell(3, 2, false).state_dict().keys() == std::vector<std::string>{"weight_ih", "weight_hh"});

  Generator g1(5), g2(5);
  CHECK(allclose(nn::GRUCell(3, 2, true, &g1).weight_hh.data(), nn::GRUCell(3, 2, true, &g2).weight_hh.data(),
                 0, 0));
}

TEST_CASE("rnn: GRUCell and LSTMCell gates by hand", "[nn][rnn]") {
  // input_size 1, hidden_size 1: every gate is a scalar, so the equations can be written out.
  nn::GRUCell cell(1, 1);
  nn::StateDict sd;
  sd.insert("weight_ih", ops::tensor({0.5, -1, 2}, {3, 1}));     // W_ir, W_iz, W_in
  sd.insert("weight_hh", ops::tensor({1, 0.25, -0.5}, {3, 1}));  // W_hr, W_hz, W_hn
  sd.insert("bias_ih", ops::tensor({0.1, 0.2, 0.3}));
  sd.insert("bias_hh", ops::tensor({-0.1, 0.4, 0.6}));
  cell.load_state_dict(sd);
  const double x = 0.7, h = -0.3;
  double r = sigmoid(0.5 * x + 0.1 + 1 * h - 0.1), z = sigmoid(-1 * x + 0.2 + 0.25 * h + 0.4);
  double n = std::tanh(2 * x + 0.3 + r * (-0.5 * h + 0.6));
  double want = (1 - z) * n + z * h;
  CHECK(std::abs(cell.forward(Variable(ops::tensor({x}, {1, 1})), Variable(ops::tensor({h}, {1, 1}))).item() -
                 want) < 1e-6);
  // Unbatched, and no state = zeros.
  CHECK(cell.forward(Variable(ops::tensor({x})), Variable(ops::tensor({h}))).shape() == Shape{1});
  double r0 = sigmoid(0.5 * x), z0 = sigmoid(-x + 0.6), n0 = std::tanh(2 * x + 0.3 + r0 * 0.6);
  CHECK(std::abs(cell.forward(Variable(ops::tensor({x}, {1, 1}))).item() - (1 - z0) * n0) < 1e-6);

  nn::LSTMCell lstm(1, 1, false);
  nn::StateDict ls;
  ls.insert("weight_ih", ops::tensor({0.5, -1, 2, 0.3}, {4, 1}));  // i, f, g, o
  ls.insert("weight_hh", ops::tensor({1, 0.25, -0.5, 0.7}, {4, 1}));
  lstm.load_state_dict(ls);
  const double c = 0.9;
  nn::LSTMState s = lstm.forward(Variable(ops::tensor({x}, {1, 1})),
                                 {Variable(ops::tensor({h}, {1, 1})), Variable(ops::tensor({c}, {1, 1}))});
  double i = sigmoid(0.5 * x + h), f = sigmoid(-x + 0.25 * h), gg = std::tanh(2 * x - 0.5 * h),
         o = sigmoid(0.3 * x + 0.7 * h);
  double c1 = f * c + i * gg;
  CHECK(std::abs(s.c.item() - c1) < 1e-6);
  CHECK(std::abs(s.h.item() - o * std::tanh(c1)) < 1e-6);
}

TEST_CASE("rnn: GRU is GRUCell over time and layers", "[nn][rnn]") {
  Generator g(2);
  nn::GRU gru(3, 4, {.num_layers = 2}, &g);
  nn::GRUCell c0(3, 4), c1(4, 4);
  nn::StateDict s0, s1;
  for (const char* k : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
    s0.insert(k, gru.state_dict().at(std::string(k) + "_l0"));
    s1.insert(k, gru.state_dict().at(std::string(k) + "_l1"));
  }
  c0.load_state_dict(s0);
  c1.load_state_dict(s1);
  Variable x(ops::randn({2, 5, 3}, DType::Float32, Device::cpu(), &g));
  Variable h0(ops::randn({2, 2, 4}, DType::Float32, Device::cpu(), &g));
  nn::GRUOutput out = gru.forward(x, h0);
  REQUIRE(out.output.shape() == Shape{2, 5, 4});
  REQUIRE(out.h_n.shape() == Shape{2, 2, 4});
  Variable a = select(h0, 0, 0), b = select(h0, 0, 1);
  for (int64_t t = 0; t < 5; ++t) {
    a = c0.forward(select(x, 1, t), a);
    b = c1.forward(a, b);
    CHECK(allclose(select(out.output, 1, t).data(), b.data(), 1e-5, 1e-6));
  }
  CHECK(allclose(select(out.h_n, 0, 0).data(), a.data(), 1e-5, 1e-6));
  CHECK(allclose(select(out.h_n, 0, 1).data(), b.data(), 1e-5, 1e-6));

  // Time-major layout and unbatched inputs give the same numbers.
  nn::GRU tm(3, 4, {.num_layers = 2, .batch_first = false});
  tm.load_state_dict(gru.state_dict());
  nn::GRUOutput o2 = tm.forward(transpose(x, 0, 1), h0);
  CHECK(allclose(transpose(o2.output, 0, 1).data(), out.output.data(), 1e-6, 1e-7));
  nn::GRUOutput o3 = gru.forward(select(x, 0, 1), select(h0, 1, 1));
  CHECK(o3.output.shape() == Shape{5, 4});
  CHECK(allclose(o3.output.data(), select(out.output, 0, 1).data(), 1e-6, 1e-7));
  CHECK(allclose(o3.h_n.data(), select(out.h_n, 1, 1).data(), 1e-6, 1e-7));
}

TEST_CASE("rnn: GRU dropout between layers follows the training flag", "[nn][rnn]") {
  Generator g(3), dg(4);
  nn::GRU gru(3, 4, {.num_layers = 2, .dropout = 0.5, .dropout_generator = &dg}, &g);
  nn::GRU plain(3, 4, {.num_layers = 2});
  plain.load_state_dict(gru.state_dict());
  Variable x(ops::randn({2, 5, 3}, DType::Float32, Device::cpu(), &g));
  Tensor ref = plain.forward(x).output.data();
  CHECK(!allclose(gru.forward(x).output.data(), ref));  // training: the layer-0 outputs are dropped
  gru.eval();
  CHECK(allclose(gru.forward(x).output.data(), ref, 0, 0));
  // A single layer has no dropout at all.
  nn::GRU one(3, 4, {.dropout = 0.5});
  nn::GRU one_plain(3, 4);
  one_plain.load_state_dict(one.state_dict());
  CHECK(allclose(one.forward(x).output.data(), one_plain.forward(x).output.data(), 0, 0));
}

// ---- agreement with PyTorch 1.13 ----

TEST_CASE("rnn: GRUCell GRU and LSTMCell agree with torch", "[nn][rnn][torch]") {
  {
    TorchCase c("layers_rnn.safetensors", "grucell");
    nn::GRUCell cell(5, 4);
    cell.load_state_dict(c.params());
    Variable x(c.in("x"), true), h(c.in("h"), true);
    Variable y = cell.forward(x, h);
    CHECK(c.compare("out", y.data(), c.out()) <= 1e-5);
    c.backward({y});
    CHECK(c.compare_param_grads(cell) <= 1e-5);
    CHECK(c.compare("grad x", x.grad(), c.at("gin", "x")) <= 1e-5);
    CHECK(c.compare("grad h", h.grad(), c.at("gin", "h")) <= 1e-5);
  }
  {
    TorchCase c("layers_rnn.safetensors", "gru");
    nn::GRU gru(5, 4, {.num_layers = 2, .batch_first = true});
    gru.load_state_dict(c.params());
    Variable x(c.in("x"), true), h0(c.in("h0"), true);
    nn::GRUOutput o = gru.forward(x, h0);
    CHECK(c.compare("output", o.output.data(), c.out(0)) <= 1e-5);
    CHECK(c.compare("h_n", o.h_n.data(), c.out(1)) <= 1e-5);
    c.backward({o.output, o.h_n});
    CHECK(c.compare_param_grads(gru) <= 1e-5);
    // float32 through 2 layers x 2 directions: 3.7e-6 in the Release build, 1.5e-5 in the -O1 sanitizer build
    // (its loops are not vectorised, and the simd reductions' order depends on the memory layout)
    CHECK(c.compare("grad x", x.grad(), c.at("gin", "x")) <= 3e-5);
    CHECK(c.compare("grad h0", h0.grad(), c.at("gin", "h0")) <= 1e-5);
  }
  {
    TorchCase c("layers_rnn.safetensors", "gru_noh0");
    nn::GRU gru(3, 4);
    gru.load_state_dict(c.params());
    Variable x(c.in("x"), true);
    nn::GRUOutput o = gru.forward(x);
    CHECK(c.compare("output", o.output.data(), c.out(0)) <= 1e-5);
    CHECK(c.compare("h_n", o.h_n.data(), c.out(1)) <= 1e-5);
    c.backward({o.output, o.h_n});
    CHECK(c.compare_param_grads(gru) <= 1e-5);
    CHECK(c.compare("grad x", x.grad(), c.at("gin", "x")) <= 1e-5);
  }
  {
    TorchCase c("layers_rnn.safetensors", "lstmcell");
    nn::LSTMCell cell(5, 4);
    cell.load_state_dict(c.params());
    Variable x(c.in("x"), true), h(c.in("h"), true), cs(c.in("c"), true);
    nn::LSTMState s = cell.forward(x, {h, cs});
    CHECK(c.compare("h'", s.h.data(), c.out(0)) <= 1e-5);
    CHECK(c.compare("c'", s.c.data(), c.out(1)) <= 1e-5);
    c.backward({s.h, s.c});
    CHECK(c.compare_param_grads(cell) <= 1e-5);
    CHECK(c.compare("grad x", x.grad(), c.at("gin", "x")) <= 1e-5);
    CHECK(c.compare("grad h", h.grad(), c.at("gin", "h")) <= 1e-5);
    CHECK(c.compare("grad c", cs.grad(), c.at("gin", "c")) <= 1e-5);
  }
}

TEST_CASE("rnn: bidirectional GRU agrees with torch, padded sequences as pack_padded_sequence",
          "[nn][rnn][torch]") {
  for (bool padded : {false, true}) {
    TorchCase c("layers_birnn.safetensors", padded ? "bigru_packed" : "bigru");
    nn::GRU gru(3, 4, {.num_layers = 2, .bidirectional = true});
    gru.load_state_dict(c.params());  // weight_ih_l1_reverse (12, 8) etc.: torch's names and layout
    Variable x(c.in("x"), true), h0(c.in("h0"), true);
    Tensor lens = padded ? ops::tensor({5, 2, 4}, DType::Int64) : Tensor();
    nn::GRUOutput o = gru.forward(x, h0, lens);
    REQUIRE(o.output.shape() == Shape{3, 5, 8});
    REQUIRE(o.h_n.shape() == Shape{4, 3, 4});
    CHECK(c.compare("output", o.output.data(), c.out(0)) <= 1e-5);
    CHECK(c.compare("h_n", o.h_n.data(), c.out(1)) <= 1e-5);
    c.backward({o.output, o.h_n});
    CHECK(c.compare_param_grads(gru) <= 1e-5);
    // float32 through 2 layers x 2 directions: 3.7e-6 in the Release build, 1.5e-5 in the -O1 sanitizer build
    // (its loops are not vectorised, and the simd reductions' order depends on the memory layout)
    CHECK(c.compare("grad x", x.grad(), c.at("gin", "x")) <= 3e-5);
    CHECK(c.compare("grad h0", h0.grad(), c.at("gin", "h0")) <= 1e-5);
  }
}

TEST_CASE("rnn: a padded sequence gives what the unpadded one gives alone", "[nn][rnn]") {
  Generator g(3);
  nn::GRU gru(2, 3, {.num_layers = 2, .bidirectional = true}, &g);
  Tensor x = ops::randn({2, 6, 2}, DType::Float32, Device::cpu(), &g);
  nn::GRUOutput both = gru.forward(Variable(x), Variable(), ops::tensor({6, 4}, DType::Int64));
  nn::GRUOutput alone = gru.forward(Variable(x.narrow(0, 1, 1).narrow(1, 0, 4)));
  CHECK(allclose(both.output.data().narrow(0, 1, 1).narrow(1, 0, 4), alone.output.data(), 1e-6, 1e-6));
  CHECK(allclose(both.h_n.data().narrow(1, 1, 1), alone.h_n.data(), 1e-6, 1e-6));
  CHECK(ops::max(ops::abs(both.output.data().narrow(0, 1, 1).narrow(1, 4, 2))).item<double>() == 0);
  // The full-length row is as without valid_lens.
  nn::GRUOutput full = gru.forward(Variable(x.narrow(0, 0, 1)));
  CHECK(allclose(both.output.data().narrow(0, 0, 1), full.output.data(), 1e-6, 1e-6));
}

// ---- float64 gradchecks over inputs and parameters ----

TEST_CASE("rnn: gradcheck of GRUCell GRU and LSTMCell", "[nn][rnn][gradcheck]") {
  nn::GRUCell cell(3, 2);
  randomize(cell, 10);
  Variable x = leaf64({2, 3}, 1), h = leaf64({2, 2}, 2);
  CHECK(module_gradcheck([&] { return cell.forward(x, h); }, leaves(cell, {x, h})));

  nn::GRU gru(2, 2, {.num_layers = 2});
  randomize(gru, 20);
  Variable xs = leaf64({2, 3, 2}, 3), h0 = leaf64({2, 2, 2}, 4);
  CHECK(module_gradcheck(
      [&] {
        nn::GRUOutput o = gru.forward(xs, h0);
        return cat({reshape(o.output, {-1}), reshape(o.h_n, {-1})}, 0);
      },
      leaves(gru, {xs, h0})));
  nn::GRU tm(2, 2, {.bias = false, .batch_first = false});
  randomize(tm, 30);
  Variable xt = Variable(rand64({2, 3, 2}, 5).transpose(0, 1), true);  // (T, B, in), non-contiguous
  CHECK(module_gradcheck([&] { return tm.forward(xt).output; }, leaves(tm, {xt})));

  nn::GRU bi(2, 2, {.num_layers = 2, .bidirectional = true});
  randomize(bi, 50);
  Variable xb = leaf64({2, 3, 2}, 7), hb = leaf64({4, 2, 2}, 8);
  Tensor lens = ops::tensor({3, 1}, DType::Int64);
  CHECK(module_gradcheck(
      [&] {
        nn::GRUOutput o = bi.forward(xb, hb, lens);
        return cat({reshape(o.output, {-1}), reshape(o.h_n, {-1})}, 0);
      },
      leaves(bi, {xb, hb})));

  nn::LSTMCell lstm(3, 2);
  randomize(lstm, 40);
  Variable c = leaf64({2, 2}, 6);
  CHECK(module_gradcheck(
      [&] {
        nn::LSTMState s = lstm.forward(x, {h, c});
        return cat({s.h, s.c}, 1);
      },
      leaves(lstm, {x, h, c})));
}

// ---- bad input ----

TEST_CASE("rnn: bad input names the module", "[nn][rnn][errors]") {
  nn::GRUCell cell(3, 4);
  REQUIRE_THROWS_SACCADE(cell.forward(Variable(ops::ones({2, 5}))), "GRUCell");  // in
  REQUIRE_THROWS_SACCADE(cell.forward(Variable(ops::ones({2, 3})), Variable(ops::ones({2, 5}))),
                         "GRUCell");  // H
  REQUIRE_THROWS_SACCADE(cell.forward(Variable(ops::ones({2, 3})), Variable(ops::ones({3, 4}))),
                         "GRUCell");                                                // B
  REQUIRE_THROWS_SACCADE(cell.forward(Variable(ops::ones({1, 2, 3}))), "GRUCell");  // rank
  REQUIRE_THROWS_SACCADE(nn::GRUCell(0, 4), "GRUCell");

  nn::GRU gru(3, 4, {.num_layers = 2});
  REQUIRE_THROWS_SACCADE(gru.forward(Variable(ops::ones({2, 5, 2}))), "GRU");
  REQUIRE_THROWS_SACCADE(gru.forward(Variable(ops::ones({3}))), "GRU");
  REQUIRE_THROWS_SACCADE(gru.forward(Variable(ops::ones({2, 0, 3}))), "GRU");
  REQUIRE_THROWS_SACCADE(gru.forward(Variable(ops::ones({2, 5, 3})), Variable(ops::ones({1, 2, 4}))), "GRU");
  REQUIRE_THROWS_SACCADE(gru.forward(Variable(ops::ones({2, 5, 3})), Variable(ops::ones({2, 2, 3}))), "GRU");
  REQUIRE_THROWS_SACCADE(nn::GRU(3, 4, {.num_layers = 0}), "GRU");
  REQUIRE_THROWS_SACCADE(nn::GRU(3, 4, {.dropout = 1.0}), "GRU");
  nn::GRU bi(3, 4, {.bidirectional = true});
  Variable x(ops::ones({2, 5, 3}));
  REQUIRE_THROWS_SACCADE(bi.forward(x, Variable(ops::ones({1, 2, 4}))), "GRU");  // needs 2 L rows
  REQUIRE_THROWS_SACCADE(bi.forward(x, Variable(), ops::tensor({5, 6}, DType::Int64)), "GRU");   // > T
  REQUIRE_THROWS_SACCADE(bi.forward(x, Variable(), ops::tensor({5, -1}, DType::Int64)), "GRU");  // < 0
  REQUIRE_THROWS_SACCADE(bi.forward(x, Variable(), ops::tensor({5}, DType::Int64)), "GRU");      // not (B)
  REQUIRE_THROWS_SACCADE(bi.forward(x, Variable(), ops::tensor({5.0, 2.0})), "GRU");             // float
  REQUIRE_THROWS_SACCADE(bi.forward(Variable(ops::ones({5, 3})), Variable(), ops::tensor({5}, DType::Int64)),
                         "GRU");  // unbatched

  nn::LSTMCell lstm(3, 4);
  REQUIRE_THROWS_SACCADE(lstm.forward(Variable(ops::ones({2, 4}))), "LSTMCell");
  REQUIRE_THROWS_SACCADE(
      lstm.forward(Variable(ops::ones({2, 3})), {Variable(ops::ones({2, 4})), Variable(ops::ones({2, 3}))}),
      "LSTMCell");
  REQUIRE_THROWS_SACCADE(lstm.forward(Variable(ops::ones({2, 3})), {Variable(ops::ones({2, 2})), Variable()}),
                         "LSTMCell");
}

TEST_CASE("rnn: fused GRU gates match the composed ones in float64 and pass gradcheck", "[nn][rnn]") {
  Tensor gi = rand64({4, 18}, 1), gh = rand64({4, 18}, 2), h = rand64({4, 6}, 3);
  Variable vi(gi, true), vg(gh, true), vh(h, true);
  Variable fused = gru_gates(vi, vg, vh), composed = nn::gru_gates_composed(vi, vg, vh);
  REQUIRE(allclose(fused.data(), composed.data(), 1e-12, 1e-12));
  REQUIRE(gradcheck([](const std::vector<Variable>& in) { return gru_gates(in[0], in[1], in[2]); },
                    {Variable(gi, true), Variable(gh, true), Variable(h, true)}));
  // the ops' composed reference, which runs where a backend has no fused kernel (CUDA), against the CPU's
  ops::GruGates f = ops::gru_gates(gi, gh, h), c = ops::gru_gates_composed(gi, gh, h);
  REQUIRE(allclose(c.h, f.h, 1e-12, 1e-12));
  REQUIRE(allclose(c.saved, f.saved, 1e-12, 1e-12));
  Tensor gy = rand64({4, 6}, 4);
  ops::GruGatesGrads r = ops::gru_gates_backward(gy, gh, h, f.saved),
                     rc = ops::gru_gates_backward_composed(gy, gh, h, f.saved);
  REQUIRE(allclose(rc.ggi, r.ggi, 1e-12, 1e-12));
  REQUIRE(allclose(rc.ggh, r.ggh, 1e-12, 1e-12));
  REQUIRE(allclose(rc.gh, r.gh, 1e-12, 1e-12));
}

TEST_CASE("rnn: GRU gates refuse mismatched shapes and dtypes", "[nn][rnn]") {
  Tensor gi = rand64({4, 18}), h = rand64({4, 6});
  REQUIRE_THROWS_SACCADE(ops::gru_gates(gi, rand64({4, 15}), h), "gru_gates");
  REQUIRE_THROWS_SACCADE(ops::gru_gates(gi, gi, rand64({3, 6})), "gru_gates");
  REQUIRE_THROWS_SACCADE(ops::gru_gates(gi, gi.to(DType::Float32), h), "gru_gates");
  REQUIRE_THROWS_SACCADE(ops::gru_gates_backward(rand64({4, 5}), gi, h, gi), "gru_gates_backward");
}
