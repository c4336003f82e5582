// GradScaler (nn/grad_scaler.h) and its ops (ops/amp.h): the schedule against PyTorch 2.x's
// torch.amp.GradScaler (tests/fixtures/make_grad_scaler.py) and against the documented rule, skipped steps,
// unscale_ before clipping, state_dict and checkpoints, bad input.
#include <cmath>
#include <limits>

#include "cuda_helpers.h"
#include "helpers.h"
#include "temp_dir.h"

using namespace saccade;
using saccade::testing::allclose;

namespace {

const nn::StateDict& fixture() {
  static const nn::StateDict f =
      nn::load_safetensors(std::string(SACCADE_TEST_DATA_DIR) + "/grad_scaler.safetensors").tensors;
  return f;
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The documented rule (torch.amp.GradScaler.update), in doubles: what the scale must be after each step.
struct Schedule {
  double scale;
  int64_t tracker = 0;
  void step(bool overflow, double growth, double backoff, int64_t interval) {
    if (overflow) {
      scale *= backoff;
      tracker = 0;
    } else if (++tracker == interval) {
      if (scale * growth <= std::numeric_limits<float>::max()) scale *= growth;
      tracker = 0;
    }
  }
};

bool any_non_finite(const Tensor& t) { return !all_finite(t); }

void replay(const std::string& run, int steps) {
  INFO(run);
  const nn::StateDict& f = fixture();
  const Tensor opts = f.at(run + ".options");
  nn::GradScalerOptions o{.init_scale = opts.select(0, 0).item<double>(),
                          .growth_factor = opts.select(0, 1).item<double>(),
                          .backoff_factor = opts.select(0, 2).item<double>(),
                          .growth_interval = static_cast<int64_t>(opts.select(0, 3).item<double>())};
  nn::GradScaler scaler(o);
  std::vector<Variable> ps = {Variable(f.at(run + ".init.p0").clone(), true),
                              Variable(f.at(run + ".init.p1").clone(), true)};
  nn::SGD sgd(ps, {.lr = 0.1, .momentum = 0.9});
  Schedule rule{o.init_scale};
  for (int i = 1; i <= steps; ++i) {
    INFO("step " << i);
    bool overflow = false;
    for (int k = 0; k < 2; ++k) {
      const Tensor g = f.at(fmt::format("{}.grad{}.p{}", run, i, k));
      overflow |= any_non_finite(g);
      ps[k].set_grad(g.clone());
    }
    const nn::StateDict before = sgd.state_dict();
    const std::vector<Tensor> params_before = {ps[0].data().clone(), ps[1].data().clone()};
    REQUIRE(scaler.step(sgd) == !overflow);
    scaler.update();
    rule.step(overflow, o.growth_factor, o.backoff_factor, o.growth_interval);
    for (int k = 0; k < 2; ++k)
      REQUIRE(allclose(ps[k].data(), f.at(fmt::format("{}.after{}.p{}", run, i, k)), 1e-6, 1e-7));
    CHECK(scaler.get_scale() == f.at(fmt::format("{}.scale{}", run, i)).item<double>());
    CHECK(scaler.get_scale() == rule.scale);
    CHECK(scaler.growth_tracker() == f.at(fmt::format("{}.tracker{}", run, i)).item<int64_t>());
    CHECK(scaler.growth_tracker() == rule.tracker);
    if (overflow) {  // a skipped step changes neither the parameters nor the optimizer's state
      for (int k = 0; k < 2; ++k) REQUIRE(allclose(ps[k].data(), params_before[k], 0, 0));
      const nn::StateDict after = sgd.state_dict();
      REQUIRE(after.keys() == before.keys());
      for (const auto& [key, t] : before) REQUIRE(allclose(after.at(key), t, 0, 0));
    }
  }
}

}  // namespace

TEST_CASE("GradScaler: follows torch.amp.GradScaler and the documented rule", "[nn][grad_scaler]") {
  replay("schedule", 12);  // init 2^16, interval 3: backoff on inf and NaN, growth after 3 clean steps
  replay("ceiling", 5);    // init 2^126, interval 1: 2^127 is the ceiling (2^128 is inf in float32)
}

TEST_CASE("GradScaler: defaults, scale(), and unscale_ before clipping", "[nn][grad_scaler]") {
  nn::GradScaler scaler;
  CHECK(scaler.options().growth_interval == 2000);
  CHECK(scaler.options().growth_factor == 2.0);
  CHECK(scaler.options().backoff_factor == 0.5);
  CHECK(scaler.get_scale() == 65536.0);
  // scale(loss) is recorded: d(scaled)/dw = S dloss/dw, and the scaled loss keeps the loss's shape
  Variable w(ops::tensor({1.0, -2.0, 3.0}), true);
  Variable loss = sum(mul(w, w));
  Variable scaled = scaler.scale(loss);
  REQUIRE(scaled.shape() == loss.shape());
  CHECK(scaled.data().item<float>() == 14.0f * 65536.0f);
  scaled.backward();
  REQUIRE(allclose(w.grad(), ops::tensor({2.0 * 65536, -4.0 * 65536, 6.0 * 65536})));
  nn::SGD sgd({w}, {.lr = 0.5});
  scaler.unscale_(sgd);  // the true gradient, ready for clip_grad_norm_
  REQUIRE(allclose(w.grad(), ops::tensor({2.0, -4.0, 6.0})));
  nn::clip_grad_norm_({w}, 1.0);
  REQUIRE_THROWS_SACCADE(scaler.unscale_(sgd), "already called");
  REQUIRE(scaler.step(sgd));  // does not unscale a second time
  REQUIRE(allclose(w.data(),
                   ops::tensor({1.0 - 0.5 * 2 / std::sqrt(56.0), -2.0 + 0.5 * 4 / std::sqrt(56.0),
                                3.0 - 0.5 * 6 / std::sqrt(56.0)}),
                   1e-5, 1e-6));
  REQUIRE_THROWS_SACCADE(scaler.step(sgd), "already called");
  scaler.update();
  CHECK(scaler.growth_tracker() == 1);
  REQUIRE_THROWS_SACCADE(scaler.update(), "no optimizer was stepped");
  scaler.update(1024.0);
  CHECK(scaler.get_scale() == 1024.0);
  // disabled: a pass-through
  nn::GradScaler off({.enabled = false});
  CHECK(off.scale(loss).impl() == loss.impl());
  CHECK(off.get_scale() == 1.0);
  CHECK(off.state_dict().empty());
}

TEST_CASE("amp_foreach_non_finite_check_and_unscale_: one pass over every gradient", "[ops][grad_scaler]") {
  Tensor inv = ops::full({1}, 0.25);
  // many tensors, float32 and float64, one of them strided, one large enough to be split over threads
  Tensor big = ops::arange(0, 100000, 1, DType::Float32);
  Tensor f64 = ops::tensor({4.0, -8.0}, DType::Float64);
  Tensor strided = ops::arange(0, 6, 1, DType::Float32).reshape({2, 3}).t();
  Tensor small = ops::tensor({1.0});
  Tensor found = ops::zeros({1});
  ops::amp_foreach_non_finite_check_and_unscale_({big, f64, strided, small}, found, inv);
  CHECK(found.item<float>() == 0.0f);
  REQUIRE(allclose(big, ops::mul(ops::arange(0, 100000, 1, DType::Float32), 0.25)));
  REQUIRE(allclose(f64, ops::tensor({1.0, -2.0}, DType::Float64)));
  REQUIRE(allclose(strided, ops::mul(ops::arange(0, 6, 1, DType::Float32).reshape({2, 3}).t(), 0.25)));
  // a non-finite value anywhere (the last element of the large one, a NaN in the small one) sets the flag;
  // the flag is never cleared by a later clean call
  for (float bad : {kInf, -kInf, kNaN}) {
    Tensor g = ops::zeros({70001});
    Tensor last = g.narrow(0, 70000, 1);
    ops::fill_(last, bad);
    Tensor flag = ops::zeros({1});
    ops::amp_foreach_non_finite_check_and_unscale_({small, g}, flag, inv);
    CHECK(flag.item<float>() == 1.0f);
    ops::amp_foreach_non_finite_check_and_unscale_({small}, flag, inv);
    CHECK(flag.item<float>() == 1.0f);
  }
  ops::amp_foreach_non_finite_check_and_unscale_({}, found, inv);  // nothing to do
  REQUIRE_THROWS_SACCADE(
      ops::amp_foreach_non_finite_check_and_unscale_({ops::zeros({2}, DType::Int64)}, found, inv),
      "amp_foreach_non_finite_check_and_unscale_: gradient 0 has dtype int64");
  REQUIRE_THROWS_SACCADE(ops::amp_foreach_non_finite_check_and_unscale_({small, Tensor()}, found, inv),
                         "gradient 1 is undefined");
  REQUIRE_THROWS_SACCADE(
      ops::amp_foreach_non_finite_check_and_unscale_({small}, ops::zeros({1}, DType::Float64), inv),
      "found_inf must be a one-element float32 tensor");
  REQUIRE_THROWS_SACCADE(ops::amp_foreach_non_finite_check_and_unscale_({small}, found, ops::ones({2})),
                         "inv_scale must be a one-element float32 tensor");
  Tensor scale = ops::full({1}, 8.0), tracker = ops::zeros({1}, DType::Int64);
  REQUIRE_THROWS_SACCADE(ops::amp_update_scale_(scale, tracker, found, 2, 0.5, 0),
                         "growth_interval must be >= 1");
  REQUIRE_THROWS_SACCADE(ops::amp_update_scale_(scale, ops::zeros({1}), found, 2, 0.5, 1),
                         "amp_update_scale_: growth_tracker must be a one-element int64 tensor");
}

TEST_CASE("GradScaler: state_dict, checkpoints and bad input", "[nn][grad_scaler][checkpoint]") {
  REQUIRE_THROWS_SACCADE(nn::GradScaler({.init_scale = 0}), "GradScaler: init_scale must be finite and > 0");
  REQUIRE_THROWS_SACCADE(nn::GradScaler({.growth_factor = 1}), "growth_factor must be finite and > 1");
  REQUIRE_THROWS_SACCADE(nn::GradScaler({.backoff_factor = 1}), "backoff_factor must be in (0, 1)");
  REQUIRE_THROWS_SACCADE(nn::GradScaler({.growth_interval = 0}), "growth_interval must be >= 1");

  nn::Linear model(3, 2);
  nn::Adam adam(model.parameters());
  nn::GradScaler scaler({.init_scale = 256, .growth_interval = 5});
  for (int i = 0; i < 3; ++i) {  // two clean steps, then an overflow: scale 128, tracker 0... then 1
    adam.zero_grad();
    scaler.scale(sum(model.forward(Variable(ops::ones({4, 3}))))).backward();
    if (i == 1) {
      Tensor row = model.weight.grad().narrow(0, 0, 1);
      ops::fill_(row, kNaN);
    }
    scaler.step(adam);
    scaler.update();
  }
  CHECK(scaler.get_scale() == 128.0);
  CHECK(scaler.growth_tracker() == 1);
  const nn::StateDict sd = scaler.state_dict();
  CHECK(sd.keys() == std::vector<std::string>{"scale", "growth_factor", "backoff_factor", "growth_interval",
                                              "_growth_tracker"});

  saccade::testing::TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  nn::save_checkpoint(path, model, adam, 3, {}, &scaler);
  REQUIRE(nn::load_safetensors(path).tensors.at("scaler.scale").item<double>() == 128.0);
  nn::Linear model2(3, 2);
  nn::Adam adam2(model2.parameters());
  nn::GradScaler scaler2;
  nn::load_checkpoint(path, model2, adam2, &scaler2);
  CHECK(scaler2.get_scale() == 128.0);
  CHECK(scaler2.growth_tracker() == 1);
  CHECK(scaler2.options().growth_interval == 5);
  nn::load_checkpoint(path, model2, adam2);  // without a scaler its keys are ignored
  nn::load(model2, path);                    // and so they are by a plain model load

  // a file saved without a scaler: refused when one is given, and nothing changes
  const std::string plain = dir.file("plain.safetensors");
  nn::save_checkpoint(plain, model, adam, 3);
  nn::GradScaler scaler3({.init_scale = 8});
  REQUIRE_THROWS_SACCADE(nn::load_checkpoint(plain, model2, adam2, &scaler3), "state dict is empty");
  CHECK(scaler3.get_scale() == 8.0);
  nn::StateDict bad = sd;
  bad.insert_or_assign("_growth_tracker", ops::scalar_tensor(7, DType::Int64));
  REQUIRE_THROWS_SACCADE(scaler3.load_state_dict(bad), "'_growth_tracker' 7 is outside [0, 5)");
  bad = sd;
  bad.insert("extra", ops::scalar_tensor(1));
  REQUIRE_THROWS_SACCADE(scaler3.load_state_dict(bad), "unexpected key 'extra'");
  CHECK(scaler3.get_scale() == 8.0);
}

TEST_CASE("GradScaler and its ops on CUDA agree with the CPU", "[cuda][grad_scaler]") {
  using saccade::testing::both;
  // 70 gradients (two launches of 64), float32 and float64, one of 10^5 elements; clean, then an inf
  both([](Device d) {
    std::vector<Tensor> grads;
    for (int i = 0; i < 70; ++i)
      grads.push_back(saccade::testing::randn({i % 7 == 0 ? 100000 : 3 + i}, 40 + i,
                                              i % 3 == 0 ? DType::Float64 : DType::Float32)
                          .to(d));
    Tensor found = ops::zeros({1}, DType::Float32, d), inv = ops::full({1}, 0.125, DType::Float32, d);
    ops::amp_foreach_non_finite_check_and_unscale_(grads, found, inv);
    std::vector<Tensor> out = {found.clone()};
    Tensor last = grads[69].narrow(0, 5, 1);
    ops::fill_(last, kInf);
    ops::amp_foreach_non_finite_check_and_unscale_(grads, found, inv);
    out.push_back(found);
    for (const Tensor& g : grads) out.push_back(g);
    return out;
  });
  // the scaler's schedule through its update kernel: overflow, growth, the float32 ceiling
  both([](Device d) {
    nn::GradScaler scaler({.init_scale = 0x1p126, .growth_interval = 1, .device = d});
    Variable w(ops::ones({4}, DType::Float32, d), true);
    nn::SGD sgd({w}, {.lr = 0.1});
    std::vector<Tensor> scales;
    for (bool overflow : {false, false, true, false}) {
      w.set_grad(ops::full({4}, overflow ? kInf : 1.0, DType::Float32, d));
      scaler.step(sgd);
      scaler.update();
      scales.push_back(ops::full({1}, scaler.get_scale(), DType::Float64, d));
    }
    scales.push_back(w.data());
    return scales;
  });
  SKIP_WITHOUT_GPU();
}

TEST_CASE("GradScaler: no gradients to check is refused, a disabled scaler loads silently (issue 37)",
          "[nn][grad_scaler]") {
  // PyTorch: "No inf checks were recorded for this optimizer." / "... prior to update."; step() and update()
  // went ahead in silence here.
  Variable w(ops::tensor({1.0, 2.0}), true);
  nn::SGD sgd({w}, {.lr = 0.5});
  nn::GradScaler scaler;
  REQUIRE_THROWS_SACCADE(scaler.step(sgd), "no inf checks were recorded for this optimizer");
  REQUIRE(allclose(w.data(), ops::tensor({1.0, 2.0})));  // nothing stepped
  REQUIRE_THROWS_SACCADE(scaler.update(), "no inf checks were recorded prior to update");
  CHECK(scaler.get_scale() == 65536.0);
  nn::GradScaler fresh;
  fresh.unscale_(sgd);
  REQUIRE_THROWS_SACCADE(fresh.update(), "no inf checks were recorded prior to update");
  // with a gradient all is as before
  nn::GradScaler ok;
  ok.scale(sum(mul(w, w))).backward();
  REQUIRE(ok.step(sgd));
  ok.update();
  // a disabled scaler's load_state_dict returns and changes nothing, whatever it is given (as PyTorch's)
  nn::GradScaler off({.enabled = false});
  off.load_state_dict(ok.state_dict());
  off.load_state_dict({});
  nn::StateDict junk;
  junk.insert("extra", ops::scalar_tensor(1));
  off.load_state_dict(junk);
  CHECK(off.get_scale() == 1.0);
  CHECK(off.state_dict().empty());
}
