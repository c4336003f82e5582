// conv2d, max_pool2d, avg_pool2d: hand values, PyTorch fixtures (tests/fixtures/make_conv.py), gradchecks,
// bad input.
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>

#include "helpers.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;

namespace {

// Reads tests/data/conv_fixtures.txt: `name ndim sizes... values...` per line; names ending in "idx" are
// int64.
const std::map<std::string, Tensor>& fixtures() {
  static const std::map<std::string, Tensor> m = [] {
    std::map<std::string, Tensor> out;
    std::ifstream in(SACCADE_TEST_DATA_DIR "/conv_fixtures.txt");
    REQUIRE(in.good());
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string name;
      int nd = 0;
      ls >> name >> nd;
      Shape shape;
      for (int i = 0; i < nd; ++i) {
        int64_t s;
        ls >> s;
        shape.push_back(s);
      }
      std::vector<double> v(static_cast<size_t>(shape.numel()));
      for (double& x : v) ls >> x;
      REQUIRE(!ls.fail());
      Tensor t = ops::from_vector(v, shape);
      out[name] = name.ends_with("idx") ? t.to(DType::Int64) : t;
    }
    return out;
  }();
  return m;
}

const Tensor& fx(const std::string& name) {
  auto it = fixtures().find(name);
  REQUIRE(it != fixtures().end());
  return it->second;
}

Variable leaf(const Tensor& t) { return Variable(t, true); }

}  // namespace

TEST_CASE("conv2d: hand-computed values", "[ops][conv]") {
  // x = 1..9 as 3x3, an all-ones 2x2 kernel: each output sums a 2x2 window; bias 1
  Tensor x = ops::tensor({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor w = ops::ones({1, 1, 2, 2});
  REQUIRE(allclose(ops::conv2d(x, w, ops::tensor({1})), ops::tensor({13, 17, 25, 29}, {1, 1, 2, 2})));
  // padding 1, stride 2: windows at rows/cols -1 and 1: [1, 2+3, 4+7, 5+6+8+9]
  REQUIRE(allclose(ops::conv2d(x, w, Tensor(), {2, 2}, {1, 1}), ops::tensor({1, 5, 11, 28}, {1, 1, 2, 2})));
  // two output channels: identity-like kernel picking the top-left, and one picking the bottom-right
  Tensor w2 = ops::tensor({1, 0, 0, 0, 0, 0, 0, 1}, {2, 1, 2, 2});
  REQUIRE(allclose(ops::conv2d(x, w2, Tensor()), ops::tensor({1, 2, 4, 5, 5, 6, 8, 9}, {1, 2, 2, 2})));
}

TEST_CASE("conv2d: matches PyTorch fixtures forward and backward", "[ops][conv]") {
  const std::pair<std::string, std::pair<Size2, Size2>> cases[] = {
      {"conv_a", {{2, 1}, {1, 2}}}, {"conv_b", {{3, 2}, {0, 1}}}, {"conv_c", {{1, 1}, {0, 0}}}};
  for (const auto& [name, sp] : cases) {
    INFO(name);
    const auto [stride, padding] = sp;
    bool has_bias = fixtures().count(name + ".b") > 0;
    Tensor b = has_bias ? fx(name + ".b") : Tensor();
    Tensor y = ops::conv2d(fx(name + ".x"), fx(name + ".w"), b, stride, padding);
    REQUIRE(allclose(y, fx(name + ".y"), 1e-10, 1e-10));
    // float32 too
    Tensor y32 = ops::conv2d(fx(name + ".x").to(DType::Float32), fx(name + ".w").to(DType::Float32),
                             has_bias ? b.to(DType::Float32) : Tensor(), stride, padding);
    REQUIRE(allclose(y32, fx(name + ".y"), 1e-4, 1e-4));
    // through autograd: L = sum(y * r)
    Variable vx = leaf(fx(name + ".x")), vw = leaf(fx(name + ".w")), vb = has_bias ? leaf(b) : Variable();
    sum(conv2d(vx, vw, vb, stride, padding) * Variable(fx(name + ".r"))).backward();
    REQUIRE(allclose(vx.grad(), fx(name + ".gx"), 1e-10, 1e-10));
    REQUIRE(allclose(vw.grad(), fx(name + ".gw"), 1e-10, 1e-10));
    if (has_bias) REQUIRE(allclose(vb.grad(), fx(name + ".gb"), 1e-10, 1e-10));
  }
}

TEST_CASE("max_pool2d's 2x2 stride-2 fast path equals the general window loop", "[ops][conv]") {
  // the readable rule: each window row by row, the first maximum, a NaN wins (the last NaN); H and W odd, so
  // the last row and column belong to no window
  auto reference = [](const std::vector<double>& x, int64_t planes, int64_t H, int64_t W) {
    std::vector<double> v;
    std::vector<int64_t> ix;
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t oh = 0; oh < H / 2; ++oh)
        for (int64_t ow = 0; ow < W / 2; ++ow) {
          double best = -std::numeric_limits<double>::infinity();
          int64_t at = 2 * oh * W + 2 * ow;
          for (int64_t h = 2 * oh; h < 2 * oh + 2; ++h)
            for (int64_t w = 2 * ow; w < 2 * ow + 2; ++w) {
              const double e = x[p * H * W + h * W + w];
              if (e > best || std::isnan(e)) best = e, at = h * W + w;
            }
          v.push_back(best), ix.push_back(at);
        }
    return std::pair{v, ix};
  };
  const int64_t N = 2, C = 3, H = 7, W = 9;
  std::vector<double> x(N * C * H * W);
  std::mt19937 rng(11);
  for (auto& e : x) e = static_cast<double>(rng() % 5) - 2;  // few levels: many ties
  x[3] = x[40] = x[41] = std::nan("");
  x[70] = x[71] = x[70 + W] = x[71 + W] = -std::numeric_limits<double>::infinity();
  const auto [want_v, want_i] = reference(x, N * C, H, W);
  for (DType dt : {DType::Float32, DType::Float64}) {
    INFO(dt);
    ops::ValuesIndices r = ops::max_pool2d(ops::from_vector(x, {N, C, H, W}).to(dt), {2, 2});
    REQUIRE(r.values.shape() == Shape{N, C, H / 2, W / 2});
    REQUIRE(r.indices.to_vector<int64_t>() == want_i);
    const std::vector<double> got = r.values.to(DType::Float64).to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i)
      REQUIRE((got[i] == want_v[i] || (std::isnan(got[i]) && std::isnan(want_v[i]))));
  }
}

TEST_CASE("pooling: hand-computed values", "[ops][conv]") {
  Tensor x = ops::arange(16, DType::Float64).reshape({1, 1, 4, 4});
  ops::ValuesIndices r = ops::max_pool2d(x, {2, 2});
  REQUIRE(allclose(r.values, ops::tensor({5, 7, 13, 15}, {1, 1, 2, 2}, DType::Float64)));
  REQUIRE(r.indices.dtype() == DType::Int64);
  REQUIRE(r.indices.to_vector<int64_t>() == std::vector<int64_t>{5, 7, 13, 15});
  // average of each 2x2 block: (0+1+4+5)/4 = 2.5, ...
  REQUIRE(allclose(ops::avg_pool2d(x, {2, 2}),
                   ops::tensor({2.5, 4.5, 10.5, 12.5}, {1, 1, 2, 2}, DType::Float64)));
  // padding 1 with kernel 2 stride 2: the corner window holds x[0,0] and three padding zeros -> 0/4, 1+2 ->
  // 3/4
  Tensor a = ops::avg_pool2d(x, {2, 2}, {2, 2}, {1, 1});
  REQUIRE(a.shape() == Shape{1, 1, 3, 3});
  REQUIRE(allclose(a.narrow(3, 0, 2).narrow(2, 0, 1), ops::tensor({0, 0.75}, {1, 1, 1, 2}, DType::Float64)));
  // max pool gradient goes to the arg-max positions
  Tensor gx = ops::max_pool2d_backward(ops::ones({1, 1, 2, 2}, DType::Float64), r.indices, x.shape());
  REQUIRE(gx.to_vector<double>() == std::vector<double>{0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1});
}

TEST_CASE("pooling: matches PyTorch fixtures forward and backward", "[ops][conv]") {
  ops::ValuesIndices r = ops::max_pool2d(fx("maxpool.x"), {3, 2}, {2, 2}, {1, 1});
  REQUIRE(allclose(r.values, fx("maxpool.y"), 1e-12, 1e-12));
  REQUIRE(r.indices.to_vector<int64_t>() == fx("maxpool.idx").to_vector<int64_t>());
  Variable vx = leaf(fx("maxpool.x"));
  sum(max_pool2d(vx, {3, 2}, {2, 2}, {1, 1}) * Variable(fx("maxpool.r"))).backward();
  REQUIRE(allclose(vx.grad(), fx("maxpool.gx"), 1e-12, 1e-12));

  REQUIRE(allclose(ops::avg_pool2d(fx("avgpool.x"), {3, 3}, {2, 1}, {1, 1}), fx("avgpool.y"), 1e-12, 1e-12));
  Variable va = leaf(fx("avgpool.x"));
  sum(avg_pool2d(va, {3, 3}, {2, 1}, {1, 1}) * Variable(fx("avgpool.r"))).backward();
  REQUIRE(allclose(va.grad(), fx("avgpool.gx"), 1e-12, 1e-12));
  // float32
  REQUIRE(allclose(ops::avg_pool2d(fx("avgpool.x").to(DType::Float32), {3, 3}, {2, 1}, {1, 1}),
                   fx("avgpool.y"), 1e-5, 1e-5));
}

TEST_CASE("conv2d: gradcheck with stride padding and strided inputs", "[autograd][conv]") {
  auto f = [](Size2 s, Size2 p) {
    return [s, p](const std::vector<Variable>& v) { return conv2d(v[0], v[1], v[2], s, p); };
  };
  REQUIRE(gradcheck(f({1, 1}, {0, 0}),
                    {leaf(rand64({1, 2, 4, 4}, 1)), leaf(rand64({2, 2, 3, 3}, 2)), leaf(rand64({2}, 3))}));
  REQUIRE(gradcheck(f({2, 1}, {1, 2}),
                    {leaf(rand64({2, 1, 5, 4}, 4)), leaf(rand64({2, 1, 3, 2}, 5)), leaf(rand64({2}, 6))}));
  REQUIRE(gradcheck(f({2, 2}, {1, 1}),
                    {leaf(rand64({1, 2, 5, 5}, 7)), leaf(rand64({1, 2, 2, 2}, 8)), Variable()}));
  // non-contiguous input (an NHWC tensor viewed as NCHW) and weight (permuted)
  REQUIRE(gradcheck(f({1, 2}, {1, 0}),
                    {leaf(rand64({1, 4, 3, 2}, 9).permute({0, 3, 1, 2})),
                     leaf(rand64({2, 2, 2, 2}, 10).permute({1, 0, 2, 3})), leaf(rand64({2}, 11))}));
}

TEST_CASE("pooling: gradcheck", "[autograd][conv]") {
  auto fmax = [](Size2 k, Size2 s, Size2 p) {
    return [k, s, p](const std::vector<Variable>& v) { return max_pool2d(v[0], k, s, p); };
  };
  auto favg = [](Size2 k, Size2 s, Size2 p) {
    return [k, s, p](const std::vector<Variable>& v) { return avg_pool2d(v[0], k, s, p); };
  };
  REQUIRE(gradcheck(fmax({2, 2}, {0, 0}, {0, 0}), {leaf(rand64({2, 2, 4, 4}, 20))}));
  REQUIRE(gradcheck(fmax({3, 2}, {2, 1}, {1, 1}), {leaf(rand64({1, 2, 5, 4}, 21))}));
  REQUIRE(gradcheck(fmax({2, 2}, {1, 1}, {0, 0}), {leaf(rand64({1, 4, 4, 2}, 22).permute({0, 3, 1, 2}))}));
  REQUIRE(gradcheck(favg({2, 2}, {0, 0}, {0, 0}), {leaf(rand64({2, 2, 4, 4}, 23))}));
  REQUIRE(gradcheck(favg({3, 3}, {2, 1}, {1, 1}), {leaf(rand64({1, 2, 5, 4}, 24))}));
  REQUIRE(gradcheck(favg({2, 3}, {1, 2}, {1, 1}), {leaf(rand64({1, 4, 5, 2}, 25).permute({0, 3, 1, 2}))}));
}

TEST_CASE("conv2d with no output channels: an empty result and zero gradients (as torch)",
          "[autograd][conv]") {
  // the weight was flattened with reshape({0, -1}), ambiguous for O = 0 (found by the fuzz test)
  Variable x(testing::rand64({2, 3, 4, 4}), true), w(ops::zeros({0, 3, 2, 2}, DType::Float64), true);
  Variable y = conv2d(x, w, Variable(), {1, 1}, {1, 1});
  REQUIRE(y.shape() == Shape{2, 0, 5, 5});
  sum(y).backward();
  REQUIRE(x.grad().shape() == x.shape());
  CHECK(ops::max(ops::abs(x.grad())).item<double>() == 0);
  CHECK(w.grad().shape() == w.shape());
}

TEST_CASE("conv2d and pooling: bad input throws naming the op", "[ops][conv]") {
  Tensor x = ops::ones({1, 2, 4, 4}), w = ops::ones({3, 2, 3, 3});
  REQUIRE_THROWS_SACCADE(ops::conv2d(ops::ones({2, 4, 4}), w, Tensor()), "conv2d: expected a 4-d input");
  REQUIRE_THROWS_SACCADE(ops::conv2d(x, ops::ones({3, 1, 3, 3}), Tensor()),
                         "conv2d: weight of shape [3, 1, 3, 3]");
  REQUIRE_THROWS_SACCADE(ops::conv2d(x, ops::ones({3, 2, 3}), Tensor()), "conv2d: weight");
  REQUIRE_THROWS_SACCADE(ops::conv2d(x, w, ops::ones({2})), "conv2d: bias of shape [2]");
  REQUIRE_THROWS_SACCADE(
      ops::conv2d(ops::ones({1, 2, 4, 4}, DType::Int64), ops::ones({3, 2, 3, 3}, DType::Int64), Tensor()),
      "conv2d");
  REQUIRE_THROWS_SACCADE(ops::conv2d(x, ops::ones({3, 2, 3, 3}, DType::Float64), Tensor()), "conv2d");
  REQUIRE_THROWS_SACCADE(ops::conv2d(x, ops::ones({3, 2, 5, 3}), Tensor()),
                         "conv2d: kernel [5, 3] is bigger");
  REQUIRE(ops::conv2d(x, ops::ones({3, 2, 5, 3}), Tensor(), {1, 1}, {1, 0}).shape() == Shape{1, 3, 2, 2});
  REQUIRE_THROWS_SACCADE(ops::conv2d(x, w, Tensor(), {0, 1}), "conv2d: stride");
  REQUIRE_THROWS_SACCADE(ops::conv2d(x, w, Tensor(), {1, 1}, {-1, 0}), "conv2d: padding");
  REQUIRE_THROWS_SACCADE(ops::conv2d(Tensor(), w, Tensor()), "conv2d");
  REQUIRE_THROWS_SACCADE(ops::conv2d_backward(ops::ones({1, 3, 3, 3}), x, w, {1, 1}, {0, 0}),
                         "conv2d_backward: grad_out has shape [1, 3, 3, 3], expected [1, 3, 2, 2]");

  REQUIRE_THROWS_SACCADE(ops::max_pool2d(ops::ones({4, 4}), {2, 2}), "max_pool2d: expected a 4-d input");
  REQUIRE_THROWS_SACCADE(ops::max_pool2d(x, {5, 2}), "max_pool2d: kernel [5, 2] is bigger");
  REQUIRE_THROWS_SACCADE(ops::max_pool2d(x, {2, 2}, {2, 2}, {2, 0}), "max_pool2d: padding [2, 0]");
  REQUIRE_THROWS_SACCADE(ops::max_pool2d(ops::ones({1, 1, 4, 4}, DType::Int64), {2, 2}), "max_pool2d");
  REQUIRE_THROWS_SACCADE(ops::max_pool2d(x, {0, 2}), "max_pool2d: kernel size");
  REQUIRE_THROWS_SACCADE(ops::avg_pool2d(ops::ones({2, 4, 4}), {2, 2}), "avg_pool2d: expected a 4-d input");
  REQUIRE_THROWS_SACCADE(ops::avg_pool2d(x, {2, 5}), "avg_pool2d: kernel [2, 5] is bigger");
  REQUIRE_THROWS_SACCADE(ops::avg_pool2d(ops::ones({1, 1, 4, 4}, DType::Bool), {2, 2}), "avg_pool2d");
  REQUIRE_THROWS_SACCADE(ops::avg_pool2d_backward(ops::ones({1, 2, 3, 3}), x.shape(), {2, 2}),
                         "avg_pool2d_backward: grad_out has shape");
  Tensor bad = ops::full({1, 2, 2, 2}, 16, DType::Int64);
  REQUIRE_THROWS_SACCADE(ops::max_pool2d_backward(ops::ones({1, 2, 2, 2}), bad, x.shape()),
                         "max_pool2d_backward: index out of range");
  REQUIRE_THROWS_SACCADE(
      ops::max_pool2d_backward(ops::ones({1, 2, 2, 2}), ops::zeros({1, 2, 2, 2}), x.shape()),
      "max_pool2d_backward: indices");
  // the autograd functions report the same errors
  REQUIRE_THROWS_SACCADE(conv2d(Variable(x), Variable(ops::ones({3, 2, 5, 3}))), "conv2d");
  REQUIRE_THROWS_SACCADE(max_pool2d(Variable(ops::ones({4, 4})), {2, 2}), "max_pool2d");
  REQUIRE_THROWS_SACCADE(avg_pool2d(Variable(x), {5, 5}), "avg_pool2d");
}

TEST_CASE("conv and pool backward ops as Variables: the first gradient's values, gradcheck, errors",
          "[autograd][conv][hograd]") {
  // conv2d_input_grad, conv2d_weight_grad, max_pool2d_backward and avg_pool2d_backward are the Variable ops
  // that make conv2d and the pools twice differentiable; here each on its own, in float64.
  const Size2 s{2, 1}, p{1, 1};
  Tensor x = rand64({2, 2, 5, 4}, 40), w = rand64({3, 2, 3, 2}, 41);
  Tensor go = rand64(ops::conv2d(x, w, Tensor(), s, p).shape(), 42);
  {  // their values are conv2d's gradients
    Variable vx = leaf(x), vw = leaf(w);
    conv2d(vx, vw, Variable(), s, p).backward(go);
    REQUIRE(allclose(conv2d_input_grad(Variable(go), Variable(w), x.shape(), s, p).data(), vx.grad(), 1e-12,
                     1e-12));
    REQUIRE(allclose(conv2d_weight_grad(Variable(x), Variable(go), w.shape(), s, p).data(), vw.grad(), 1e-12,
                     1e-12));
  }
  REQUIRE(gradcheck([&](const auto& v) { return conv2d_input_grad(v[0], v[1], x.shape(), s, p); },
                    {leaf(go), leaf(w)}));
  REQUIRE(gradcheck([&](const auto& v) { return conv2d_weight_grad(v[0], v[1], w.shape(), s, p); },
                    {leaf(x), leaf(go)}));

  // pools: overlapping windows (stride 1 < kernel), so several outputs reach one input
  const ops::ValuesIndices mp = ops::max_pool2d(x, {3, 2}, {1, 1}, {1, 1});
  Tensor gm = rand64(mp.values.shape(), 43);
  {
    Variable vx = leaf(x);
    max_pool2d(vx, {3, 2}, {1, 1}, {1, 1}).backward(gm);
    REQUIRE(
        allclose(max_pool2d_backward(Variable(gm), mp.indices, x.shape()).data(), vx.grad(), 1e-12, 1e-12));
  }
  REQUIRE(
      gradcheck([&](const auto& v) { return max_pool2d_backward(v[0], mp.indices, x.shape()); }, {leaf(gm)}));
  Tensor ga = rand64(ops::avg_pool2d(x, {3, 3}, {2, 1}, {1, 1}).shape(), 44);
  {
    Variable vx = leaf(x);
    avg_pool2d(vx, {3, 3}, {2, 1}, {1, 1}).backward(ga);
    REQUIRE(allclose(avg_pool2d_backward(Variable(ga), x.shape(), {3, 3}, {2, 1}, {1, 1}).data(), vx.grad(),
                     1e-12, 1e-12));
  }
  REQUIRE(gradcheck(
      [&](const auto& v) {
        return avg_pool2d_backward(v[0], x.shape(), {3, 3}, {2, 1}, {1, 1});
      },
      {leaf(ga)}));

  // bad input: the op's own error, through the Variable ops too
  REQUIRE_THROWS_SACCADE(conv2d_input_grad(Variable(go), Variable(w), {2, 3, 5, 4}, s, p),
                         "conv2d_input_grad");
  REQUIRE_THROWS_SACCADE(
      conv2d_input_grad(Variable(ops::ones({2, 3, 1, 1}, DType::Float64)), Variable(w), x.shape(), s, p),
      "conv2d_input_grad");
  REQUIRE_THROWS_SACCADE(conv2d_weight_grad(Variable(x), Variable(go), {3, 2, 4, 2}, s, p),
                         "conv2d_weight_grad");
  REQUIRE_THROWS_SACCADE(conv2d_weight_grad(Variable(x.to(DType::Float32)), Variable(go), w.shape(), s, p),
                         "conv2d_weight_grad");
  REQUIRE_THROWS_SACCADE(max_pool2d_backward(Variable(gm), mp.indices.to(DType::Float64), x.shape()),
                         "max_pool2d_backward");
  REQUIRE_THROWS_SACCADE(avg_pool2d_backward(Variable(gm), x.shape(), {3, 3}, {2, 1}, {1, 1}),
                         "avg_pool2d_backward");
}
