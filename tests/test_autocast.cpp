// Autocast (autograd/autocast.h): the policy table's ops give the dtypes it names, gradients reach float32
// parameters in float32 and agree with the float32 run within bfloat16's rounding, the weight cache casts a
// parameter once per guard, the guard's scope and nesting, and bad input.
#include <thread>

#include "helpers.h"

using namespace saccade;
using saccade::testing::allclose;

namespace {

Tensor randn32(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return ops::randn(shape, DType::Float32, Device::cpu(), &g);
}

// max |a - b| / max |b|, in float64
double rel_error(const Tensor& a, const Tensor& b) {
  Tensor d = ops::abs(ops::sub(a.to(DType::Float64), b.to(DType::Float64)));
  return ops::max(d).item<double>() /
         std::max(ops::max(ops::abs(b.to(DType::Float64))).item<double>(), 1e-30);
}

}  // namespace

TEST_CASE("autocast: a Linear runs in bfloat16, its gradients arrive in float32", "[autograd][autocast]") {
  nn::Linear f32(64, 32), half(64, 32);
  half.load_state_dict(f32.state_dict());
  const Tensor x = randn32({16, 64}, 3);
  // float32 reference
  Variable y_ref = f32.forward(Variable(x));
  sum(mul(y_ref, y_ref)).backward();
  Variable y;
  {
    AutocastGuard autocast(DType::BFloat16);
    y = half.forward(Variable(x));
    CHECK(y.dtype() == DType::BFloat16);
    Variable loss = sum(mul(y, y));  // mul stays bf16, sum gives float32
    CHECK(loss.dtype() == DType::Float32);
    loss.backward();
  }
  REQUIRE(half.weight.grad().dtype() == DType::Float32);
  REQUIRE(half.bias.grad().dtype() == DType::Float32);
  // bfloat16 keeps 8 significant bits (unit roundoff u = 2^-8): x and W are rounded once (y within ~2u of
  // the float32 y, relative to max |y|), and the backward rounds y, g = 2y and the products again: 8u
  // bounds both with room, and a float32 run is ~1e-6 off.
  const double u = 1.0 / 256;
  CHECK(rel_error(y.data(), y_ref.data()) < 2 * u);
  CHECK(rel_error(half.weight.grad(), f32.weight.grad()) < 8 * u);
  CHECK(rel_error(half.bias.grad(), f32.bias.grad()) < 8 * u);
  // and the rounding is really there (bfloat16 is not float32 under another name)
  CHECK(rel_error(y.data(), y_ref.data()) > 1e-5);
  // float64 is never cast
  nn::Linear f64(4, 2);
  f64.to(DType::Float64);
  AutocastGuard autocast(DType::BFloat16);
  CHECK(f64.forward(Variable(ops::ones({3, 4}, DType::Float64))).dtype() == DType::Float64);
}

TEST_CASE("autocast: the policy table's float32 ops give float32, cat and stack promote",
          "[autograd][autocast]") {
  const Tensor base = ops::add(ops::abs(randn32({4, 6}, 5)), 0.5);
  Variable h(base.to(DType::BFloat16), true);
  Variable w(ops::ones({6}), true), b(ops::zeros({6}), true);
  const Tensor target = ops::tensor({0, 5, 2, 1}, DType::Int64);
  AutocastGuard autocast(DType::BFloat16);
  for (AutocastPolicy p : {AutocastPolicy::Lower, AutocastPolicy::Float32, AutocastPolicy::Promote}) {
    int rows = 0;
    for (const AutocastRule& r : kAutocastPolicy) rows += r.policy == p;
    CHECK(rows > 0);
  }
  const std::vector<std::pair<const char*, Variable>> outs = {
      {"softmax", softmax(h, -1)},
      {"log_softmax", log_softmax(h, -1)},
      {"layer_norm", layer_norm(h, {6}, w, b, 1e-5)},
      {"cross_entropy", cross_entropy(h, target)},
      {"mse_loss", mse_loss(h, h)},
      {"logsumexp", logsumexp(h, {1}, false)},
      {"exp", exp(h)},
      {"log", log(h)},
      {"pow", pow(h, 2.0)},
      {"sum", sum(h)},
      {"mean", mean(h)},
  };
  for (const auto& [name, v] : outs) {
    INFO(name);
    CHECK(autocast_policy(name) == AutocastPolicy::Float32);
    CHECK(v.dtype() == DType::Float32);
  }
  // the values are float32 math on the bf16 input, the same as casting by hand without autocast
  Variable ref;
  {
    AutocastGuard off(DType::BFloat16, /*enabled=*/false);
    CHECK(!autocast::active());
    ref = softmax(h.to(DType::Float32), -1);
  }
  CHECK(allclose(softmax(h, -1).data(), ref.data(), 0, 0));
  // gradients flow back through the cast into the bf16 leaf, in bf16
  sum(exp(h)).backward();
  CHECK(h.grad().dtype() == DType::BFloat16);
  // cat and stack: the widest input
  Variable f = Variable(base);
  CHECK(cat({h, f}, 0).dtype() == DType::Float32);
  CHECK(stack({h, f}, 0).dtype() == DType::Float32);
  CHECK(cat({h, h}, 0).dtype() == DType::BFloat16);
  // ops outside the table keep their inputs' dtype
  CHECK(gelu(h).dtype() == DType::BFloat16);
}

TEST_CASE("autocast: the weight cache casts a parameter once per guard", "[autograd][autocast]") {
  nn::Linear lin(8, 8);
  Variable x(randn32({2, 8}, 7));
  autocast::reset_weight_cache_casts();
  {
    AutocastGuard autocast(DType::BFloat16);
    Variable y = lin.forward(x);
    for (int i = 0; i < 3; ++i) y = lin.forward(y);  // four uses of weight and bias
    CHECK(autocast::weight_cache_casts() == 2);
    sum(y).backward();
    CHECK(lin.weight.grad().dtype() == DType::Float32);
    // the casts' nodes were consumed by that backward: a new forward casts again (once)
    Variable z = lin.forward(lin.forward(x));
    CHECK(autocast::weight_cache_casts() == 4);
    // a parameter modified in place (an optimizer step) is cast again: its storage version moved
    {
      NoGradGuard no_grad;
      Tensor w = lin.weight.data();
      ops::mul_(w, 0.5);
    }
    z = lin.forward(x);
    CHECK(autocast::weight_cache_casts() == 5);
    // while the parameters are unchanged and their casts unspent, the cache serves them
    lin.forward(x);
    CHECK(autocast::weight_cache_casts() == 5);
  }
  {
    AutocastGuard autocast(DType::BFloat16);  // a new guard: a new cache
    lin.forward(x);
    CHECK(autocast::weight_cache_casts() == 7);
  }
}

TEST_CASE("autocast: guard scope, threads and bad input", "[autograd][autocast]") {
  CHECK(!autocast_enabled());
  REQUIRE_THROWS_SACCADE(AutocastGuard(DType::Float32),
                         "AutocastGuard: expected bfloat16 or float16, got float32");
  REQUIRE_THROWS_SACCADE(AutocastGuard(DType::Float64), "got float64");
  REQUIRE_THROWS_SACCADE(AutocastGuard(DType::Int64), "got int64");
  CHECK(!autocast_enabled());
  REQUIRE_THROWS_SACCADE(autocast_policy("relu"), "autocast: 'relu' has no row in kAutocastPolicy");
  {
    AutocastGuard outer(DType::Float16);
    CHECK(autocast_enabled());
    CHECK(autocast_dtype() == DType::Float16);
    {
      AutocastGuard inner(DType::BFloat16);
      CHECK(autocast_dtype() == DType::BFloat16);
    }
    CHECK(autocast_dtype() == DType::Float16);
    bool other_thread = true;
    std::thread([&] { other_thread = autocast_enabled(); }).join();
    CHECK(!other_thread);  // thread-local, as NoGradGuard
  }
  CHECK(!autocast_enabled());
}
