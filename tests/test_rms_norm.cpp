// RMSNorm (issue 40): ops::rms_norm against its formula in float64, the Variable function against its
// composed reference, gradcheck and gradgradcheck, the 16-bit path as the float32 one rounded once, the
// module, autocast, and bad input.
#include <limits>

#include "helpers.h"
#include "module_gradcheck.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;

namespace {

Variable leaf(const Tensor& t) { return Variable(t, true); }

// x / sqrt(mean(x²) + eps) over the last dim, in float64
Tensor rstd_of(const Tensor& xd, double eps) {
  return ops::rsqrt(ops::add(ops::mean(ops::mul(xd, xd), {-1}, true), eps));
}

}  // namespace

TEST_CASE("rms_norm: forward and backward follow the formula (threaded rows, with and without weight)",
          "[ops][nn][rms_norm]") {
  Generator gen(51);
  // 96 rows of 600: the threaded paths and several row chunks of the weight gradient
  Tensor x = ops::normal({96, 600}, 1.0, 2.0, DType::Float32, Device::cpu(), &gen);
  Tensor w = ops::randn({600}, DType::Float32, Device::cpu(), &gen);
  Tensor gy = ops::randn({96, 600}, DType::Float32, Device::cpu(), &gen);
  const double eps = 1e-6;
  Tensor xd = x.to(DType::Float64), wd = w.to(DType::Float64), gd = gy.to(DType::Float64);
  Tensor rstd = rstd_of(xd, eps), xhat = ops::mul(xd, rstd);
  ops::RmsNormForward f = ops::rms_norm_forward(x, {600}, w, eps);
  CHECK(allclose(f.out, ops::mul(xhat, wd), 1e-5, 1e-5));
  CHECK(allclose(f.rstd, rstd.reshape({96}), 1e-6, 0));
  CHECK(allclose(ops::rms_norm(x, {600}, Tensor(), eps), xhat, 1e-5, 1e-5));
  ops::RmsNormGrads g = ops::rms_norm_backward(gy, x, {600}, w, f.rstd, true);
  // gx = rstd (ĝ - x̂ mean(ĝ ⊙ x̂)),  ĝ = gy ⊙ w;  gw = Σ_rows gy ⊙ x̂
  Tensor gh = ops::mul(gd, wd);
  CHECK(allclose(g.gx, ops::mul(rstd, ops::sub(gh, ops::mul(xhat, ops::mean(ops::mul(gh, xhat), {1}, true)))),
                 1e-4, 1e-4));
  CHECK(allclose(g.gweight, ops::sum(ops::mul(gd, xhat), {0}), 1e-4, 1e-3));
  CHECK_FALSE(ops::rms_norm_backward(gy, x, {600}, w, f.rstd, false).gweight.defined());
  // over two trailing dims, and a non-contiguous input
  Tensor x3 = rand64({4, 3, 5}, 52), w3 = rand64({3, 5}, 53);
  Tensor flat = ops::mul(x3.reshape({4, 15}), rstd_of(x3.reshape({4, 15}), 0.1));
  CHECK(allclose(ops::rms_norm(x3, {3, 5}, w3, 0.1), ops::mul(flat.reshape({4, 3, 5}), w3), 1e-12, 1e-12));
  Tensor xt = rand64({5, 4}, 54).t();
  CHECK(allclose(ops::rms_norm(xt, {5}, Tensor(), 1e-5),
                 ops::mul(xt.contiguous(), rstd_of(xt.contiguous(), 1e-5)), 1e-12, 1e-12));
}

TEST_CASE("rms_norm: gradcheck, gradgradcheck and the composed reference",
          "[autograd][nn][rms_norm][gradcheck]") {
  auto affine = [](Shape ns, double eps) {
    return [ns, eps](const std::vector<Variable>& v) { return rms_norm(v[0], ns, v[1], eps); };
  };
  CHECK(gradcheck(affine({4}, 1e-5), {leaf(rand64({3, 4}, 1)), leaf(rand64({4}, 2))}));
  CHECK(gradcheck(affine({2, 3}, 0.1), {leaf(rand64({2, 2, 3}, 3)), leaf(rand64({2, 3}, 4))}));
  CHECK(gradcheck(affine({3}, 1e-5), {leaf(rand64({3, 4}, 5).t()), leaf(rand64({6}, 6).slice(0, 0, 6, 2))}));
  CHECK(gradcheck([](const std::vector<Variable>& v) { return rms_norm(v[0], {5}); },
                  {leaf(rand64({2, 5}, 7))}));
  Variable fixed_w(rand64({4}, 8));
  CHECK(gradcheck([&](const std::vector<Variable>& v) { return rms_norm(v[0], {4}, fixed_w); },
                  {leaf(rand64({3, 4}, 9))}));
  CHECK(gradgradcheck(affine({4}, 1e-5), {leaf(rand64({3, 4}, 10)), leaf(rand64({4}, 11))}));
  // the fused function and its composed reference: same values and gradients (float32)
  Tensor x0 = rand64({6, 32}, 12).to(DType::Float32), w0 = rand64({32}, 13).to(DType::Float32);
  Variable x1(x0, true), w1(w0, true), x2(x0, true), w2(w0, true);
  Variable y1 = rms_norm(x1, {32}, w1, 1e-6), y2 = rms_norm_composed(x2, {32}, w2, 1e-6);
  CHECK(allclose(y1.data(), y2.data(), 1e-6, 1e-6));
  sum(mul(y1, y1)).backward();
  sum(mul(y2, y2)).backward();
  CHECK(allclose(x1.grad(), x2.grad(), 1e-4, 1e-5));
  CHECK(allclose(w1.grad(), w2.grad(), 1e-4, 1e-5));
  // eps unset: the machine epsilon of x's dtype, as torch.nn.functional.rms_norm(eps=None)
  CHECK(allclose(rms_norm(Variable(x0), {32}).data(),
                 rms_norm(Variable(x0), {32}, Variable(), std::numeric_limits<float>::epsilon()).data(), 0,
                 0));
  Tensor tiny = ops::full({1, 4}, 1e-3).to(DType::BFloat16);  // mean(x²) ~ 1e-6: eps decides
  Tensor by_default = rms_norm(Variable(tiny), {4}).data();
  CHECK(allclose(by_default, ops::rms_norm(tiny, {4}, Tensor(), 0x1p-7), 0, 0));
  CHECK(by_default.to(DType::Float32).to_vector<float>()[0] < 0.02f);  // not 1, as with eps = 0
}

TEST_CASE("rms_norm: 16-bit in and out, the float32 computation rounded once", "[half][rms_norm]") {
  for (DType t : {DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(t));
    Tensor x = rand64({4, 3, 50}, 20).to(t), w = rand64({50}, 21).to(t), gy = rand64({4, 3, 50}, 22).to(t);
    const Tensor x32 = x.to(DType::Float32), w32 = w.to(DType::Float32), g32 = gy.to(DType::Float32);
    ops::RmsNormForward f = ops::rms_norm_forward(x, {50}, w, 1e-5);
    ops::RmsNormForward ref = ops::rms_norm_forward(x32, {50}, w32, 1e-5);
    REQUIRE(f.out.dtype() == t);
    REQUIRE(f.rstd.dtype() == DType::Float32);  // statistics stay float32
    CHECK(allclose(f.out, ref.out.to(t), 0, 0));
    ops::RmsNormGrads g = ops::rms_norm_backward(gy, x, {50}, w, f.rstd, true);
    ops::RmsNormGrads gref = ops::rms_norm_backward(g32, x32, {50}, w32, ref.rstd, true);
    CHECK(allclose(g.gx, gref.gx.to(t), 0, 0));
    CHECK(allclose(g.gweight, gref.gweight.to(t), 0, 0));
  }
  // under autocast a bf16 input beside float32 weights runs in float32 (as layer_norm)
  nn::RMSNorm norm(8, 1e-6);
  Variable xb(rand64({2, 8}, 23).to(DType::BFloat16), true);
  AutocastGuard autocast(DType::BFloat16);
  Variable y = norm.forward(xb);
  CHECK(y.dtype() == DType::Float32);
  sum(y).backward();
  CHECK(xb.grad().dtype() == DType::BFloat16);
  CHECK(norm.weight.grad().dtype() == DType::Float32);
}

TEST_CASE("RMSNorm: the module, its state and bad input", "[nn][rms_norm][errors]") {
  nn::RMSNorm norm(6, 1e-5);
  REQUIRE(norm.state_dict().keys() == std::vector<std::string>{"weight"});
  CHECK(allclose(norm.weight.data(), ops::ones({6})));
  Tensor x = rand64({2, 3, 6}, 30).to(DType::Float32);
  CHECK(allclose(norm.forward(Variable(x)).data(), ops::rms_norm(x, {6}, ops::ones({6}), 1e-5), 0, 0));
  nn::RMSNorm plain(Shape{3, 6}, std::nullopt, false);
  CHECK(plain.parameters().empty());
  CHECK(allclose(plain.forward(Variable(x)).data(),
                 ops::rms_norm(x, {3, 6}, Tensor(), std::numeric_limits<float>::epsilon()), 0, 0));
  REQUIRE_THROWS_SACCADE(nn::RMSNorm(Shape{}), "RMSNorm: normalized_shape must have at least one dim");
  REQUIRE_THROWS_SACCADE(nn::RMSNorm(0), "RMSNorm: normalized_shape must be positive");
  REQUIRE_THROWS_SACCADE(nn::RMSNorm(4, -1.0), "RMSNorm: expected eps >= 0");
  REQUIRE_THROWS_SACCADE(norm.forward(Variable(rand64({2, 5}))), "RMSNorm: expected input of shape (*, 6)");
  REQUIRE_THROWS_SACCADE(norm.forward(Variable()), "RMSNorm: got an undefined input");
  Tensor xd = rand64({3, 4});
  REQUIRE_THROWS_SACCADE(ops::rms_norm(xd, {3}, Tensor(), 1e-5), "rms_norm: normalized_shape [3] must be");
  REQUIRE_THROWS_SACCADE(ops::rms_norm(xd, {4}, rand64({5}), 1e-5), "rms_norm: weight must have");
  REQUIRE_THROWS_SACCADE(ops::rms_norm(xd, {4}, ops::ones({4}), 1e-5), "the input's dtype float64");
  REQUIRE_THROWS_SACCADE(ops::rms_norm(xd, {4}, Tensor(), -1), "rms_norm: eps must be non-negative");
  REQUIRE_THROWS_SACCADE(ops::rms_norm(ops::ones({3, 4}, DType::Int64), {4}, Tensor(), 1e-5), "rms_norm");
  REQUIRE_THROWS_SACCADE(ops::rms_norm_backward(xd, xd, {4}, Tensor(), ops::ones({2}, DType::Float64), false),
                         "rms_norm_backward: rstd [2] must hold one float64 value per row (3 rows");
  REQUIRE_THROWS_SACCADE(rms_norm(Variable(xd), {4}, Variable(rand64({3}))), "rms_norm: weight must have");
}

TEST_CASE(
    "rms_norm: float32 statistics summed in float lanes stay within float32 rounding at D = 1024 and 8192",
    "[ops][nn][rms_norm]") {
  // the largest error of rstd, out, gx and gweight against the float64 formula, relative to each tensor's
  // largest magnitude (the float32 kernel sums in 16 float lanes since ops16b, double before)
  auto rel = [](const Tensor& got, const Tensor& ref) {
    return ops::max(ops::abs(ops::sub(got.to(DType::Float64), ref))).item<double>() /
           ops::max(ops::abs(ref)).item<double>();
  };
  for (int64_t n : {1024, 8192}) {
    Generator gen(55);
    // offset inputs (mean 1, std 2): the sums of squares are dominated by many like terms
    Tensor x = ops::normal({64, n}, 1.0, 2.0, DType::Float32, Device::cpu(), &gen);
    Tensor w = ops::randn({n}, DType::Float32, Device::cpu(), &gen);
    Tensor gy = ops::randn({64, n}, DType::Float32, Device::cpu(), &gen);
    const double eps = 1e-6;
    Tensor xd = x.to(DType::Float64), wd = w.to(DType::Float64), gd = gy.to(DType::Float64);
    Tensor rstd = rstd_of(xd, eps), xhat = ops::mul(xd, rstd), gh = ops::mul(gd, wd);
    ops::RmsNormForward f = ops::rms_norm_forward(x, {n}, w, eps);
    ops::RmsNormGrads g = ops::rms_norm_backward(gy, x, {n}, w, f.rstd, true);
    const double e_rstd = rel(f.rstd, rstd.reshape({64})), e_out = rel(f.out, ops::mul(xhat, wd)),
                 e_gx = rel(
                     g.gx,
                     ops::mul(rstd, ops::sub(gh, ops::mul(xhat, ops::mean(ops::mul(gh, xhat), {1}, true))))),
                 e_gw = rel(g.gweight, ops::sum(ops::mul(gd, xhat), {0}));
    INFO("D = " << n << ": rstd " << e_rstd << ", out " << e_out << ", gx " << e_gx << ", gweight " << e_gw);
    // measured: 0.7-1.6e-7 (a few float32 roundings)
    CHECK(e_rstd < 5e-7);
    CHECK(e_out < 5e-7);
    CHECK(e_gx < 5e-7);
    CHECK(e_gw < 5e-7);
  }
}

TEST_CASE(
    "RMSNorm with unit_offset (Gemma's): x-hat times (1 + w), zeros at init, its gradients, and 16-bit "
    "inputs "
    "normed in float32 and rounded once",
    "[nn][rms_norm]") {
  nn::RMSNorm norm(6, 1e-6, true, true);
  CHECK(norm.unit_offset());
  CHECK(allclose(norm.weight.data(), ops::zeros({6}), 0, 0));  // 1 + 0: the plain norm at init
  Tensor w = ops::mul(rand64({6}, 31), 0.3);
  norm.to(DType::Float64);
  Tensor stored = norm.weight.data();
  ops::copy_(stored, w);
  Variable x(rand64({2, 3, 6}, 32), true);
  CHECK(allclose(norm.forward(x).data(), ops::rms_norm(x.data(), {6}, ops::add(w, 1.0), 1e-6), 1e-15, 1e-15));
  // its gradients with respect to the input and the stored offset (float64 central differences)
  CHECK(testing::module_gradcheck([&] { return norm.forward(x); }, {x, norm.weight}));
  // bfloat16: the float32 norm of the input, times 1 + w in float32, rounded once (transformers'
  // GemmaRMSNorm; 1 + w rounded to bfloat16 first would lose w's low bits)
  norm.to(DType::BFloat16);
  const Tensor xb = rand64({4, 6}, 33).to(DType::BFloat16);
  const Tensor want =
      ops::rms_norm(xb.to(DType::Float32), {6}, ops::add(norm.weight.data().to(DType::Float32), 1.0), 1e-6)
          .to(DType::BFloat16);
  const Tensor got = norm.forward(Variable(xb)).data();
  CHECK(got.dtype() == DType::BFloat16);
  CHECK(allclose(got.to(DType::Float32), want.to(DType::Float32), 0, 0));
  // without the offset the same stored weight means another scale
  nn::RMSNorm plain(6, 1e-6);
  CHECK_FALSE(plain.unit_offset());
  CHECK(allclose(plain.weight.data(), ops::ones({6}), 0, 0));
}
