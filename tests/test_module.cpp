// nn::Module (registration, dotted names, modes, placement, state_dict) and nn::init.
#include <cmath>

#include "helpers.h"

using namespace saccade;
using saccade::testing::allclose;

namespace {

// y = x * weight + bias, elementwise over the last dim (n).
struct Affine : nn::Module {
  Variable weight, bias;
  Affine(int64_t n, Generator* gen) : Module("Affine") {
    weight = register_parameter("weight", ops::randn({n}, DType::Float32, Device::cpu(), gen));
    bias = register_parameter("bias", ops::zeros({n}));
  }
  Variable forward(const Variable& x) const { return x * weight + bias; }
};

// Two Affine children and a float buffer.
struct Attention : nn::Module {
  Variable scale;
  std::shared_ptr<Affine> W_q, W_k;
  Attention(int64_t n, Generator* gen) : Module("Attention") {
    scale = register_buffer("scale", ops::full({1}, 0.5));
    W_q = register_module("W_q", std::make_shared<Affine>(n, gen));
    W_k = register_module("W_k", std::make_shared<Affine>(n, gen));
  }
  Variable forward(const Variable& x) const {
    return W_q->forward(x) * W_k->forward(x) * Variable(scale.data());
  }
};

// An int64 buffer, a child tree, and an own parameter registered after the children.
struct Decoder : nn::Module {
  Variable num_batches, gain;
  std::shared_ptr<Attention> attention;
  std::shared_ptr<Affine> out;
  Decoder(int64_t n, Generator* gen) : Module("Decoder") {
    num_batches = register_buffer("num_batches", ops::zeros({}, DType::Int64));
    attention = register_module("attention", std::make_shared<Attention>(n, gen));
    out = register_module("out", std::make_shared<Affine>(n, gen));
    gain = register_parameter("gain", ops::ones({1}));
  }
  Variable forward(const Variable& x) const { return out->forward(attention->forward(x)) * gain; }
};

struct Model : nn::Module {
  std::shared_ptr<Decoder> decoder;
  explicit Model(uint64_t seed, int64_t n = 3) : Module("Model") {
    Generator gen(seed);
    decoder = register_module("decoder", std::make_shared<Decoder>(n, &gen));
  }
};

template <class T>
std::vector<std::string> names_of(const std::vector<std::pair<std::string, T>>& items) {
  std::vector<std::string> out;
  for (const auto& [k, v] : items) out.push_back(k);
  return out;
}

nn::StateDict snapshot(const nn::Module& m) {
  nn::StateDict out;
  for (const auto& [k, t] : m.state_dict()) out.insert(k, t.clone());
  return out;
}

bool same_state(const nn::StateDict& a, const nn::StateDict& b) {
  if (a.keys() != b.keys()) return false;
  for (const auto& [k, t] : a)
    if (!(t.shape() == b.at(k).shape()) || t.to_vector<double>() != b.at(k).to_vector<double>()) return false;
  return true;
}

}  // namespace

TEST_CASE("module: dotted names follow registration order", "[nn][module]") {
  Model m(1);
  std::vector<std::string> params = {"decoder.attention.W_q.weight",
                                     "decoder.attention.W_q.bias",
                                     "decoder.attention.W_k.weight",
                                     "decoder.attention.W_k.bias",
                                     "decoder.out.weight",
                                     "decoder.out.bias",
                                     "decoder.gain"};
  // named_parameters: own parameters first, then each child's (torch's named_parameters order).
  std::vector<std::string> expected_named = {"decoder.gain",
                                             "decoder.attention.W_q.weight",
                                             "decoder.attention.W_q.bias",
                                             "decoder.attention.W_k.weight",
                                             "decoder.attention.W_k.bias",
                                             "decoder.out.weight",
                                             "decoder.out.bias"};
  REQUIRE(names_of(m.named_parameters()) == expected_named);
  REQUIRE(m.parameters().size() == 7);
  REQUIRE(m.num_parameters() == 6 * 3 + 1);
  REQUIRE(names_of(m.named_buffers()) ==
          std::vector<std::string>{"decoder.num_batches", "decoder.attention.scale"});
  // state_dict: per module, own parameters then own buffers, then the children (torch's order).
  REQUIRE(m.state_dict().keys() ==
          std::vector<std::string>{"decoder.gain", "decoder.num_batches", "decoder.attention.scale",
                                   "decoder.attention.W_q.weight", "decoder.attention.W_q.bias",
                                   "decoder.attention.W_k.weight", "decoder.attention.W_k.bias",
                                   "decoder.out.weight", "decoder.out.bias"});
  REQUIRE(names_of(m.decoder->named_children()) == std::vector<std::string>{"attention", "out"});
  REQUIRE(m.children().size() == 1);
  REQUIRE(names_of(m.named_parameters(/*recurse=*/false)).empty());
  REQUIRE(names_of(m.decoder->named_parameters(false)) == std::vector<std::string>{"gain"});
  // The handles a module keeps are the registered Variables themselves.
  REQUIRE(m.decoder->out->parameter("weight").impl() == m.decoder->out->weight.impl());
  REQUIRE(m.decoder->attention->buffer("scale").data().item() == 0.5);
  REQUIRE(m.decoder->out->weight.requires_grad());
  REQUIRE_FALSE(m.decoder->num_batches.requires_grad());
  REQUIRE_THROWS_SACCADE(m.decoder->parameter("nope"), "no parameter 'nope'");
  REQUIRE_THROWS_SACCADE(m.decoder->buffer("gain"), "no buffer 'gain'");
}

TEST_CASE("module: bad registrations throw", "[nn][module]") {
  nn::Module m("M");
  m.register_parameter("w", ops::ones({2}));
  REQUIRE_THROWS_SACCADE(m.register_parameter("w", ops::ones({2})), "already registered");
  REQUIRE_THROWS_SACCADE(m.register_buffer("w", ops::ones({2})), "already registered");
  REQUIRE_THROWS_SACCADE(m.register_module("w", std::make_shared<nn::Module>()), "already registered");
  REQUIRE_THROWS_SACCADE(m.register_parameter("a.b", ops::ones({2})), "invalid name");
  REQUIRE_THROWS_SACCADE(m.register_parameter("", ops::ones({2})), "invalid name");
  REQUIRE_THROWS_SACCADE(m.register_parameter("u", Tensor()), "undefined");
  REQUIRE_THROWS_SACCADE(m.register_buffer("u", Tensor()), "undefined");
  REQUIRE_THROWS_SACCADE(m.register_parameter("i", ops::arange(3)), "float");
  REQUIRE_THROWS_SACCADE(m.register_module("c", std::shared_ptr<nn::Module>()), "null module");
  // An int64 parameter that does not require grad is fine (torch allows it).
  REQUIRE_NOTHROW(m.register_parameter("count", ops::arange(3), /*requires_grad=*/false));
}

TEST_CASE("module: a shared child is counted once by parameters", "[nn][module]") {
  Generator gen(3);
  nn::Module m("Shared");
  auto shared = std::make_shared<Affine>(2, &gen);
  m.register_module("a", shared);
  m.register_module("b", shared);
  REQUIRE(m.parameters().size() == 2);
  REQUIRE(names_of(m.named_parameters()) == std::vector<std::string>{"a.weight", "a.bias"});
  REQUIRE(m.state_dict().size() == 4);  // torch keeps both names in the state_dict
}

TEST_CASE("module: train and eval recurse", "[nn][module]") {
  Model m(1);
  REQUIRE(m.is_training());
  m.eval();
  REQUIRE_FALSE(m.is_training());
  REQUIRE_FALSE(m.decoder->attention->W_q->is_training());
  REQUIRE_FALSE(m.decoder->out->is_training());
  m.decoder->train();
  REQUIRE_FALSE(m.is_training());
  REQUIRE(m.decoder->attention->W_k->is_training());
  m.train();
  REQUIRE(m.is_training());
}

TEST_CASE("module: backward fills parameter grads and zero_grad drops them", "[nn][module]") {
  Generator gen(5);
  Affine a(3, &gen);
  Variable x(ops::tensor({1, 2, 3}));
  sum(a.forward(x)).backward();  // d/dw sum(x w + b) = x, d/db = 1
  REQUIRE(allclose(a.weight.grad(), ops::tensor({1, 2, 3})));
  REQUIRE(allclose(a.bias.grad(), ops::ones({3})));
  a.zero_grad();
  REQUIRE_FALSE(a.weight.grad().defined());
  REQUIRE_FALSE(a.bias.grad().defined());
}

TEST_CASE("module: to keeps the parameter handles", "[nn][module]") {
  Model m(2);
  Variable w = m.decoder->attention->W_q->weight;
  std::vector<double> before = w.data().to_vector<double>();
  sum(m.decoder->forward(Variable(ops::ones({3})))).backward();
  m.to(DType::Float64);
  REQUIRE(w.dtype() == DType::Float64);
  REQUIRE(w.grad().dtype() == DType::Float64);
  REQUIRE(w.data().to_vector<double>() == before);
  REQUIRE(m.named_parameters()[1].second.impl() == w.impl());
  REQUIRE(m.decoder->num_batches.dtype() == DType::Int64);  // non-float buffers keep their dtype
  REQUIRE(m.decoder->attention->scale.dtype() == DType::Float64);
  m.to(Device::cpu());
  REQUIRE(w.device() == Device::cpu());
  REQUIRE_THROWS_SACCADE(m.to(DType::Int64), "float dtype");
  if (cuda_is_available()) {
    m.to(Device::cuda());
    REQUIRE(w.device() == Device::cuda());
    REQUIRE(m.decoder->num_batches.device() == Device::cuda());
    m.to(Device::cpu());
    REQUIRE(w.data().to_vector<double>() == before);
  }
}

TEST_CASE("module: state_dict round trip copies in place", "[nn][module]") {
  Model m(3);
  nn::StateDict saved = snapshot(m);
  Variable w = m.decoder->out->weight;
  const void* storage = w.data().raw_data();
  for (Variable& p : m.parameters()) {
    Tensor t = p.data();
    ops::add_(t, ops::ones_like(t));
  }
  REQUIRE_FALSE(same_state(snapshot(m), saved));
  nn::LoadResult r = m.load_state_dict(saved);
  REQUIRE(r.missing_keys.empty());
  REQUIRE(r.unexpected_keys.empty());
  REQUIRE(same_state(snapshot(m), saved));
  REQUIRE(w.data().raw_data() == storage);  // same storage: optimizers holding w stay valid

  // Another model built from another seed differs, and takes the first one's state.
  Model other(4);
  REQUIRE_FALSE(same_state(snapshot(other), saved));
  other.load_state_dict(m.state_dict());
  REQUIRE(same_state(snapshot(other), saved));
}

TEST_CASE("module: strict load errors leave the module unchanged", "[nn][module]") {
  Model m(5);
  nn::StateDict before = snapshot(m);

  // Every key but the last is fine and different: a load that wrote as it checked would change the module.
  auto perturbed = [&](const std::string& bad_key, const Tensor& bad_value) {
    nn::StateDict d;
    for (const auto& [k, t] : before) d.insert(k, k == bad_key ? bad_value : ops::add(t, 1.0));
    return d;
  };
  REQUIRE_THROWS_SACCADE(
      m.load_state_dict(perturbed("decoder.out.bias", ops::zeros({4}))),
      "size mismatch for 'decoder.out.bias': the checkpoint has shape [4], the module [3]");
  REQUIRE(same_state(snapshot(m), before));

  nn::StateDict missing;
  for (const auto& [k, t] : before)
    if (k != "decoder.attention.W_k.bias") missing.insert(k, ops::add(t, 1.0));
  REQUIRE_THROWS_SACCADE(m.load_state_dict(missing), "missing key 'decoder.attention.W_k.bias'");
  REQUIRE(same_state(snapshot(m), before));

  nn::StateDict extra = perturbed("", Tensor());
  extra.insert("decoder.extra", ops::ones({2}));
  REQUIRE_THROWS_SACCADE(m.load_state_dict(extra), "unexpected key 'decoder.extra'");
  REQUIRE(same_state(snapshot(m), before));

  // Non-strict: skips what is missing or unexpected, reports it, but still refuses shape mismatches.
  nn::LoadResult r = m.load_state_dict(missing, /*strict=*/false);
  REQUIRE(r.missing_keys == std::vector<std::string>{"decoder.attention.W_k.bias"});
  REQUIRE(allclose(m.decoder->out->bias.data(), ops::add(before.at("decoder.out.bias"), 1.0)));
  REQUIRE(allclose(m.decoder->attention->W_k->bias.data(), before.at("decoder.attention.W_k.bias")));
  r = m.load_state_dict(extra, false);
  REQUIRE(r.unexpected_keys == std::vector<std::string>{"decoder.extra"});
  REQUIRE_THROWS_SACCADE(m.load_state_dict(perturbed("decoder.gain", ops::ones({1, 1})), false),
                         "decoder.gain");
}

TEST_CASE("module: same seed gives the same parameters", "[nn][module][init]") {
  REQUIRE(same_state(snapshot(Model(7)), snapshot(Model(7))));
  REQUIRE_FALSE(same_state(snapshot(Model(7)), snapshot(Model(8))));
}

// ---- init ----

TEST_CASE("init: fans and gains as torch", "[nn][init]") {
  using nn::init::calculate_fan_in_and_fan_out;
  REQUIRE(calculate_fan_in_and_fan_out({3, 4}) == std::pair<int64_t, int64_t>{4, 3});
  REQUIRE(calculate_fan_in_and_fan_out({8, 4, 3, 3}) == std::pair<int64_t, int64_t>{36, 72});
  REQUIRE(calculate_fan_in_and_fan_out({5, 2, 7}) == std::pair<int64_t, int64_t>{14, 35});
  REQUIRE_THROWS_SACCADE(calculate_fan_in_and_fan_out({5}), "calculate_fan_in_and_fan_out");
  using NL = nn::init::Nonlinearity;
  REQUIRE(nn::init::calculate_gain(NL::Linear) == 1);
  REQUIRE(nn::init::calculate_gain(NL::Tanh) == Approx(5.0 / 3));
  REQUIRE(nn::init::calculate_gain(NL::Relu) == Approx(std::sqrt(2.0)));
  REQUIRE(nn::init::calculate_gain(NL::LeakyRelu) == Approx(std::sqrt(2.0 / (1 + 1e-4))));
  REQUIRE(nn::init::calculate_gain(NL::LeakyRelu, std::sqrt(5.0)) == Approx(std::sqrt(1.0 / 3)));
  REQUIRE(nn::init::calculate_gain(NL::Selu) == 0.75);
}

namespace {
struct Stats {
  double mean, var, lo, hi;
};
Stats stats_of(const Tensor& t) {
  auto v = t.to_vector<double>();
  Stats s{0, 0, v[0], v[0]};
  for (double x : v) s.mean += x, s.lo = std::min(s.lo, x), s.hi = std::max(s.hi, x);
  s.mean /= v.size();
  for (double x : v) s.var += (x - s.mean) * (x - s.mean);
  s.var /= v.size();
  return s;
}
}  // namespace

TEST_CASE("init: distributions have the documented bounds and variances", "[nn][init]") {
  namespace init = nn::init;
  Generator gen(11);
  Tensor w = ops::empty({200, 500});  // fan_in 500, fan_out 200, 10^5 samples
  auto check_uniform = [&](double bound) {
    Stats s = stats_of(w);
    REQUIRE(s.lo >= -bound);
    REQUIRE(s.hi < bound);
    REQUIRE(s.hi > 0.99 * bound);
    REQUIRE(std::abs(s.mean) < 0.01 * bound);
    REQUIRE(s.var == Approx(bound * bound / 3).epsilon(0.02));
  };
  auto check_normal = [&](double std) {
    Stats s = stats_of(w);
    REQUIRE(std::abs(s.mean) < 0.02 * std);
    REQUIRE(std::sqrt(s.var) == Approx(std).epsilon(0.02));
  };
  init::kaiming_uniform_(w, 0, init::FanMode::FanIn, init::Nonlinearity::Relu, &gen);
  check_uniform(std::sqrt(3.0) * std::sqrt(2.0) / std::sqrt(500.0));
  init::kaiming_uniform_(w, std::sqrt(5.0), init::FanMode::FanIn, init::Nonlinearity::LeakyRelu, &gen);
  check_uniform(1 / std::sqrt(500.0));
  init::kaiming_normal_(w, 0, init::FanMode::FanOut, init::Nonlinearity::Relu, &gen);
  check_normal(std::sqrt(2.0) / std::sqrt(200.0));
  init::xavier_uniform_(w, 2.0, &gen);
  check_uniform(2.0 * std::sqrt(6.0 / 700.0));
  init::xavier_normal_(w, 1.0, &gen);
  check_normal(std::sqrt(2.0 / 700.0));
  init::uniform_(w, -3, 3, &gen);
  check_uniform(3);
  init::normal_(w, 0, 0.5, &gen);
  check_normal(0.5);

  Tensor weight = ops::empty({10, 400}, DType::Float64), bias = ops::empty({10}, DType::Float64);
  init::linear_default_init_(weight, bias, &gen);
  REQUIRE(stats_of(weight).hi < 1 / std::sqrt(400.0));
  REQUIRE(stats_of(weight).lo >= -1 / std::sqrt(400.0));
  REQUIRE(stats_of(bias).hi < 1 / std::sqrt(400.0));
  REQUIRE(stats_of(bias).lo >= -1 / std::sqrt(400.0));
  REQUIRE(stats_of(bias).hi != stats_of(bias).lo);
  init::linear_default_init_(weight, Tensor(), &gen);  // no bias: fine

  init::constant_(bias, 2.5);
  REQUIRE(allclose(bias, ops::full({10}, 2.5, DType::Float64)));
  init::zeros_(bias);
  REQUIRE(allclose(bias, ops::zeros({10}, DType::Float64)));
  init::ones_(bias);
  REQUIRE(allclose(bias, ops::ones({10}, DType::Float64)));
  // A non-contiguous view is filled in place.
  Tensor m = ops::zeros({4, 3});
  init::ones_(m.t());
  REQUIRE(allclose(m, ops::ones({4, 3})));
  Tensor empty = ops::empty({0, 3});
  REQUIRE_NOTHROW(init::kaiming_uniform_(empty));
}

TEST_CASE("init: SkipInitGuard leaves the random initialisers' tensors alone, nests, and ends",
          "[nn][init]") {
  namespace init = nn::init;
  Tensor t = ops::zeros({4, 3});
  REQUIRE_FALSE(init::init_skipped());
  {
    init::SkipInitGuard skip;
    {
      init::SkipInitGuard nested;
      init::normal_(t);
    }
    REQUIRE(init::init_skipped());
    init::uniform_(t, 1, 2);
    init::kaiming_uniform_(t);
    init::xavier_normal_(t);
    nn::Linear lin(3, 4);  // a module's own init too
    REQUIRE(ops::sum(ops::abs(t), {}).item<double>() == 0);
    init::ones_(t);  // the constant ones still write
    REQUIRE(ops::sum(t, {}).item<double>() == 12);
    REQUIRE_THROWS_SACCADE(init::normal_(t, 0, -1), "std");  // and still check their input
  }
  REQUIRE_FALSE(init::init_skipped());
  init::uniform_(t, 2, 3);
  REQUIRE(ops::amin(t, {}).item<double>() >= 2);
}

TEST_CASE("init: same seed same values, bad input throws", "[nn][init]") {
  namespace init = nn::init;
  Tensor a = ops::empty({5, 6}), b = ops::empty({5, 6});
  Generator g1(3), g2(3);
  init::xavier_uniform_(a, 1, &g1);
  init::xavier_uniform_(b, 1, &g2);
  REQUIRE(a.to_vector<float>() == b.to_vector<float>());
  init::xavier_uniform_(b, 1, &g2);  // the stream advanced
  REQUIRE(a.to_vector<float>() != b.to_vector<float>());

  Tensor i = ops::zeros({3, 3}, DType::Int64);
  REQUIRE_THROWS_SACCADE(init::uniform_(i), "uniform_");
  REQUIRE_THROWS_SACCADE(init::normal_(i), "normal_");
  REQUIRE_THROWS_SACCADE(init::kaiming_normal_(i), "kaiming_normal_");
  REQUIRE_THROWS_SACCADE(init::xavier_normal_(ops::ones({3})), "at least 2 dims");
  REQUIRE_THROWS_SACCADE(init::uniform_(Tensor()), "undefined");
  REQUIRE_THROWS_SACCADE(init::constant_(Tensor(), 1), "undefined");
  REQUIRE_THROWS_SACCADE(init::uniform_(a, 1, 0), "a <= b");
  REQUIRE_THROWS_SACCADE(init::normal_(a, 0, -1), "std");
}
