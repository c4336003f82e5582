// The attention family (nn/attention.h, nn/nadaraya_watson.h, nn/multihead.h, nn/positional.h): d2l's worked
// examples, hand-computed values, properties, gradchecks, and agreement with torch.nn.MultiheadAttention 1.13
// (fixtures from tests/fixtures/make_attention.py).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "helpers.h"
#include "nn/attention.h"
#include "nn/multihead.h"
#include "nn/nadaraya_watson.h"
#include "nn/positional.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;

// Shared with test_transformer.cpp (same binary).
namespace attn_test {

// Address of element j (row-major logical order) of a strided float64 tensor.
static double* element(const Tensor& t, int64_t j) {
  double* p = static_cast<double*>(t.storage()->data()) + t.offset();
  for (int d = t.dim() - 1; d >= 0; --d) {
    p += (j % t.shape()[d]) * t.strides()[d];
    j /= t.shape()[d];
  }
  return p;
}

/// gradcheck (float64 central differences) of f with respect to `inputs` (those requiring grad) AND every
/// parameter of `module` (which must already be float64). Throws saccade::Error at the first mismatch.
bool module_gradcheck(const std::function<Variable(const std::vector<Variable>&)>& f,
                      const std::vector<Variable>& inputs, nn::Module& module, double atol = 1e-5,
                      double rtol = 1e-3) {
  std::vector<Variable> xs;
  for (const auto& in : inputs)
    xs.push_back(in.defined() ? Variable(in.data(), in.requires_grad()) : Variable());
  module.zero_grad();
  Variable out = f(xs);
  Generator gen(99);
  Tensor r = ops::randn(out.shape(), DType::Float64, Device::cpu(), &gen);
  out.backward(r);
  std::vector<std::pair<std::string, Variable>> targets;
  for (size_t i = 0; i < xs.size(); ++i)
    if (xs[i].defined() && xs[i].requires_grad()) targets.emplace_back("input " + std::to_string(i), xs[i]);
  for (auto& np : module.named_parameters()) targets.push_back(np);
  auto objective = [&]() {
    NoGradGuard ng;
    return ops::sum(ops::mul(f(xs).data(), r)).item<double>();
  };
  const double eps = 1e-6;
  for (auto& [name, v] : targets) {
    const Tensor& x = v.data();
    SACCADE_CHECK(x.dtype() == DType::Float64, "module_gradcheck: {} is {}", name, x.dtype());
    std::vector<double> analytic =
        v.grad().defined() ? v.grad().to_vector<double>() : std::vector<double>(x.numel(), 0.0);
    for (int64_t j = 0; j < x.numel(); ++j) {
      double* p = element(x, j);
      const double x0 = *p;
      *p = x0 + eps;
      const double lp = objective();
      *p = x0 - eps;
      const double lm = objective();
      *p = x0;
      const double numeric = (lp - lm) / (2 * eps), a = analytic[static_cast<size_t>(j)];
      SACCADE_CHECK(std::abs(a - numeric) <= atol + rtol * std::abs(numeric),
                    "module_gradcheck: {} (shape {}), element {}: analytic {} but numeric {}", name,
                    x.shape(), j, a, numeric);
    }
  }
  return true;
}

}  // namespace attn_test

namespace {

using attn_test::module_gradcheck;

Tensor f64(std::initializer_list<double> v, const Shape& s) { return ops::tensor(v, s, DType::Float64); }
Tensor i64(std::initializer_list<double> v, const Shape& s) { return ops::tensor(v, s, DType::Int64); }

// Reads tests/data/attention_<name>.txt (format: see tests/fixtures/make_attention.py).
std::map<std::string, Tensor> read_fixture(const std::string& name) {
  return saccade::testing::read_fixture("attention_" + name);
}

// ||a - b||_inf / ||b||_inf
double rel_err(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i)
    num = std::max(num, std::abs(x[i] - y[i])), den = std::max(den, std::abs(y[i]));
  return num / std::max(den, 1e-30);
}

// A reference attention computed with loops: q (Tq, D), k (Tk, D), v (Tk, Dv) float64, keep[i][j].
std::vector<double> reference_attention(const std::vector<double>& q, const std::vector<double>& k,
                                        const std::vector<double>& v, int tq, int tk, int d, int dv,
                                        const std::function<bool(int, int)>& keep) {
  std::vector<double> out(static_cast<size_t>(tq * dv), 0.0);
  for (int i = 0; i < tq; ++i) {
    std::vector<double> s(tk);
    double m = -INFINITY, z = 0;
    for (int j = 0; j < tk; ++j) {
      double dot = 0;
      for (int c = 0; c < d; ++c) dot += q[i * d + c] * k[j * d + c];
      s[j] = dot / std::sqrt(double(d));
      if (keep(i, j)) m = std::max(m, s[j]);
    }
    for (int j = 0; j < tk; ++j) z += keep(i, j) ? std::exp(s[j] - m) : 0.0;
    for (int j = 0; j < tk; ++j)
      if (keep(i, j))
        for (int c = 0; c < dv; ++c) out[i * dv + c] += std::exp(s[j] - m) / z * v[j * dv + c];
  }
  return out;
}

}  // namespace

// ---- masked softmax and the functional core ----

TEST_CASE("masked_softmax zeroes the entries beyond valid_lens as d2l 11.3", "[attention]") {
  Tensor x = ops::rand({2, 2, 4}, DType::Float64);
  Tensor w = masked_softmax(Variable(x), i64({2, 3}, {2})).data();
  auto v = w.to_vector<double>();
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 2; ++i) {
      double s = 0;
      for (int j = 0; j < 4; ++j) {
        double e = v[(b * 2 + i) * 4 + j];
        if (j >= (b == 0 ? 2 : 3))
          REQUIRE(e == 0.0);
        else
          REQUIRE(e > 0.0);
        s += e;
      }
      REQUIRE(s == Approx(1.0));
    }
  // (B, Tq) valid_lens: one per query
  auto v2 = masked_softmax(Variable(x), i64({1, 3, 2, 4}, {2, 2})).data().to_vector<double>();
  const int lens[4] = {1, 3, 2, 4};
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 4; ++j) REQUIRE((v2[r * 4 + j] == 0.0) == (j >= lens[r]));
}

TEST_CASE("causal_mask is bottom-right aligned", "[attention]") {
  auto a = nn::causal_mask(3, 3).to_vector<int64_t>();
  REQUIRE(a == std::vector<int64_t>{1, 0, 0, 1, 1, 0, 1, 1, 1});
  // two new queries after two cached keys: they are positions 2 and 3 of 4
  auto b = nn::causal_mask(2, 4).to_vector<int64_t>();
  REQUIRE(b == std::vector<int64_t>{1, 1, 1, 0, 1, 1, 1, 1});
}

TEST_CASE("scaled_dot_product_attention matches a loop reference with masks", "[attention]") {
  const int B = 2, H = 2, Tq = 3, Tk = 4, D = 5, Dv = 3;
  Tensor q = rand64({B, H, Tq, D}, 1), k = rand64({B, H, Tk, D}, 2), v = rand64({B, H, Tk, Dv}, 3);
  Tensor lens = i64({3, 1}, {2});
  for (bool causal : {false, true}) {
    auto r = nn::scaled_dot_product_attention(q, k, v,
                                              {.attn_mask = lens, .is_causal = causal, .need_weights = true});
    REQUIRE(r.output.shape() == Shape({B, H, Tq, Dv}));
    REQUIRE(r.weights.shape() == Shape({B, H, Tq, Tk}));
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h) {
        auto keep = [&](int i, int j) { return j < (b == 0 ? 3 : 1) && (!causal || j <= i + Tk - Tq); };
        auto ref = reference_attention(q.select(0, b).select(0, h).to_vector<double>(),
                                       k.select(0, b).select(0, h).to_vector<double>(),
                                       v.select(0, b).select(0, h).to_vector<double>(), Tq, Tk, D, Dv, keep);
        REQUIRE(allclose(r.output.data().select(0, b).select(0, h), ops::from_vector(ref, {Tq, Dv}), 1e-12,
                         1e-12));
      }
  }
  // a Bool keep-mask equal to the valid_lens gives the same numbers
  Tensor mask = ops::lt(ops::arange(0, Tk).view({1, 1, 1, Tk}), lens.view({B, 1, 1, 1}));
  REQUIRE(allclose(nn::scaled_dot_product_attention(q, k, v, {.attn_mask = mask}).output.data(),
                   nn::scaled_dot_product_attention(q, k, v, {.attn_mask = lens}).output.data(), 1e-14,
                   1e-14));
}

TEST_CASE("scaled_dot_product_attention's options by name: scale, and the mask given once", "[attention]") {
  Tensor q = rand64({2, 2, 3, 4}, 21), k = rand64({2, 2, 5, 4}, 22), v = rand64({2, 2, 5, 3}, 23);
  // scale s on q kᵀ equals the default 1/√D applied to q scaled by s·√D, on both paths
  for (bool need_weights : {false, true}) {
    INFO("need_weights " << need_weights);
    const auto a = nn::scaled_dot_product_attention(
        q, k, v, {.is_causal = true, .scale = 0.3, .need_weights = need_weights});
    const auto b = nn::scaled_dot_product_attention(ops::mul(q, 0.3 * 2.0), k, v,
                                                    {.is_causal = true, .need_weights = need_weights});
    REQUIRE(allclose(a.output.data(), b.output.data(), 1e-12, 1e-12));
    REQUIRE(a.weights.defined() == need_weights);
  }
  REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(q, k, v, {.scale = std::nan("")}),
                         "scale must be finite");
  const ops::AttentionMask m =
      ops::attention_mask(Tensor(), {2, 2, 3, 5}, ops::CausalAlign::BottomRight, Device::cpu(), "test");
  REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(q, k, v, m, {.is_causal = true}, "MyAttention"),
                         "MyAttention: the mask is given twice");
  REQUIRE_THROWS_SACCADE(nn::attend_from_scores(rand64({2, 3, 5}, 24), rand64({2, 5, 3}, 25), {.window = 2}),
                         "attend_from_scores: window, scale and enable_gqa do not apply");
}

TEST_CASE("scaled_dot_product_attention gives zeros for fully masked rows", "[attention]") {
  Tensor q = rand64({2, 3, 4}, 4), k = rand64({2, 5, 4}, 5), v = rand64({2, 5, 2}, 6);
  auto r = nn::scaled_dot_product_attention(q, k, v, {.attn_mask = i64({0, 5}, {2}), .need_weights = true});
  auto o = r.output.data().select(0, 0).to_vector<double>();
  for (double x : o) REQUIRE(x == 0.0);
  REQUIRE(allclose(ops::sum(r.weights.data().select(0, 1), {1}), ops::ones({3}, DType::Float64)));
  // dropout in training mode: same expectation shape, random masks, no NaN
  Generator g(3);
  auto d = nn::scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5, .generator = &g});
  for (double x : d.output.data().to_vector<double>()) REQUIRE(std::isfinite(x));
}

TEST_CASE("scaled_dot_product_attention gradcheck", "[attention][gradcheck]") {
  Variable q(rand64({2, 3, 4}, 7), true), k(rand64({2, 4, 4}, 8).transpose(1, 2), true);
  Variable v(rand64({2, 4, 2}, 9), true);
  Tensor lens = i64({4, 2}, {2});
  for (bool causal : {false, true}) {
    REQUIRE(gradcheck(
        [&](const std::vector<Variable>& x) {
          return nn::scaled_dot_product_attention(
                     x[0], x[1], x[2], {.attn_mask = lens, .is_causal = causal, .need_weights = true})
              .output;
        },
        {q, k, v}));
    REQUIRE(gradcheck(
        [&](const std::vector<Variable>& x) {
          return nn::scaled_dot_product_attention(
                     x[0], x[1], x[2], {.attn_mask = lens, .is_causal = causal, .need_weights = true})
              .weights;
        },
        {q, k, v}));
  }
}

// ---- AdditiveAttention and DotProductAttention ----

TEST_CASE("AdditiveAttention reproduces d2l's worked example", "[attention]") {
  manual_seed(0);
  Tensor queries = ops::randn({2, 1, 20});
  Tensor keys = ops::ones({2, 10, 2});
  Tensor values = ops::repeat(ops::arange(0, 40, 1, DType::Float32).reshape({1, 10, 4}), {2, 1, 1});
  nn::AdditiveAttention attention(2, 20, 8, 0.1);
  attention.eval();
  Variable out = attention.forward(queries, keys, values, i64({2, 6}, {2}));
  // keys are equal, so every valid key gets the same weight: the mean of the first 2 and 6 value rows
  REQUIRE(allclose(out.data(), ops::tensor({2, 3, 4, 5, 10, 11, 12, 13}, {2, 1, 4}), 1e-5, 1e-5));
  Tensor w = attention.attention_weights();
  REQUIRE(w.shape() == Shape({2, 1, 10}));
  REQUIRE(w.to_vector<float>()[1] == Approx(0.5));
  REQUIRE(w.to_vector<float>()[2] == 0.0f);
  auto names = attention.state_dict().keys();
  REQUIRE(names == std::vector<std::string>{"W_k.weight", "W_q.weight", "w_v.weight"});
  REQUIRE(attention.W_q->weight.shape() == Shape({8, 20}));
  REQUIRE(attention.w_v->weight.shape() == Shape({1, 8}));
}

TEST_CASE("DotProductAttention reproduces d2l's worked example", "[attention]") {
  manual_seed(1);
  Tensor queries = ops::randn({2, 1, 2});
  Tensor keys = ops::ones({2, 10, 2});
  Tensor values = ops::repeat(ops::arange(0, 40, 1, DType::Float32).reshape({1, 10, 4}), {2, 1, 1});
  nn::DotProductAttention attention(0.5);
  attention.eval();
  Variable out = attention.forward(queries, keys, values, i64({2, 6}, {2}));
  REQUIRE(allclose(out.data(), ops::tensor({2, 3, 4, 5, 10, 11, 12, 13}, {2, 1, 4}), 1e-5, 1e-5));
  REQUIRE(attention.attention_weights().shape() == Shape({2, 1, 10}));
}

TEST_CASE("AdditiveAttention and DotProductAttention gradcheck", "[attention][gradcheck]") {
  Generator g(11);
  nn::AdditiveAttention add(3, 4, 5, 0.0, &g);
  add.to(DType::Float64);
  Variable q(rand64({2, 2, 4}, 12), true), k(rand64({2, 3, 3}, 13), true), v(rand64({2, 3, 2}, 14), true);
  Tensor lens = i64({3, 2}, {2});
  REQUIRE(module_gradcheck(
      [&](const std::vector<Variable>& x) { return add.forward(x[0], x[1], x[2], lens); }, {q, k, v}, add));
  nn::DotProductAttention dot;
  Variable q2(rand64({2, 2, 3}, 15), true);
  REQUIRE(gradcheck([&](const std::vector<Variable>& x) { return dot.forward(x[0], x[1], x[2], lens, true); },
                    {q2, k, v}));
}

// ---- MultiHeadAttention (d2l) ----

TEST_CASE("MultiHeadAttention reproduces d2l's shape example", "[attention]") {
  nn::MultiHeadAttention attention(100, 5, {.dropout = 0.5});
  attention.eval();
  Tensor X = ops::ones({2, 4, 100}), Y = ops::ones({2, 6, 100});
  Variable out = attention.forward(X, Y, Y, i64({3, 2}, {2}));
  REQUIRE(out.shape() == Shape({2, 4, 100}));
  Tensor w = attention.attention_weights();
  REQUIRE(w.shape() == Shape({2, 5, 4, 6}));
  // valid_lens apply to every head
  auto wv = w.to_vector<float>();
  for (int h = 0; h < 5; ++h) REQUIRE(wv[((1 * 5 + h) * 4 + 0) * 6 + 2] == 0.0f);
  auto names = attention.state_dict().keys();
  REQUIRE(names == std::vector<std::string>{"W_q.weight", "W_k.weight", "W_v.weight", "W_o.weight"});
}

TEST_CASE("MultiHeadAttention masks: valid_lens and Bool masks agree", "[attention]") {
  Generator g(21);
  nn::MultiHeadAttention mha(
      6, 2, {.bias = true, .query_size = 4, .key_size = 5, .value_size = 3, .generator = &g});
  mha.to(DType::Float64);
  Tensor q = rand64({2, 3, 4}, 22), k = rand64({2, 5, 5}, 23), v = rand64({2, 5, 3}, 24);
  Tensor lens = i64({2, 4, 5, 1, 3, 5}, {2, 3});  // (B, Tq)
  Tensor a = mha.forward(q, k, v, lens).data();
  // the same as a Bool (B, Tq, Tk) mask
  Tensor mask = ops::lt(ops::arange(0, 5).view({1, 1, 5}), lens.view({2, 3, 1}));
  REQUIRE(allclose(mha.forward(q, k, v, mask).data(), a, 1e-14, 1e-14));
  // and a (B, H, Tq, Tk) mask
  REQUIRE(allclose(mha.forward(q, k, v, mask.unsqueeze(1).expand({2, 2, 3, 5})).data(), a, 1e-14, 1e-14));
}

TEST_CASE("MultiHeadAttention self-attention is permutation equivariant", "[attention]") {
  Generator g(31);
  nn::MultiHeadAttention mha(8, 2, {.bias = true, .generator = &g});
  mha.to(DType::Float64);
  Tensor X = rand64({2, 5, 8}, 32);
  Tensor perm = ops::tensor({3, 0, 4, 1, 2}, DType::Int64);
  Tensor fx = mha.forward(X, X, X).data();
  Tensor px = ops::index_select(X, 1, perm);
  REQUIRE(allclose(mha.forward(px, px, px).data(), ops::index_select(fx, 1, perm), 1e-12, 1e-12));
  // a permuted sequence under causal masking is NOT equivariant (the mask depends on position)
  REQUIRE_FALSE(allclose(mha.forward(px, px, px, Tensor(), true).data(),
                         ops::index_select(mha.forward(X, X, X, Tensor(), true).data(), 1, perm), 1e-6,
                         1e-6));
}

TEST_CASE("MultiHeadAttention causal output at t ignores inputs after t", "[attention]") {
  Generator g(41);
  nn::MultiHeadAttention mha(8, 4, {.generator = &g});
  mha.to(DType::Float64);
  Tensor X = rand64({2, 6, 8}, 42);
  Tensor Y = X.clone();
  Tensor tail = Y.narrow(1, 4, 2);
  ops::copy_(tail, rand64({2, 2, 8}, 43));
  Tensor a = mha.forward(X, X, X, Tensor(), true).data(), b = mha.forward(Y, Y, Y, Tensor(), true).data();
  REQUIRE(allclose(a.narrow(1, 0, 4), b.narrow(1, 0, 4), 1e-14, 1e-14));
  REQUIRE_FALSE(allclose(a.narrow(1, 4, 2), b.narrow(1, 4, 2), 1e-6, 1e-6));
}

TEST_CASE("MultiHeadAttention cached forward equals the full causal forward", "[attention]") {
  Generator g(51);
  nn::MultiHeadAttention mha(8, 2, {.bias = true, .generator = &g});
  mha.to(DType::Float64);
  Tensor X = rand64({2, 5, 8}, 52);
  Tensor full = mha.forward(X, X, X, Tensor(), true).data();
  nn::KVCache cache;
  // one position, then two at once, then two
  std::vector<std::pair<int, int>> chunks{{0, 1}, {1, 2}, {3, 2}};
  for (auto [s, n] : chunks) {
    Tensor x = X.narrow(1, s, n);
    REQUIRE(allclose(mha.forward_cached(x, x, x, cache).data(), full.narrow(1, s, n), 1e-12, 1e-12));
  }
  REQUIRE(cache.length() == 5);
}

TEST_CASE("MultiHeadAttention gradcheck", "[attention][gradcheck]") {
  Generator g(61);
  nn::MultiHeadAttention mha(
      4, 2, {.bias = true, .query_size = 3, .key_size = 2, .value_size = 3, .generator = &g});
  mha.to(DType::Float64);
  Variable q(rand64({2, 2, 3}, 62), true), k(rand64({2, 3, 2}, 63), true), v(rand64({2, 3, 3}, 64), true);
  Tensor lens = i64({3, 2}, {2});
  REQUIRE(module_gradcheck(
      [&](const std::vector<Variable>& x) { return mha.forward(x[0], x[1], x[2], lens); }, {q, k, v}, mha));
  Variable s(rand64({2, 3, 3}, 65), true);
  nn::MultiHeadAttention self(4, 2, {.query_size = 3, .key_size = 3, .value_size = 3, .generator = &g});
  self.to(DType::Float64);
  REQUIRE(module_gradcheck(
      [&](const std::vector<Variable>& x) { return self.forward(x[0], x[0], x[0], Tensor(), true); }, {s},
      self));
}

// ---- MultiHeadAttention in torch's Packed layout, called as torch.nn.MultiheadAttention ----

namespace {

struct TorchCase {
  double out = 0, weights = 0, grads = 0;
};

TorchCase check_torch_case(const std::string& name, int64_t E, int64_t H, bool self_attention,
                           bool causal_flag, bool need_weights = true) {
  auto fx = read_fixture(name);
  nn::MultiHeadAttention mha(E, H, {.bias = true, .layout = nn::ParameterLayout::Packed});
  nn::StateDict sd;
  for (const char* key : {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"})
    sd.insert(key, fx.at(key));
  REQUIRE(mha.state_dict().keys() == sd.keys());  // torch's names and order
  mha.load_state_dict(sd);
  mha.eval();
  Variable q(fx.at("query"), true);
  Variable k = self_attention ? q : Variable(fx.at("key"), true);
  Variable v = self_attention ? q : Variable(fx.at("value"), true);
  Tensor kpm = fx.count("key_padding_mask") ? fx.at("key_padding_mask") : Tensor();
  // the causal case passes torch's attn_mask, or equivalently our causal flag
  Tensor am = fx.count("attn_mask") && !causal_flag ? fx.at("attn_mask") : Tensor();
  auto r = mha.forward(
      q, k, v,
      {.key_padding_mask = kpm, .need_weights = need_weights, .attn_mask = am, .is_causal = causal_flag});
  r.output.backward(fx.at("R"));
  TorchCase e;
  e.out = rel_err(r.output.data(), fx.at("out"));
  e.weights = need_weights ? rel_err(r.weights.data(), fx.at("weights")) : 0.0;
  std::vector<std::pair<std::string, Tensor>> grads{{"g_in_proj_weight", mha.in_proj_weight.grad()},
                                                    {"g_in_proj_bias", mha.in_proj_bias.grad()},
                                                    {"g_out_proj.weight", mha.out_proj->weight.grad()},
                                                    {"g_out_proj.bias", mha.out_proj->bias.grad()},
                                                    {"g_query", q.grad()}};
  if (!self_attention) grads.insert(grads.end(), {{"g_key", k.grad()}, {"g_value", v.grad()}});
  for (auto& [key, g] : grads) e.grads = std::max(e.grads, rel_err(g, fx.at(key)));
  std::printf("torch agreement %s%s%s: rel. error out %.2e, weights %.2e, gradients (max) %.2e\n",
              name.c_str(), causal_flag ? " (causal flag)" : "", need_weights ? "" : " (fused)", e.out,
              e.weights, e.grads);
  return e;
}

}  // namespace

TEST_CASE("MultiHeadAttention (Packed) agrees with torch.nn.MultiheadAttention 1.13 with a key_padding_mask",
          "[attention][torch]") {
  TorchCase e = check_torch_case("mha_padding", 8, 2, false, false);
  REQUIRE(e.out <= 1e-5);
  REQUIRE(e.weights <= 1e-5);
  REQUIRE(e.grads <= 1e-5);
}

TEST_CASE("MultiHeadAttention (Packed) agrees with torch.nn.MultiheadAttention 1.13 with a causal attn_mask",
          "[attention][torch]") {
  for (bool flag : {false, true}) {
    TorchCase e = check_torch_case("mha_causal", 12, 3, true, flag);
    REQUIRE(e.out <= 1e-5);
    REQUIRE(e.weights <= 1e-5);
    REQUIRE(e.grads <= 1e-5);
  }
}

TEST_CASE("MultiHeadAttention's torch forward: is_causal is torch's (top-left) when Tq != Tk",
          "[attention][torch]") {
  for (const char* name : {"mha_causal_tq_lt_tk", "mha_causal_tq_gt_tk"})
    for (bool flag : {false, true})
      for (bool need_weights : {true, false}) {
        TorchCase e = check_torch_case(name, 8, 2, false, flag, need_weights);
        REQUIRE(e.out <= 1e-5);
        REQUIRE(e.weights <= 1e-5);
        REQUIRE(e.grads <= 1e-5);
      }
}

TEST_CASE("MultiHeadAttention causal is bottom-right (KV cache) when Tq != Tk, as torch ops compute it",
          "[attention][torch]") {
  for (const char* name : {"d2l_causal_tq_lt_tk", "d2l_causal_tq_gt_tk"})
    for (bool need_weights : {true, false}) {
      auto fx = read_fixture(name);
      nn::MultiHeadAttention mha(8, 2, {.bias = true});
      nn::StateDict sd;
      for (const char* m : {"W_q", "W_k", "W_v", "W_o"})
        for (const char* p : {".weight", ".bias"}) sd.insert(std::string(m) + p, fx.at(std::string(m) + p));
      mha.load_state_dict(sd);
      mha.need_weights = need_weights;
      Variable q(fx.at("query"), true), k(fx.at("key"), true), v(fx.at("value"), true);
      Variable out = mha.forward(q, k, v, Tensor(), true);
      out.backward(fx.at("R"));
      double g = std::max({rel_err(q.grad(), fx.at("g_query")), rel_err(k.grad(), fx.at("g_key")),
                           rel_err(v.grad(), fx.at("g_value"))});
      for (auto& [key, p] : mha.named_parameters()) {
        // NOTE: the key bias adds q·b_k to a whole row of scores, which softmax ignores: its gradient is 0 up
        // to rounding in both, so it is compared in absolute terms
        if (key == "W_k.bias")
          REQUIRE(allclose(p.grad(), fx.at("g_" + key), 0.0, 1e-6));
        else
          g = std::max(g, rel_err(p.grad(), fx.at("g_" + key)));
      }
      std::printf("torch-ops agreement %s%s: rel. error out %.2e, gradients (max) %.2e\n", name,
                  need_weights ? "" : " (fused)", rel_err(out.data(), fx.at("out")), g);
      REQUIRE(rel_err(out.data(), fx.at("out")) <= 1e-5);
      REQUIRE(g <= 1e-5);
    }
}

TEST_CASE("MultiHeadAttention: the Packed and Split layouts with the same weights agree under both forwards",
          "[attention]") {
  Generator g(71);
  nn::MultiHeadAttention t(6, 3, {.bias = true, .layout = nn::ParameterLayout::Packed, .generator = &g});
  REQUIRE(t.state_dict().keys() ==
          std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"});
  REQUIRE(t.W_o == t.out_proj);
  t.to(DType::Float64);
  nn::init::normal_(t.in_proj_bias.data(), 0, 1, &g);
  nn::init::normal_(t.out_proj->bias.data(), 0, 1, &g);
  nn::MultiHeadAttention d(6, 3, {.bias = true});
  d.to(DType::Float64);
  d.need_weights = true;
  nn::StateDict sd;
  auto w = ops::chunk(t.in_proj_weight.data(), 3), b = ops::chunk(t.in_proj_bias.data(), 3);
  const char* names[3] = {"W_q", "W_k", "W_v"};
  for (int i = 0; i < 3; ++i) {
    sd.insert(std::string(names[i]) + ".weight", w[i]);
    sd.insert(std::string(names[i]) + ".bias", b[i]);
  }
  sd.insert("W_o.weight", t.out_proj->weight.data());
  sd.insert("W_o.bias", t.out_proj->bias.data());
  d.load_state_dict(sd);
  Tensor q = rand64({2, 3, 6}, 72), kv = rand64({2, 4, 6}, 73);
  Tensor kpm = ops::tensor({0, 0, 1, 1, 0, 0, 0, 0}, {2, 4}, DType::Float64).to(DType::Bool);
  // torch's forward on the Packed layout against d2l's on the Split one
  auto r =
      t.forward(q, kv, kv, {.key_padding_mask = kpm, .need_weights = true, .average_attn_weights = false});
  REQUIRE(allclose(r.output.data(), d.forward(q, kv, kv, i64({2, 4}, {2})).data(), 1e-12, 1e-12));
  REQUIRE(allclose(r.weights.data(), d.attention_weights(), 1e-12, 1e-12));
  REQUIRE(allclose(t.attention_weights(), d.attention_weights(), 1e-12, 1e-12));
  // and the other way round: d2l's forward on the Packed layout, torch's on the Split one (weights averaged)
  t.need_weights = true;
  REQUIRE(allclose(t.forward(q, kv, kv, i64({2, 4}, {2})).data(), r.output.data(), 1e-12, 1e-12));
  auto s = d.forward(q, kv, kv, {.key_padding_mask = kpm, .need_weights = true});
  REQUIRE_FALSE(d.forward(q, kv, kv, {.key_padding_mask = kpm}).weights.defined());  // fused by default
  REQUIRE(allclose(s.output.data(), r.output.data(), 1e-12, 1e-12));
  REQUIRE(allclose(s.weights.data(), ops::mean(r.weights.data(), {1}), 1e-12, 1e-12));
  // causal: torch's top-left and d2l's bottom-right are one rule when Tq == Tk
  Tensor x = rand64({2, 4, 6}, 74);
  REQUIRE(allclose(t.forward(x, x, x, {.is_causal = true}).output.data(),
                   d.forward(x, x, x, Tensor(), true).data(), 1e-12, 1e-12));
}

TEST_CASE("MultiHeadAttention gradcheck in the Packed layout, torch's forward", "[attention][gradcheck]") {
  Generator g(81);
  nn::MultiHeadAttention mha(4, 2, {.bias = true, .layout = nn::ParameterLayout::Packed, .generator = &g});
  mha.to(DType::Float64);
  Variable q(rand64({2, 3, 4}, 82), true), kv(rand64({2, 2, 4}, 83), true);
  Tensor kpm = ops::tensor({0, 1, 0, 0}, {2, 2}, DType::Float64).to(DType::Bool);
  REQUIRE(module_gradcheck(
      [&](const std::vector<Variable>& x) {
        return mha.forward(x[0], x[1], x[1], {.key_padding_mask = kpm}).output;
      },
      {q, kv}, mha));
}

// ---- Nadaraya-Watson ----

TEST_CASE("NadarayaWatson kernels against hand-computed weights", "[attention][nw]") {
  Tensor keys = f64({0, 1, 2, 4}, {4}), values = f64({1, 3, 5, 7}, {4});
  Tensor queries = f64({1, 10}, {2});
  SECTION("constant: the mean of the values") {
    nn::NadarayaWatson nw(nn::Kernel::Constant);
    REQUIRE(allclose(nw.forward(queries, keys, values).predictions.data(), f64({4, 4}, {2})));
  }
  SECTION("gaussian") {
    nn::NadarayaWatson nw(nn::Kernel::Gaussian, 2.0);
    auto r = nw.forward(queries, keys, values);
    // query 1: u = (1 - k) / 2 = 0.5, 0, -0.5, -1.5
    double e[4] = {std::exp(-0.125), 1.0, std::exp(-0.125), std::exp(-1.125)}, z = e[0] + e[1] + e[2] + e[3];
    REQUIRE(r.weights.data().to_vector<double>()[0] == Approx(e[0] / z));
    REQUIRE(r.predictions.data().to_vector<double>()[0] ==
            Approx((e[0] + 3 * e[1] + 5 * e[2] + 7 * e[3]) / z));
    REQUIRE(nw.attention_weights().shape() == Shape({2, 4}));
  }
  SECTION("boxcar: keys within the width, zeros (not NaN) when none") {
    nn::NadarayaWatson nw(nn::Kernel::Boxcar, 1.5);
    auto r = nw.forward(queries, keys, values);
    REQUIRE(allclose(r.predictions.data(), f64({3, 0}, {2})));  // keys 0, 1, 2 for query 1; none for 10
    REQUIRE(allclose(r.weights.data().select(0, 1), ops::zeros({4}, DType::Float64)));
  }
  SECTION("epanechnikov and triangular") {
    nn::NadarayaWatson ep(nn::Kernel::Epanechnikov, 2.0), tri(nn::Kernel::Triangular, 2.0);
    // query 1, u = 0.5, 0, -0.5, -1.5: epanechnikov 0.75, 1, 0.75, 0; triangular 0.5, 1, 0.5, 0
    REQUIRE(ep.forward(queries, keys, values).predictions.data().to_vector<double>()[0] ==
            Approx((0.75 * 1 + 3 + 0.75 * 5) / 2.5));
    REQUIRE(tri.forward(queries, keys, values).predictions.data().to_vector<double>()[0] ==
            Approx((0.5 + 3 + 2.5) / 2));
  }
}

TEST_CASE("NadarayaWatson and ParametricNadarayaWatson gradcheck", "[attention][nw][gradcheck]") {
  Variable q(f64({0.3, 1.2, 2.9}, {3}), true), k(f64({0.1, 0.9, 1.6, 2.5}, {4}), true),
      v(rand64({4}, 91), true);
  for (auto kernel : {nn::Kernel::Gaussian, nn::Kernel::Epanechnikov, nn::Kernel::Triangular}) {
    nn::NadarayaWatson nw(kernel, 1.45);  // no |u| = 1 kink at these points
    REQUIRE(gradcheck(
        [&](const std::vector<Variable>& x) { return nw.forward(x[0], x[1], x[2]).predictions; }, {q, k, v}));
  }
  Generator g(92);
  nn::ParametricNadarayaWatson pnw(&g);
  pnw.to(DType::Float64);
  REQUIRE(module_gradcheck(
      [&](const std::vector<Variable>& x) { return pnw.forward(x[0], x[1], x[2]).predictions; }, {q, k, v},
      pnw));
  Variable k2(rand64({3, 4}, 93), true), v2(rand64({3, 4}, 94), true);
  REQUIRE(module_gradcheck(
      [&](const std::vector<Variable>& x) { return pnw.forward(x[0], x[1], x[2]).predictions; }, {q, k2, v2},
      pnw));
}

TEST_CASE("ParametricNadarayaWatson regression trains on d2l's data", "[attention][nw]") {
  // d2l 11.2: x_train = sort(5 U(0, 1)), n = 50, y = 2 sin x + x^0.8 + N(0, 0.5); leave-one-out keys.
  Generator g(2017);
  const int64_t n = 50;
  std::vector<float> xs = ops::mul(ops::rand({n}, DType::Float32, Device::cpu(), &g), 5.0).to_vector<float>();
  std::sort(xs.begin(), xs.end());
  Tensor x = ops::from_vector(xs, {n});
  Tensor y = ops::add(ops::add(ops::mul(ops::sin(x), 2.0), ops::pow(x, 0.8)),
                      ops::normal({n}, 0.0, 0.5, DType::Float32, Device::cpu(), &g));
  // keys / values (n, n - 1): row i holds every training point but the i-th
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      if (i != j) idx.push_back(j);
  Tensor flat_idx = ops::from_vector(idx, {n * (n - 1)});
  Tensor keys = ops::index_select(x, 0, flat_idx).view({n, n - 1});
  Tensor values = ops::index_select(y, 0, flat_idx).view({n, n - 1});
  REQUIRE(keys.to_vector<float>()[0] == xs[1]);

  Generator init(0);
  nn::ParametricNadarayaWatson net(&init);
  nn::SGD sgd(net.parameters(), nn::SGDOptions{.lr = 0.5});
  std::vector<double> losses;
  for (int epoch = 0; epoch < 5; ++epoch) {
    sgd.zero_grad();
    Variable pred = net.forward(x, keys, values).predictions;
    // d2l: nn.MSELoss(reduction='none'), then l.sum().backward()
    Variable l = mse_loss(pred, Variable(y), Reduction::Sum);
    l.backward();
    sgd.step();
    losses.push_back(l.item());
  }
  std::printf("parametric NW loss by epoch: %.4f %.4f %.4f %.4f %.4f (w = %.3f)\n", losses[0], losses[1],
              losses[2], losses[3], losses[4], net.w.item());
  REQUIRE(losses.back() < 0.8 * losses.front());
}

// ---- positional encodings ----

TEST_CASE("sinusoidal positional encodings by hand", "[attention][positional]") {
  Tensor P = nn::sinusoidal_positions(4, 6, DType::Float64);
  auto p = P.to_vector<double>();
  REQUIRE(p[0] == 0.0);
  REQUIRE(p[1] == 1.0);
  REQUIRE(p[6 + 0] == Approx(std::sin(1.0)));
  REQUIRE(p[6 + 1] == Approx(std::cos(1.0)));
  REQUIRE(p[3 * 6 + 2] == Approx(std::sin(3.0 / std::pow(10000.0, 2.0 / 6))));
  REQUIRE(p[3 * 6 + 5] == Approx(std::cos(3.0 / std::pow(10000.0, 4.0 / 6))));
  REQUIRE(nn::sinusoidal_positions(3, 5).shape() == Shape({3, 5}));  // odd d

  nn::PositionalEncoding pe(6, 0.0, 10);
  pe.to(DType::Float64);
  REQUIRE(pe.state_dict().keys() == std::vector<std::string>{"P"});
  Tensor X = rand64({2, 3, 6}, 101);
  // (P is stored in float32, hence the tolerance)
  REQUIRE(allclose(pe.forward(X).data(), ops::add(X, P.narrow(0, 0, 3).unsqueeze(0)), 1e-6, 1e-7));
  REQUIRE(allclose(pe.forward(X, 1).data(), ops::add(X, P.narrow(0, 1, 3).unsqueeze(0)), 1e-6, 1e-7));

  // 2-d: the first half of the channels encodes the row, the second half the column
  Tensor P2 = nn::sinusoidal_positions_2d(3, 4, 8, DType::Float64);
  REQUIRE(P2.shape() == Shape({3, 4, 8}));
  Tensor P4 = nn::sinusoidal_positions(4, 4, DType::Float64);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) {
      REQUIRE(allclose(P2.select(0, r).select(0, c).narrow(0, 0, 4), P4.select(0, r)));
      REQUIRE(allclose(P2.select(0, r).select(0, c).narrow(0, 4, 4), P4.select(0, c)));
    }
  nn::PositionalEncoding2D pe2(8, 0.0, 5, 5);
  pe2.to(DType::Float64);
  Tensor G = rand64({2, 8, 3, 4}, 102);
  Tensor expect = ops::add(G, P2.permute({2, 0, 1}).unsqueeze(0));
  REQUIRE(allclose(pe2.forward_nchw(G).data(), expect, 1e-6, 1e-7));
  Variable Gv(G, true);
  REQUIRE(gradcheck([&](const std::vector<Variable>& x) { return pe2.forward_nchw(x[0]); }, {Gv}));
}

// ---- bad input ----

TEST_CASE("attention modules reject bad input naming themselves", "[attention][errors]") {
  Tensor q = ops::randn({2, 3, 4}), k = ops::randn({2, 5, 4}), v = ops::randn({2, 5, 2});
  REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(q, ops::randn({2, 5, 3}), v),
                         "scaled_dot_product_attention");
  REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(q, k.select(0, 0), v),
                         "scaled_dot_product_attention");
  REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(q, k, ops::randn({2, 4, 2})),
                         "scaled_dot_product_attention");
  REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(q, k, v, {.attn_mask = i64({1, 2, 3}, {3})}),
                         "scaled_dot_product_attention");
  REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(q, k, v, {.dropout_p = 1.0}),
                         "scaled_dot_product_attention");
  REQUIRE_THROWS_SACCADE(nn::scaled_dot_product_attention(q.to(DType::Float64), k, v),
                         "scaled_dot_product_attention");

  nn::DotProductAttention dot;
  REQUIRE_THROWS_SACCADE(dot.forward(q, ops::randn({2, 5, 3}), v), "DotProductAttention");
  REQUIRE_THROWS_SACCADE(dot.forward(q.select(0, 0), k, v), "DotProductAttention");
  REQUIRE_THROWS_SACCADE(dot.forward(q, k, v, i64({1, 2}, {1, 2})), "DotProductAttention");
  REQUIRE_THROWS_SACCADE(dot.forward(q, k, v, ops::ones({2, 5})), "DotProductAttention");

  nn::AdditiveAttention add(4, 4, 3);
  REQUIRE_THROWS_SACCADE(add.forward(q, ops::randn({2, 5, 3}), v), "AdditiveAttention");
  REQUIRE_THROWS_SACCADE(add.forward(q, k, ops::randn({2, 4, 2})), "AdditiveAttention");
  REQUIRE_THROWS_SACCADE(add.forward(q, k, v, i64({1, 2, 3}, {3})), "AdditiveAttention");
  REQUIRE_THROWS_SACCADE(nn::AdditiveAttention(0, 4, 3), "AdditiveAttention");

  REQUIRE_THROWS_SACCADE(nn::MultiHeadAttention(10, 3), "MultiHeadAttention");
  nn::MultiHeadAttention mha(4, 2);
  REQUIRE_THROWS_SACCADE(mha.forward(q, k, ops::randn({2, 5, 3})), "MultiHeadAttention");
  REQUIRE_THROWS_SACCADE(mha.forward(q.select(0, 0), k, k), "MultiHeadAttention");
  REQUIRE_THROWS_SACCADE(mha.forward(q, k, k, i64({1, 2, 3}, {3})), "MultiHeadAttention");
  REQUIRE_THROWS_SACCADE(mha.forward(q, k, k, ops::ones({2, 3, 4}, DType::Bool)), "MultiHeadAttention");

  REQUIRE_THROWS_SACCADE(nn::MultiHeadAttention(6, 4, {.layout = nn::ParameterLayout::Packed}),
                         "MultiHeadAttention");
  REQUIRE_THROWS_SACCADE(nn::MultiHeadAttention(4, 2, {.key_size = 3, .layout = nn::ParameterLayout::Packed}),
                         "MultiHeadAttention: the Packed layout");
  REQUIRE_THROWS_SACCADE(
      nn::MultiHeadAttention(4, 2, {.num_kv_heads = 1, .layout = nn::ParameterLayout::Packed}),
      "MultiHeadAttention: the Packed layout");
  nn::MultiHeadAttention tmha(4, 2, {.layout = nn::ParameterLayout::Packed});
  REQUIRE_THROWS_SACCADE(tmha.forward(q, k, k, {.key_padding_mask = ops::ones({2, 4}, DType::Bool)}),
                         "MultiHeadAttention");
  REQUIRE_THROWS_SACCADE(tmha.forward(q, k, k, {.attn_mask = ops::ones({3, 5})}), "MultiHeadAttention");
  REQUIRE_THROWS_SACCADE(tmha.forward(q, ops::randn({2, 5, 3}), k, {.need_weights = false}),
                         "MultiHeadAttention");
  tmha.window = 2;  // a window needs is_causal in torch's forward too
  REQUIRE_THROWS_SACCADE(tmha.forward(q, k, k, {.need_weights = false}), "needs causal attention");

  nn::NadarayaWatson nw;
  REQUIRE_THROWS_SACCADE(nw.forward(ops::randn({3}), ops::randn({4}), ops::randn({5})), "NadarayaWatson");
  REQUIRE_THROWS_SACCADE(nw.forward(ops::randn({3, 1}), ops::randn({4}), ops::randn({4})), "NadarayaWatson");
  REQUIRE_THROWS_SACCADE(nn::NadarayaWatson(nn::Kernel::Gaussian, 0.0), "NadarayaWatson");
  nn::ParametricNadarayaWatson pnw;
  REQUIRE_THROWS_SACCADE(pnw.forward(ops::randn({3}), ops::randn({2, 4}), ops::randn({2, 4})),
                         "ParametricNadarayaWatson");

  nn::PositionalEncoding pe(4, 0.0, 3);
  REQUIRE_THROWS_SACCADE(pe.forward(ops::randn({1, 4, 4})), "PositionalEncoding");
  REQUIRE_THROWS_SACCADE(pe.forward(ops::randn({1, 2, 5})), "PositionalEncoding");
  REQUIRE_THROWS_SACCADE(nn::PositionalEncoding2D(5, 0.0), "PositionalEncoding2D");
}
