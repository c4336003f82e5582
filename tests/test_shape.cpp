// Views and joins: ops-level forward values and errors (ops/join.h), and the differentiable views and joins
// (autograd/functions/shape.h) checked by float64 gradcheck, including broadcast and non-contiguous inputs.
#include <fstream>

#include <nlohmann/json.hpp>

#include "helpers.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;
using Fn = std::function<Variable(const std::vector<Variable>&)>;

namespace {

Tensor f64(std::initializer_list<double> v, const Shape& s) { return ops::tensor(v, s, DType::Float64); }

// A tensor stored by tests/fixtures/make_index.py: {"shape", "dtype", "data"}.
Tensor from_json(const nlohmann::json& j) {
  Shape shape(j["shape"].get<std::vector<int64_t>>());
  if (j["dtype"] == "int64") return ops::from_vector(j["data"].get<std::vector<int64_t>>(), shape);
  return ops::from_vector(j["data"].get<std::vector<double>>(), shape);
}

nlohmann::json load_cases() {
  std::ifstream f(SACCADE_TEST_DATA_DIR "/index_cases.json");
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}

// gradcheck of f at one float64 input that requires grad.
bool check1(const Fn& f, const Tensor& x) { return gradcheck(f, {Variable(x, true)}); }

}  // namespace

// ---- ops level: forward values ----

TEST_CASE("ops cat: values along each dim", "[ops][shape]") {
  Tensor a = f64({1, 2, 3, 4}, {2, 2}), b = f64({5, 6}, {2, 1}), c = f64({7, 8}, {1, 2});
  REQUIRE(allclose(ops::cat({a, b}, 1), f64({1, 2, 5, 3, 4, 6}, {2, 3})));
  REQUIRE(allclose(ops::cat({a, b}, -1), f64({1, 2, 5, 3, 4, 6}, {2, 3})));
  REQUIRE(allclose(ops::cat({a, c, a}, 0), f64({1, 2, 3, 4, 7, 8, 1, 2, 3, 4}, {5, 2})));
  // non-contiguous input, and 1-d empty tensors are skipped as in torch.cat
  REQUIRE(
      allclose(ops::cat({a.t(), ops::empty({0}, DType::Float64), b}, 1), f64({1, 3, 5, 2, 4, 6}, {2, 3})));
  // the result is a new tensor
  Tensor one = ops::cat({a}, 0);
  REQUIRE(one.storage() != a.storage());
  REQUIRE(allclose(one, a));
}

TEST_CASE("ops cat: dtype promotion matches torch", "[ops][shape]") {
  auto c = load_cases()["cat_promote"];
  Tensor out = ops::cat({from_json(c["a"]), from_json(c["b"])}, c["dim"].get<int64_t>());
  REQUIRE(out.dtype() == DType::Float64);
  REQUIRE(allclose(out, from_json(c["out"])));
  REQUIRE(ops::cat({ops::arange(2), ops::ones({2}, DType::Float32)}, 0).dtype() == DType::Float32);
}

TEST_CASE("ops stack: values on new first middle and last dims", "[ops][shape]") {
  Tensor a = f64({1, 2, 3}, {3}), b = f64({4, 5, 6}, {3});
  REQUIRE(allclose(ops::stack({a, b}, 0), f64({1, 2, 3, 4, 5, 6}, {2, 3})));
  REQUIRE(allclose(ops::stack({a, b}, 1), f64({1, 4, 2, 5, 3, 6}, {3, 2})));
  REQUIRE(allclose(ops::stack({a, b}, -1), f64({1, 4, 2, 5, 3, 6}, {3, 2})));
  Tensor m = f64({1, 2, 3, 4}, {2, 2});
  REQUIRE(allclose(ops::stack({m, m.t()}, 1), f64({1, 2, 1, 3, 3, 4, 2, 4}, {2, 2, 2})));
}

TEST_CASE("ops split and chunk: views with torch's sizes", "[ops][shape]") {
  Tensor x = ops::arange(0, 14, 1, DType::Float64).reshape({2, 7});
  auto parts = ops::split(x, 3, 1);
  REQUIRE(parts.size() == 3);
  REQUIRE(parts[0].shape() == Shape{2, 3});
  REQUIRE(parts[2].shape() == Shape{2, 1});
  REQUIRE(parts[1].storage() == x.storage());  // a view
  REQUIRE(allclose(parts[1], f64({3, 4, 5, 10, 11, 12}, {2, 3})));
  REQUIRE(allclose(parts[2], f64({6, 13}, {2, 1})));
  auto sized = ops::split(x, std::vector<int64_t>{1, 0, 6}, -1);
  REQUIRE(sized.size() == 3);
  REQUIRE(sized[1].shape() == Shape{2, 0});
  REQUIRE(allclose(sized[2], f64({1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13}, {2, 6})));
  // torch.chunk: ceil(7 / 3) = 3 per chunk -> 3, 3, 1; ceil(7 / 4) = 2 -> 2, 2, 2, 1; 6 chunks of 7 -> 7 of
  // 1? no: ceil(7 / 6) = 2 -> 4 chunks (torch returns fewer than asked)
  REQUIRE(ops::chunk(x, 3, 1).size() == 3);
  REQUIRE(ops::chunk(x, 4, 1).size() == 4);
  REQUIRE(ops::chunk(x, 6, 1).size() == 4);
  REQUIRE(ops::chunk(x, 6, 1)[3].shape() == Shape{2, 1});
  REQUIRE(ops::chunk(x, 2, 0)[1].shape() == Shape{1, 7});
}

TEST_CASE("ops repeat and repeat_interleave: values match torch", "[ops][shape]") {
  auto cs = load_cases();
  auto c = cs["repeat"];
  Tensor out = ops::repeat(from_json(c["x"]), Shape(c["repeats"].get<std::vector<int64_t>>()));
  REQUIRE(allclose(out, from_json(c["out"])));
  for (int d = 0; d < 2; ++d) {
    auto r = cs[fmt::format("repeat_interleave_d{}", d)];
    REQUIRE(allclose(ops::repeat_interleave(from_json(r["x"]), r["repeats"].get<int64_t>(), d),
                     from_json(r["out"])));
  }
  // by hand: [1, 2] -> repeat(2) = [1, 2, 1, 2]; repeat_interleave(2) = [1, 1, 2, 2]; zero repeats -> empty
  Tensor v = f64({1, 2}, {2});
  REQUIRE(allclose(ops::repeat(v, {2}), f64({1, 2, 1, 2}, {4})));
  REQUIRE(allclose(ops::repeat_interleave(v, 2, 0), f64({1, 1, 2, 2}, {4})));
  REQUIRE(ops::repeat(v, {3, 0}).shape() == Shape{3, 0});
  REQUIRE(ops::repeat_interleave(v, 0, 0).shape() == Shape{0});
  REQUIRE(allclose(ops::repeat(ops::scalar_tensor(3, DType::Float64), {2, 1}), f64({3, 3}, {2, 1})));
  Tensor same = ops::repeat(v, {1});  // a copy, not a view
  REQUIRE(same.storage() != v.storage());
  REQUIRE(allclose(ops::repeat(v.reshape({2, 1}).t(), {2, 1}), f64({1, 2, 1, 2}, {2, 2})));
}

// ---- ops level: errors ----

TEST_CASE("ops join: bad input throws naming the op", "[ops][shape]") {
  Tensor a = ops::zeros({2, 3}), b = ops::zeros({3, 3}), s = ops::zeros({});
  REQUIRE_THROWS_SACCADE(ops::cat({}, 0), "cat");
  REQUIRE_THROWS_SACCADE(ops::cat({a, b}, 1), "cat: tensor 1 has shape [3, 3]");
  REQUIRE_THROWS_SACCADE(ops::cat({a, ops::zeros({2, 3, 1})}, 0), "cat");
  REQUIRE_THROWS_SACCADE(ops::cat({a, b}, 2), "cat: dim 2 out of range");
  REQUIRE_THROWS_SACCADE(ops::cat({a, Tensor()}, 0), "cat: tensor 1 is undefined");
  REQUIRE_THROWS_SACCADE(ops::cat({s, s}, 0), "cat: zero-dimensional");
  REQUIRE_THROWS_SACCADE(ops::stack({}, 0), "stack");
  REQUIRE_THROWS_SACCADE(ops::stack({a, b}, 0), "stack: expects tensors of equal shape");
  REQUIRE_THROWS_SACCADE(ops::stack({a, a}, 3), "stack: dim 3 out of range");
  REQUIRE_THROWS_SACCADE(ops::stack({a, Tensor()}, 0), "stack");
  REQUIRE_THROWS_SACCADE(ops::split(a, 0, 1), "split: split_size must be positive");
  REQUIRE_THROWS_SACCADE(ops::split(a, 2, 2), "split: dim 2 out of range");
  REQUIRE_THROWS_SACCADE(ops::split(a, std::vector<int64_t>{1, 1}, 1), "split: sizes 1, 1 do not sum");
  REQUIRE_THROWS_SACCADE(ops::split(a, std::vector<int64_t>{4, -1}, 1), "split: negative");
  REQUIRE_THROWS_SACCADE(ops::split(s, 1, 0), "split: cannot split a 0-d");
  REQUIRE_THROWS_SACCADE(ops::split(Tensor(), 1, 0), "split");
  REQUIRE_THROWS_SACCADE(ops::chunk(a, 0, 0), "chunk: number of chunks must be positive");
  REQUIRE_THROWS_SACCADE(ops::chunk(a, 2, -3), "chunk: dim -3 out of range");
  REQUIRE_THROWS_SACCADE(ops::repeat(a, {2}), "repeat: number of repeats");
  REQUIRE_THROWS_SACCADE(ops::repeat(a, {2, -1}), "repeat: negative");
  REQUIRE_THROWS_SACCADE(ops::repeat(Tensor(), {2}), "repeat");
  REQUIRE_THROWS_SACCADE(ops::repeat_interleave(a, -1, 0), "repeat_interleave: repeats must be non-negative");
  REQUIRE_THROWS_SACCADE(ops::repeat_interleave(a, 2, 2), "repeat_interleave: dim 2 out of range");
  REQUIRE_THROWS_SACCADE(ops::repeat_interleave(s, 2, 0), "repeat_interleave");
}

// ---- autograd: views ----

TEST_CASE("views: forward shares storage and matches the tensor views", "[autograd][shape]") {
  Variable x(rand64({2, 3, 4}), true);
  REQUIRE(reshape(x, {6, 4}).data().storage() == x.data().storage());
  REQUIRE(permute(x, {2, 0, 1}).shape() == Shape{4, 2, 3});
  REQUIRE(allclose(permute(x, {2, 0, 1}).data(), x.data().permute({2, 0, 1})));
  REQUIRE(allclose(select(x, 1, 2).data(), x.data().select(1, 2)));
  REQUIRE(allclose(slice(x, 2, 1, 4, 2).data(), x.data().slice(2, 1, 4, 2)));
  REQUIRE(expand(unsqueeze(x, 0), {5, 2, 3, 4}).shape() == Shape{5, 2, 3, 4});
  REQUIRE(squeeze(unsqueeze(x, 1)).shape() == Shape{2, 3, 4});
  REQUIRE(flatten(x, 1).shape() == Shape{2, 12});
  REQUIRE(contiguous(transpose(x, 0, 2)).data().is_contiguous());
}

TEST_CASE("views: gradcheck of reshape view permute transpose and t", "[autograd][shape]") {
  Tensor nc = rand64({4, 3}, 2).t();  // non-contiguous (3, 4)
  for (const Tensor& x : {rand64({3, 4}, 1), nc}) {
    REQUIRE(check1([](auto& v) { return reshape(v[0], {2, -1, 2}); }, x));
    REQUIRE(check1([](auto& v) { return reshape(v[0], {12}); }, x));
    REQUIRE(check1([](auto& v) { return t(v[0]); }, x));
    REQUIRE(check1([](auto& v) { return transpose(v[0], 0, -1); }, x));
  }
  REQUIRE(check1([](auto& v) { return view(v[0], {4, 3}); }, rand64({2, 6})));
  REQUIRE(check1(
      [](auto& v) {
        return view(t(v[0]), {2, 1, 3});
      },
      rand64({3, 2})));  // view of a 1-row-stride
  Tensor x3 = rand64({2, 3, 4}, 3);
  REQUIRE(check1([](auto& v) { return permute(v[0], {2, 0, 1}); }, x3));
  REQUIRE(check1([](auto& v) { return permute(v[0], {1, -1, 0}); }, x3.permute({1, 0, 2})));
  REQUIRE(check1([](auto& v) { return transpose(v[0], 0, 2); }, x3));
  REQUIRE(check1([](auto& v) { return t(v[0]); }, rand64({5})));  // t of 1-d is the identity
}

TEST_CASE("views: gradcheck of squeeze unsqueeze flatten and contiguous", "[autograd][shape]") {
  Tensor x = rand64({2, 1, 3, 1}, 4);
  REQUIRE(check1([](auto& v) { return squeeze(v[0]); }, x));
  REQUIRE(check1([](auto& v) { return squeeze(v[0], 1); }, x));
  REQUIRE(check1([](auto& v) { return squeeze(v[0], 0); }, x));  // size 2: unchanged
  REQUIRE(check1([](auto& v) { return unsqueeze(v[0], -1); }, x));
  REQUIRE(check1([](auto& v) { return unsqueeze(v[0], 0); }, rand64({3, 2}).t()));
  REQUIRE(check1([](auto& v) { return flatten(v[0]); }, rand64({2, 3, 2}).permute({2, 0, 1})));
  REQUIRE(check1([](auto& v) { return flatten(v[0], 1, 2); }, rand64({2, 3, 2, 2})));
  REQUIRE(check1([](auto& v) { return contiguous(v[0]); }, rand64({3, 4}).t()));
}

TEST_CASE("views: gradcheck of expand sums over broadcast dims", "[autograd][shape]") {
  REQUIRE(check1([](auto& v) { return expand(v[0], {2, 3, 4}); }, rand64({3, 1}, 5)));
  REQUIRE(check1([](auto& v) { return expand(v[0], {4, -1}); }, rand64({1, 3}, 6)));
  REQUIRE(check1([](auto& v) { return expand(v[0], {2, 3}); }, rand64({}, 7)));
  REQUIRE(check1(
      [](auto& v) {
        return expand(v[0], {2, 3, 2});
      },
      rand64({2, 3}).t().unsqueeze(0).squeeze(0).t().unsqueeze(-1)));
  // the gradient of a broadcast input is the sum over the broadcast dims: here 4 copies
  Variable x(f64({1, 2, 3}, {3, 1}), true);
  sum(expand(x, {3, 4})).backward();
  REQUIRE(allclose(x.grad(), ops::full({3, 1}, 4.0, DType::Float64)));
}

TEST_CASE("views: gradcheck of narrow slice and select place the gradient", "[autograd][shape]") {
  Tensor nc = rand64({5, 4}, 8).t();  // (4, 5) non-contiguous
  for (const Tensor& x : {rand64({4, 5}, 9), nc}) {
    REQUIRE(check1([](auto& v) { return narrow(v[0], 1, 1, 3); }, x));
    REQUIRE(check1([](auto& v) { return narrow(v[0], 0, -2, 2); }, x));
    REQUIRE(check1([](auto& v) { return slice(v[0], 1, 0, 5, 2); }, x));
    REQUIRE(check1([](auto& v) { return slice(v[0], -1, -4, -1, 1); }, x));
    REQUIRE(check1([](auto& v) { return select(v[0], 0, 3); }, x));
    REQUIRE(check1([](auto& v) { return select(v[0], 1, -1); }, x));
  }
  // gradient outside the view is exactly zero
  Variable x(rand64({2, 4}), true);
  sum(slice(x, 1, 1, 4, 2)).backward();
  REQUIRE(allclose(x.grad(), f64({0, 1, 0, 1, 0, 1, 0, 1}, {2, 4})));
}

TEST_CASE("views: bad input throws naming the op", "[autograd][shape]") {
  Variable x(rand64({2, 3}), true);
  REQUIRE_THROWS_SACCADE(reshape(x, {4, 2}), "reshape");
  REQUIRE_THROWS_SACCADE(view(t(x), {6}), "view: cannot view");
  REQUIRE_THROWS_SACCADE(permute(x, {0, 0}), "permute: repeated dim");
  REQUIRE_THROWS_SACCADE(permute(x, {0}), "permute");
  REQUIRE_THROWS_SACCADE(transpose(x, 0, 2), "transpose: dim 2 out of range");
  REQUIRE_THROWS_SACCADE(t(Variable(rand64({2, 2, 2}), true)), "t: expects a tensor of at most 2 dims");
  REQUIRE_THROWS_SACCADE(squeeze(x, 3), "squeeze: dim 3 out of range");
  REQUIRE_THROWS_SACCADE(unsqueeze(x, 4), "unsqueeze: dim 4 out of range");
  REQUIRE_THROWS_SACCADE(expand(x, {4, 3}), "expand: cannot expand");
  REQUIRE_THROWS_SACCADE(expand(x, {3}), "expand");
  REQUIRE_THROWS_SACCADE(flatten(x, 1, 0), "flatten: start_dim");
  REQUIRE_THROWS_SACCADE(narrow(x, 1, 2, 2), "narrow: start 2 length 2 out of range");
  REQUIRE_THROWS_SACCADE(slice(x, 0, 0, 2, 0), "slice: step must be positive");
  REQUIRE_THROWS_SACCADE(select(x, 0, 2), "select: index 2 out of range");
  REQUIRE_THROWS_SACCADE(select(x, 2, 0), "select: dim 2 out of range");
}

// ---- autograd: joins ----

TEST_CASE("joins: gradcheck of cat and stack", "[autograd][shape]") {
  Tensor a = rand64({2, 3}, 10), b = rand64({3, 2}, 11).t(), c = rand64({2, 1}, 12);
  REQUIRE(gradcheck(
      [](auto& v) {
        return cat({v[0], v[1], v[2]}, 1);
      },
      {Variable(a, true), Variable(b, true), Variable(c, true)}));
  REQUIRE(gradcheck([](auto& v) { return cat({v[0], v[1]}, 0); }, {Variable(a, true), Variable(b, true)}));
  // an input that needs no gradient, and one used twice
  REQUIRE(gradcheck([](auto& v) { return cat({v[0], v[1], v[0]}, -1); }, {Variable(a, true), Variable(b)}));
  REQUIRE(gradcheck([](auto& v) { return stack({v[0], v[1]}, 1); }, {Variable(a, true), Variable(b, true)}));
  REQUIRE(gradcheck([](auto& v) { return stack({v[0], v[1]}, -1); }, {Variable(a, true), Variable(b, true)}));
}

TEST_CASE("joins: cat gradient takes each input's dtype", "[autograd][shape]") {
  Variable a(ops::ones({2}, DType::Float32), true), b(ops::ones({3}, DType::Float64), true);
  Variable y = cat({a, b}, 0);
  REQUIRE(y.dtype() == DType::Float64);
  sum(y * ops::tensor({1, 2, 3, 4, 5}, DType::Float64)).backward();
  REQUIRE(a.grad().dtype() == DType::Float32);
  REQUIRE(allclose(a.grad(), ops::tensor({1, 2})));
  REQUIRE(allclose(b.grad(), ops::tensor({3, 4, 5}, DType::Float64)));
}

TEST_CASE("joins: gradcheck of split and chunk pieces", "[autograd][shape]") {
  Tensor x = rand64({3, 5}, 13), nc = rand64({5, 3}, 14).t();
  for (const Tensor& in : {x, nc}) {
    REQUIRE(check1([](auto& v) { return split(v[0], 2, 1)[1]; }, in));
    REQUIRE(check1([](auto& v) { return split(v[0], 2, 1)[2]; }, in));
    REQUIRE(check1(
        [](auto& v) {
          auto p = split(v[0], std::vector<int64_t>{1, 2}, 0);
          return cat({p[1] * 3.0, p[0]}, 0);
        },
        in));
    REQUIRE(check1(
        [](auto& v) {
          auto p = chunk(v[0], 2, -1);
          return narrow(p[0], 1, 1, 2) * contiguous(p[1]);
        },
        in));
  }
  // pieces of a chunk are used together: gradients accumulate into one input
  Variable y(rand64({4}), true);
  auto p = chunk(y, 2, 0);
  sum(p[0] * 2.0 + p[1] * 5.0).backward();
  REQUIRE(allclose(y.grad(), f64({2, 2, 5, 5}, {4})));
}

TEST_CASE("joins: gradcheck of repeat repeat_interleave tril and triu", "[autograd][shape]") {
  Tensor x = rand64({2, 3}, 15), nc = rand64({3, 2}, 16).t();
  for (const Tensor& in : {x, nc}) {
    REQUIRE(check1([](auto& v) { return repeat(v[0], {2, 2}); }, in));
    REQUIRE(check1([](auto& v) { return repeat(v[0], {3, 1, 2}); }, in));
    REQUIRE(check1([](auto& v) { return repeat(v[0], {1, 1}); }, in));
    REQUIRE(check1([](auto& v) { return repeat(v[0], {2, 0}); }, in));
    REQUIRE(check1([](auto& v) { return repeat_interleave(v[0], 3, 0); }, in));
    REQUIRE(check1([](auto& v) { return repeat_interleave(v[0], 2, -1); }, in));
    REQUIRE(check1([](auto& v) { return tril(v[0]); }, in));
    REQUIRE(check1([](auto& v) { return triu(v[0], 1); }, in));
    REQUIRE(check1([](auto& v) { return tril(v[0], -1); }, in));
  }
  REQUIRE(check1([](auto& v) { return triu(v[0], -1); }, rand64({2, 3, 3}, 17)));
  REQUIRE(check1([](auto& v) { return repeat(v[0], {3, 2}); }, rand64({}, 19)));
  // repeat of an 8-d tensor takes the loop path of the backward (no spare dim to reshape into)
  REQUIRE(check1(
      [](auto& v) {
        return repeat(v[0], {1, 1, 1, 1, 1, 1, 2, 3});
      },
      rand64({1, 1, 1, 1, 1, 1, 2, 2}, 18)));
}

TEST_CASE("joins: bad input throws naming the op", "[autograd][shape]") {
  Variable a(rand64({2, 3}), true), b(rand64({3, 3}), true);
  REQUIRE_THROWS_SACCADE(cat({a, b}, 1), "cat");
  REQUIRE_THROWS_SACCADE(cat({}, 0), "cat");
  REQUIRE_THROWS_SACCADE(stack({a, b}, 0), "stack");
  REQUIRE_THROWS_SACCADE(split(a, 0, 0), "split");
  REQUIRE_THROWS_SACCADE(split(a, std::vector<int64_t>{1, 2}, 0), "split: sizes");
  REQUIRE_THROWS_SACCADE(chunk(a, -1, 0), "chunk");
  REQUIRE_THROWS_SACCADE(repeat(a, {2}), "repeat");
  REQUIRE_THROWS_SACCADE(repeat_interleave(a, 2, 5), "repeat_interleave");
  REQUIRE_THROWS_SACCADE(tril(Variable(rand64({3}), true)), "tril: expected a tensor of at least 2 dims");
  REQUIRE_THROWS_SACCADE(triu(Variable(rand64({3}), true)), "triu");
}
