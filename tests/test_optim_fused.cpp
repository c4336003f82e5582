// The fused optimizer kernels (ops/optim.h) against the readable compositions they replace: Adam/AdamW's
// per-parameter update (AdamOptions::fused = false) and the norm and rescaling of clip_grad_norm_, on the
// CPU and (both()) on the GPU. The sizes cross the CPU kernels' block (2^14) and grain (2^15) boundaries and
// the CUDA kernels' group of 48 tensors. Tolerances: the fused update does the composed one's operations in
// the same order in the same dtype, so they differ only where a compiler contracts a multiply-add: a few ulps
// of the parameter's dtype after several steps.
#include <cmath>
#include <limits>

#include "cuda_helpers.h"

using namespace saccade;
using namespace saccade::testing;

namespace {

// Parameters of assorted sizes (60 of them: more than one CUDA group) on `d`, with gradients for all but
// every seventh, the gradient of the second a transposed (non-contiguous) view.
std::vector<Variable> make_params(Device d, DType dt, uint64_t seed) {
  std::vector<Variable> ps;
  const int64_t sizes[] = {1, 3, 17, 256, 5000, 16385, 40000, 70001};
  for (int i = 0; i < 60; ++i) ps.emplace_back(testing::randn({sizes[i % 8]}, seed + i, dt).to(d), true);
  ps[1] = Variable(testing::randn({40, 30}, seed + 100, dt).to(d), true);
  return ps;
}

void set_grads(std::vector<Variable>& ps, uint64_t seed) {
  for (size_t i = 0; i < ps.size(); ++i) {
    if (i % 7 == 6) {
      ps[i].zero_grad();
      continue;
    }
    const Tensor& p = ps[i].data();
    Tensor g = i == 1 ? testing::randn({30, 40}, seed + i, p.dtype()).to(p.device()).transpose(0, 1)
                      : testing::randn(p.shape(), seed + i, p.dtype()).to(p.device());
    ps[i].set_grad(g);
  }
}

// Three steps of Adam (decoupled: AdamW) with options `o`; the parameters and both states afterwards.
std::vector<Tensor> run_adam(Device d, DType dt, bool decoupled, nn::AdamOptions o) {
  std::vector<Variable> ps = make_params(d, dt, 10);
  std::unique_ptr<nn::Optimizer> opt;
  if (decoupled)
    opt = std::make_unique<nn::AdamW>(ps, o);
  else
    opt = std::make_unique<nn::Adam>(ps, o);
  for (int s = 0; s < 3; ++s) {
    set_grads(ps, 1000 * (s + 1));
    opt->step();
  }
  std::vector<Tensor> out;
  for (const Variable& p : ps) out.push_back(p.data());
  for (const auto& [name, t] : opt->state_dict())
    if (name.find("exp_avg") != std::string::npos) out.push_back(t);
  return out;
}

}  // namespace

TEST_CASE("optim fused: Adam and AdamW agree with the readable update", "[optim][fused]") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (bool decoupled : {false, true}) {
      INFO(dtype_name(dt) << (decoupled ? " AdamW" : " Adam"));
      nn::AdamOptions o{.lr = 1e-2, .beta1 = 0.85, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1};
      const double tol = dt == DType::Float32 ? 1e-5 : 1e-12;
      nn::AdamOptions readable = o;
      readable.fused = false;
      const std::vector<Tensor> want = run_adam(kCpu, dt, decoupled, readable);
      const std::vector<Tensor> got = run_adam(kCpu, dt, decoupled, o);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("tensor " << i);
        CHECK(allclose(got[i], want[i], tol, tol));
      }
      // the same fused update on the GPU (the readable one on the CPU is the reference)
      both([&](Device d) { return run_adam(d, dt, decoupled, d.is_cpu() ? readable : o); }, tol);
    }
  }
  SKIP_WITHOUT_GPU();
}

TEST_CASE("optim fused: foreach_pow_sum and foreach_mul_ agree with the composed ops", "[optim][fused]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (double p : {2.0, 1.0, 3.0, inf}) {
    INFO("p = " << p);
    std::vector<Tensor> ts;
    for (int i = 0; i < 55; ++i) ts.push_back(testing::randn({(i * 977) % 70001 + 1}, 50 + i));
    ts.push_back(testing::randn({0}, 1));
    ts.push_back(testing::randn({30, 20}, 2, DType::Float64).transpose(0, 1));
    ts.push_back(testing::randn({7}, 3).to(DType::BFloat16));
    double want = 0;
    for (const Tensor& t : ts) {
      if (t.numel() == 0) continue;
      Tensor a = ops::abs(t.to(DType::Float64));
      const double s = std::isinf(p) ? ops::max(a).item<double>() : ops::sum(ops::pow(a, p)).item<double>();
      want = std::isinf(p) ? std::max(want, s) : want + s;
    }
    Tensor got = ops::foreach_pow_sum(ts, p);
    CHECK(got.dtype() == DType::Float64);
    CHECK(got.item<double>() == Approx(want).epsilon(1e-12));
    both(
        [&](Device d) {
          std::vector<Tensor> on;
          for (const Tensor& t : ts) on.push_back(t.to(d));
          return std::vector<Tensor>{ops::foreach_pow_sum(on, p)};
        },
        1e-12);
  }
  // a NaN anywhere makes the sum and the max NaN
  std::vector<Tensor> nan = {ops::ones({5}), ops::full({3}, std::nan(""))};
  CHECK(std::isnan(ops::foreach_pow_sum(nan, 2).item<double>()));
  CHECK(std::isnan(ops::foreach_pow_sum(nan, inf).item<double>()));

  both(
      [&](Device d) {
        std::vector<Tensor> ts = {testing::randn({40000}, 1).to(d),
                                  testing::randn({5, 3}, 2, DType::Float64).to(d),
                                  testing::randn({6, 4}, 3).to(d).transpose(0, 1),
                                  testing::randn({9}, 4).to(d).to(DType::BFloat16)};
        std::vector<Tensor> want;
        for (const Tensor& t : ts) want.push_back(ops::mul(t, 0.375));
        ops::foreach_mul_(ts, ops::full({1}, 0.375, DType::Float32, d));
        for (size_t i = 0; i < ts.size(); ++i) {
          INFO("tensor " << i);
          CHECK(allclose(ts[i], want[i], 0, 0));  // one multiply by an exact scale: bit for bit
        }
        return ts;
      },
      0);
  SKIP_WITHOUT_GPU();
}

TEST_CASE("optim fused: bad arguments name the op", "[optim][fused]") {
  Tensor a = ops::zeros({3}), b = ops::zeros({4});
  REQUIRE_THROWS_SACCADE(ops::adam_foreach_step_({a}, {b}, {a}, {a}, {1}, {}), "adam_foreach_step_");
  REQUIRE_THROWS_SACCADE(ops::adam_foreach_step_({a}, {a}, {a}, {a}, {1, 2}, {}), "equal counts");
  REQUIRE_THROWS_SACCADE(ops::adam_foreach_step_({a}, {a}, {a}, {a}, {0}, {}), "step must be >= 1");
  REQUIRE_THROWS_SACCADE(ops::adam_foreach_step_({a}, {a.to(DType::Float64)}, {a}, {a}, {1}, {}),
                         "one dtype");
  REQUIRE_THROWS_SACCADE(ops::adam_foreach_step_({ops::zeros({3, 2}).transpose(0, 1)}, {ops::zeros({2, 3})},
                                                 {ops::zeros({2, 3})}, {ops::zeros({2, 3})}, {1}, {}),
                         "contiguous");
  REQUIRE_THROWS_SACCADE(ops::adam_foreach_step_({Tensor()}, {a}, {a}, {a}, {1}, {}), "undefined");
  // 16-bit parameters are refused by name (autocast keeps parameters and their Adam state float32)
  for (DType half : {DType::BFloat16, DType::Float16}) {
    Tensor h = a.to(half);
    REQUIRE_THROWS_SACCADE(ops::adam_foreach_step_({h}, {h}, {h}, {h}, {1}, {}),
                           fmt::format("adam_foreach_step_: entry 0: param {}", half));
    REQUIRE_THROWS_SACCADE(ops::adam_foreach_step_({h}, {h}, {h}, {h}, {1}, {}), "float32 or float64");
  }
  REQUIRE_THROWS_SACCADE(ops::foreach_pow_sum({a}, 0), "foreach_pow_sum");
  REQUIRE_THROWS_SACCADE(ops::foreach_pow_sum({ops::zeros({2}, DType::Int64)}, 2), "float dtype");
  REQUIRE_THROWS_SACCADE(ops::foreach_mul_({a}, ops::ones({2})), "foreach_mul_");
  REQUIRE_THROWS_SACCADE(ops::foreach_mul_({a}, Tensor()), "undefined");
}

TEST_CASE("optim fused: every in-place foreach write bumps the version counter (issue 37, 3)",
          "[optim][fused][autograd]") {
  // The fused Adam step wrote the parameters without bumping their storage's version, so a tensor saved for
  // backward before the step was read after it without complaint (PyTorch: "modified by an inplace
  // operation"), and autocast's weight cache kept stale casts.
  for (bool fused : {true, false}) {
    INFO("fused " << fused);
    Variable a(testing::randn({4}, 1), true), w(testing::randn({4}, 2), true);
    nn::Adam opt({w}, {.lr = 0.1, .fused = fused});
    Variable y = mul(a, w);  // saves w for a's gradient
    sum(mul(w, w)).backward();
    const uint64_t v = w.data().version();
    opt.step();
    CHECK(w.data().version() > v);
    REQUIRE_THROWS_SACCADE(sum(y).backward(), "modified by an in-place operation");
  }
  // the parameters and both states of the fused step, and the other foreach ops' outputs
  std::vector<Tensor> p{ops::ones({3}), ops::ones({70001})}, g{ops::ones({3}), ops::ones({70001})},
      m{ops::zeros({3}), ops::zeros({70001})}, v{ops::zeros({3}), ops::zeros({70001})};
  std::vector<uint64_t> before;
  for (const auto* list : {&p, &m, &v})
    for (const Tensor& t : *list) before.push_back(t.version());
  ops::adam_foreach_step_(p, g, m, v, {1, 1}, {});
  size_t k = 0;
  for (const auto* list : {&p, &m, &v})
    for (const Tensor& t : *list) CHECK(t.version() > before[k++]);
  Tensor strided = ops::arange(0, 6, 1, DType::Float32).reshape({2, 3}).t(), dense = ops::ones({5});
  const uint64_t vs = strided.version(), vd = dense.version();
  ops::foreach_mul_({strided, dense}, ops::full({1}, 0.5));
  CHECK(strided.version() > vs);
  CHECK(dense.version() > vd);
  Tensor found = ops::zeros({1});
  const uint64_t vf = found.version(), vs2 = strided.version();
  ops::amp_foreach_non_finite_check_and_unscale_({strided}, found, ops::full({1}, 0.5));
  CHECK(found.version() > vf);
  CHECK(strided.version() > vs2);
  Tensor scale = ops::full({1}, 8.0), tracker = ops::zeros({1}, DType::Int64);
  const uint64_t vsc = scale.version(), vt = tracker.version();
  ops::amp_update_scale_(scale, tracker, found, 2, 0.5, 3);
  CHECK(scale.version() > vsc);
  CHECK(tracker.version() > vt);
}
