// Elementwise ops: forward values against NumPy / PyTorch fixtures (tests/fixtures/make_elementwise.py),
// type promotion, NaN propagation, gradchecks of every differentiable elementwise function, bad input.
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

// same dtype, shape and values (NaN matches NaN)
bool same(const Tensor& got, const Tensor& want, double rtol = 1e-6, double atol = 1e-7) {
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

// positive values away from 0, for log / sqrt / pow bases
Tensor pos64(const Shape& shape, uint64_t seed) { return ops::add(ops::abs(rand64(shape, seed)), 0.5); }

}  // namespace

TEST_CASE("elementwise: broadcasting binary ops match numpy", "[ops][elementwise]") {
  Tensor a = fx("a"), b = fx("b");
  REQUIRE(a.shape() == Shape{3, 1, 4});
  CHECK(same(ops::add(a, b), fx("add")));
  CHECK(same(ops::sub(a, b), fx("sub")));
  CHECK(same(ops::mul(a, b), fx("mul")));
  CHECK(same(ops::div(a, b), fx("div")));
  CHECK(same(ops::maximum(a, b), fx("maximum")));
  CHECK(same(ops::minimum(a, b), fx("minimum")));
  CHECK(same(ops::pow(fx("pow_base"), b), fx("pow"), 1e-5));
  CHECK(ops::add(a, b).shape() == Shape{3, 2, 4});
  // the C++ operators and a non-contiguous operand give the same
  CHECK(same(a + b, fx("add")));
  Tensor bt = b.t().contiguous().t();  // same values, column-major strides
  REQUIRE_FALSE(bt.is_contiguous());
  CHECK(same(a * bt, fx("mul")));
}

TEST_CASE("elementwise: comparisons give bool and match numpy", "[ops][elementwise]") {
  Tensor a = fx("a"), b = fx("b");
  CHECK(same(ops::eq(a, b), fx("eq")));
  CHECK(same(ops::ne(a, b), fx("ne")));
  CHECK(same(ops::lt(a, b), fx("lt")));
  CHECK(same(ops::le(a, b), fx("le")));
  CHECK(same(ops::gt(a, b), fx("gt")));
  CHECK(same(ops::ge(a, b), fx("ge")));
  CHECK(ops::eq(a, b).dtype() == DType::Bool);
  CHECK(ops::gt(a, 0.0).dtype() == DType::Bool);
  // the fixture holds one tie: eq finds exactly it
  CHECK(ops::sum(ops::eq(a, b)).item<int64_t>() == 1);
}

TEST_CASE("elementwise: type promotion follows torch", "[ops][elementwise]") {
  Tensor i = fx("int"), f32 = fx("f32"), f64 = fx("f64"), bl = fx("bool");
  REQUIRE(i.dtype() == DType::Int64);
  REQUIRE(bl.dtype() == DType::Bool);
  CHECK(same(ops::add(i, f32), fx("int_plus_f32")));
  CHECK(same(ops::mul(i, f64), fx("int_mul_f64")));
  CHECK(same(ops::add(bl, i), fx("bool_plus_int")));
  CHECK(same(ops::mul(i, 2.5), fx("int_mul_2p5")));
  CHECK(same(ops::add(i, 3.0), fx("int_plus_3")));
  CHECK(same(ops::add(f32, f64), fx("f32_plus_f64")));
  CHECK(same(ops::div(i, 2.0), fx("int_div_int")));
  Tensor pos = ops::gt(i.select(0, 0), 0.0);
  CHECK(same(ops::logical_and(bl, pos), fx("bool_and")));
  CHECK(same(ops::logical_or(bl, pos), fx("bool_or")));
  CHECK(same(ops::logical_not(bl), fx("bool_not")));
  // integer true division never traps on zero
  Tensor q = ops::div(ops::tensor({1, -1, 0}, DType::Int64), ops::zeros({3}, DType::Int64));
  CHECK(q.dtype() == DType::Float32);
  auto v = q.to_vector<float>();
  CHECK((std::isinf(v[0]) && v[0] > 0 && std::isinf(v[1]) && v[1] < 0 && std::isnan(v[2])));
  // scalars: an int tensor with a nan or inf scalar promotes to float (no undefined int conversion)
  CHECK(ops::add(i, NAN).dtype() == DType::Float32);
  CHECK(ops::lt(i, INFINITY).dtype() == DType::Bool);
  CHECK(ops::sum(ops::lt(i, INFINITY)).item<int64_t>() == i.numel());
  // integer powers stay exact integers; fractional ones promote
  CHECK(ops::pow(ops::tensor({3, -2, 10}, DType::Int64), 3.0).to_vector<int64_t>() ==
        std::vector<int64_t>{27, -8, 1000});
  CHECK(ops::pow(ops::tensor({4, 9}, DType::Int64), 0.5).dtype() == DType::Float32);
  CHECK(allclose(ops::pow(ops::tensor({4, 9}, DType::Int64), 0.5), ops::tensor({2, 3})));
}

TEST_CASE("elementwise: a 0-d tensor promotes only across categories, as torch.result_type (issue 37)",
          "[ops][elementwise]") {
  // A bfloat16 (3) times a float32 0-d tensor gave float32; PyTorch gives bfloat16: tensors with dimensions
  // decide within a category, and a 0-d tensor counts only from a higher category (int -> float).
  const Tensor bf = ops::ones({3}, DType::BFloat16), f16 = ops::ones({3}, DType::Float16);
  const Tensor f32_0d = ops::scalar_tensor(2.0, DType::Float32),
               f64_0d = ops::scalar_tensor(2.0, DType::Float64);
  const Tensor i64 = ops::ones({3}, DType::Int64), bl = ops::ones({3}, DType::Bool);
  CHECK(ops::mul(bf, f32_0d).dtype() == DType::BFloat16);
  CHECK(ops::mul(f32_0d, bf).dtype() == DType::BFloat16);
  CHECK(ops::add(f16, f64_0d).dtype() == DType::Float16);
  CHECK(ops::add(ops::ones({3}), f64_0d).dtype() == DType::Float32);
  CHECK(ops::mul(i64, f64_0d).dtype() == DType::Float64);  // int -> float: the 0-d tensor's dtype
  CHECK(ops::mul(i64, ops::scalar_tensor(3, DType::Int64)).dtype() == DType::Int64);
  CHECK(ops::add(bl, ops::scalar_tensor(3, DType::Int64)).dtype() == DType::Int64);
  CHECK(ops::add(bl, f32_0d).dtype() == DType::Float32);
  CHECK(ops::lt(bf, f32_0d).dtype() == DType::Bool);
  CHECK(ops::where(ops::gt(bf, 0.0), bf, f32_0d).dtype() == DType::BFloat16);
  // two 0-d tensors, or two with dimensions (a size-1 dimension counts), promote as before
  CHECK(ops::mul(ops::scalar_tensor(1.0, DType::BFloat16), f32_0d).dtype() == DType::Float32);
  CHECK(ops::mul(bf, ops::ones({1})).dtype() == DType::Float32);
  CHECK(ops::mul(bf, f16).dtype() == DType::Float32);
  // the values: 2 x 1 in bfloat16
  CHECK(ops::mul(bf, f32_0d).to(DType::Float32).to_vector<float>() == std::vector<float>{2, 2, 2});
  // and through autograd: the gradient of the 0-d float32 input comes back float32
  Variable a(ops::full({3}, 1.5, DType::BFloat16), true), s(f32_0d, true);
  Variable y = mul(a, s);
  CHECK(y.dtype() == DType::BFloat16);
  sum(y).backward();
  CHECK(s.grad().dtype() == DType::Float32);
  CHECK(s.grad().item<double>() == 4.5);
  CHECK(a.grad().dtype() == DType::BFloat16);
}

TEST_CASE("elementwise: maximum minimum and relu propagate NaN", "[ops][elementwise]") {
  Tensor x = fx("nan_x"), y = fx("nan_y");
  CHECK(same(ops::maximum(x, y), fx("nan_maximum")));
  CHECK(same(ops::minimum(x, y), fx("nan_minimum")));
  CHECK(same(ops::maximum(y, x), fx("nan_maximum")));  // either side
  CHECK(same(ops::relu(x), fx("nan_relu")));
  CHECK(same(ops::relu(x.to(DType::Float32)), fx("nan_relu").to(DType::Float32)));
}

TEST_CASE("elementwise: unary ops match torch", "[ops][elementwise]") {
  Tensor u = fx("u"), up = fx("up");
  CHECK(same(ops::neg(u), fx("unary_neg")));
  CHECK(same(ops::exp(u), fx("unary_exp")));
  CHECK(same(ops::abs(u), fx("unary_abs")));
  CHECK(same(ops::sin(u), fx("unary_sin")));
  CHECK(same(ops::cos(u), fx("unary_cos")));
  CHECK(same(ops::tanh(u), fx("unary_tanh")));
  CHECK(same(ops::sigmoid(u), fx("unary_sigmoid")));
  CHECK(same(ops::relu(u), fx("unary_relu")));
  CHECK(same(ops::gelu(u), fx("unary_gelu")));
  CHECK(same(ops::gelu_grad(u), fx("unary_gelu_grad")));
  // the fused backward g · gelu'(x) is the composed product exactly in float64 and float32 (gelu'(x) is
  // already of the dtype there), broadcast and transposed too
  for (DType dt : {DType::Float64, DType::Float32}) {
    Tensor x = u.to(dt), g = ops::randn(u.shape(), dt), row = ops::randn({u.size(-1)}, dt);
    CHECK(allclose(ops::gelu_backward(g, x), ops::mul(g, ops::gelu_grad(x)), 0, 0));
    CHECK(allclose(ops::gelu_backward(row, x), ops::mul(row, ops::gelu_grad(x)), 0, 0));
    if (x.dim() == 2)
      CHECK(allclose(ops::gelu_backward(g.t(), x.t()), ops::mul(g.t(), ops::gelu_grad(x.t())), 0, 0));
  }
  CHECK(same(ops::sign(u), fx("unary_sign")));
  CHECK(same(ops::log(up), fx("unary_log")));
  CHECK(same(ops::sqrt(up), fx("unary_sqrt")));
  CHECK(same(ops::rsqrt(up), fx("unary_rsqrt")));
  CHECK(same(ops::pow(up, 2.5), fx("unary_pow2p5")));
  CHECK(same(ops::clamp(u, -0.5, 1.0), fx("unary_clamp")));
  CHECK(same(ops::clamp(u, 0.25, std::nullopt), fx("unary_clamp_lo")));
  // float32 and transposed inputs go through the same kernels
  CHECK(allclose(ops::exp(u.to(DType::Float32)), fx("unary_exp").to(DType::Float32), 1e-6));
  CHECK(same(ops::tanh(u.t()), fx("unary_tanh").t()));
  // int64 where defined
  Tensor i = ops::tensor({-3, 0, 5}, DType::Int64);
  CHECK(ops::abs(i).to_vector<int64_t>() == std::vector<int64_t>{3, 0, 5});
  CHECK(ops::relu(i).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 5});
  CHECK(ops::sign(i).to_vector<int64_t>() == std::vector<int64_t>{-1, 0, 1});
  CHECK(ops::neg(i).to_vector<int64_t>() == std::vector<int64_t>{3, 0, -5});
}

TEST_CASE("elementwise: where and masked_fill match torch", "[ops][elementwise]") {
  Tensor u = fx("u"), up = fx("up");
  CHECK(same(ops::where(fx("cond"), u, up.select(0, 0)), fx("where")));
  CHECK(same(ops::masked_fill(u, fx("mask"), -7.5), fx("masked_fill")));
  // mixed dtypes promote
  Tensor w = ops::where(ops::tensor({1, 0}, DType::Bool), ops::tensor({1, 2}, DType::Int64),
                        ops::tensor({0.5, 0.25}, DType::Float32));
  CHECK(w.dtype() == DType::Float32);
  CHECK(w.to_vector<float>() == std::vector<float>{1, 0.25f});
}

TEST_CASE("elementwise: in-place ops bump the version and check dtypes", "[ops][elementwise]") {
  Tensor a = ops::tensor({1, 2, 3}, DType::Float64);
  uint64_t v0 = a.version();
  ops::add_(a, ops::tensor({1}, DType::Float64), 2.0);
  CHECK(a.to_vector<double>() == std::vector<double>{3, 4, 5});
  ops::mul_(a, 2.0);
  ops::sub_(a, ops::tensor({1, 1, 1}, DType::Float32));  // float32 into float64: fine
  ops::div_(a, ops::full({3}, 5.0, DType::Float64));
  CHECK(a.to_vector<double>() == std::vector<double>{1, 1.4, 1.8});
  CHECK(a.version() == v0 + 4);
  Tensor i = ops::tensor({1, 2}, DType::Int64);
  REQUIRE_THROWS_SACCADE(ops::add_(i, ops::tensor({0.5, 0.5})), "add_");
  REQUIRE_THROWS_SACCADE(ops::mul_(i, 0.5), "mul_");
  Tensor b = ops::ones({2}, DType::Bool);
  REQUIRE_THROWS_SACCADE(ops::mul_(b, b), "mul_");
  REQUIRE_THROWS_SACCADE(ops::add_(a, ops::ones({2}, DType::Float64)), "add_");
  // fill_ of a bool tensor stores 0 or 1
  ops::fill_(b, 2.0);
  CHECK(b.to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  CHECK(ops::full({2}, 5.0, DType::Bool).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  // copy_ broadcasts and converts
  Tensor d = ops::zeros({2, 2}, DType::Float64);
  ops::copy_(d, ops::tensor({1, 2}, DType::Int64));
  CHECK(d.to_vector<double>() == std::vector<double>{1, 2, 1, 2});
  REQUIRE_THROWS_SACCADE(ops::copy_(d, ops::zeros({3})), "copy_");
}

TEST_CASE("elementwise: bad input names the op", "[ops][elementwise][errors]") {
  Tensor a = ops::zeros({2, 3}), b = ops::zeros({4}), u;
  Tensor i = ops::zeros({2, 3}, DType::Int64), bl = ops::zeros({2, 3}, DType::Bool);
  // unbroadcastable shapes, naming both
  for (auto [name, f] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&, const Tensor&)>>{
           {"add", ops::add},
           {"sub", ops::sub},
           {"mul", ops::mul},
           {"div", ops::div},
           {"pow", ops::pow},
           {"maximum", ops::maximum},
           {"minimum", ops::minimum},
           {"eq", ops::eq},
           {"ne", ops::ne},
           {"lt", ops::lt},
           {"le", ops::le},
           {"gt", ops::gt},
           {"ge", ops::ge}}) {
    INFO(name);
    REQUIRE_THROWS_SACCADE(f(a, b), name + ": shapes [2, 3] and [4] cannot be broadcast");
    REQUIRE_THROWS_SACCADE(f(a, u), name + ": got an undefined tensor");
  }
  REQUIRE_THROWS_SACCADE(ops::logical_and(bl, ops::zeros({4}, DType::Bool)), "logical_and");
  REQUIRE_THROWS_SACCADE(ops::logical_or(bl, ops::zeros({4}, DType::Bool)), "logical_or");
  REQUIRE_THROWS_SACCADE(ops::where(ops::zeros({4}, DType::Bool), a, a), "where");
  REQUIRE_THROWS_SACCADE(ops::masked_fill(a, ops::zeros({4}, DType::Bool), 1), "masked_fill");
  REQUIRE_THROWS_SACCADE(ops::masked_fill(ops::zeros({3}), ops::zeros({2, 3}, DType::Bool), 1),
                         "masked_fill");
  // wrong dtypes
  REQUIRE_THROWS_SACCADE(ops::logical_and(a, a), "logical_and: expected a bool tensor, got float32");
  REQUIRE_THROWS_SACCADE(ops::logical_or(bl, i), "logical_or: expected a bool tensor, got int64");
  REQUIRE_THROWS_SACCADE(ops::logical_not(a), "logical_not: expected a bool tensor");
  REQUIRE_THROWS_SACCADE(ops::where(a, a, a), "where: expected a bool tensor");
  REQUIRE_THROWS_SACCADE(ops::masked_fill(a, a, 0), "masked_fill: expected a bool tensor");
  REQUIRE_THROWS_SACCADE(ops::add(bl, bl), "add: not defined for bool");
  REQUIRE_THROWS_SACCADE(ops::pow(i, -1.0), "pow: integers to negative integer powers");
  REQUIRE_THROWS_SACCADE(ops::clamp(bl, 0, 1), "clamp: not defined for bool");
  REQUIRE_THROWS_SACCADE(ops::clamp(a, 2, 1), "clamp: min 2 is greater than max 1");
  REQUIRE_THROWS_SACCADE(ops::clamp(u, 0, 1), "clamp: got an undefined tensor");
  REQUIRE_THROWS_SACCADE(ops::add(u, 1.0), "add: got an undefined tensor");
  for (auto [name, f] :
       std::vector<std::pair<std::string, Tensor (*)(const Tensor&)>>{{"exp", ops::exp},
                                                                      {"log", ops::log},
                                                                      {"sqrt", ops::sqrt},
                                                                      {"rsqrt", ops::rsqrt},
                                                                      {"sin", ops::sin},
                                                                      {"cos", ops::cos},
                                                                      {"tanh", ops::tanh},
                                                                      {"sigmoid", ops::sigmoid},
                                                                      {"gelu", ops::gelu},
                                                                      {"gelu_grad", ops::gelu_grad}}) {
    INFO(name);
    REQUIRE_THROWS_SACCADE(f(i), name + ": not defined for int64 tensors (shape [2, 3])");
    REQUIRE_THROWS_SACCADE(f(bl), name + ": not defined for bool");
    REQUIRE_THROWS_SACCADE(f(u), name + ": got an undefined tensor");
  }
  // GELU's fused backward g · gelu'(x)
  Tensor x = ops::randn({2, 3});
  REQUIRE_THROWS_SACCADE(ops::gelu_backward(x, i),
                         "gelu_backward: expected floating tensors, got [2, 3] float32 "
                         "and [2, 3] int64");
  REQUIRE_THROWS_SACCADE(ops::gelu_backward(bl, x), "gelu_backward: expected floating tensors");
  REQUIRE_THROWS_SACCADE(ops::gelu_backward(x, u),
                         "gelu_backward: expected floating tensors, got [2, 3] float32 "
                         "and [] undefined");
  REQUIRE_THROWS_SACCADE(ops::gelu_backward(x, ops::randn({4})), "gelu_backward");
  for (auto [name, f] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&)>>{
           {"neg", ops::neg}, {"abs", ops::abs}, {"relu", ops::relu}, {"sign", ops::sign}}) {
    INFO(name);
    REQUIRE_THROWS_SACCADE(f(bl), name + ": not defined for bool");
    REQUIRE_THROWS_SACCADE(f(u), name + ": got an undefined tensor");
  }
  REQUIRE_THROWS_SACCADE(ops::fill_(u, 1), "fill_");
}

// ---- gradchecks: every differentiable function in autograd/functions/elementwise.h ----

namespace {

using Fn = std::function<Variable(const std::vector<Variable>&)>;

void check_binary(const std::string& name, const Fn& f, bool positive_a = false) {
  // same shape, broadcasting both ways, and non-contiguous (transposed / permuted) operands
  struct Case {
    Tensor a, b;
  };
  auto A = [&](const Shape& s, uint64_t seed) { return positive_a ? pos64(s, seed) : rand64(s, seed); };
  std::vector<Case> cases = {
      {A({2, 3}, 1), rand64({2, 3}, 2)},
      {A({3, 1, 4}, 3), rand64({2, 4}, 4)},
      {A({4}, 5), rand64({3, 4}, 6)},
      {A({4, 3}, 7).t(), rand64({3, 1}, 8)},
      {A({2, 3, 4}, 9).permute({2, 0, 1}), rand64({3, 2, 4}, 10).permute({2, 1, 0})},  // both (4, 2, 3)
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    INFO(name << " case " << k);
    REQUIRE(gradcheck(f, {Variable(cases[k].a, true), Variable(cases[k].b, true)}));
  }
}

void check_unary(const std::string& name, const Fn& f, bool positive = false, bool away_from_zero = false) {
  auto X = [&](const Shape& s, uint64_t seed) {
    Tensor x = positive ? pos64(s, seed) : rand64(s, seed);
    // kinks at 0 (abs, relu): keep every element at least 0.1 away from it
    if (away_from_zero) x = ops::add(x, ops::mul(ops::sign(x), 0.1));
    return x;
  };
  std::vector<Tensor> xs = {X({5}, 11), X({2, 3, 2}, 12), X({4, 3}, 13).t(),
                            X({2, 3, 4}, 14).permute({1, 2, 0})};
  for (size_t k = 0; k < xs.size(); ++k) {
    INFO(name << " case " << k);
    REQUIRE(gradcheck(f, {Variable(xs[k], true)}));
  }
}

}  // namespace

TEST_CASE("elementwise: gradcheck of the binary functions", "[autograd][elementwise]") {
  check_binary("add", [](const auto& v) { return add(v[0], v[1]); });
  check_binary("sub", [](const auto& v) { return sub(v[0], v[1]); });
  check_binary("mul", [](const auto& v) { return mul(v[0], v[1]); });
  check_binary(
      "div", [](const auto& v) { return div(v[1], v[0]); }, /*positive_a=*/true);  // divisor > 0
  check_binary(
      "pow", [](const auto& v) { return pow(v[0], v[1]); }, true);
  check_binary("maximum", [](const auto& v) { return maximum(v[0], v[1]); });
  check_binary("minimum", [](const auto& v) { return minimum(v[0], v[1]); });
  check_binary("operators", [](const auto& v) { return (v[0] + v[1]) * v[0] - v[1] / (v[0] * v[0] + 1.0); });
  // only one side requires grad
  REQUIRE(gradcheck([](const auto& v) { return mul(v[0], v[1]); },
                    {Variable(rand64({3}), true), Variable(rand64({2, 3}))}));
  REQUIRE(gradcheck([](const auto& v) { return div(v[0], v[1]); },
                    {Variable(rand64({2, 3})), Variable(pos64({3}, 3), true)}));
}

TEST_CASE(
    "elementwise: pow of an int64 Variable and a float Variable promotes, forward and backward (as torch)",
    "[autograd][elementwise]") {
  // the exponent's gradient used to take log of the int64 base: "log: not defined for int64 tensors"
  const Tensor base = ops::tensor({1, 2, 3, 0}, DType::Int64);
  Variable e(ops::tensor({0.5, 1.5, -0.5, 2}, DType::Float64), true);
  Variable y = pow(Variable(base), e);
  CHECK(y.dtype() == DType::Float64);
  sum(y).backward();
  // d/db a^b = a^b log a (0 at a = 0 with b >= 0, as torch)
  CHECK(allclose(
      e.grad(),
      ops::tensor({0, std::pow(2, 1.5) * std::log(2), std::pow(3, -0.5) * std::log(3), 0}, DType::Float64)));
  REQUIRE(gradcheck([](const auto& v) { return pow(v[0], v[1]); },
                    {Variable(base), Variable(ops::tensor({0.5, 1.5, -0.5, 2}, DType::Float64), true)}));
  // a float32 exponent gets a float32 gradient
  Variable e32(ops::tensor({0.5, 1.5}), true);
  sum(pow(Variable(ops::tensor({2, 3}, DType::Int64)), e32)).backward();
  CHECK(e32.grad().dtype() == DType::Float32);
  // and the other way round: a float base with an int64 exponent
  REQUIRE(gradcheck([](const auto& v) { return pow(v[0], v[1]); },
                    {Variable(pos64({4}, 5), true), Variable(ops::tensor({0, 1, 2, 3}, DType::Int64))}));
}

TEST_CASE("elementwise: masked_fill names itself for a value the dtype cannot hold", "[ops][elementwise]") {
  // found by the fuzz test (seed 3): the error named only scalar_tensor
  const Tensor x = ops::zeros({2}, DType::Int64), m = ops::ones({2}, DType::Bool);
  REQUIRE_THROWS_SACCADE(ops::masked_fill(x, m, 0x1p63), "masked_fill > scalar_tensor: value");
  REQUIRE(ops::masked_fill(x, m, 7).to_vector<int64_t>() == std::vector<int64_t>{7, 7});
}

TEST_CASE("elementwise: gradcheck of the scalar forms", "[autograd][elementwise]") {
  check_unary("add scalar", [](const auto& v) { return add(v[0], 1.5); });
  check_unary("sub scalar", [](const auto& v) { return sub(v[0], 1.5); });
  check_unary("mul scalar", [](const auto& v) { return mul(v[0], -2.5); });
  check_unary("div scalar", [](const auto& v) { return div(v[0], 4.0); });
  check_unary("rsub", [](const auto& v) { return rsub(v[0], 3.0); });
  check_unary(
      "rdiv", [](const auto& v) { return rdiv(v[0], 3.0); }, true);
  check_unary(
      "pow scalar", [](const auto& v) { return pow(v[0], 2.5); }, true);
  check_unary("pow 3", [](const auto& v) { return pow(v[0], 3.0); });
  check_unary("pow 0", [](const auto& v) { return pow(v[0], 0.0); });
  check_unary("scalar operators", [](const auto& v) { return 2.0 - v[0] * 3.0 + 1.0 / (v[0] * v[0] + 1.0); });
}

TEST_CASE("elementwise: gradcheck of the unary functions", "[autograd][elementwise]") {
  check_unary("neg", [](const auto& v) { return neg(v[0]); });
  check_unary("exp", [](const auto& v) { return exp(v[0]); });
  check_unary(
      "log", [](const auto& v) { return log(v[0]); }, true);
  check_unary(
      "sqrt", [](const auto& v) { return sqrt(v[0]); }, true);
  check_unary(
      "rsqrt", [](const auto& v) { return rsqrt(v[0]); }, true);
  check_unary(
      "abs", [](const auto& v) { return abs(v[0]); }, false, true);
  check_unary("sin", [](const auto& v) { return sin(v[0]); });
  check_unary("cos", [](const auto& v) { return cos(v[0]); });
  check_unary("tanh", [](const auto& v) { return tanh(v[0]); });
  check_unary("sigmoid", [](const auto& v) { return sigmoid(v[0]); });
  check_unary(
      "relu", [](const auto& v) { return relu(v[0]); }, false, true);
  check_unary("gelu", [](const auto& v) { return gelu(v[0]); });
  check_unary("unary minus", [](const auto& v) { return -v[0]; });
}

TEST_CASE("elementwise: gradcheck of clamp where and masked_fill", "[autograd][elementwise]") {
  // bounds well inside the data's range; the odds of an element within eps of a bound are negligible
  check_unary("clamp", [](const auto& v) { return clamp(v[0], -0.55, 0.65); });
  check_unary("clamp lo", [](const auto& v) { return clamp(v[0], 0.05, std::nullopt); });
  check_unary("clamp hi", [](const auto& v) { return clamp(v[0], std::nullopt, -0.05); });
  // conditions and masks computed from the data (constant under the finite-difference steps)
  check_binary("where", [](const auto& v) { return where(ops::gt(v[1].data(), 0.0), v[0], v[1]); });
  check_binary("masked_fill",
               [](const auto& v) { return masked_fill(v[0], ops::gt(v[0].data(), 0.3), 2.0) * v[1]; });
  Tensor cond = ops::gt(rand64({3, 1}, 40), 0.0);
  REQUIRE(gradcheck([cond](const auto& v) { return where(cond, v[0], v[1]); },
                    {Variable(rand64({4, 3}, 41).t(), true), Variable(rand64({4}, 42), true)}));
}

TEST_CASE("elementwise: backward details", "[autograd][elementwise]") {
  // maximum at a tie splits the gradient
  Variable a(ops::tensor({1, 2}, DType::Float64), true), b(ops::tensor({1, 3}, DType::Float64), true);
  sum(maximum(a, b)).backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0.5, 0});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{0.5, 1});
  // a float32 input of a float64 result gets a float32 gradient
  Variable x(ops::tensor({1, 2}, DType::Float32), true), y(ops::tensor({3, 4}, DType::Float64), true);
  sum(mul(x, y)).backward();
  CHECK(x.grad().dtype() == DType::Float32);
  CHECK(x.grad().to_vector<float>() == std::vector<float>{3, 4});
  CHECK(y.grad().dtype() == DType::Float64);
  // d(a^b)/db at a = 0 is 0 (not nan), as torch
  Variable base(ops::tensor({0, 2}, DType::Float64), false), e(ops::tensor({2, 3}, DType::Float64), true);
  sum(pow(base, e)).backward();
  CHECK(allclose(e.grad(), ops::tensor({0, 8 * std::log(2.0)}, DType::Float64)));
  // clamp passes the gradient at the bounds (inclusive), as torch
  Variable c(ops::tensor({-1, 0, 0.5, 1, 2}, DType::Float64), true);
  sum(clamp(c, 0.0, 1.0)).backward();
  CHECK(c.grad().to_vector<double>() == std::vector<double>{0, 1, 1, 1, 0});
  // a where mask modified in place after the forward is caught
  Tensor m = ops::tensor({1, 0}, DType::Bool);
  Variable w = where(m, a, b);
  ops::fill_(m, 0);
  REQUIRE_THROWS_SACCADE(sum(w).backward(), "where");
}
