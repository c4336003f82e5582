// Gradients of gradients (issue 28): saccade::grad with create_graph, gradgradcheck over the ops that are
// twice differentiable, Hessian-vector products (against finite differences and PyTorch), Newton's method, a
// WGAN-GP gradient penalty, and the bad-input cases.
#include <cmath>
#include <map>

#include "helpers.h"

using namespace saccade;
using saccade::testing::rand64;

namespace {

using Fn = std::function<Variable(const std::vector<Variable>&)>;

Variable leaf(const Shape& s, uint64_t seed) { return Variable(rand64(s, seed), true); }
// values away from 0 (for abs, relu, clamp, log, sqrt: no kink or pole within the finite-difference step)
Variable away(const Shape& s, uint64_t seed, double shift = 0.5) {
  Tensor t = rand64(s, seed);
  return Variable(ops::add(ops::mul(ops::sign(t), shift), t), true);
}
Variable positive(const Shape& s, uint64_t seed) {
  return Variable(ops::add(ops::abs(rand64(s, seed)), 0.5), true);
}

double dot(const Tensor& a, const Tensor& b) { return ops::sum(ops::mul(a, b)).item<double>(); }

}  // namespace

TEST_CASE("hograd: the second derivative of a tanh chain matches its closed form", "[autograd][hograd]") {
  // y = tanh(tanh(x)), u = tanh x:  y' = (1 - y²)(1 - u²),
  // y'' = -2 y (1 - y²)(1 - u²)² - 2 u (1 - y²)(1 - u²)
  Variable x = leaf({7}, 1);
  Variable y = tanh(tanh(x));
  Variable dy = grad({sum(y)}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  REQUIRE(dy.requires_grad());
  Variable d2y = grad({sum(dy)}, {x})[0];
  REQUIRE_FALSE(x.grad().defined());  // grad accumulates nothing
  auto xs = x.data().to_vector<double>(), got1 = dy.data().to_vector<double>(),
       got2 = d2y.data().to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double u = std::tanh(xs[i]), v = std::tanh(u), du = 1 - u * u, dv = 1 - v * v;
    CHECK(got1[i] == Approx(dv * du).epsilon(1e-13));
    CHECK(got2[i] == Approx(-2 * v * dv * du * du - 2 * u * dv * du).epsilon(1e-12));
  }
}

TEST_CASE("hograd: backward(create_graph) and grad agree, retain_graph following create_graph",
          "[autograd][hograd]") {
  Variable x = leaf({3}, 2);
  Variable y = sum(mul(exp(x), sin(x)));
  std::vector<Variable> g = grad({y}, {x}, {}, std::nullopt, true);
  y.backward(Variable(), std::nullopt, true);  // the graph was kept by create_graph
  REQUIRE(saccade::testing::allclose(x.grad(), g[0].data(), 0, 0));
  // d/dx (e^x sin x)' = d/dx e^x (sin x + cos x) = 2 e^x cos x
  Variable h = grad({sum(g[0])}, {x})[0];
  REQUIRE(saccade::testing::allclose(
      h.data(), ops::mul(ops::mul(ops::exp(x.data()), ops::cos(x.data())), 2.0), 1e-12, 1e-14));
  // a saved output, reattached to its own node under create_graph, holds no reference to it (no cycle)
  std::weak_ptr<Node> node;
  {
    Variable z = tanh(x);
    node = z.grad_fn();
    Variable dz = grad({sum(z)}, {x}, {}, true, true)[0];
    REQUIRE(dz.requires_grad());
  }
  REQUIRE(node.expired());
}

TEST_CASE("hograd: gradgradcheck over the twice-differentiable ops", "[autograd][hograd]") {
  GradcheckOptions o;
  auto check = [&](const Fn& f, std::vector<Variable> xs) { REQUIRE(gradgradcheck(f, xs, o)); };
  SECTION("elementwise binary (with broadcasting)") {
    check([](const auto& v) { return add(v[0], v[1]); }, {leaf({2, 3}, 1), leaf({3}, 2)});
    check([](const auto& v) { return sub(v[0], v[1]); }, {leaf({2, 3}, 1), leaf({2, 1}, 2)});
    check([](const auto& v) { return mul(v[0], v[1]); }, {leaf({2, 3}, 1), leaf({3}, 2)});
    check([](const auto& v) { return div(v[0], v[1]); }, {leaf({2, 3}, 1), away({3}, 2)});
    check([](const auto& v) { return pow(v[0], v[1]); }, {positive({2, 3}, 1), leaf({2, 3}, 2)});
    check([](const auto& v) { return maximum(v[0], v[1]); }, {leaf({5}, 1), leaf({5}, 2)});
    check([](const auto& v) { return minimum(v[0], v[1]); }, {leaf({5}, 1), leaf({5}, 2)});
    check([](const auto& v) { return where(ops::gt(v[0].data(), 0.0), v[0], v[1]); },
          {leaf({4}, 3), leaf({4}, 4)});
  }
  SECTION("elementwise with a scalar, and unary") {
    check([](const auto& v) { return pow(v[0], 3.0); }, {leaf({4}, 1)});
    check([](const auto& v) { return rdiv(v[0], 2.0); }, {away({4}, 1)});
    check([](const auto& v) { return rsub(mul(v[0], 2.0), 1.0) / 3.0 + 1.0; }, {leaf({4}, 1)});
    check([](const auto& v) { return neg(exp(v[0])); }, {leaf({4}, 1)});
    check([](const auto& v) { return log(v[0]); }, {positive({4}, 1)});
    check([](const auto& v) { return sqrt(v[0]); }, {positive({4}, 1)});
    check([](const auto& v) { return rsqrt(v[0]); }, {positive({4}, 1)});
    check([](const auto& v) { return abs(v[0]); }, {away({4}, 1)});
    check([](const auto& v) { return sin(v[0]) * cos(v[0]); }, {leaf({4}, 1)});
    check([](const auto& v) { return tanh(v[0]); }, {leaf({4}, 1)});
    check([](const auto& v) { return sigmoid(v[0]); }, {leaf({4}, 1)});
    check([](const auto& v) { return relu(v[0]) * v[0]; }, {away({4}, 1)});
    check([](const auto& v) { return gelu(v[0]); }, {leaf({4}, 1)});
    check([](const auto& v) { return clamp(v[0], -0.3, 0.4) * v[0]; }, {away({6}, 1)});
    check([](const auto& v) { return masked_fill(v[0] * v[0], ops::gt(v[0].data(), 0.0), 2.0); },
          {leaf({4}, 1)});
  }
  SECTION("reductions") {
    check([](const auto& v) { return sum(v[0] * v[0], {1}); }, {leaf({2, 3}, 1)});
    check([](const auto& v) { return mean(v[0] * v[0], {0}, true); }, {leaf({2, 3}, 1)});
    check([](const auto& v) { return amax(v[0] * v[0], {1}); }, {leaf({2, 3}, 1)});
    check([](const auto& v) { return max(v[0] * v[0], 1).values; }, {leaf({2, 3}, 1)});
    check([](const auto& v) { return var(v[0], {1}); }, {leaf({2, 4}, 1)});
    check([](const auto& v) { return logsumexp(v[0], {1}); }, {leaf({2, 3}, 1)});
  }
  SECTION("shapes and joins") {
    check([](const auto& v) { return reshape(v[0] * v[0], {3, 2}); }, {leaf({2, 3}, 1)});
    check([](const auto& v) { return permute(v[0] * v[0], {1, 0}); }, {leaf({2, 3}, 1)});
    check([](const auto& v) { return expand(v[0] * v[0], {2, 3}); }, {leaf({1, 3}, 1)});
    check([](const auto& v) { return narrow(v[0] * v[0], 1, 1, 2) * select(v[0], 1, 0); }, {leaf({2, 3}, 1)});
    check([](const auto& v) { return cat({v[0] * v[1], v[1]}, 0); }, {leaf({2, 3}, 1), leaf({1, 3}, 2)});
    check([](const auto& v) { return stack({v[0] * v[1], v[1]}, 1); }, {leaf({3}, 1), leaf({3}, 2)});
    check([](const auto& v) { return split(v[0] * v[0], 1, 0)[1]; }, {leaf({2, 3}, 1)});
    check([](const auto& v) { return repeat(v[0] * v[0], {2, 1}); }, {leaf({2, 3}, 1)});
    check([](const auto& v) { return repeat_interleave(v[0] * v[0], 2, 1); }, {leaf({2, 3}, 1)});
    check([](const auto& v) { return tril(v[0] * v[0]); }, {leaf({3, 3}, 1)});
  }
  SECTION("index ops") {
    Tensor idx = ops::tensor({2, 0, 2}, {3}, DType::Int64);
    Tensor gidx = ops::tensor({0, 1, 1, 0}, {2, 2}, DType::Int64);
    check([&](const auto& v) { return index_select(v[0] * v[0], 1, idx); }, {leaf({2, 3}, 1)});
    check([&](const auto& v) { return gather(v[0] * v[0], 1, gidx); }, {leaf({2, 3}, 1)});
    check([&](const auto& v) { return scatter_add(v[0], 1, gidx, v[1] * v[1]); },
          {leaf({2, 3}, 1), leaf({2, 3}, 2)});
    check([&](const auto& v) { return index_add(v[0], 1, idx, v[1] * v[1]); },
          {leaf({2, 3}, 1), leaf({2, 3}, 2)});
    check([&](const auto& v) { return embedding(v[0] * v[0], idx, 0); }, {leaf({3, 2}, 1)});
  }
  SECTION("matrix products") {
    check([](const auto& v) { return matmul(v[0], v[1]); }, {leaf({2, 3, 4}, 1), leaf({4, 2}, 2)});
    check([](const auto& v) { return matmul(v[0], v[1]); }, {leaf({4}, 1), leaf({2, 4, 3}, 2)});
    check([](const auto& v) { return matmul(v[0], v[1]); }, {leaf({4}, 1), leaf({4}, 2)});
    check([](const auto& v) { return bmm(v[0], v[1]); }, {leaf({2, 2, 3}, 1), leaf({2, 3, 2}, 2)});
    check([](const auto& v) { return mm(v[0], v[1]); }, {leaf({2, 3}, 1), leaf({3, 2}, 2)});
    check([](const auto& v) { return linear(v[0], v[1], v[2]); },
          {leaf({2, 2, 3}, 1), leaf({4, 3}, 2), leaf({4}, 3)});
  }
  SECTION("convolution and pooling (stride, padding, bias; max pooling away from ties)") {
    // H: (6 + 2 - 3) / 2 + 1 = 3 rows, the last input row in no window; W: (5 - 2) / 1 + 1 = 4
    check(
        [](const auto& v) {
          return conv2d(v[0], v[1], v[2], {2, 1}, {1, 0});
        },
        {leaf({2, 2, 6, 5}, 1), leaf({3, 2, 3, 2}, 2), leaf({3}, 3)});
    check(
        [](const auto& v) {
          return conv2d(v[0], v[1], Variable(), {1, 1}, {1, 1});
        },
        {leaf({1, 2, 3, 3}, 1), leaf({2, 2, 2, 2}, 2)});
    check(
        [](const auto& v) {
          return avg_pool2d(v[0] * v[0], {3, 3}, {2, 2}, {1, 1});
        },
        {leaf({1, 2, 5, 5}, 1)});
    // overlapping windows: one element can be the max of two; random values have no ties
    check(
        [](const auto& v) {
          return max_pool2d(v[0] * v[0], {3, 3}, {2, 2}, {1, 1});
        },
        {leaf({1, 2, 5, 5}, 1)});
    check(
        [](const auto& v) {
          return max_pool2d(tanh(conv2d(v[0], v[1], v[2], {1, 1}, {1, 1})), {2, 2});
        },
        {leaf({1, 1, 4, 4}, 1), leaf({2, 1, 3, 3}, 2), leaf({2}, 3)});
  }
  SECTION("nn ops") {
    Tensor target = ops::tensor({1, 0, 2}, {3}, DType::Int64);
    check([](const auto& v) { return softmax(v[0], 1); }, {leaf({2, 3}, 1)});
    check([](const auto& v) { return log_softmax(v[0], 0); }, {leaf({2, 3}, 1)});
    check(
        [](const auto& v) {
          return masked_softmax(v[0], ops::tensor({2, 1}, {2}, DType::Int64));
        },
        {leaf({2, 2, 3}, 1)});
    check([](const auto& v) { return layer_norm(v[0], {3}, v[1], v[2]); },
          {leaf({2, 3}, 1), leaf({3}, 2), leaf({3}, 3)});
    check([&](const auto& v) { return cross_entropy(v[0], target, -100, Reduction::Mean, 0.1); },
          {leaf({3, 3}, 1)});
    // without smoothing (the rule from each row's log-sum-exp), an ignored row and each reduction
    const Tensor some_ignored = ops::tensor({1, -100, 2}, {3}, DType::Int64);
    for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      check([&](const auto& v) { return cross_entropy(v[0], some_ignored, -100, red); }, {leaf({3, 3}, 4)});
      // its gradient under create_graph (composed) is the first-order one (the fused kernel): the row weights
      // tell each row's scale apart, the ignored row's gradient is zero in both
      const Variable z = leaf({3, 3}, 5), w(ops::tensor({1.0, -2.0, 3.0}, {3}, DType::Float64));
      auto loss = [&] {
        const Variable l = cross_entropy(z, some_ignored, -100, red);
        return sum(red == Reduction::None ? l * w : l * 2.0);
      };
      const Tensor first = grad({loss()}, {z})[0].data();
      const Tensor composed = grad({loss()}, {z}, {}, std::nullopt, /*create_graph=*/true)[0].data();
      CHECK(testing::allclose(first, composed, 1e-12, 1e-12));
      CHECK(ops::max(ops::abs(first.narrow(0, 1, 1))).item() == 0.0);
    }
    check([](const auto& v) { return mse_loss(v[0], v[1], Reduction::Sum); },
          {leaf({2, 3}, 1), leaf({2, 3}, 2)});
    check(
        [](const auto& v) {
          Generator g(7);  // the same mask at every evaluation
          return dropout(v[0] * v[0], 0.4, true, &g);
        },
        {leaf({8}, 1)});
  }
}

TEST_CASE("hograd: an op with no second derivative throws under create_graph, naming it",
          "[autograd][hograd]") {
  Variable x = leaf({2, 3}, 1), w = leaf({3, 3}, 2);
  auto square = [&](const std::vector<Variable>& v) { return mul(matmul(v[0], w), v[0]); };
  Variable y = sum(checkpoint(square, {x}));
  REQUIRE_THROWS_SACCADE(grad({y}, {x}, {}, std::nullopt, true),
                         "checkpoint: create_graph through an op with no second derivative");
  // first-order gradients through it are unaffected
  Variable y1 = sum(checkpoint(square, {x}));
  REQUIRE(grad({y1}, {x})[0].shape() == x.shape());
}

TEST_CASE("hograd: bad input to grad and a second backward through a freed graph", "[autograd][hograd]") {
  Variable x = leaf({3}, 1), c(rand64({3}, 2));
  Variable y = mul(x, x);
  REQUIRE_THROWS_SACCADE(grad({y}, {x}), "grad: a gradient can be created implicitly only for one-element");
  REQUIRE_THROWS_SACCADE(grad({y}, {x}, {Variable(rand64({2}, 3))}), "grad: gradient of shape");
  REQUIRE_THROWS_SACCADE(grad({sum(y)}, {c}), "grad: input 0 does not require grad");
  REQUIRE_THROWS_SACCADE(grad({c}, {x}), "grad: output 0 does not require grad");
  Variable unused = leaf({2}, 4);
  REQUIRE_THROWS_SACCADE(grad({sum(y)}, {x, unused}, {}, true), "grad: input 1 (shape [2]) was not used");
  std::vector<Variable> g = grad({sum(y)}, {x, unused}, {}, true, false, /*allow_unused=*/true);
  REQUIRE(g[0].defined());
  REQUIRE_FALSE(g[1].defined());
  Variable s = sum(exp(x));
  grad({s}, {x});  // frees the graph
  REQUIRE_THROWS_SACCADE(grad({s}, {x}), "already freed by an earlier backward");
}

// f(x) = logsumexp(3 h) + ½ |x|² Σ σ(h) + softmax(h)_1,  h = tanh(W x + b)  (as tests/fixtures/make_hvp.py)
static Variable hvp_objective(const Variable& x, const Tensor& W, const Tensor& b) {
  Variable h = tanh(add(matmul(Variable(W), x), b));
  return add(add(logsumexp(mul(h, 3.0), {0}), mul(mul(sum(mul(x, x)), 0.5), sum(sigmoid(h)))),
             select(softmax(h, 0), 0, 1));
}

static Tensor hvp(const Tensor& x0, const Tensor& v, const Tensor& W, const Tensor& b) {
  Variable x(x0.clone(), true);
  Variable g = grad({hvp_objective(x, W, b)}, {x}, {}, std::nullopt, true)[0];
  return grad({sum(mul(g, v))}, {x})[0].data();
}

TEST_CASE("hograd: Hessian-vector products match finite differences and PyTorch", "[autograd][hograd]") {
  const nn::StateDict fx =
      nn::load_safetensors(std::string(SACCADE_TEST_DATA_DIR) + "/hvp.safetensors").tensors;
  const Tensor &W = fx.at("W"), &b = fx.at("b"), &x = fx.at("x"), &v = fx.at("v");
  REQUIRE(hvp_objective(Variable(x), W, b).item() == Approx(fx.at("f").item<double>()).epsilon(1e-14));
  Tensor hv = hvp(x, v, W, b);
  CHECK(saccade::testing::allclose(hv, fx.at("hvp"), 1e-10, 0));
  // central differences of the gradient along v
  const double eps = 1e-5;
  auto gradient = [&](const Tensor& at) {
    Variable xv(at, true);
    return grad({hvp_objective(xv, W, b)}, {xv})[0].data();
  };
  Tensor fd = ops::div(
      ops::sub(gradient(ops::add(x, ops::mul(v, eps))), gradient(ops::sub(x, ops::mul(v, eps)))), 2 * eps);
  CHECK(saccade::testing::allclose(hv, fd, 1e-7, 1e-9));
}

TEST_CASE("hograd: Newton's method converges quadratically on a convex problem", "[autograd][hograd]") {
  // minimise f(x) = Σ_i log(1 + e^(a_i·x)) - c·x + ½ |x|² (strictly convex), x in R^3; the Hessian is built
  // column by column from Hessian-vector products with the unit vectors.
  const int n = 3;
  Tensor A = rand64({6, n}, 5), c = rand64({n}, 6);
  auto f = [&](const Variable& x) {
    Variable z = matmul(Variable(A), x);
    return add(sub(sum(log(add(exp(z), 1.0))), sum(mul(x, c))), mul(sum(mul(x, x)), 0.5));
  };
  Tensor x = ops::zeros({n}, DType::Float64);
  std::vector<double> norms;
  for (int step = 0; step < 8; ++step) {
    Variable xv(x.clone(), true);
    Variable g = grad({f(xv)}, {xv}, {}, std::nullopt, true)[0];
    std::vector<double> gv = g.data().to_vector<double>(), H(n * n);
    norms.push_back(std::sqrt(dot(g.data(), g.data())));
    if (norms.back() < 1e-14) break;
    for (int j = 0; j < n; ++j) {
      Tensor e = ops::zeros({n}, DType::Float64);
      Tensor ej = e.select(0, j);
      ops::add_(ej, ops::ones({}, DType::Float64));
      std::vector<double> col = grad({sum(mul(g, e))}, {xv}, {}, true)[0].data().to_vector<double>();
      for (int i = 0; i < n; ++i) H[i * n + j] = col[i];
    }
    // solve H d = g (Gaussian elimination; H is symmetric positive definite)
    for (int k = 0; k < n; ++k)
      for (int i = k + 1; i < n; ++i) {
        double m = H[i * n + k] / H[k * n + k];
        for (int j = k; j < n; ++j) H[i * n + j] -= m * H[k * n + j];
        gv[i] -= m * gv[k];
      }
    std::vector<double> d(n);
    for (int i = n - 1; i >= 0; --i) {
      double s = gv[i];
      for (int j = i + 1; j < n; ++j) s -= H[i * n + j] * d[j];
      d[i] = s / H[i * n + i];
    }
    x = ops::sub(x, ops::from_vector(d, {n}));
  }
  REQUIRE(norms.size() >= 4);
  REQUIRE(norms.back() < 1e-12);
  // quadratic: once close, each gradient norm is bounded by a constant times the square of the previous one
  for (size_t k = 2; k + 1 < norms.size(); ++k)
    if (norms[k] < 1e-2 && norms[k + 1] > 1e-15) CHECK(norms[k + 1] < 10 * norms[k] * norms[k]);
}

TEST_CASE("hograd: a WGAN-GP gradient penalty trains", "[autograd][hograd]") {
  // critic D(x) = w2 · tanh(W1 x + b1); penalty = mean_i (|∇_x D(x_i)| - 1)² (Gulrajani et al. 2017, eq. 3)
  Variable W1 = leaf({8, 2}, 1), b1 = leaf({8}, 2), w2 = leaf({8}, 3);
  Tensor points = rand64({5, 2}, 4);
  auto penalty = [&](const std::vector<Variable>& p) {
    AutoGradMode record(true);  // also when gradcheck evaluates it under NoGradGuard
    Variable x(points, true);
    Variable d = matmul(tanh(linear(x, p[0], p[1])), p[2]);        // (5)
    Variable gx = grad({sum(d)}, {x}, {}, std::nullopt, true)[0];  // (5, 2): each row its own ∇_x D
    Variable norm = sqrt(sum(mul(gx, gx), {1}));
    Variable dev = sub(norm, 1.0);
    return mean(mul(dev, dev));
  };
  // the penalty's parameter gradient (a second derivative of D) against finite differences
  REQUIRE(gradcheck(penalty, {W1, b1, w2}));
  // and a few steps of gradient descent on it drive the critic's gradient norms towards 1
  std::vector<Variable> params{W1, b1, w2};
  const double before = penalty(params).item();
  for (int step = 0; step < 30; ++step) {
    Variable p = penalty(params);
    std::vector<Variable> g = grad({p}, params);
    for (size_t i = 0; i < params.size(); ++i)
      params[i] = Variable(ops::sub(params[i].data(), ops::mul(g[i].data(), 0.1)), true);
  }
  const double after = penalty(params).item();
  CHECK(after < 0.2 * before);
}

TEST_CASE("hograd: fused ops and attention modules get second derivatives from their composed references",
          "[autograd][hograd][attention]") {
  GradcheckOptions o;
  SECTION("flash attention, masked and causal") {
    const Shape s{2, 4, 5};
    ops::AttentionMask mask = ops::attention_mask(ops::tensor({4, 2}, {2}, DType::Int64), s,
                                                  ops::CausalAlign::TopLeft, Device::cpu(), "test");
    REQUIRE(gradgradcheck([&](const auto& v) { return flash_attention(v[0], v[1], v[2], mask, 0.7); },
                          {leaf({2, 4, 3}, 1), leaf({2, 5, 3}, 2), leaf({2, 5, 2}, 3)}, o));
  }
  SECTION("additive attention scores and GRU gates") {
    REQUIRE(gradgradcheck([](const auto& v) { return additive_attention_scores(v[0], v[1], v[2]); },
                          {leaf({2, 3, 4}, 1), leaf({2, 2, 4}, 2), leaf({4}, 3)}, o));
    // gh computed from h, as in a GRU step: the recomputation takes partial derivatives
    REQUIRE(gradgradcheck(
        [](const auto& v) {
          return gru_gates(v[0], add(mul(repeat(v[2], {1, 3}), 0.7), v[1]), v[2]);
        },
        {leaf({2, 6}, 1), leaf({2, 6}, 2), leaf({2, 2}, 3)}, o));
    REQUIRE(gradgradcheck([](const auto& v) { return gru_gates(v[0], v[1], v[2]); },
                          {leaf({2, 6}, 1), leaf({2, 6}, 2), leaf({2, 2}, 3)}, o));
  }
  SECTION("modules: multi-head (fused kernel), additive attention") {
    Generator gen(3);
    nn::MultiHeadAttention mha(4, 2, {.bias = true, .generator = &gen});
    mha.to(DType::Float64);
    REQUIRE(gradgradcheck([&](const auto& v) { return mha.forward(v[0], v[1], v[1], Tensor(), true); },
                          {leaf({2, 3, 4}, 1), leaf({2, 3, 4}, 2)}, o));
    nn::AdditiveAttention add_attn(3, 3, 4, 0.0, &gen);
    add_attn.to(DType::Float64);
    REQUIRE(gradgradcheck(
        [&](const auto& v) {
          return add_attn.forward(v[0], v[1], v[1], ops::tensor({2, 1}, {2}, DType::Int64));
        },
        {leaf({2, 2, 3}, 1), leaf({2, 3, 3}, 2)}, o));
  }
  SECTION("flash attention with dropout: the composed reference drops what the kernel dropped") {
    const Shape s{2, 4, 5};  // the weights' shape
    ops::AttentionMask mask = ops::attention_mask(ops::tensor({4, 2}, {2}, DType::Int64), s,
                                                  ops::CausalAlign::TopLeft, Device::cpu(), "test");
    Variable q = leaf({2, 4, 3}, 1), k = leaf({2, 5, 3}, 2), v = leaf({2, 5, 2}, 3);
    Generator g1(11), g2(11);
    g1.advance(17), g2.advance(17);  // a generator part-way through its stream
    Tensor fused = flash_attention(q, k, v, mask, 0.7, 0.3, true, &g1).data();
    const ops::AttentionDropout drop{0.3, g2.seed(), g2.advance(2 * 4 * 5), Tensor()};
    REQUIRE(g1.offset() == g2.offset());
    Tensor z = ops::attention_dropout_mask(drop, s, DType::Float64, Device::cpu());
    const double kept = ops::sum(ops::gt(z, 0.0)).item<double>();
    REQUIRE(kept > 0);
    REQUIRE(kept < 40);  // something dropped: the comparison below can fail
    Tensor scores = ops::mul(ops::matmul(q.data(), k.data().transpose(1, 2)), 0.7);
    Tensor weights = ops::masked_softmax(scores, ops::attention_keep_mask(mask, s, Device::cpu()));
    Tensor composed = ops::matmul(ops::mul(weights, z), v.data());
    REQUIRE(testing::allclose(fused, composed, 1e-12, 1e-12));
    // a fresh generator per evaluation: the same mask every time
    REQUIRE(gradgradcheck(
        [&](const auto& x) {
          Generator g(5);
          return flash_attention(x[0], x[1], x[2], mask, 0.7, 0.3, true, &g);
        },
        {q, k, v}, o));
  }
}
