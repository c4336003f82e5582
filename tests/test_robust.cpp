// Bad input never crashes (issue 10): the regression cases of the independent check, the error chain of
// composite modules, and the API frictions (printing, cross_entropy over (N, C, d...), Module::to chaining,
// d2l state_dict names, half-precision safetensors).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "tests/helpers.h"

using namespace saccade;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST_CASE("checked sizes: overflowing, negative and absurd shapes are refused by the op called", "[robust]") {
  const int64_t two32 = int64_t{1} << 32;
  REQUIRE_THROWS_SACCADE(ops::zeros({two32, two32}), "zeros: size too large");
  REQUIRE_THROWS_SACCADE(ops::empty({int64_t{1} << 40}), "empty: cannot allocate");
  REQUIRE_THROWS_SACCADE(ops::ones({3, -1}), "ones: negative size");
  REQUIRE_THROWS_SACCADE(ops::full({kMax, 2}, 1.0), "full: size too large");
  REQUIRE_THROWS_SACCADE(ops::rand({kMax}), "rand");
  REQUIRE_THROWS_SACCADE(ops::eye(kMax), "eye");
  REQUIRE_THROWS_SACCADE(ops::eye(3, int64_t{1} << 62), "eye");
  REQUIRE_THROWS_SACCADE(ops::arange(0, 1e300, 1, DType::Float64), "arange: size too large");
  REQUIRE_THROWS_SACCADE(ops::arange(0, 1e300), "arange: value 1e+300 cannot be converted to int64");
  REQUIRE_THROWS_SACCADE(ops::linspace(0, 1, kMax), "linspace");
  REQUIRE_THROWS_SACCADE(ops::randperm(kMax), "randperm");
  REQUIRE_THROWS_SACCADE(ops::randint(0, 5, {two32, two32}), "randint");
  // a zero size does not excuse an overflowing product of the others (the strides would overflow)
  REQUIRE_THROWS_SACCADE(ops::zeros({0, two32, two32}), "size too large");
  CHECK(ops::zeros({0, 5}).numel() == 0);
  // empty, with a huge other dim: the CPU loop returns before forming byte strides (UBSan found
  // 2^62 * 8 overflowing there, at fuzz case 47048)
  CHECK(ops::zeros({0, int64_t{1} << 62}, DType::Int64).numel() == 0);
  CHECK(ops::eye(0, int64_t{1} << 62, DType::Float64).numel() == 0);
  // randint over the whole int64 range: no overflow in high - low
  Generator g(3);
  auto v =
      ops::randint(std::numeric_limits<int64_t>::min(), kMax, {1000}, Device::cpu(), &g).to_vector<int64_t>();
  CHECK(*std::min_element(v.begin(), v.end()) < 0);
  CHECK(*std::max_element(v.begin(), v.end()) > 0);
}

TEST_CASE("views: expand, narrow, slice and size at the int64 limits", "[robust]") {
  Tensor t = ops::ones({1, 2});
  REQUIRE_THROWS_SACCADE(t.expand({-2, 2}), "expand");
  REQUIRE_THROWS_SACCADE(t.expand({kMax, kMax, 2}), "expand: size too large");
  REQUIRE_THROWS_SACCADE(t.narrow(1, kMax, 2), "narrow");
  REQUIRE_THROWS_SACCADE(t.narrow(1, 1, kMax), "narrow");
  Tensor s = ops::arange(10.0).slice(0, 1, kMax, kMax);  // one element, no overflow in the stride
  CHECK(s.to_vector<int64_t>() == std::vector<int64_t>{1});
  CHECK(ops::arange(10.0).slice(0, 0, 10, 3).to_vector<int64_t>() == std::vector<int64_t>{0, 3, 6, 9});
  REQUIRE_THROWS_SACCADE(ops::scalar_tensor(1.0).size(0), "size: dim 0 requested of a 0-d tensor");
  REQUIRE_THROWS_SACCADE(ops::arange(4.0).view({int64_t{1} << 32, int64_t{1} << 32, 0}), "view");
  REQUIRE_THROWS_SACCADE(
      ops::conv2d(ops::ones({1, 1, 4, 4}), ops::ones({1, 1, 2, 2}), Tensor(), {int64_t{1} << 32, 1}),
      "conv2d: kernel size, stride and padding must be at most 2^30");
}

TEST_CASE("an undefined Tensor throws from every method instead of crashing", "[robust]") {
  Tensor u;
  REQUIRE_THROWS_SACCADE(u.to(DType::Float64), "to: called on an undefined tensor");
  REQUIRE_THROWS_SACCADE(u.contiguous(), "contiguous");
  REQUIRE_THROWS_SACCADE(u.clone(), "clone");
  REQUIRE_THROWS_SACCADE(u.item(), "item");
  REQUIRE_THROWS_SACCADE(u.view({1}), "view");
  REQUIRE_THROWS_SACCADE(u.size(0), "size");
  REQUIRE_THROWS_SACCADE(u.data<float>(), "data");
  REQUIRE_THROWS_SACCADE(u.to_vector<float>(), "to_vector");
  REQUIRE_THROWS_SACCADE(ops::zeros_like(u), "zeros_like");
}

TEST_CASE("modules refuse huge constructor arguments naming the module", "[robust]") {
  const int64_t big = 10'000'000'000'000;
  REQUIRE_THROWS_SACCADE(nn::Linear(big, big), "Linear");
  REQUIRE_THROWS_SACCADE(nn::Embedding(big, big), "Embedding");
  REQUIRE_THROWS_SACCADE(nn::GRUCell(4, kMax / 2), "GRUCell");
  REQUIRE_THROWS_SACCADE(nn::PositionalEncoding(big, 0.0, big), "PositionalEncoding");
  REQUIRE_THROWS_SACCADE(nn::PositionalEncoding2D(2, 0.0, big, big), "PositionalEncoding2D");
  REQUIRE_THROWS_SACCADE(nn::MultiHeadAttention(kMax - 1, 1, {.layout = nn::ParameterLayout::Packed}),
                         "MultiHeadAttention");
  REQUIRE_THROWS_SACCADE(nn::BahdanauDecoderCell(kMax, 4, 4), "BahdanauDecoderCell");
  REQUIRE_THROWS_SACCADE(nn::PositionWiseFFN(big, big, 2), "PositionWiseFFN > Linear");
  nn::PositionalEncoding pe(4, 0.0, 8);
  REQUIRE_THROWS_SACCADE(pe.forward(Variable(ops::zeros({1, 2, 4})), kMax), "PositionalEncoding");
}

TEST_CASE("errors inside a composite name the outer module first", "[robust]") {
  REQUIRE_THROWS_SACCADE(nn::AddNorm(4, INFINITY),
                         "AddNorm > Dropout: expected a probability p in [0, 1), got inf");
  // the user's shapes are listed, and the inner layer's own message follows
  nn::MultiHeadAttention mha(8, 2);
  Variable q(ops::zeros({2, 3, 8}, DType::Float64)), k(ops::zeros({2, 5, 8}, DType::Float64));
  REQUIRE_THROWS_SACCADE(
      mha.forward(q, k, k),
      "MultiHeadAttention([2, 3, 8], [2, 5, 8], [2, 5, 8]) > Linear: expected a float32 input");
  // a float64 input to a float32 module names the module, not matmul
  nn::MultiHeadAttention torch_mha(8, 2, {.layout = nn::ParameterLayout::Packed});
  Variable q64(ops::zeros({2, 3, 8}, DType::Float64));
  REQUIRE_THROWS_SACCADE(torch_mha.forward(q64, q64, q64, {.need_weights = true}),
                         "MultiHeadAttention([2, 3, 8]");
  nn::Linear lin(3, 2);
  REQUIRE_THROWS_SACCADE(lin.forward(Variable(ops::zeros({4, 3}, DType::Float64))),
                         "Linear: expected a float32 input");
  // ErrorScope nests and unwinds: outside every scope, messages are unchanged
  {
    ErrorScope outer("Outer");
    ErrorScope inner("Inner");
    REQUIRE_THROWS_SACCADE(ops::ones({-1}), "Outer > Inner > ones: negative size");
  }
  try {
    ops::ones({-1});
  } catch (const Error& e) {
    CHECK(std::string(e.what()).rfind("ones: negative size", 0) == 0);
  }
}

TEST_CASE("DType and Device print with operator<< as with fmt", "[robust]") {
  std::ostringstream os;
  os << DType::Float64 << " " << Device::cpu();
  CHECK(os.str() == fmt::format("{} {}", DType::Float64, Device::cpu()));
  CHECK(os.str() == "float64 cpu");
}

TEST_CASE("cross_entropy accepts (N, C, d...) logits like F.cross_entropy", "[robust]") {
  // (N, C, T) against (N, T) equals the (N*T, C) form after moving classes last
  Tensor logits = testing::rand64({2, 3, 4}, 5);
  Tensor target = ops::tensor({0, 1, 2, 1, 2, 0, 0, 1}, {2, 4}, DType::Int64);
  Variable x(logits, true);
  Variable loss = cross_entropy(x, target, -100, Reduction::None);
  REQUIRE(loss.shape() == Shape{2, 4});
  Tensor flat = logits.permute({0, 2, 1}).reshape({8, 3});
  Tensor ref = ops::cross_entropy(flat, target.reshape({8}), -100, Reduction::None).reshape({2, 4});
  CHECK(testing::allclose(loss.data(), ref, 1e-12));
  CHECK(gradcheck([&](const std::vector<Variable>& in) { return cross_entropy(in[0], target); }, {x}));
  REQUIRE_THROWS_SACCADE(cross_entropy(x, ops::zeros({2, 3}, DType::Int64)),
                         "cross_entropy: expected target of shape [2, 4]");
  // no classes: refused by cross_entropy itself (the flattening reshape({-1, 0}) used to fail first,
  // misnamed)
  Variable none(ops::zeros({3, 0, 3}), true);
  REQUIRE_THROWS_WITH(cross_entropy(none, ops::zeros({3, 3}, DType::Int64)),
                      Catch::StartsWith("cross_entropy: "));
}

TEST_CASE("Module::to returns the module for chaining", "[robust]") {
  auto lin = std::make_shared<nn::Linear>(3, 2);
  nn::Module& m = lin->to(DType::Float64).to(Device::cpu());
  CHECK(&m == lin.get());
  CHECK(lin->weight.dtype() == DType::Float64);
}

TEST_CASE("d2l's stacked block names load through from_d2l_names", "[robust]") {
  nn::TransformerEncoder enc(8, 16, 2, 2, 0.0);
  nn::StateDict d2l;
  for (const auto& [k, t] : enc.state_dict()) {
    std::string key = k;
    key.replace(0, 5, "blks.block");  // "blks.0." -> "blks.block0."
    d2l.insert(key, ops::full_like(t, 0.25));
  }
  REQUIRE(d2l.contains("blks.block1.attention.W_q.weight"));
  enc.load_state_dict(nn::from_d2l_names(d2l));
  CHECK(enc.blks[1]->attention->W_q->weight.data().to_vector<float>()[0] == 0.25f);
}

TEST_CASE("safetensors F16 and BF16 tensors load as themselves, with exact values", "[robust]") {
  // values exact in both formats: 1, -2, 0.5, a half subnormal (2^-24), inf
  const std::vector<uint16_t> f16{0x3c00, 0xc000, 0x3800, 0x0001, 0x7c00};
  const std::vector<uint16_t> bf16{0x3f80, 0xc000, 0x3f00, 0x3380, 0x7f80};
  std::string header = R"({"a":{"dtype":"F16","shape":[5],"data_offsets":[0,10]},)"
                       R"("b":{"dtype":"BF16","shape":[5],"data_offsets":[10,20]}})";
  auto path = std::filesystem::temp_directory_path() / "saccade_half_test.safetensors";
  {
    std::ofstream f(path, std::ios::binary);
    uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header;
    f.write(reinterpret_cast<const char*>(f16.data()), 10);
    f.write(reinterpret_cast<const char*>(bf16.data()), 10);
  }
  nn::Safetensors s = nn::load_safetensors(path.string());
  std::filesystem::remove(path);
  const std::vector<float> want{1, -2, 0.5f, 0x1p-24f, INFINITY};
  CHECK(s.tensors.at("a").dtype() == DType::Float16);  // (issue 26; they were widened to float32 before)
  CHECK(s.tensors.at("b").dtype() == DType::BFloat16);
  CHECK(s.tensors.at("a").to_vector<float>() == want);
  CHECK(s.tensors.at("b").to_vector<float>() == std::vector<float>{1, -2, 0.5f, 0x1p-24f, INFINITY});
}

TEST_CASE("backward through zero-width products: matmul, linear and embedding with K = 0 or D = 0",
          "[robust]") {
  // Found by the fuzz test at 10^5 cases: the backward reshaped to {-1, 0}, which cannot infer its -1.
  Variable x(ops::randn({2, 3, 0}, DType::Float64), true), w(ops::randn({0, 4}, DType::Float64), true);
  Variable y = matmul(x, w);  // (2, 3, 4) of zeros
  sum(y).backward();
  CHECK(x.grad().shape() == Shape({2, 3, 0}));
  CHECK(w.grad().shape() == Shape({0, 4}));
  CHECK(ops::sum(ops::abs(w.grad())).item<double>() == 0);

  Variable a(ops::randn({5, 0}, DType::Float64), true), wl(ops::randn({3, 0}, DType::Float64), true);
  Variable b(ops::randn({3}, DType::Float64), true);
  sum(linear(a, wl, b)).backward();
  CHECK(wl.grad().shape() == Shape({3, 0}));
  CHECK(b.grad().to_vector<double>() == std::vector<double>{5, 5, 5});  // db = Σ_rows g = 5 rows of ones

  Variable table(ops::randn({4, 0}, DType::Float64), true);
  sum(embedding(table, ops::tensor({1, 3, 3}, DType::Int64))).backward();
  CHECK(table.grad().shape() == Shape({4, 0}));
}
