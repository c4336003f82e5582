// nn layers: Linear, Flatten, Identity, activations, Embedding, LayerNorm, Dropout, Conv2d, pooling,
// Sequential, PositionWiseFFN, AddNorm. Agreement with PyTorch 1.13 (fixtures from
// tests/fixtures/make_layers.py), float64 gradchecks over inputs and parameters, and bad input.
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

// ---- construction, names, shapes, init ----

TEST_CASE("layers: Linear names shapes and default init", "[nn][layers]") {
  Generator g(3);
  nn::Linear lin(4, 3, true, &g);
  auto sd = lin.state_dict();
  REQUIRE(sd.keys() == std::vector<std::string>{"weight", "bias"});
  CHECK(sd.at("weight").shape() == Shape{3, 4});
  CHECK(sd.at("bias").shape() == Shape{3});
  // kaiming_uniform(a = √5) on (3, 4): U(±1/√4); bias U(±1/√4).
  for (double v : sd.at("weight").to_vector<double>()) CHECK(std::abs(v) <= 0.5);
  for (double v : sd.at("bias").to_vector<double>()) CHECK(std::abs(v) <= 0.5);
  Generator g2(3);
  nn::Linear same(4, 3, true, &g2);
  CHECK(allclose(same.weight.data(), lin.weight.data(), 0, 0));
  CHECK(allclose(same.bias.data(), lin.bias.data(), 0, 0));

  nn::Linear nobias(4, 3, false);
  CHECK(nobias.state_dict().keys() == std::vector<std::string>{"weight"});
  CHECK(!nobias.bias.defined());
  CHECK(nobias.forward(Variable(ops::ones({2, 5, 4}))).shape() == Shape{2, 5, 3});
  CHECK(nobias.forward(Variable(ops::ones({4}))).shape() == Shape{3});
}

TEST_CASE("layers: Linear forward by hand", "[nn][layers]") {
  nn::Linear lin(2, 2);
  Tensor w = ops::tensor({1, 2, 3, 4}, {2, 2}), b = ops::tensor({0.5, -1});
  nn::StateDict sd;
  sd.insert("weight", w);
  sd.insert("bias", b);
  lin.load_state_dict(sd);
  // [1, 1] W^T + b = [1 + 2 + 0.5, 3 + 4 - 1]
  CHECK(allclose(lin.forward(Variable(ops::tensor({1, 1}, {1, 2}))).data(), ops::tensor({3.5, 6}, {1, 2})));
}

TEST_CASE("layers: LayerNorm Flatten Identity and activations", "[nn][layers]") {
  nn::LayerNorm ln(Shape{2, 3});
  CHECK(ln.state_dict().keys() == std::vector<std::string>{"weight", "bias"});
  CHECK(allclose(ln.weight.data(), ops::ones({2, 3})));
  CHECK(allclose(ln.bias.data(), ops::zeros({2, 3})));
  nn::LayerNorm plain(4, 1e-5, false);
  CHECK(plain.state_dict().empty());
  // [1, 2, 3, 4]: mean 2.5, biased var 1.25.
  Tensor y = plain.forward(Variable(ops::tensor({1, 2, 3, 4}))).data();
  double s = std::sqrt(1.25 + 1e-5);
  CHECK(allclose(y, ops::tensor({-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s}), 1e-5, 1e-6));

  nn::Flatten flat;
  CHECK(flat.forward(Variable(ops::ones({2, 3, 4, 5}))).shape() == Shape{2, 60});
  CHECK(nn::Flatten(0, 1).forward(Variable(ops::ones({2, 3, 4}))).shape() == Shape{6, 4});
  Variable x(ops::tensor({-1, 0, 2}));
  CHECK(nn::Identity().forward(x).data().storage() == x.data().storage());
  CHECK(allclose(nn::ReLU().forward(x).data(), ops::tensor({0, 0, 2})));
  CHECK(allclose(nn::Tanh().forward(x).data(), ops::tensor({std::tanh(-1.0), 0, std::tanh(2.0)})));
  CHECK(allclose(nn::Sigmoid().forward(x).data(),
                 ops::tensor({1 / (1 + std::exp(1.0)), 0.5, 1 / (1 + std::exp(-2.0))})));
  // GELU(x) = x Φ(x), Φ(x) = (1 + erf(x / √2)) / 2.
  auto gelu = [](double v) { return v * 0.5 * (1 + std::erf(v / std::sqrt(2.0))); };
  CHECK(allclose(nn::GELU().forward(x).data(), ops::tensor({gelu(-1), 0, gelu(2)})));
}

TEST_CASE("layers: GELU(approximate = 'tanh') is GPT-2's gelu_new, with its derivatives", "[nn][layers]") {
  // 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))) (Hendrycks & Gimpel 2016, section 2)
  auto gelu_tanh = [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  };
  nn::GELU g("tanh");
  CHECK(g.approximate() == "tanh");
  Tensor x = ops::tensor({-3, -1, 0, 0.5, 2});  // float32: 1 + tanh cancels near -3, hence the absolute bound
  CHECK(allclose(g.forward(x).data(),
                 ops::tensor({gelu_tanh(-3), gelu_tanh(-1), 0, gelu_tanh(0.5), gelu_tanh(2)}), 1e-5, 1e-6));
  // within 1e-3 of the exact GELU, and not equal to it
  const Tensor exact = nn::GELU().forward(x).data();
  CHECK(allclose(g.forward(x).data(), exact, 0, 1e-3));
  CHECK_FALSE(allclose(g.forward(x).data(), exact, 0, 1e-6));
  auto f = [&](const std::vector<Variable>& v) { return g.forward(v[0]); };
  Variable x64(rand64({3, 4}, 9), true);
  CHECK(gradcheck(f, {x64}));
  CHECK(gradgradcheck(f, {x64}));
  CHECK_THROWS_WITH(nn::GELU("fast"),
                    Catch::Contains("GELU: approximate must be 'none' or 'tanh', got 'fast'"));
}

TEST_CASE("layers: Dropout follows the training flag", "[nn][layers]") {
  Generator g(5);
  nn::Dropout drop(0.5, &g);
  Variable x(ops::ones({1000}));
  Tensor y = drop.forward(x).data();
  int zeros = 0, twos = 0;
  for (double v : y.to_vector<double>()) {
    zeros += v == 0;
    twos += v == 2;
  }
  CHECK(zeros + twos == 1000);
  CHECK(zeros > 400);
  CHECK(zeros < 600);
  drop.eval();
  CHECK(allclose(drop.forward(x).data(), x.data(), 0, 0));
  drop.train();
  CHECK(!allclose(drop.forward(x).data(), x.data()));
  // The same seed gives the same mask.
  Generator g1(9), g2(9);
  nn::Dropout d1(0.3, &g1), d2(0.3, &g2);
  CHECK(allclose(d1.forward(x).data(), d2.forward(x).data(), 0, 0));
  CHECK(nn::Dropout(0.0).forward(x).data().storage() == x.data().storage());
}

TEST_CASE("layers: PositionWiseFFN and AddNorm as d2l", "[nn][layers][transformer]") {
  Generator g(1);
  nn::PositionWiseFFN ffn(4, 8, 6, &g);
  CHECK(ffn.state_dict().keys() ==
        std::vector<std::string>{"dense1.weight", "dense1.bias", "dense2.weight", "dense2.bias"});
  CHECK(ffn.state_dict().at("dense1.weight").shape() == Shape{8, 4});
  Variable x(ops::randn({2, 3, 4}, DType::Float32, Device::cpu(), &g));
  Tensor y = ffn.forward(x).data();
  CHECK(y.shape() == Shape{2, 3, 6});
  // dense2(relu(dense1(x))) by hand with ops.
  Tensor h =
      ops::relu(ops::add(ops::matmul(x.data(), ffn.dense1->weight.data().t()), ffn.dense1->bias.data()));
  Tensor ref = ops::add(ops::matmul(h, ffn.dense2->weight.data().t()), ffn.dense2->bias.data());
  CHECK(allclose(y, ref, 1e-5, 1e-6));

  nn::AddNorm an(4, 0.5, &g);
  CHECK(an.state_dict().keys() == std::vector<std::string>{"ln.weight", "ln.bias"});
  an.eval();  // no dropout: LayerNorm(Y + X)
  Variable X(ops::randn({2, 3, 4}, DType::Float32, Device::cpu(), &g));
  Variable Y(ops::randn({2, 3, 4}, DType::Float32, Device::cpu(), &g));
  CHECK(allclose(an.forward(X, Y).data(), ops::layer_norm(ops::add(X.data(), Y.data()), {4}), 1e-5, 1e-6));
  an.train();
  CHECK(an.forward(X, Y).shape() == Shape{2, 3, 4});
  REQUIRE_THROWS_SACCADE(an.forward(X, Variable(ops::ones({2, 4}))), "AddNorm");
}

TEST_CASE("layers: Embedding init and padding_idx", "[nn][layers]") {
  Generator g(11);
  nn::Embedding emb(6, 3, 2, &g);
  CHECK(emb.state_dict().keys() == std::vector<std::string>{"weight"});
  CHECK(emb.weight.shape() == Shape{6, 3});
  CHECK(allclose(emb.weight.data().select(0, 2), ops::zeros({3}), 0, 0));
  CHECK(nn::Embedding(6, 3, -1).padding_idx() == 5);  // normalised as torch
  // N(0, 1): a large table has mean ~0 and std ~1.
  nn::Embedding big(1000, 10, std::nullopt, &g);
  auto v = big.weight.data().to_vector<double>();
  double m = 0, sq = 0;
  for (double x : v) m += x / v.size();
  for (double x : v) sq += (x - m) * (x - m) / v.size();
  CHECK(std::abs(m) < 0.05);
  CHECK(std::abs(std::sqrt(sq) - 1) < 0.05);

  Tensor idx = ops::from_vector<int64_t>({0, 2, 2, 5}, {2, 2});
  Variable y = emb.forward(idx);
  CHECK(y.shape() == Shape{2, 2, 3});
  CHECK(allclose(y.data().select(0, 1).select(0, 1), emb.weight.data().select(0, 5), 0, 0));
  sum(y).backward();
  // Row 0 used once, row 5 once, the padding row twice but gets no gradient.
  CHECK(allclose(emb.weight.grad().select(0, 0), ops::ones({3})));
  CHECK(allclose(emb.weight.grad().select(0, 2), ops::zeros({3})));
  CHECK(allclose(emb.weight.grad().select(0, 1), ops::zeros({3})));
}

TEST_CASE("layers: Conv2d and pooling shapes and init", "[nn][layers][conv]") {
  Generator g(12);
  nn::Conv2d conv(3, 5, Size2{3, 2}, Size2{2, 1}, Size2{1, 0}, true, &g);
  auto sd = conv.state_dict();
  REQUIRE(sd.keys() == std::vector<std::string>{"weight", "bias"});
  CHECK(sd.at("weight").shape() == Shape{5, 3, 3, 2});
  double bound = 1 / std::sqrt(18.0);  // fan_in = 3 * 3 * 2
  for (double v : sd.at("weight").to_vector<double>()) CHECK(std::abs(v) <= bound);
  for (double v : sd.at("bias").to_vector<double>()) CHECK(std::abs(v) <= bound);
  // OH = (7 + 2 - 3) / 2 + 1 = 4, OW = (6 - 2) / 1 + 1 = 5
  CHECK(conv.forward(Variable(ops::ones({2, 3, 7, 6}))).shape() == Shape{2, 5, 4, 5});
  CHECK(conv.forward(Variable(ops::ones({3, 7, 6}))).shape() == Shape{5, 4, 5});  // unbatched
  CHECK(nn::Conv2d(3, 5, 3, 1, 0, false).state_dict().keys() == std::vector<std::string>{"weight"});
  CHECK(nn::MaxPool2d(2).forward(Variable(ops::ones({1, 2, 5, 4}))).shape() == Shape{1, 2, 2, 2});
  CHECK(nn::AvgPool2d(3, 1, 1).forward(Variable(ops::ones({2, 5, 4}))).shape() == Shape{2, 5, 4});
  // Max and mean of one 2x2 window by hand.
  Variable x(ops::tensor({1, -2, 7, 3}, {1, 1, 2, 2}));
  CHECK(nn::MaxPool2d(2).forward(x).item() == 7);
  CHECK(nn::AvgPool2d(2).forward(x).item() == 2.25);
}

TEST_CASE("layers: Sequential names its children as torch", "[nn][layers][sequential]") {
  Generator g(13);
  auto first = std::make_shared<nn::Linear>(4, 8, true, &g);
  nn::Sequential seq{first, std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(0.5, &g)};
  seq.push_back(std::make_shared<nn::Linear>(8, 2, true, &g));
  CHECK(seq.size() == 4);
  CHECK(seq[0] == first);
  std::vector<std::string> names;
  for (const auto& [k, p] : seq.named_parameters()) names.push_back(k);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias"});
  CHECK(seq.state_dict().at("3.weight").shape() == Shape{2, 8});

  // forward = the layers in order; eval() reaches the Dropout child.
  seq.eval();
  CHECK(!seq[2]->is_training());
  Variable x(ops::randn({5, 4}, DType::Float32, Device::cpu(), &g));
  Variable ref = seq[3]->forward(seq[1]->forward(first->forward(x)));
  CHECK(allclose(seq.forward(x).data(), ref.data(), 0, 0));
  seq.train();
  CHECK(seq[2]->is_training());
  CHECK(!allclose(seq.forward(x).data(), ref.data()));

  // Nested Sequentials and Lambda layers; an empty Sequential is the identity.
  nn::Sequential outer{
      std::make_shared<nn::Sequential>(
          std::initializer_list<std::shared_ptr<nn::UnaryModule>>{std::make_shared<nn::Linear>(4, 3)}),
      std::make_shared<nn::Lambda>([](const Variable& v) { return v * 2.0; }, "Double")};
  CHECK(outer.state_dict().keys() == std::vector<std::string>{"0.0.weight", "0.0.bias"});
  CHECK(outer.forward(x).shape() == Shape{5, 3});
  CHECK(nn::Sequential().forward(x).data().storage() == x.data().storage());

  // Errors name the layer.
  REQUIRE_THROWS_SACCADE(seq.forward(Variable(ops::ones({5, 3}))), "Sequential: layer 0 (Linear): Linear");
  REQUIRE_THROWS_SACCADE(seq.push_back(nullptr), "Sequential");
  REQUIRE_THROWS_SACCADE(seq[9], "Sequential");
}

// ---- agreement with PyTorch 1.13 ----

namespace {

// Loads torch's parameters (under torch's names, strictly: this proves names and layouts match), runs forward
// and backward on torch's inputs, and compares the output, the parameter gradients and the input gradient.
void agree_with_torch(const std::string& name, nn::UnaryModule& m, bool float_input = true,
                      const std::string& input = "x") {
  TorchCase c("layers_modules.safetensors", name);
  m.load_state_dict(c.params());
  Variable x(c.in(input), float_input);
  Variable y = m.forward(x);
  CHECK(c.compare("out", y.data(), c.out()) <= 1e-5);
  c.backward({y});
  CHECK(c.compare_param_grads(m) <= 1e-5);
  if (float_input) CHECK(c.compare("grad " + input, x.grad(), c.at("gin", input)) <= 1e-5);
}

}  // namespace

TEST_CASE("layers: Linear agrees with torch", "[nn][layers][torch]") {
  nn::Linear lin(5, 4);
  agree_with_torch("linear", lin);
  nn::Linear nobias(5, 4, false);
  agree_with_torch("linear_nobias", nobias);
}

TEST_CASE("layers: Conv2d and pooling agree with torch", "[nn][layers][conv][torch]") {
  nn::Conv2d conv(3, 4, Size2{3, 2}, Size2{2, 1}, Size2{1, 2});
  agree_with_torch("conv", conv);
  nn::Conv2d plain(2, 3, 3);
  agree_with_torch("conv_plain", plain);
  nn::MaxPool2d maxpool(2);
  agree_with_torch("maxpool", maxpool);
  nn::AvgPool2d avgpool(3, 2, 1);
  agree_with_torch("avgpool", avgpool);
}

TEST_CASE("layers: LayerNorm and Embedding agree with torch", "[nn][layers][torch]") {
  nn::LayerNorm ln(Shape{3, 4});
  agree_with_torch("layernorm", ln);
  nn::Embedding emb(10, 4, 1);
  agree_with_torch("embedding", emb, false, "idx");
}

TEST_CASE("layers: PositionWiseFFN and Sequential agree with torch", "[nn][layers][torch]") {
  nn::PositionWiseFFN ffn(4, 8, 6);
  agree_with_torch("ffn", ffn);
  nn::Sequential seq{std::make_shared<nn::Conv2d>(1, 2, 3, 1, 1), std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::MaxPool2d>(2),          std::make_shared<nn::Flatten>(),
                     std::make_shared<nn::Linear>(8, 3),          std::make_shared<nn::Tanh>()};
  agree_with_torch("sequential", seq);
}

// ---- float64 gradchecks over inputs and parameters ----

TEST_CASE("layers: gradcheck of Linear LayerNorm FFN AddNorm and activations", "[nn][layers][gradcheck]") {
  Generator g(2);
  nn::Linear lin(3, 2, true, &g);
  lin.to(DType::Float64);
  Variable x = leaf64({4, 3}, 1);
  CHECK(module_gradcheck([&] { return lin.forward(x); }, leaves(lin, {x})));
  Variable xt = Variable(rand64({3, 2, 2}, 2).permute({1, 2, 0}), true);  // non-contiguous (2, 2, 3)
  CHECK(module_gradcheck([&] { return lin.forward(xt); }, leaves(lin, {xt})));

  nn::LayerNorm ln(Shape{2, 3});
  ln.to(DType::Float64);
  {
    NoGradGuard ng;  // non-trivial affine parameters
    Tensor w = ln.weight.data(), b = ln.bias.data();
    ops::copy_(w, rand64({2, 3}, 3));
    ops::copy_(b, rand64({2, 3}, 4));
  }
  Variable y = leaf64({2, 2, 3}, 5);
  CHECK(module_gradcheck([&] { return ln.forward(y); }, leaves(ln, {y})));

  nn::PositionWiseFFN ffn(3, 4, 2, &g);
  ffn.to(DType::Float64);
  Variable z = leaf64({2, 2, 3}, 6);
  CHECK(module_gradcheck([&] { return ffn.forward(z); }, leaves(ffn, {z})));

  nn::AddNorm an(3, 0.0);
  an.to(DType::Float64);
  Variable X = leaf64({2, 3}, 7), Y = leaf64({2, 3}, 8);
  CHECK(module_gradcheck([&] { return an.forward(X, Y); }, leaves(an, {X, Y})));

  Variable a = leaf64({2, 3}, 9);
  nn::GELU gelu;
  nn::Tanh tanh_;
  nn::Sigmoid sig;
  nn::Flatten flat;
  CHECK(module_gradcheck([&] { return gelu.forward(a); }, {a}));
  CHECK(module_gradcheck([&] { return tanh_.forward(a); }, {a}));
  CHECK(module_gradcheck([&] { return sig.forward(a); }, {a}));
  CHECK(module_gradcheck([&] { return flat.forward(a); }, {a}));
}

TEST_CASE("layers: gradcheck of Conv2d pooling Embedding and Sequential", "[nn][layers][gradcheck]") {
  Generator g(3);
  nn::Conv2d conv(2, 2, Size2{2, 3}, Size2{2, 1}, Size2{1, 1}, true, &g);
  conv.to(DType::Float64);
  Variable x = leaf64({1, 2, 3, 4}, 1);
  CHECK(module_gradcheck([&] { return conv.forward(x); }, leaves(conv, {x})));
  Variable xu = leaf64({2, 3, 3}, 2);  // unbatched
  CHECK(module_gradcheck([&] { return conv.forward(xu); }, leaves(conv, {xu})));

  nn::MaxPool2d maxpool(2, 1);
  nn::AvgPool2d avgpool(2, 1, 1);
  Variable y = leaf64({1, 2, 3, 3}, 3);
  CHECK(module_gradcheck([&] { return maxpool.forward(y); }, {y}));
  CHECK(module_gradcheck([&] { return avgpool.forward(y); }, {y}));

  // The padding row gets no gradient by design (torch's rule), so the checked indices avoid it; with padding
  // in the indices, every other row must still be right.
  nn::Embedding emb(5, 3, 3, &g);
  emb.to(DType::Float64);
  Tensor idx = ops::from_vector<int64_t>({1, 0, 4, 4, 2, 0}, {2, 3});
  CHECK(module_gradcheck([&] { return emb.forward(idx); }, leaves(emb, {})));
  Tensor with_pad = ops::from_vector<int64_t>({1, 3, 4, 3}, {4});
  Variable w = emb.weight;
  w.zero_grad();
  Generator gr(1);
  Tensor r = ops::randn({4, 3}, DType::Float64, Device::cpu(), &gr);
  sum(emb.forward(with_pad) * Variable(r)).backward();
  CHECK(allclose(w.grad().select(0, 3), ops::zeros({3}, DType::Float64), 0, 0));
  CHECK(allclose(w.grad().select(0, 4), r.select(0, 2), 0, 0));

  nn::Sequential seq{std::make_shared<nn::Linear>(3, 4, true, &g), std::make_shared<nn::GELU>(),
                     std::make_shared<nn::LayerNorm>(4), std::make_shared<nn::Linear>(4, 2, true, &g)};
  seq.to(DType::Float64);
  Variable z = leaf64({2, 3}, 4);
  CHECK(module_gradcheck([&] { return seq.forward(z); }, leaves(seq, {z})));
}

TEST_CASE("layers: gradcheck of Dropout with a fixed mask", "[nn][layers][gradcheck]") {
  Generator g(4);
  nn::Dropout drop(0.4, &g);
  Variable x = leaf64({3, 4}, 1);
  // Reset the generator before every call so that the finite differences see the same mask.
  CHECK(module_gradcheck(
      [&] {
        g = Generator(4);
        return drop.forward(x);
      },
      {x}));
}

// ---- bad input ----

TEST_CASE("layers: bad input names the module", "[nn][layers][errors]") {
  nn::Linear lin(4, 3);
  REQUIRE_THROWS_SACCADE(lin.forward(Variable(ops::ones({2, 5}))), "Linear");
  REQUIRE_THROWS_SACCADE(lin.forward(Variable()), "Linear");
  REQUIRE_THROWS_SACCADE(nn::Linear(-1, 3), "Linear");
  nn::LayerNorm ln(Shape{2, 3});
  REQUIRE_THROWS_SACCADE(ln.forward(Variable(ops::ones({3, 2}))), "LayerNorm");
  REQUIRE_THROWS_SACCADE(ln.forward(Variable(ops::ones({3}))), "LayerNorm");
  REQUIRE_THROWS_SACCADE(nn::LayerNorm(Shape{}), "LayerNorm");
  REQUIRE_THROWS_SACCADE(nn::Dropout(1.0), "Dropout");
  REQUIRE_THROWS_SACCADE(nn::Dropout(-0.1), "Dropout");
  REQUIRE_THROWS_SACCADE(nn::Flatten(1, 5).forward(Variable(ops::ones({2, 3}))), "Flatten");
  REQUIRE_THROWS_SACCADE(nn::ReLU().forward(Variable()), "ReLU");
  nn::PositionWiseFFN ffn(4, 8, 4);
  REQUIRE_THROWS_SACCADE(ffn.forward(Variable(ops::ones({2, 3}))), "Linear");

  nn::Embedding emb(5, 3);
  REQUIRE_THROWS_SACCADE(emb.forward(ops::from_vector<int64_t>({0, 5}, {2})), "Embedding");
  REQUIRE_THROWS_SACCADE(emb.forward(ops::from_vector<int64_t>({-1}, {1})), "Embedding");
  REQUIRE_THROWS_SACCADE(emb.forward(Variable(ops::ones({2}))), "Embedding");
  REQUIRE_THROWS_SACCADE(nn::Embedding(5, 3, 5), "Embedding");
  REQUIRE_THROWS_SACCADE(nn::Embedding(0, 3), "Embedding");

  nn::Conv2d conv(3, 4, 3);
  REQUIRE_THROWS_SACCADE(conv.forward(Variable(ops::ones({1, 2, 5, 5}))), "Conv2d");  // channels
  REQUIRE_THROWS_SACCADE(conv.forward(Variable(ops::ones({3, 5}))), "Conv2d");        // rank
  REQUIRE_THROWS_SACCADE(conv.forward(Variable(ops::ones({1, 3, 2, 5}))), "Conv2d");  // kernel > input
  REQUIRE_THROWS_SACCADE(nn::Conv2d(3, 4, 3, 0), "Conv2d");
  REQUIRE_THROWS_SACCADE(nn::MaxPool2d(2).forward(Variable(ops::ones({4, 4}))), "MaxPool2d");
  REQUIRE_THROWS_SACCADE(nn::AvgPool2d(5).forward(Variable(ops::ones({1, 1, 4, 4}))), "AvgPool2d");
  REQUIRE_THROWS_SACCADE(nn::Linear(4, 3).forward(Variable(ops::ones({2, 4}, DType::Int64))), "Linear");
}
