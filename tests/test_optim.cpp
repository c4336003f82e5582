// Optimizers, clip_grad_norm_ and schedulers against PyTorch 1.13 (tests/fixtures/make_optim.py).
#include <cmath>
#include <functional>
#include <limits>
#include <memory>

#include "helpers.h"

using namespace saccade;
using saccade::testing::allclose;

namespace {

// `file` is a C string: with a std::string temporary there g++ 13 warns of a dangling reference to the result
const nn::StateDict& fixture(const char* file) {
  static std::map<std::string, nn::StateDict> cache;
  auto it = cache.find(file);
  if (it == cache.end())
    it = cache.emplace(file, nn::load_safetensors(std::string(SACCADE_TEST_DATA_DIR) + "/" + file).tensors)
             .first;
  return it->second;
}

using MakeOptimizer = std::function<std::unique_ptr<nn::Optimizer>(const std::vector<Variable>&)>;
constexpr int kSteps = 4, kParams = 3;

std::vector<Variable> initial_params(const nn::StateDict& f, const std::string& prefix) {
  std::vector<Variable> ps;
  for (int i = 0; i < kParams; ++i)
    ps.emplace_back(f.at(fmt::format("{}.p{}.init", prefix, i)).clone(), true);
  return ps;
}

// Sets the fixture's gradients of step `step` (undefined where torch had None).
void set_grads(const nn::StateDict& f, const std::string& prefix, int step, std::vector<Variable>& ps) {
  for (int i = 0; i < kParams; ++i) {
    const Tensor* g = f.find(fmt::format("{}.g{}.p{}", prefix, step, i));
    if (g) {
      ps[i].set_grad(g->clone());
    } else {
      ps[i].zero_grad();
    }
  }
}

// Runs kSteps steps of the optimizer and compares every parameter with torch's after every step.
void check_against_torch(const std::string& file, const std::string& prefix, const MakeOptimizer& make) {
  INFO(prefix);
  const nn::StateDict& f = fixture(file.c_str());
  std::vector<Variable> ps = initial_params(f, prefix);
  std::unique_ptr<nn::Optimizer> opt = make(ps);
  for (int step = 1; step <= kSteps; ++step) {
    set_grads(f, prefix, step, ps);
    opt->step();
    for (int i = 0; i < kParams; ++i) {
      INFO("step " << step << " param " << i);
      REQUIRE(allclose(ps[i].data(), f.at(fmt::format("{}.after{}.p{}", prefix, step, i)), 1e-5, 1e-7));
    }
  }
}

template <class Opt, class Options>
MakeOptimizer maker(Options options) {
  return [options](const std::vector<Variable>& ps) { return std::make_unique<Opt>(ps, options); };
}

}  // namespace

TEST_CASE("optim: SGD matches torch", "[nn][optim]") {
  check_against_torch("optim_sgd.safetensors", "sgd_plain", maker<nn::SGD>(nn::SGDOptions{.lr = 0.1}));
  check_against_torch(
      "optim_sgd.safetensors", "sgd_momentum",
      maker<nn::SGD>(nn::SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}));
  check_against_torch(
      "optim_sgd.safetensors", "sgd_nesterov",
      maker<nn::SGD>(nn::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true}));
  check_against_torch("optim_sgd.safetensors", "sgd_groups", [](const std::vector<Variable>& ps) {
    std::vector<nn::ParamGroup> groups = {{{ps[0], ps[1]}, {}, {}}, {{ps[2]}, 0.01, 0.1}};
    return std::make_unique<nn::SGD>(groups, nn::SGDOptions{.lr = 0.1, .momentum = 0.5});
  });
}

TEST_CASE("optim: Adam and AdamW match torch", "[nn][optim]") {
  check_against_torch("optim_adam.safetensors", "adam", maker<nn::Adam>(nn::AdamOptions{.lr = 1e-2}));
  check_against_torch("optim_adam.safetensors", "adam_wd",
                      maker<nn::Adam>(nn::AdamOptions{
                          .lr = 1e-2, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1}));
  nn::AdamOptions adamw = nn::AdamW::default_options();
  adamw.lr = 1e-2;
  check_against_torch("optim_adam.safetensors", "adamw", maker<nn::AdamW>(adamw));
  check_against_torch(
      "optim_adam.safetensors", "adamw_wd",
      maker<nn::AdamW>(nn::AdamOptions{.lr = 1e-2, .beta1 = 0.85, .beta2 = 0.995, .weight_decay = 0.1}));
}

TEST_CASE("optim: state_dict names the state and resumes exactly", "[nn][optim]") {
  const nn::StateDict& f = fixture("optim_adam.safetensors");
  std::vector<Variable> ps = initial_params(f, "adamw");
  nn::AdamW opt(ps, nn::AdamOptions{.lr = 1e-2, .weight_decay = 0.01});
  for (int step = 1; step <= 2; ++step) {
    set_grads(f, "adamw", step, ps);
    opt.step();
  }
  nn::StateDict sd = opt.state_dict();
  REQUIRE(sd.at("state.0.step").item<int64_t>() == 2);
  REQUIRE(sd.at("state.2.step").item<int64_t>() == 1);  // p2 had no gradient at step 2
  REQUIRE(sd.at("state.1.exp_avg").shape() == Shape{5});
  REQUIRE(sd.at("state.0.exp_avg_sq").shape() == Shape{3, 4});
  REQUIRE(sd.at("param_groups.0.lr").item() == 1e-2);
  REQUIRE(sd.at("param_groups.0.weight_decay").item() == 0.01);
  REQUIRE(sd.at("param_groups.0.num_params").item<int64_t>() == 3);
  REQUIRE(sd.size() == 3 * 3 + 3);

  // A second optimizer on copies of the parameters, given the state, continues identically.
  std::vector<Variable> qs;
  for (const Variable& p : ps) qs.emplace_back(p.data().clone(), true);
  nn::AdamW resumed(qs, nn::AdamOptions{.lr = 0.5, .weight_decay = 0.3});  // lr, wd come from the state
  resumed.load_state_dict(sd);
  REQUIRE(resumed.lr() == 1e-2);
  REQUIRE(resumed.weight_decay() == 0.01);
  for (int step = 3; step <= 4; ++step) {
    set_grads(f, "adamw", step, ps);
    set_grads(f, "adamw", step, qs);
    opt.step();
    resumed.step();
  }
  for (int i = 0; i < kParams; ++i)
    REQUIRE(ps[i].data().to_vector<float>() == qs[i].data().to_vector<float>());
  // The state_dict holds copies: stepping did not change `sd`.
  REQUIRE(sd.at("state.0.step").item<int64_t>() == 2);
}

TEST_CASE("optim: load_state_dict validates before changing anything", "[nn][optim]") {
  std::vector<Variable> ps = {Variable(ops::ones({2, 2}), true), Variable(ops::ones({3}), true)};
  nn::SGD opt(ps, nn::SGDOptions{.lr = 0.1, .momentum = 0.9});
  for (Variable& p : ps) p.set_grad(ops::ones_like(p.data()));
  opt.step();
  nn::StateDict good = opt.state_dict();
  REQUIRE(good.contains("state.1.momentum_buffer"));

  auto with = [&](const std::string& key, const Tensor& t) {
    nn::StateDict d;
    for (const auto& [k, v] : good)
      d.insert(k, k == key ? t : k.rfind("state.", 0) == 0 ? ops::add(v, 1.0) : v);
    if (!d.contains(key)) d.insert(key, t);
    return d;
  };
  REQUIRE_THROWS_SACCADE(opt.load_state_dict(with("state.1.momentum_buffer", ops::ones({4}))),
                         "'state.1.momentum_buffer' has shape [4], the parameter has shape [3]");
  REQUIRE_THROWS_SACCADE(opt.load_state_dict(with("state.2.momentum_buffer", ops::ones({3}))), "parameter 2");
  REQUIRE_THROWS_SACCADE(opt.load_state_dict(with("state.0.exp_avg", ops::ones({2, 2}))),
                         "unexpected state key");
  REQUIRE_THROWS_SACCADE(opt.load_state_dict(with("bogus", ops::ones({1}))), "unexpected key 'bogus'");
  REQUIRE_THROWS_SACCADE(opt.load_state_dict(with("param_groups.1.lr", ops::scalar_tensor(0.1))), "group 1");
  REQUIRE_THROWS_SACCADE(
      opt.load_state_dict(with("param_groups.0.num_params", ops::scalar_tensor(5, DType::Int64))),
      "5 parameters");
  nn::StateDict no_lr;
  for (const auto& [k, v] : good)
    if (k != "param_groups.0.lr") no_lr.insert(k, v);
  REQUIRE_THROWS_SACCADE(opt.load_state_dict(no_lr), "missing key 'param_groups.0.lr'");
  // Unchanged: same lr and the same momentum buffers as before the failed loads.
  REQUIRE(opt.lr() == 0.1);
  nn::StateDict after = opt.state_dict();
  for (const auto& [k, v] : good) REQUIRE(after.at(k).to_vector<double>() == v.to_vector<double>());
  // Adam's step must be an int64 scalar.
  nn::Adam adam(ps);
  adam.step();
  nn::StateDict a = adam.state_dict();
  nn::StateDict bad_step;
  for (const auto& [k, v] : a) bad_step.insert(k, k == "state.0.step" ? ops::scalar_tensor(1.0) : v);
  REQUIRE_THROWS_SACCADE(adam.load_state_dict(bad_step), "int64");
  // Each entry has one name: an index with a leading zero is refused (it named parameter 1's entry twice)
  nn::StateDict renamed;
  for (const auto& [k, v] : a) renamed.insert(k == "state.1.exp_avg" ? "state.01.exp_avg" : k, v);
  REQUIRE_THROWS_SACCADE(adam.load_state_dict(renamed), "unexpected key 'state.01.exp_avg'");
  // A parameter's state is whole or absent: without exp_avg, AdamW's next step would read an undefined tensor
  nn::StateDict partial;
  for (const auto& [k, v] : a)
    if (k != "state.1.exp_avg") partial.insert(k, v);
  REQUIRE_THROWS_SACCADE(adam.load_state_dict(partial), "the state of parameter 1 lacks 'state.1.exp_avg'");
  nn::StateDict none_for_1;  // absent: loads, and the next step starts parameter 1's state afresh
  for (const auto& [k, v] : a)
    if (k.rfind("state.1.", 0) != 0) none_for_1.insert(k, v);
  adam.load_state_dict(none_for_1);
  for (Variable& p : ps) p.set_grad(ops::ones_like(p.data()));
  adam.step();
  REQUIRE(adam.state_dict().at("state.1.step").item<int64_t>() == 1);
  REQUIRE(adam.state_dict().at("state.0.step").item<int64_t>() == 2);
}

TEST_CASE("optim: bad construction throws", "[nn][optim]") {
  Variable p(ops::ones({2}), true);
  REQUIRE_THROWS_SACCADE(nn::SGD(std::vector<Variable>{}), "empty parameter list");
  REQUIRE_THROWS_SACCADE(nn::SGD({p}, nn::SGDOptions{.lr = -1}), "SGD: invalid learning rate");
  REQUIRE_THROWS_SACCADE(nn::SGD({p}, nn::SGDOptions{.momentum = -0.5}), "momentum");
  REQUIRE_THROWS_SACCADE(nn::SGD({p}, nn::SGDOptions{.nesterov = true}), "nesterov");
  REQUIRE_THROWS_SACCADE(nn::SGD({p}, nn::SGDOptions{.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                         "nesterov");
  REQUIRE_THROWS_SACCADE(nn::SGD({p, p}), "more than once");
  REQUIRE_THROWS_SACCADE(nn::Adam({p}, nn::AdamOptions{.beta1 = 1.0}), "Adam: invalid beta1");
  REQUIRE_THROWS_SACCADE(nn::AdamW({p}, nn::AdamOptions{.beta2 = -0.1}), "AdamW: invalid beta2");
  REQUIRE_THROWS_SACCADE(nn::Adam({p}, nn::AdamOptions{.eps = -1}), "epsilon");
  REQUIRE_THROWS_SACCADE(nn::Adam({p}, nn::AdamOptions{.weight_decay = -1}), "weight_decay");
  REQUIRE_THROWS_SACCADE(nn::Adam({Variable()}), "undefined");
  REQUIRE_THROWS_SACCADE(nn::Adam({p * 2.0}), "non-leaf");
  nn::SGD opt({p});
  REQUIRE_THROWS_SACCADE(opt.lr(1), "group 1 out of range");
  REQUIRE_THROWS_SACCADE(opt.set_lr(0, -1), "invalid learning rate");
}

TEST_CASE("optim: zero_grad and skipped parameters", "[nn][optim]") {
  Variable a(ops::ones({2}), true), b(ops::ones({2}), true);
  nn::Adam opt({a, b}, nn::AdamOptions{.lr = 0.1});
  sum(a * 3.0).backward();  // b gets no gradient
  opt.step();
  REQUIRE(allclose(a.data(), ops::full({2}, 0.9)));  // first Adam step moves by lr · sign(g)
  REQUIRE(allclose(b.data(), ops::ones({2})));
  REQUIRE_FALSE(opt.state_dict().contains("state.1.step"));
  opt.zero_grad();
  REQUIRE_FALSE(a.grad().defined());
  // Parameter groups expose their own lr.
  nn::SGD sgd(std::vector<nn::ParamGroup>{{{a}, {}, {}}, {{b}, 0.5, {}}}, nn::SGDOptions{.lr = 0.1});
  REQUIRE(sgd.num_groups() == 2);
  REQUIRE(sgd.lr(0) == 0.1);
  REQUIRE(sgd.lr(1) == 0.5);
  REQUIRE(sgd.parameters().size() == 2);
}

TEST_CASE("optim: clip_grad_norm_ matches torch", "[nn][optim]") {
  const nn::StateDict& f = fixture("optim_clip.safetensors");
  const double cases[][2] = {
      {1.0, 2.0}, {100.0, 2.0}, {0.5, 1.0}, {0.3, std::numeric_limits<double>::infinity()}, {2.0, 3.0}};
  for (int k = 0; k < 5; ++k) {
    INFO("case " << k);
    std::vector<Variable> ps = {Variable(ops::zeros({3, 4}), true), Variable(ops::zeros({5}), true),
                                Variable(ops::zeros({2}), true)};
    for (int i = 0; i < 2; ++i) ps[i].set_grad(f.at(fmt::format("clip{}.g{}", k, i)).clone());
    double total = nn::clip_grad_norm_(ps, cases[k][0], cases[k][1]);
    REQUIRE(total == Approx(f.at(fmt::format("clip{}.total", k)).item()).epsilon(1e-5));
    for (int i = 0; i < 2; ++i)
      REQUIRE(allclose(ps[i].grad(), f.at(fmt::format("clip{}.clipped{}", k, i)), 1e-5, 1e-7));
    REQUIRE_FALSE(ps[2].grad().defined());
  }
  // Hand-checked: grads (3, 4) have norm 5; max_norm 1 scales them by 1 / (5 + 1e-6).
  Variable p(ops::zeros({2}), true);
  p.set_grad(ops::tensor({3, 4}, DType::Float64));
  REQUIRE(nn::clip_grad_norm_({p}, 1.0) == Approx(5.0));
  REQUIRE(allclose(p.grad(), ops::tensor({0.6, 0.8}, DType::Float64), 1e-6));
  REQUIRE(nn::clip_grad_norm_({Variable(ops::zeros({2}), true)}, 1.0) == 0);
  REQUIRE_THROWS_SACCADE(nn::clip_grad_norm_({p}, 1.0, 0), "clip_grad_norm_");
}

// ---- schedulers ----

namespace {
void check_schedule(nn::Optimizer& opt, nn::LRScheduler& sched, const std::string& key) {
  INFO(key);
  std::vector<double> expected = fixture("optim_sched.safetensors").at(key).to_vector<double>();
  REQUIRE(opt.lr() == Approx(expected[0]).epsilon(1e-12));
  for (size_t t = 1; t < expected.size(); ++t) {
    opt.step();
    sched.step();
    INFO("step " << t);
    REQUIRE(opt.lr() == Approx(expected[t]).epsilon(1e-12).margin(1e-15));
    REQUIRE(sched.get_lr()[0] == opt.lr());
  }
}
}  // namespace

TEST_CASE("scheduler: learning rates match torch", "[nn][scheduler]") {
  Variable p(ops::zeros({1}), true);
  auto fresh = [&] { return std::make_unique<nn::SGD>(std::vector<Variable>{p}, nn::SGDOptions{.lr = 0.1}); };
  auto o1 = fresh();
  nn::StepLR step_lr(*o1, 3, 0.5);
  check_schedule(*o1, step_lr, "steplr");
  auto o2 = fresh();
  nn::CosineAnnealingLR cosine(*o2, 10, 0.001);
  check_schedule(*o2, cosine, "cosine");
  auto o3 = fresh();
  nn::LinearWarmup linear(*o3, 5, 0.1);
  check_schedule(*o3, linear, "linear");
  auto o4 = fresh();
  nn::LinearWarmup warmup_cosine(*o4, 4, 0.2, 16, 0.002);
  check_schedule(*o4, warmup_cosine, "warmup_cosine");
  REQUIRE(warmup_cosine.last_epoch() == 24);
}

TEST_CASE("scheduler: groups, jumps and bad arguments", "[nn][scheduler]") {
  Variable a(ops::zeros({1}), true), b(ops::zeros({1}), true);
  nn::SGD opt(std::vector<nn::ParamGroup>{{{a}, {}, {}}, {{b}, 0.01, {}}}, nn::SGDOptions{.lr = 0.1});
  nn::StepLR sched(opt, 2, 0.1);
  REQUIRE(sched.base_lrs() == std::vector<double>{0.1, 0.01});
  for (int i = 0; i < 4; ++i) sched.step();
  REQUIRE(opt.lr(0) == Approx(0.1 * 0.01));
  REQUIRE(opt.lr(1) == Approx(0.01 * 0.01));
  sched.set_last_epoch(2);  // as after two steps
  REQUIRE(opt.lr(0) == Approx(0.01));
  REQUIRE(opt.lr(1) == Approx(0.001));
  REQUIRE(sched.last_epoch() == 2);
  REQUIRE_THROWS_SACCADE(sched.set_last_epoch(-1), "set_last_epoch");
  REQUIRE_THROWS_SACCADE(nn::StepLR(opt, 0), "StepLR: step_size");
  REQUIRE_THROWS_SACCADE(nn::CosineAnnealingLR(opt, 0), "CosineAnnealingLR: T_max");
  REQUIRE_THROWS_SACCADE(nn::LinearWarmup(opt, 3, 0.0), "LinearWarmup: start_factor");
  REQUIRE_THROWS_SACCADE(nn::LinearWarmup(opt, -1), "LinearWarmup: warmup_steps");
  REQUIRE_THROWS_SACCADE(nn::LinearWarmup(opt, 2, 0.5, -3), "LinearWarmup: cosine_steps");
}

TEST_CASE("optimizers name themselves for a gradient that does not match its parameter", "[optim]") {
  // a bool gradient reached Adam's update and was reported by an inner op ("mul")
  const std::pair<std::string, MakeOptimizer> opts[] = {
      {"SGD",
       [](const auto& p) {
         return std::make_unique<nn::SGD>(p, nn::SGDOptions{0.1, 0.9});
       }},
      {"Adam", [](const auto& p) { return std::make_unique<nn::Adam>(p); }},
      {"AdamW", [](const auto& p) { return std::make_unique<nn::AdamW>(p); }},
  };
  for (const auto& [name, make] : opts) {
    INFO(name);
    Variable ok(ops::ones({2}), true), p(ops::ones({3}), true);
    ok.set_grad(ops::ones({2}));
    auto opt = make({ok, p});
    p.set_grad(ops::ones({3}, DType::Bool));
    REQUIRE_THROWS_SACCADE(opt->step(), name +
                                            ": the gradient of parameter 1 is bool of shape [3] on cpu; "
                                            "expected float32 of shape [3] on cpu");
    p.set_grad(ops::ones({3}, DType::Float64));
    REQUIRE_THROWS_SACCADE(opt->step(), name + ": the gradient of parameter 1 is float64");
    // nothing was updated, not even the parameter before the bad one
    CHECK(ok.data().to_vector<float>() == std::vector<float>{1, 1});
    CHECK(p.data().to_vector<float>() == std::vector<float>{1, 1, 1});
  }
  Variable p(ops::ones({3}), true);
  p.set_grad(ops::ones({3}, DType::Bool));
  REQUIRE_THROWS_SACCADE(nn::clip_grad_norm_({p}, 1.0),
                         "clip_grad_norm_: expected float gradients, got bool");
}
