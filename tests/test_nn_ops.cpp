// nn primitives (ops/nn.h, autograd/functions/nn.h): masked softmax, layer norm, dropout and the losses
// (softmax and log_softmax: test_softmax.cpp). Reference values come from PyTorch 1.13 via
// tests/fixtures/make_nn_ops.py, or are derived by hand below; every differentiable function gets a float64
// gradcheck.
#include <cmath>

#include "helpers.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;
using saccade::testing::read_fixture;

namespace {

Tensor i64(std::initializer_list<double> v, const Shape& shape) {
  return ops::tensor(v, shape, DType::Int64);
}
Tensor f64(std::initializer_list<double> v, const Shape& shape) {
  return ops::tensor(v, shape, DType::Float64);
}
Variable leaf(const Tensor& t) { return Variable(t, true); }

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// masked softmax

TEST_CASE("nn_ops: masked_softmax with valid_lens (B) as in d2l 11.3", "[ops][nn][attention]") {
  Generator gen(11);
  Tensor x = ops::rand({2, 2, 4}, DType::Float32, Device::cpu(), &gen);
  Tensor y = ops::masked_softmax(x, i64({2, 3}, {2}));
  REQUIRE(y.shape() == Shape({2, 2, 4}));
  for (int q = 0; q < 2; ++q) {
    // batch 0: entries 2..3 are zero, 0..1 are the softmax of x[0, q, :2]
    Tensor r0 = y.select(0, 0).select(0, q), r1 = y.select(0, 1).select(0, q);
    auto v0 = r0.to_vector<double>(), v1 = r1.to_vector<double>();
    CHECK(v0[2] == 0.0);
    CHECK(v0[3] == 0.0);
    CHECK(v1[3] == 0.0);
    CHECK(allclose(r0.narrow(0, 0, 2), ops::softmax(x.select(0, 0).select(0, q).narrow(0, 0, 2), 0)));
    CHECK(allclose(r1.narrow(0, 0, 3), ops::softmax(x.select(0, 1).select(0, q).narrow(0, 0, 3), 0)));
    CHECK(v0[0] + v0[1] == Approx(1.0));
    CHECK(v1[0] + v1[1] + v1[2] == Approx(1.0));
  }
  // undefined valid_lens: plain softmax (d2l: valid_lens=None)
  CHECK(allclose(ops::masked_softmax(x, Tensor()), ops::softmax(x, -1)));
  CHECK(allclose(masked_softmax(Variable(x), i64({2, 3}, {2})).data(), y));
}

TEST_CASE("nn_ops: masked_softmax with valid_lens (B Tq) and 4-d scores", "[ops][nn][attention]") {
  Tensor x = rand64({2, 2, 4}, 12);
  Tensor vl = i64({1, 3, 2, 4}, {2, 2});  // d2l: torch.tensor([[1, 3], [2, 4]])
  Tensor y = ops::masked_softmax(x, vl);
  const int64_t lens[2][2] = {{1, 3}, {2, 4}};
  for (int b = 0; b < 2; ++b)
    for (int q = 0; q < 2; ++q) {
      Tensor row = y.select(0, b).select(0, q);
      int64_t len = lens[b][q];
      CHECK(allclose(row.narrow(0, 0, len), ops::softmax(x.select(0, b).select(0, q).narrow(0, 0, len), 0)));
      for (int64_t k = len; k < 4; ++k) CHECK(row.select(0, k).item() == 0.0);
    }
  // (B, H, Tq, Tk): the heads share the batch's lengths
  Tensor x4 = rand64({2, 3, 2, 4}, 13);
  Tensor y4 = ops::masked_softmax(x4, vl);
  for (int h = 0; h < 3; ++h)
    CHECK(allclose(y4.select(1, h), ops::masked_softmax(x4.select(1, h).contiguous(), vl)));
  Tensor yb = ops::masked_softmax(x4, i64({0, 2}, {2}));
  CHECK(ops::sum(ops::abs(yb.select(0, 0))).item() == 0.0);
  CHECK(allclose(ops::sum(yb.select(0, 1), {-1}), ops::ones({3, 2}, DType::Float64)));
}

TEST_CASE("nn_ops: valid_lens_to_mask and the bool mask form agree", "[ops][nn][attention]") {
  Tensor m = ops::valid_lens_to_mask(i64({1, 3}, {2}), {2, 2, 4});
  REQUIRE(m.dtype() == DType::Bool);
  REQUIRE(m.shape() == Shape({2, 2, 4}));
  CHECK(m.to_vector<int>() == std::vector<int>{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 0});
  Tensor m2 = ops::valid_lens_to_mask(i64({1, 3, 0, 4}, {2, 2}), {2, 2, 4});
  CHECK(m2.to_vector<int>() == std::vector<int>{1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1});
  Tensor x = rand64({2, 2, 4}, 14);
  CHECK(allclose(ops::masked_softmax(x, m2), ops::masked_softmax(x, i64({1, 3, 0, 4}, {2, 2}))));
  // a broadcast bool mask: a causal (lower-triangular) mask of shape (Tq, Tk) for every batch
  Tensor causal = ops::ne(ops::tril(ops::ones({2, 4})), 0.0);
  Tensor yc = ops::masked_softmax(x, causal);
  CHECK(allclose(yc, ops::masked_softmax(x, i64({1, 2, 1, 2}, {2, 2}))));
  CHECK(allclose(yc, masked_softmax(Variable(x), causal).data()));
}

TEST_CASE("nn_ops: fully masked rows give zeros forward and zero gradient", "[autograd][nn][attention]") {
  Tensor x = rand64({2, 3, 4}, 15);
  for (Tensor mask : {i64({0, 2}, {2}), i64({0, 0, 0, 1, 0, 4}, {2, 3}),
                      ops::logical_not(ops::ones({2, 1, 4}, DType::Bool))}) {
    Variable xv = leaf(x);
    Variable y = masked_softmax(xv, mask);
    for (double v : y.data().select(0, 0).to_vector<double>()) CHECK(v == 0.0);  // batch 0 is fully masked
    for (double v : y.data().to_vector<double>()) CHECK(std::isfinite(v));
    sum(mul(y, Variable(rand64({2, 3, 4}, 16)))).backward();
    for (double g : xv.grad().select(0, 0).to_vector<double>()) CHECK(g == 0.0);
    for (double g : xv.grad().to_vector<double>()) CHECK(std::isfinite(g));
    Tensor keep = ops::attention_keep_mask(x, mask);
    Tensor gm = ops::masked_fill(xv.grad(), keep.expand(x.shape()), 0.0);  // gradient at masked positions
    CHECK(ops::sum(ops::abs(gm)).item() == 0.0);
  }
}

TEST_CASE("nn_ops: masked_softmax gradcheck", "[autograd][nn][gradcheck][attention]") {
  auto with = [](Tensor m) {
    return [m](const std::vector<Variable>& v) { return masked_softmax(v[0], m); };
  };
  CHECK(gradcheck(with(i64({2, 3}, {2})), {leaf(rand64({2, 2, 4}, 17))}));
  CHECK(gradcheck(with(i64({1, 3, 0, 4}, {2, 2})), {leaf(rand64({2, 2, 4}, 18))}));
  CHECK(gradcheck(with(i64({2, 1}, {2})), {leaf(rand64({2, 2, 4, 3}, 19).permute({0, 3, 2, 1}))}));
  CHECK(gradcheck(with(ops::ne(ops::tril(ops::ones({3, 3})), 0.0)),
                  {leaf(rand64({2, 3, 3}, 20).transpose(1, 2))}));
  CHECK(gradcheck(with(Tensor()), {leaf(rand64({2, 3}, 21))}));
}

// ---------------------------------------------------------------------------------------------------------
// layer norm

TEST_CASE("nn_ops: layer_norm matches torch forward and backward", "[ops][nn]") {
  auto fx = read_fixture("nn_ops_layer_norm");
  const Tensor& x = fx["x"];
  for (DType dt : {DType::Float64, DType::Float32}) {
    double tol = dt == DType::Float64 ? 1e-10 : 2e-5;
    auto c = [dt](const Tensor& t) { return t.to(dt); };
    CHECK(allclose(ops::layer_norm(c(x), {4}, c(fx["w4"]), c(fx["b4"])), fx["out4"], tol, tol));
    CHECK(allclose(ops::layer_norm(c(x), {4}), fx["out4_plain"], tol, tol));
    CHECK(allclose(ops::layer_norm(c(x), {3, 4}, Tensor(), Tensor(), 0.1), fx["out34_eps"], tol, tol));
    // the ops-level backward
    ops::LayerNormForward f = ops::layer_norm_forward(c(x), {3, 4}, c(fx["w34"]), c(fx["b34"]));
    CHECK(allclose(f.out, fx["out34"], tol, tol));
    CHECK(f.mean.shape() == Shape({2}));
    CHECK(allclose(f.mean, ops::mean(x, {1, 2}), tol, tol));
    ops::LayerNormGrads g =
        ops::layer_norm_backward(c(fx["gy"]), c(x), {3, 4}, c(fx["w34"]), f.mean, f.rstd, true, true);
    CHECK(allclose(g.gx, fx["gx34"], tol, tol));
    CHECK(allclose(g.gweight, fx["gw34"], tol, tol));
    CHECK(allclose(g.gbias, fx["gb34"], tol, tol));
  }
  // autograd: the same gradients through the engine, with a non-contiguous x
  Variable xv = leaf(x.permute({2, 0, 1}).contiguous().permute({1, 2, 0}));
  REQUIRE_FALSE(xv.data().is_contiguous());
  Variable w = leaf(fx["w34"]), b = leaf(fx["b34"]);
  Variable y = layer_norm(xv, {3, 4}, w, b);
  CHECK(allclose(y.data(), fx["out34"], 1e-10, 1e-10));
  y.backward(fx["gy"]);
  CHECK(allclose(xv.grad(), fx["gx34"], 1e-10, 1e-10));
  CHECK(allclose(w.grad(), fx["gw34"], 1e-10, 1e-10));
  CHECK(allclose(b.grad(), fx["gb34"], 1e-10, 1e-10));
}

TEST_CASE("nn_ops: layer_norm gradcheck", "[autograd][nn][gradcheck]") {
  auto affine = [](Shape ns) {
    return [ns](const std::vector<Variable>& v) { return layer_norm(v[0], ns, v[1], v[2], 1e-5); };
  };
  CHECK(gradcheck(affine({4}), {leaf(rand64({3, 4}, 22)), leaf(rand64({4}, 23)), leaf(rand64({4}, 24))}));
  CHECK(gradcheck(affine({2, 3}),
                  {leaf(rand64({2, 2, 3}, 25)), leaf(rand64({2, 3}, 26)), leaf(rand64({2, 3}, 27))}));
  CHECK(gradcheck(affine({3}), {leaf(rand64({3, 4}, 28).t()), leaf(rand64({6}, 29).slice(0, 0, 6, 2)),
                                leaf(rand64({3}, 30))}));  // non-contiguous x and weight
  auto plain = [](const std::vector<Variable>& v) { return layer_norm(v[0], {5}); };
  CHECK(gradcheck(plain, {leaf(rand64({2, 5}, 31))}));
  auto weight_only = [](const std::vector<Variable>& v) {
    return layer_norm(v[0], {4}, v[1], Variable(), 0.1);
  };
  CHECK(gradcheck(weight_only, {leaf(rand64({3, 4}, 32)), leaf(rand64({4}, 33))}));
  // a weight that does not require grad, and a bias that does
  Variable fixed_w(rand64({4}, 34));
  auto bias_only = [fixed_w](const std::vector<Variable>& v) { return layer_norm(v[0], {4}, fixed_w, v[1]); };
  CHECK(gradcheck(bias_only, {leaf(rand64({2, 4}, 35)), leaf(rand64({4}, 36))}));
}

TEST_CASE("nn_ops: large float32 rows agree with composed ops", "[ops][nn]") {
  // big enough for the threaded paths and for several column blocks in layer_norm's weight gradient
  Generator gen(50);
  Tensor x = ops::normal({96, 600}, 3.0, 2.0, DType::Float32, Device::cpu(), &gen);
  Tensor w = ops::randn({600}, DType::Float32, Device::cpu(), &gen),
         b = ops::randn({600}, DType::Float32, Device::cpu(), &gen);
  Tensor gy = ops::randn({96, 600}, DType::Float32, Device::cpu(), &gen);
  Tensor xd = x.to(DType::Float64), wd = w.to(DType::Float64), gd = gy.to(DType::Float64);
  Tensor mu = ops::mean(xd, {1}, true), rstd = ops::rsqrt(ops::add(ops::var(xd, {1}, false, true), 1e-5));
  Tensor xhat = ops::mul(ops::sub(xd, mu), rstd);
  CHECK(allclose(ops::layer_norm(x, {600}, w, b), ops::add(ops::mul(xhat, wd), b.to(DType::Float64)), 1e-4,
                 1e-4));
  ops::LayerNormForward f = ops::layer_norm_forward(x, {600}, w, b);
  ops::LayerNormGrads g = ops::layer_norm_backward(gy, x, {600}, w, f.mean, f.rstd, true, true);
  CHECK(allclose(g.gweight, ops::sum(ops::mul(gd, xhat), {0}), 1e-4, 1e-3));
  CHECK(allclose(g.gbias, ops::sum(gd, {0}), 1e-4, 1e-3));
  Tensor gh = ops::mul(gd, wd);
  Tensor gx = ops::mul(rstd, ops::sub(ops::sub(gh, ops::mean(gh, {1}, true)),
                                      ops::mul(xhat, ops::mean(ops::mul(gh, xhat), {1}, true))));
  CHECK(allclose(g.gx, gx, 1e-3, 1e-4));
  Tensor e = ops::exp(ops::sub(xd, ops::amax(xd, {1}, true)));
  CHECK(allclose(ops::softmax(x, 1), ops::div(e, ops::sum(e, {1}, true)), 1e-4, 1e-7));
  CHECK(allclose(ops::log_softmax(x, 0), ops::sub(xd, ops::logsumexp(xd, {0}, true)), 1e-5, 1e-5));
}

// ---------------------------------------------------------------------------------------------------------
// dropout

TEST_CASE("nn_ops: dropout statistics and scaling", "[ops][nn][random]") {
  Generator gen(42);
  const double p = 0.3;
  Tensor x = ops::ones({200, 500});
  ops::DropoutResult r = ops::dropout(x, p, true, &gen);
  auto v = r.out.to_vector<double>();
  int64_t zeros = 0;
  for (double e : v) {
    if (e == 0.0) {
      ++zeros;
    } else {
      REQUIRE(e == Approx(1.0 / (1.0 - p)));
    }
  }
  // 10^5 Bernoulli(0.3) draws: the standard deviation of the fraction is 0.00145; allow 5 of them
  CHECK(std::abs(static_cast<double>(zeros) / 1e5 - p) < 0.0073);
  CHECK(std::abs(ops::mean(r.out).item() - 1.0) < 0.02);
  CHECK(allclose(r.out, ops::mul(x, r.mask)));
  CHECK(r.mask.dtype() == DType::Float32);
}

TEST_CASE("nn_ops: dropout is deterministic for a seed and the identity in eval", "[ops][nn][random]") {
  Tensor x = rand64({4, 5}, 37);
  Generator g1(7), g2(7), g3(8);
  Tensor a = ops::dropout(x, 0.5, true, &g1).out, b = ops::dropout(x, 0.5, true, &g2).out;
  CHECK(allclose(a, b, 0, 0));
  CHECK_FALSE(allclose(a, ops::dropout(x, 0.5, true, &g3).out));
  CHECK_FALSE(allclose(a, ops::dropout(x, 0.5, true, &g1).out));  // the generator advanced
  manual_seed(99);
  Tensor c = ops::dropout(x, 0.5).out;
  manual_seed(99);
  CHECK(allclose(c, ops::dropout(x, 0.5).out, 0, 0));
  ops::DropoutResult e = ops::dropout(x, 0.5, false, &g1);
  CHECK(e.out.storage() == x.storage());
  CHECK_FALSE(e.mask.defined());
  CHECK(ops::dropout(x, 0.0, true, &g1).out.storage() == x.storage());
  Variable xv = leaf(x);
  CHECK(dropout(xv, 0.5, false).impl() == xv.impl());
}

TEST_CASE("nn_ops: the fused dropout kernel equals the composed reference, every float dtype",
          "[ops][nn][random]") {
  // 37 x 1001: several threads' blocks, the tail of a 4096 block; the composed path is what CUDA runs
  const Tensor x = rand64({37, 1001}, 41);
  for (DType dt : {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(dt));
    Generator g1(11), g2(11);
    const Tensor xd = x.to(dt);
    ops::DropoutResult fused = ops::dropout(xd, 0.3, true, &g1),
                       composed = ops::dropout_composed(xd, 0.3, &g2);
    CHECK(allclose(fused.mask, composed.mask, 0, 0));
    CHECK(allclose(fused.out, composed.out, 0, 0));
    CHECK(composed.out.dtype() == dt);
    CHECK(g1.offset() == g2.offset());
  }
}

TEST_CASE("nn_ops: dropout gradient is the mask", "[autograd][nn][gradcheck][random]") {
  Tensor x = rand64({3, 4}, 38);
  Generator g(5);
  Tensor mask = ops::dropout(x, 0.4, true, &g).mask;
  Variable xv = leaf(x);
  Generator h(5);
  Variable y = dropout(xv, 0.4, true, &h);
  Tensor gy = rand64({3, 4}, 39);
  y.backward(gy);
  CHECK(allclose(xv.grad(), ops::mul(gy, mask), 1e-12, 1e-12));
  // gradcheck reseeds inside f so that every evaluation draws the same mask
  auto f = [](const std::vector<Variable>& v) {
    Generator gen(123);
    return dropout(v[0], 0.25, true, &gen);
  };
  CHECK(gradcheck(f, {leaf(rand64({4, 3}, 40).t())}));
}

// ---------------------------------------------------------------------------------------------------------
// losses

TEST_CASE("nn_ops: cross_entropy matches torch with ignore_index and label_smoothing", "[ops][nn][loss]") {
  auto fx = read_fixture("nn_ops_cross_entropy");
  const Tensor &logits = fx["logits"], &target = fx["target"], &target2 = fx["target_ig2"];
  const std::pair<const char*, Reduction> reds[] = {
      {"mean", Reduction::Mean}, {"sum", Reduction::Sum}, {"none", Reduction::None}};
  for (DType dt : {DType::Float64, DType::Float32}) {
    double tol = dt == DType::Float64 ? 1e-12 : 1e-5;
    for (double eps : {0.0, 0.1}) {
      std::string tag = eps > 0 ? "ls_" : "plain_";
      for (auto [name, red] : reds) {
        INFO(tag << name << " " << dtype_name(dt));
        Tensor l = ops::cross_entropy(logits.to(dt), target, -100, red, eps);
        CHECK(l.dtype() == dt);
        CHECK(allclose(l, fx[tag + name], tol, tol));
        CHECK(allclose(ops::cross_entropy(logits.to(dt), target2, 2, red, eps), fx[tag + name + "_ig2"], tol,
                       tol));
      }
    }
  }
  Variable z = leaf(logits);
  cross_entropy(z, target, -100, Reduction::Mean, 0.1).backward();
  CHECK(allclose(z.grad(), fx["grad_ls_mean"], 1e-12, 1e-12));
  // every target ignored: Mean is 0/0 = NaN, as torch; Sum is 0
  Tensor all_ignored = i64({-100, -100}, {2});
  CHECK(std::isnan(ops::cross_entropy(logits.narrow(0, 0, 2), all_ignored).item()));
  CHECK(ops::cross_entropy(logits.narrow(0, 0, 2), all_ignored, -100, Reduction::Sum).item() == 0.0);
  // a -inf logit of another class does not turn the loss into NaN (no 0 · -inf)
  Tensor masked = f64({-INFINITY, 1, 2}, {1, 3});
  CHECK(ops::cross_entropy(masked, i64({2}, {1})).item() == Approx(std::log(1 + std::exp(-1.0))));
}

TEST_CASE("nn_ops: cross_entropy gradcheck", "[autograd][nn][gradcheck][loss]") {
  Tensor target = i64({0, 3, -100, 2}, {4});
  for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None})
    for (double eps : {0.0, 0.2}) {
      auto f = [&](const std::vector<Variable>& v) { return cross_entropy(v[0], target, -100, red, eps); };
      CHECK(gradcheck(f, {leaf(rand64({4, 5}, 41))}));
    }
  auto g = [](const std::vector<Variable>& v) { return cross_entropy(v[0], i64({1, 1, 0}, {3}), 1); };
  CHECK(gradcheck(g, {leaf(rand64({2, 3}, 42).t())}));  // non-contiguous logits, ignore_index = 1
}

TEST_CASE(
    "nn_ops: cross_entropy_rows, fused, against its composed twin and cross_entropy, forward and backward",
    "[ops][nn][loss]") {
  // rows of 37 and 1000 classes, one ignored row, a row with -inf logits, every float dtype; the loss and
  // the log-sum-exp against the composed ops and against cross_entropy_forward (log_softmax), the gradient
  // against the composed twin and against (softmax - onehot) · scale
  for (int64_t c : {37, 1000})
    for (DType dt : {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16}) {
      INFO("classes " << c << " " << dtype_name(dt));
      Tensor x = ops::mul(ops::randn({6, c}, DType::Float64), 3.0);
      Tensor masked = x.narrow(0, 4, 1).narrow(1, 0, c / 2);  // half of row 4 masked out
      ops::fill_(masked, -INFINITY);
      x = x.to(dt);
      const Tensor target = i64({0, static_cast<double>(c - 1), -100, 5, 7, 1}, {6});
      const double tol = dt == DType::Float64 ? 1e-12 : dt == DType::Float32 ? 1e-5 : 2e-3;
      for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
        const ops::CrossEntropyRows fused = ops::cross_entropy_rows(x, target, -100, red);
        const ops::CrossEntropyRows twin = ops::cross_entropy_rows_composed(x, target, -100, red);
        CHECK(fused.count == 5);
        CHECK(fused.loss.dtype() == compute_dtype(dt));
        CHECK(allclose(fused.lse, twin.lse, tol, tol));
        CHECK(allclose(fused.loss, twin.loss, tol, tol));
        CHECK(allclose(fused.loss, ops::cross_entropy(x, target, -100, red), tol, tol));
      }
      const ops::CrossEntropyRows f = ops::cross_entropy_rows(x, target, -100, Reduction::None);
      const Tensor scale = ops::rand({6}, compute_dtype(dt));
      const Tensor gx = ops::cross_entropy_rows_backward(x, target, -100, f.lse, scale);
      CHECK(gx.dtype() == dt);
      CHECK(allclose(
          gx.to(DType::Float64),
          ops::cross_entropy_rows_backward_composed(x, target, -100, f.lse, scale).to(DType::Float64), tol,
          tol));
      // the readable formula: (softmax(x) - onehot) · scale on kept rows, 0 on the ignored one
      const Tensor p = ops::softmax(x.to(DType::Float64), 1);
      for (int64_t i = 0; i < 6; ++i) {
        const double s = i == 2 ? 0.0 : scale.to(DType::Float64).data<double>()[i];
        Tensor want = ops::mul(p.narrow(0, i, 1), s);
        if (i != 2) {
          Tensor hit = want.narrow(1, target.data<int64_t>()[i], 1);
          ops::add_(hit, ops::full({1, 1}, -s, DType::Float64));
        }
        CHECK(allclose(gx.narrow(0, i, 1).to(DType::Float64), want, 4 * tol, 4 * tol));
      }
    }
  // NaN in a row gives that row a NaN loss, as cross_entropy's
  Tensor nan_row = f64({1, NAN, 2, 0, 1, 2}, {2, 3});
  const Tensor l = ops::cross_entropy_rows(nan_row, i64({0, 2}, {2}), -100, Reduction::None).loss;
  CHECK(std::isnan(l.data<double>()[0]));
  CHECK(l.data<double>()[1] == Approx(std::log(1 + std::exp(-1.0) + std::exp(-2.0))));
}

TEST_CASE("nn_ops: mse_loss matches torch", "[ops][nn][loss]") {
  auto fx = read_fixture("nn_ops_mse");
  const Tensor &a = fx["a"], &b = fx["b"];
  CHECK(allclose(ops::mse_loss(a, b), fx["mean"], 1e-12, 1e-12));
  CHECK(allclose(ops::mse_loss(a, b, Reduction::Sum), fx["sum"], 1e-12, 1e-12));
  CHECK(allclose(ops::mse_loss(a, b, Reduction::None), fx["none"], 1e-12, 1e-12));
  CHECK(allclose(ops::mse_loss(a.to(DType::Float32), b.to(DType::Float32)), fx["mean"], 1e-5, 1e-6));
  CHECK(allclose(mse_loss(Variable(a), Variable(b)).data(), fx["mean"], 1e-12, 1e-12));
}

TEST_CASE("nn_ops: mse_loss gradcheck", "[autograd][nn][gradcheck][loss]") {
  for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    auto f = [red](const std::vector<Variable>& v) { return mse_loss(v[0], v[1], red); };
    CHECK(gradcheck(f, {leaf(rand64({3, 4}, 43)), leaf(rand64({4, 3}, 44).t())}));
  }
  auto target_fixed = [](const std::vector<Variable>& v) {
    return mse_loss(v[0], Variable(rand64({2, 3}, 45)));
  };
  CHECK(gradcheck(target_fixed, {leaf(rand64({2, 3}, 46))}));
}

// ---------------------------------------------------------------------------------------------------------
// bad input

TEST_CASE("nn_ops: bad input throws naming the op", "[ops][nn][errors]") {
  Tensor x = rand64({2, 3}, 47), ints = ops::arange(6).view({2, 3});
  // softmax family
  REQUIRE_THROWS_SACCADE(ops::softmax(Tensor(), 0), "softmax");
  REQUIRE_THROWS_SACCADE(ops::softmax(ints, 0), "softmax");
  REQUIRE_THROWS_SACCADE(ops::softmax(x, 2), "softmax");
  REQUIRE_THROWS_SACCADE(ops::log_softmax(x, -3), "log_softmax");
  REQUIRE_THROWS_SACCADE(ops::softmax_backward(x, rand64({3, 2}), 0, false), "softmax_backward");
  REQUIRE_THROWS_SACCADE(ops::softmax_backward(x, x.to(DType::Float32), 0, false), "softmax_backward");
  REQUIRE_THROWS_SACCADE(softmax(Variable(ints), 0), "softmax");
  // masked softmax
  Tensor s = rand64({2, 3, 4}, 48);
  REQUIRE_THROWS_SACCADE(ops::masked_softmax(s, i64({1, 2, 3}, {3})), "valid_lens");        // wrong B
  REQUIRE_THROWS_SACCADE(ops::masked_softmax(s, i64({1, 2, 3, 4}, {2, 2})), "valid_lens");  // wrong Tq
  REQUIRE_THROWS_SACCADE(ops::masked_softmax(s, f64({1, 2}, {2})), "masked_softmax");       // float lens
  REQUIRE_THROWS_SACCADE(ops::masked_softmax(s, i64({1, -1}, {2})), "negative");
  REQUIRE_THROWS_SACCADE(ops::masked_softmax(s, ops::ones({3, 3}, DType::Bool)), "masked_softmax");
  REQUIRE_THROWS_SACCADE(ops::masked_softmax(ints, i64({1, 2}, {2})), "masked_softmax");
  REQUIRE_THROWS_SACCADE(ops::valid_lens_to_mask(i64({1, 2}, {2}), {2}), "valid_lens_to_mask");
  REQUIRE_THROWS_SACCADE(ops::valid_lens_to_mask(Tensor(), {2, 2}), "valid_lens_to_mask");
  REQUIRE_THROWS_SACCADE(masked_softmax(Variable(s), i64({1}, {1})), "valid_lens_to_mask");
  // layer norm
  REQUIRE_THROWS_SACCADE(ops::layer_norm(x, {2}), "layer_norm");
  REQUIRE_THROWS_SACCADE(ops::layer_norm(x, {1, 2, 3}), "layer_norm");
  REQUIRE_THROWS_SACCADE(ops::layer_norm(x, {3}, rand64({4})), "weight");
  REQUIRE_THROWS_SACCADE(ops::layer_norm(x, {3}, Tensor(), rand64({3}).to(DType::Float32)), "bias");
  REQUIRE_THROWS_SACCADE(ops::layer_norm(ints, {3}), "layer_norm");
  REQUIRE_THROWS_SACCADE(ops::layer_norm(Tensor(), {3}), "layer_norm");
  REQUIRE_THROWS_SACCADE(ops::layer_norm(x, {3}, Tensor(), Tensor(), -1.0), "layer_norm");
  ops::LayerNormForward f = ops::layer_norm_forward(x, {3}, Tensor(), Tensor());
  REQUIRE_THROWS_SACCADE(
      ops::layer_norm_backward(rand64({3, 2}), x, {3}, Tensor(), f.mean, f.rstd, false, false),
      "layer_norm_backward");
  REQUIRE_THROWS_SACCADE(ops::layer_norm_backward(x, x, {3}, Tensor(), rand64({3}), f.rstd, false, false),
                         "layer_norm_backward");
  REQUIRE_THROWS_SACCADE(layer_norm(Variable(x), {3}, Variable(rand64({2}))), "layer_norm");
  // dropout
  REQUIRE_THROWS_SACCADE(ops::dropout(x, 1.0), "dropout");
  REQUIRE_THROWS_SACCADE(ops::dropout(x, -0.1), "dropout");
  REQUIRE_THROWS_SACCADE(ops::dropout(x, NAN), "dropout");
  REQUIRE_THROWS_SACCADE(ops::dropout(ints, 0.5), "dropout");
  REQUIRE_THROWS_SACCADE(dropout(Variable(x), 1.5), "dropout");
  // cross entropy
  Tensor t = i64({0, 2}, {2});
  REQUIRE_THROWS_SACCADE(ops::cross_entropy(x, i64({0, 3}, {2})), "out of range");
  REQUIRE_THROWS_SACCADE(ops::cross_entropy(x, i64({-1, 0}, {2})), "out of range");
  REQUIRE_THROWS_SACCADE(ops::cross_entropy(x, i64({0, 1, 2}, {3})), "cross_entropy");
  REQUIRE_THROWS_SACCADE(ops::cross_entropy(x, f64({0, 1}, {2})), "int64");
  REQUIRE_THROWS_SACCADE(ops::cross_entropy(rand64({2, 3, 1}), t), "cross_entropy");
  REQUIRE_THROWS_SACCADE(ops::cross_entropy(ints, t), "cross_entropy");
  REQUIRE_THROWS_SACCADE(ops::cross_entropy(x, Tensor()), "cross_entropy");
  REQUIRE_THROWS_SACCADE(ops::cross_entropy(x, t, -100, Reduction::Mean, 1.5), "label_smoothing");
  REQUIRE_THROWS_SACCADE(cross_entropy(Variable(x), i64({0, 5}, {2})), "cross_entropy");
  // mse
  REQUIRE_THROWS_SACCADE(ops::mse_loss(x, rand64({3, 2})), "mse_loss");
  REQUIRE_THROWS_SACCADE(ops::mse_loss(x, x.to(DType::Float32)), "mse_loss");
  REQUIRE_THROWS_SACCADE(ops::mse_loss(ints, ints), "mse_loss");
  REQUIRE_THROWS_SACCADE(ops::mse_loss(x, Tensor()), "mse_loss");
  REQUIRE_THROWS_SACCADE(mse_loss(Variable(x), Variable(rand64({2}))), "mse_loss");
}
