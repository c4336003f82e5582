// Reductions: forward values against PyTorch fixtures (tests/fixtures/make_elementwise.py), keepdim,
// multi-dim, NaN, -inf rows in logsumexp, gradchecks of every differentiable reduction, bad input.
#include <cmath>
#include <string>

#include "helpers.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;

namespace {

Tensor fx(const std::string& name) {
  return ops::load_npy(std::string(SACCADE_TEST_DATA_DIR) + "/elementwise_" + name + ".npy");
}

bool same(const Tensor& got, const Tensor& want, double rtol = 1e-9, double atol = 1e-12) {
  if (got.dtype() != want.dtype()) {
    WARN("dtype " << dtype_name(got.dtype()) << " but expected " << dtype_name(want.dtype()));
    return false;
  }
  if (!(got.shape() == want.shape())) {
    WARN("shape " << fmt::format("{}", got.shape()) << " but expected " << fmt::format("{}", want.shape()));
    return false;
  }
  if (!is_floating(want.dtype())) return allclose(got, want, 0, 0);
  // allclose, with equal infinities matching too
  Tensor inf = ops::logical_and(ops::eq(got, want), ops::eq(ops::abs(want), INFINITY));
  return allclose(ops::masked_fill(got, inf, 0), ops::masked_fill(want, inf, 0), rtol, atol);
}

}  // namespace

TEST_CASE("reduce: sum mean prod amax amin match torch", "[ops][reduce]") {
  Tensor x = fx("x");
  REQUIRE(x.shape() == Shape{2, 3, 4, 5});
  CHECK(same(ops::sum(x), fx("sum_all")));
  CHECK(ops::sum(x).dim() == 0);
  CHECK(same(ops::sum(x, {1, 3}, true), fx("sum_13_keep")));
  CHECK(same(ops::sum(x, {-1, 1}, true), fx("sum_13_keep")));  // any order, negative dims
  CHECK(same(ops::sum(x, {0, 2}), fx("sum_02")));
  CHECK(same(ops::mean(x, {-1}), fx("mean_m1")));
  CHECK(same(ops::mean(x, {0, 1, 2}), fx("mean_012")));
  CHECK(same(ops::prod(x, {1}), fx("prod_1")));
  CHECK(same(ops::amax(x, {0, 2}), fx("amax_02")));
  CHECK(same(ops::amin(x, {3}, true), fx("amin_3_keep")));
  CHECK(same(ops::max(x), fx("max_all")));
  CHECK(same(ops::min(x), fx("min_all")));
  // a non-contiguous input gives the same
  Tensor p = x.permute({3, 0, 1, 2});  // (5, 2, 3, 4); summing its dims 1 and 3 leaves x's dims (3, 1)
  CHECK(same(ops::sum(p, {1, 3}), fx("sum_02").t()));
  // float32 sums, int64 and bool inputs
  CHECK(allclose(ops::sum(x.to(DType::Float32), {0, 2}), fx("sum_02").to(DType::Float32), 1e-5, 1e-5));
  CHECK(same(ops::sum(fx("xi"), {0}), fx("xi_sum_0")));
  CHECK(same(ops::sum(fx("bool")), fx("bool_sum")));
}

TEST_CASE("reduce: max min argmax with indices match torch", "[ops][reduce]") {
  Tensor x = fx("x");
  ops::ValuesIndices m = ops::max(x, 2);
  CHECK(same(m.values, fx("max2_values")));
  CHECK(same(m.indices, fx("max2_indices")));
  ops::ValuesIndices n = ops::min(x, 1, true);
  CHECK(same(n.values, fx("min1_keep_values")));
  CHECK(same(n.indices, fx("min1_keep_indices")));
  CHECK(same(ops::argmax(x, 3), fx("argmax_3")));
  CHECK(same(ops::argmin(x, 0), fx("argmin_0")));
  CHECK(same(ops::argmax(x), fx("argmax_flat")));
  // ties give the first index
  Tensor t = ops::tensor({1, 3, 3, 0, 3});
  CHECK(ops::argmax(t, 0).item<int64_t>() == 1);
  CHECK(ops::argmin(ops::tensor({2, 0, 0}), 0).item<int64_t>() == 1);
}

TEST_CASE("reduce: NaN propagates through max and amax", "[ops][reduce]") {
  Tensor x = fx("nan_x");
  CHECK(same(ops::amax(x, {1}), fx("nan_amax1")));
  CHECK(same(ops::amax(x, {0}), fx("nan_amax0")));
  ops::ValuesIndices m = ops::max(x, 1);
  CHECK(same(m.values, fx("nan_max_values")));
  CHECK(same(m.indices, fx("nan_max_indices")));
  CHECK(std::isnan(ops::max(x).item()));
  CHECK(std::isnan(ops::min(x).item()));
}

TEST_CASE("reduce: var and logsumexp match torch", "[ops][reduce]") {
  Tensor x = fx("x");
  CHECK(same(ops::var(x, {1, 2}), fx("var_12")));
  CHECK(same(ops::var(x, false), fx("var_all_biased")));
  CHECK(same(ops::var(x, {3}, true, true), fx("var_3_keep")));
  CHECK(same(ops::logsumexp(x, {1, 3}), fx("logsumexp_13")));
  CHECK(same(ops::logsumexp(x, {0}, true), fx("logsumexp_0_keep")));
  // rows of all -inf give -inf (not NaN); -inf entries are ignored; large values do not overflow; +inf gives
  // +inf
  CHECK(same(ops::logsumexp(fx("lse_x"), {1}), fx("lse_1")));
  std::vector<double> l = ops::logsumexp(fx("lse_x"), {1}).to_vector<double>();
  CHECK((std::isinf(l[1]) && l[1] < 0));
  CHECK((std::isinf(l[4]) && l[4] > 0));
  // an empty reduction is -inf, as torch
  Tensor e = ops::logsumexp(ops::zeros({2, 0}, DType::Float64), {1});
  CHECK(e.shape() == Shape{2});
  CHECK(std::isinf(e.to_vector<double>()[0]));
}

TEST_CASE("reduce: keepdim empty tensors and 0-d inputs", "[ops][reduce]") {
  Tensor x = ops::arange(0, 24, 1, DType::Float64).view({2, 3, 4});
  CHECK(ops::sum(x, {0, 2}, true).shape() == Shape{1, 3, 1});
  CHECK(ops::sum(x, {0, 2}).shape() == Shape{3});
  CHECK(ops::sum(x, {0, 2}).to_vector<double>() == std::vector<double>{60, 92, 124});
  CHECK(ops::mean(x, {1}, true).shape() == Shape{2, 1, 4});
  CHECK(ops::amax(x, {0, 1, 2}).dim() == 0);
  CHECK(ops::amax(x, {0, 1, 2}).item() == 23);
  // empty: sum is 0, prod is 1, mean is nan, amax over a non-empty dim of an empty tensor is empty
  Tensor z = ops::zeros({0, 3}, DType::Float64);
  CHECK(ops::sum(z, {0}).to_vector<double>() == std::vector<double>{0, 0, 0});
  CHECK(ops::prod(z, {0}).to_vector<double>() == std::vector<double>{1, 1, 1});
  CHECK(std::isnan(ops::mean(z).item()));
  CHECK(ops::amax(z, {1}).shape() == Shape{0});
  // 0-d
  Tensor s = ops::scalar_tensor(2.5, DType::Float64);
  CHECK(ops::sum(s).item() == 2.5);
  CHECK(ops::sum(s, {0}).item() == 2.5);
  CHECK(ops::max(s, 0).values.item() == 2.5);
  CHECK(ops::argmax(s).item<int64_t>() == 0);
  // sum_to reduces broadcast dims
  CHECK(ops::sum_to(ops::ones({2, 3, 4}), {3, 1}).to_vector<float>() == std::vector<float>{8, 8, 8});
  CHECK(ops::sum_to(ops::ones({2, 3}), {3}).to_vector<float>() == std::vector<float>{2, 2, 2});
}

TEST_CASE("reduce: bad input names the op", "[ops][reduce][errors]") {
  Tensor x = ops::zeros({2, 3}), u;
  Tensor empty = ops::zeros({0, 3});
  REQUIRE_THROWS_SACCADE(ops::sum(x, {2}), "sum: dim 2 out of range for a tensor of 2 dimensions");
  REQUIRE_THROWS_SACCADE(ops::sum(x, {-3}), "sum: dim -3 out of range");
  REQUIRE_THROWS_SACCADE(ops::sum(x, {1, -1}), "sum: dim 1 repeated");
  REQUIRE_THROWS_SACCADE(ops::mean(x, {5}), "mean: dim 5 out of range");
  REQUIRE_THROWS_SACCADE(ops::mean(x, {0, 0}), "mean: dim 0 repeated");
  REQUIRE_THROWS_SACCADE(ops::prod(x, {3}), "prod: dim 3 out of range");
  REQUIRE_THROWS_SACCADE(ops::amax(x, {0, 0}), "amax: dim 0 repeated");
  REQUIRE_THROWS_SACCADE(ops::amin(x, {2}), "amin: dim 2 out of range");
  REQUIRE_THROWS_SACCADE(ops::var(x, Shape{2}), "var: dim 2 out of range");
  REQUIRE_THROWS_SACCADE(ops::var(x, Shape{1, 1}), "var: dim 1 repeated");
  REQUIRE_THROWS_SACCADE(ops::logsumexp(x, {2}), "logsumexp: dim 2 out of range");
  REQUIRE_THROWS_SACCADE(ops::logsumexp(x, {-1, 1}), "logsumexp: dim 1 repeated");
  REQUIRE_THROWS_SACCADE(ops::max(x, 2), "max: dim 2 out of range");
  REQUIRE_THROWS_SACCADE(ops::min(x, -3), "min: dim -3 out of range");
  REQUIRE_THROWS_SACCADE(ops::argmax(x, 2), "argmax: dim 2 out of range");
  REQUIRE_THROWS_SACCADE(ops::argmin(x, 2), "argmin: dim 2 out of range");
  // empty max / min
  REQUIRE_THROWS_SACCADE(ops::max(empty), "max: cannot reduce an empty dim");
  REQUIRE_THROWS_SACCADE(ops::min(empty), "min: cannot reduce an empty dim");
  REQUIRE_THROWS_SACCADE(ops::amax(empty, {0}), "amax: cannot reduce an empty dim 0 of shape [0, 3]");
  REQUIRE_THROWS_SACCADE(ops::amin(empty, {0}), "amin: cannot reduce an empty dim");
  REQUIRE_THROWS_SACCADE(ops::max(empty, 0), "max: cannot reduce an empty dim");
  REQUIRE_THROWS_SACCADE(ops::argmax(empty), "argmax: cannot reduce an empty dim");
  REQUIRE_THROWS_SACCADE(ops::argmin(empty, 0), "argmin: cannot reduce an empty dim");
  // wrong dtypes
  Tensor i = ops::zeros({2, 3}, DType::Int64), b = ops::zeros({2, 3}, DType::Bool);
  REQUIRE_THROWS_SACCADE(ops::mean(i), "mean: expected a float tensor, got int64");
  REQUIRE_THROWS_SACCADE(ops::var(i, Shape{0}), "var: expected a float tensor, got int64");
  REQUIRE_THROWS_SACCADE(ops::logsumexp(b, {0}), "logsumexp: expected a float tensor, got bool");
  REQUIRE_THROWS_SACCADE(ops::argmax(b, 0), "argmax: not defined for bool");
  // undefined
  REQUIRE_THROWS_SACCADE(ops::sum(u), "sum: got an undefined tensor");
  REQUIRE_THROWS_SACCADE(ops::amax(u, {0}), "amax: got an undefined tensor");
  REQUIRE_THROWS_SACCADE(ops::max(u, 0), "max: got an undefined tensor");
  REQUIRE_THROWS_SACCADE(ops::argmax(u), "argmax: got an undefined tensor");
  REQUIRE_THROWS_SACCADE(ops::mean(u), "mean: expected a float tensor, got undefined");
  // sum_to needs a broadcast
  REQUIRE_THROWS_SACCADE(ops::sum_to(x, {4}), "sum_to");
  REQUIRE_THROWS_SACCADE(ops::sum_to(x, {2, 2, 3}), "sum_to");
}

// ---- gradchecks: every differentiable function in autograd/functions/reduce.h ----

namespace {

using Fn = std::function<Variable(const std::vector<Variable>&)>;

// a few shapes, contiguous and not (transposed / permuted views)
std::vector<Tensor> inputs3d() {
  return {rand64({2, 3, 4}, 21), rand64({4, 3, 2}, 22).permute({2, 1, 0}),
          rand64({3, 2, 4}, 23).transpose(0, 1)};
}

void check_all(const std::string& name, const std::function<Variable(const Variable&)>& f,
               const std::vector<Tensor>& xs) {
  for (size_t k = 0; k < xs.size(); ++k) {
    INFO(name << " input " << k << " shape " << fmt::format("{}", xs[k].shape()));
    REQUIRE(gradcheck([&](const std::vector<Variable>& v) { return f(v[0]); }, {Variable(xs[k], true)}));
  }
}

}  // namespace

TEST_CASE("reduce: gradcheck of sum and mean", "[autograd][reduce]") {
  auto xs = inputs3d();
  check_all(
      "sum all", [](const Variable& x) { return sum(x); }, xs);
  check_all(
      "sum 1", [](const Variable& x) { return sum(x, {1}); }, xs);
  check_all(
      "sum 0 2 keep",
      [](const Variable& x) {
        return sum(x, {0, -1}, true);
      },
      xs);
  check_all(
      "mean all", [](const Variable& x) { return mean(x); }, xs);
  check_all(
      "mean 2 0",
      [](const Variable& x) {
        return mean(x, {2, 0});
      },
      xs);
  check_all(
      "mean 1 keep", [](const Variable& x) { return mean(x, {1}, true); }, xs);
  check_all("sum 0-d", [](const Variable& x) { return sum(x * 2.0); },
            {ops::scalar_tensor(1.5, DType::Float64)});
}

TEST_CASE("reduce: gradcheck of max min amax amin", "[autograd][reduce]") {
  // random normals: no ties, so the max is differentiable
  auto xs = inputs3d();
  check_all(
      "max all", [](const Variable& x) { return max(x); }, xs);
  check_all(
      "min all", [](const Variable& x) { return min(x); }, xs);
  check_all(
      "amax 1", [](const Variable& x) { return amax(x, {1}); }, xs);
  check_all(
      "amax 0 2 keep",
      [](const Variable& x) {
        return amax(x, {0, 2}, true);
      },
      xs);
  check_all(
      "amin -1", [](const Variable& x) { return amin(x, {-1}); }, xs);
  check_all(
      "max dim", [](const Variable& x) { return max(x, 1).values; }, xs);
  check_all(
      "max dim keep", [](const Variable& x) { return max(x, -1, true).values; }, xs);
  check_all(
      "min dim", [](const Variable& x) { return min(x, 0).values; }, xs);
  check_all(
      "min dim keep", [](const Variable& x) { return min(x, 2, true).values; }, xs);
}

TEST_CASE("reduce: gradcheck of var and logsumexp", "[autograd][reduce]") {
  auto xs = inputs3d();
  check_all(
      "var 1", [](const Variable& x) { return var(x, {1}); }, xs);
  check_all(
      "var 0 2 biased keep",
      [](const Variable& x) {
        return var(x, {0, 2}, false, true);
      },
      xs);
  check_all(
      "var all", [](const Variable& x) { return var(x, {}); }, xs);
  check_all(
      "logsumexp 2", [](const Variable& x) { return logsumexp(x, {2}); }, xs);
  check_all(
      "logsumexp 0 1 keep",
      [](const Variable& x) {
        return logsumexp(x, {0, 1}, true);
      },
      xs);
  check_all(
      "logsumexp all", [](const Variable& x) { return logsumexp(x, {}); }, xs);
}

TEST_CASE("reduce: backward details", "[autograd][reduce]") {
  // tied maxima share the gradient
  Variable x(ops::tensor({1, 3, 3, 0}, DType::Float64), true);
  max(x).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0.5, 0.5, 0});
  // max along a dim sends the gradient to the returned index only
  Variable y(ops::tensor({1, 3, 3, 0}, {2, 2}, DType::Float64), true);
  VariableIndices m = max(y, 1);
  CHECK(m.indices.to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  sum(m.values).backward();
  CHECK(y.grad().to_vector<double>() == std::vector<double>{0, 1, 1, 0});
  // logsumexp: a row of all -inf gets a zero gradient (no NaN), the others softmax
  Variable l(ops::tensor({-INFINITY, -INFINITY, 0, 0}, {2, 2}, DType::Float64), true);
  sum(logsumexp(l, {1})).backward();
  CHECK(l.grad().to_vector<double>() == std::vector<double>{0, 0, 0.5, 0.5});
  // var checks its input like the op
  REQUIRE_THROWS_SACCADE(var(Variable(ops::zeros({2}, DType::Int64)), {0}), "var: expected a float tensor");
  REQUIRE_THROWS_SACCADE(var(Variable(ops::zeros({2}, DType::Float64)), {1}), "var: dim 1 out of range");
}

TEST_CASE("reduce: a 0-d Variable reduced over dim 0 or -1 (as torch) has gradient ones",
          "[autograd][reduce]") {
  // the backward used to unsqueeze the 0-d gradient to [1] and fail: "expand: cannot expand shape [1] to []"
  using R = std::function<Variable(const Variable&, const Shape&, bool)>;
  const std::pair<const char*, R> fs[] = {
      {"sum", [](const Variable& x, const Shape& d, bool k) { return sum(x, d, k); }},
      {"mean", [](const Variable& x, const Shape& d, bool k) { return mean(x, d, k); }},
      {"amax", [](const Variable& x, const Shape& d, bool k) { return amax(x, d, k); }},
      {"amin", [](const Variable& x, const Shape& d, bool k) { return amin(x, d, k); }},
      {"logsumexp", [](const Variable& x, const Shape& d, bool k) { return logsumexp(x, d, k); }},
  };
  for (const auto& [name, f] : fs)
    for (int64_t d : {0, -1})
      for (bool keepdim : {false, true}) {
        INFO(name << " dim " << d << " keepdim " << keepdim);
        Variable x(ops::scalar_tensor(1.5, DType::Float64), true);
        Variable y = f(x, {d}, keepdim);
        CHECK(y.shape() == Shape{});
        y.backward();
        REQUIRE(x.grad().shape() == Shape{});
        CHECK(x.grad().item<double>() == 1);
        // f by an init-capture: clang 14 cannot capture a structured binding (C++20's P1091, clang 16)
        REQUIRE(
            gradcheck([&f = f, d, keepdim](const std::vector<Variable>& v) { return f(v[0], {d}, keepdim); },
                      {Variable(rand64({}), true)}));
      }
}

TEST_CASE("reduce: large inputs take the threaded and blocked paths", "[ops][reduce]") {
  // 300 x 301 > the parallel grain; 301 columns > the kernel's block of 256 partial results
  Tensor x = ops::rand({300, 301}, DType::Float32);
  std::vector<float> v = x.to_vector<float>();
  std::vector<double> rows(300, 0), cols(301, 0);
  std::vector<float> cmax(301, -INFINITY);
  for (int i = 0; i < 300; ++i)
    for (int j = 0; j < 301; ++j) {
      float e = v[static_cast<size_t>(i * 301 + j)];
      rows[i] += e, cols[j] += e, cmax[j] = std::max(cmax[j], e);
    }
  CHECK(allclose(ops::sum(x, {1}), ops::from_vector(rows, {300}).to(DType::Float32), 1e-6));
  CHECK(allclose(ops::sum(x, {0}), ops::from_vector(cols, {301}).to(DType::Float32), 1e-6));
  CHECK(ops::amax(x, {0}).to_vector<float>() == cmax);
  // a NaN in the middle of a long row still wins
  Tensor y = x.clone();
  y.data<float>()[150 * 301 + 77] = NAN;
  std::vector<float> m = ops::amax(y, {1}).to_vector<float>();
  CHECK(std::isnan(m[150]));
  CHECK_FALSE(std::isnan(m[149]));
  CHECK(std::isnan(ops::amin(y, {0}).to_vector<float>()[77]));
}
