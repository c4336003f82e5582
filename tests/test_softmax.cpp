// softmax and log_softmax, all of their tests in one file (ops/nn.h, autograd/functions/nn.h; the kernels
// ops/cpu/nn.cpp and ops/cuda/nn.cu): values against PyTorch 1.13 (tests/fixtures/make_nn_ops.py), all -inf
// and NaN rows, the backward's formulas and float64 gradchecks; the CUDA kernels against the CPU's ([cuda]:
// without a GPU they warn and pass); bfloat16 and float16 in and out ([half]); the CPU rows at every vector
// width this machine runs ([isa]).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda_helpers.h"
#include "kernel_checks.h"

using namespace saccade;
using namespace saccade::testing;  // the suite's helpers: helpers.h, cuda_helpers.h, kernel_checks.h

namespace {

Tensor f64(std::initializer_list<double> v, const Shape& shape) {
  return ops::tensor(v, shape, DType::Float64);
}
Variable leaf(const Tensor& t) { return Variable(t, true); }

}  // namespace

// ---- values, edge rows, the backward, gradchecks ----

TEST_CASE("nn_ops: softmax and log_softmax match torch", "[ops][nn]") {
  auto fx = read_fixture("nn_ops_softmax");
  const Tensor &x = fx["x"], &y = fx["y"];
  for (DType dt : {DType::Float64, DType::Float32}) {
    double tol = dt == DType::Float64 ? 1e-12 : 1e-5;
    Tensor xd = x.to(dt), yd = y.to(dt);
    CHECK(allclose(ops::softmax(xd, -1), fx["softmax_last"], tol, tol));
    CHECK(allclose(ops::softmax(xd, 0), fx["softmax_0"], tol, tol));
    CHECK(allclose(ops::log_softmax(xd, 1), fx["log_softmax_last"], tol, tol));
    CHECK(allclose(ops::log_softmax(xd, -2), fx["log_softmax_0"], tol, tol));
    CHECK(allclose(ops::softmax(yd, 1), fx["softmax_y1"], tol, tol));
    CHECK(allclose(ops::log_softmax(yd, 1), fx["log_softmax_y1"], tol, tol));
    CHECK(ops::softmax(xd, -1).dtype() == dt);
  }
  // a non-contiguous input (transposed view) gives the same numbers
  Tensor xt = x.t().contiguous().t();
  REQUIRE_FALSE(xt.is_contiguous());
  CHECK(allclose(ops::softmax(xt, -1), fx["softmax_last"], 1e-12, 1e-12));
  // autograd forwards agree with ops
  CHECK(allclose(softmax(Variable(x), 0).data(), fx["softmax_0"], 1e-12, 1e-12));
  CHECK(allclose(log_softmax(Variable(x), -1).data(), fx["log_softmax_last"], 1e-12, 1e-12));
}

TEST_CASE("nn_ops: softmax of an all -inf row is zeros and NaN propagates", "[ops][nn]") {
  const double inf = INFINITY;
  Tensor x = f64({-inf, -inf, -inf, 0, 1, -inf}, {2, 3});
  Tensor y = ops::softmax(x, -1);
  auto v = y.to_vector<double>();
  CHECK(v[0] == 0.0);
  CHECK(v[1] == 0.0);
  CHECK(v[2] == 0.0);
  CHECK(v[5] == 0.0);
  CHECK(v[3] == Approx(1.0 / (1.0 + std::exp(1.0))));
  Variable xv = leaf(x);
  softmax(xv, -1).backward(ops::ones({2, 3}, DType::Float64));
  for (double g : xv.grad().to_vector<double>()) CHECK(g == 0.0);  // Σ of a softmax is constant
  Tensor n = ops::softmax(f64({NAN, 1, 2, 3}, {2, 2}), -1);
  auto nv = n.to_vector<double>();
  CHECK(std::isnan(nv[0]));
  CHECK(std::isnan(nv[1]));
  CHECK(nv[2] + nv[3] == Approx(1.0));
  // 0-d and empty tensors
  CHECK(ops::softmax(ops::scalar_tensor(3.0, DType::Float64), 0).item() == 1.0);
  CHECK(ops::softmax(ops::zeros({0, 3}), -1).shape() == Shape({0, 3}));
}

TEST_CASE("nn_ops: softmax_backward matches the formulas", "[ops][nn]") {
  Tensor x = rand64({3, 4}, 2), g = rand64({3, 4}, 3);
  Tensor y = ops::softmax(x, 1), ly = ops::log_softmax(x, 1);
  Tensor dot = ops::sum(ops::mul(g, y), {1}, true);
  CHECK(allclose(ops::softmax_backward(y, g, 1, false), ops::mul(y, ops::sub(g, dot)), 1e-12, 1e-12));
  Tensor expected = ops::sub(g, ops::mul(ops::exp(ly), ops::sum(g, {1}, true)));
  CHECK(allclose(ops::softmax_backward(ly, g, -1, true), expected, 1e-12, 1e-12));
  // along dim 0 equals along dim 1 of the transpose
  Tensor y0 = ops::softmax(x, 0);
  CHECK(allclose(ops::softmax_backward(y0, g, 0, false),
                 ops::softmax_backward(y0.t().contiguous(), g.t().contiguous(), 1, false).t(), 1e-12, 1e-12));
}

TEST_CASE("nn_ops: softmax and log_softmax gradcheck", "[autograd][nn][gradcheck]") {
  for (bool log : {false, true}) {
    auto f = [log](int64_t dim) {
      return [log, dim](const std::vector<Variable>& v) {
        return log ? log_softmax(v[0], dim) : softmax(v[0], dim);
      };
    };
    CHECK(gradcheck(f(-1), {leaf(rand64({3, 4}, 4))}));
    CHECK(gradcheck(f(0), {leaf(rand64({3, 4}, 5))}));
    CHECK(gradcheck(f(1), {leaf(rand64({2, 3, 4}, 6))}));
    CHECK(gradcheck(f(-1), {leaf(rand64({4, 3}, 7).t())}));                   // non-contiguous
    CHECK(gradcheck(f(0), {leaf(rand64({2, 3, 4}, 8).permute({2, 0, 1}))}));  // permuted view
    CHECK(gradcheck(f(0), {leaf(rand64({5}, 9))}));
  }
}

// ---- CUDA against the CPU ----

TEST_CASE("cuda: softmax and log_softmax forward and backward, a fully masked row", "[cuda]") {
  Tensor x = randn({5, 3, 700}, 16), r = randn({5, 3, 700}, 17);
  both(
      [&](Device d) {
        std::vector<Tensor> out;
        for (int kind = 0; kind < 2; ++kind) {
          Variable vx(x.to(d), true);
          Variable y = kind == 0 ? softmax(vx, -1) : log_softmax(vx, 1);
          y.backward(r.to(d));
          out.push_back(y.data());
          out.push_back(vx.grad());
        }
        // a fully masked row gives zeros
        Tensor masked = x.to(d).select(1, 0).clone();
        Tensor row = masked.select(0, 1);
        ops::fill_(row, -INFINITY);
        out.push_back(ops::softmax(masked, -1));
        return out;
      },
      2e-5);
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
}

// ---- 16 bits in and out ----

TEST_CASE("16-bit softmax and log_softmax: 16 bits in and out, float32 inside", "[half]") {
  for (DType t : {DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(t));
    Tensor x = randn16({4, 3, 50}, t, 5);
    check_close(ops::softmax(x, -1), ops::softmax(f32(x), -1), t);
    check_close(ops::softmax(x, 1), ops::softmax(f32(x), 1), t);
    check_close(ops::log_softmax(x, -1), ops::log_softmax(f32(x), -1), t);
  }
}

// ---- every vector width ----

TEST_CASE("isa dispatch: softmax rows agree with double arithmetic at every width", "[ops][isa]") {
  const int64_t rows = 5, n = 333;
  Tensor x = randn({rows, n}, 3);
  const std::vector<double> v = x.to_vector<double>();
  std::vector<double> sm(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, v[r * n + i]);
    for (int64_t i = 0; i < n; ++i) s += std::exp(v[r * n + i] - m);
    for (int64_t i = 0; i < n; ++i) sm[r * n + i] = std::exp(v[r * n + i] - m) / s;
  }
  for (cpu::Isa isa : widths()) {
    cpu::IsaGuard g(isa);
    INFO("width " << cpu::vector_level_name(isa));
    CHECK(max_err(ops::softmax(x, 1).to_vector<double>(), sm) < 1e-6);
  }
}
