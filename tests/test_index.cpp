// Index ops: ops-level forward values against PyTorch fixtures (tests/fixtures/make_index.py) and by hand,
// bounds and dtype errors, and float64 gradchecks of the differentiable index ops.
#include <fstream>

#include <nlohmann/json.hpp>

#include "helpers.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;

namespace {

Tensor f64(std::initializer_list<double> v, const Shape& s) { return ops::tensor(v, s, DType::Float64); }
Tensor i64(std::initializer_list<double> v, const Shape& s) { return ops::tensor(v, s, DType::Int64); }
Tensor i64(std::initializer_list<double> v) { return ops::tensor(v, DType::Int64); }

// A tensor stored by tests/fixtures/make_index.py: {"shape", "dtype", "data"}.
Tensor from_json(const nlohmann::json& j) {
  Shape shape(j["shape"].get<std::vector<int64_t>>());
  if (j["dtype"] == "int64") return ops::from_vector(j["data"].get<std::vector<int64_t>>(), shape);
  return ops::from_vector(j["data"].get<std::vector<double>>(), shape);
}

const nlohmann::json& cases() {
  static const nlohmann::json j = [] {
    std::ifstream f(SACCADE_TEST_DATA_DIR "/index_cases.json");
    if (!f.good()) throw std::runtime_error("missing tests/data/index_cases.json");
    return nlohmann::json::parse(f);
  }();
  return j;
}

}  // namespace

// ---- ops level: values ----

TEST_CASE("ops index_select gather scatter_add index_add: values match torch", "[ops][index]") {
  for (int d = 0; d < 3; ++d) {
    INFO("dim " << d);
    auto c = cases()[fmt::format("index_select_d{}", d)];
    Tensor x = from_json(c["x"]);
    REQUIRE(allclose(ops::index_select(x, d, from_json(c["index"])), from_json(c["out"])));
    // a non-contiguous input gives the same values
    REQUIRE(allclose(
        ops::index_select(x.permute({2, 1, 0}).contiguous().permute({2, 1, 0}), d, from_json(c["index"])),
        from_json(c["out"])));
    c = cases()[fmt::format("gather_d{}", d)];
    REQUIRE(allclose(ops::gather(from_json(c["x"]), d, from_json(c["index"])), from_json(c["out"])));
    c = cases()[fmt::format("scatter_add_d{}", d)];
    Tensor s = from_json(c["x"]);
    REQUIRE(
        allclose(ops::scatter_add(s, d, from_json(c["index"]), from_json(c["src"])), from_json(c["out"])));
    REQUIRE(allclose(s, from_json(c["x"])));  // out-of-place: the input is unchanged
    c = cases()[fmt::format("index_add_d{}", d)];
    REQUIRE(allclose(ops::index_add(from_json(c["x"]), d, from_json(c["index"]), from_json(c["src"])),
                     from_json(c["out"])));
  }
  auto c = cases()["embedding"];
  Tensor e = ops::embedding(from_json(c["x"]), from_json(c["index"]));
  REQUIRE(e.shape() == Shape{2, 3, 3});
  REQUIRE(allclose(e, from_json(c["out"])));
}

TEST_CASE("ops index ops: values by hand", "[ops][index]") {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  REQUIRE(allclose(ops::index_select(x, 1, i64({2, 0})), f64({3, 1, 6, 4}, {2, 2})));
  REQUIRE(allclose(ops::index_select(x, 0, i64({1, 1, 0})), f64({4, 5, 6, 4, 5, 6, 1, 2, 3}, {3, 3})));
  REQUIRE(ops::index_select(x, 0, i64({}, {0})).shape() == Shape{0, 3});
  REQUIRE(ops::index_select(x, 1, ops::scalar_tensor(1, DType::Int64)).shape() == Shape{2, 1});
  // int64 and bool data are indexed too
  REQUIRE(ops::index_select(ops::arange(5), 0, i64({4, 0})).to_vector<int64_t>() ==
          std::vector<int64_t>{4, 0});
  // gather: out[i][j] = x[i][index[i][j]]
  REQUIRE(allclose(ops::gather(x, 1, i64({0, 0, 2, 1}, {2, 2})), f64({1, 1, 6, 5}, {2, 2})));
  // scatter_add: out[index[i][j]][j] += src[i][j]
  Tensor z = ops::zeros({2, 3}, DType::Float64);
  REQUIRE(
      allclose(ops::scatter_add(z, 0, i64({1, 0, 1, 1, 1, 0}, {2, 3}), x), f64({0, 2, 6, 5, 5, 3}, {2, 3})));
  // index_add: out[index[j]] += src[j], repeated rows accumulate
  REQUIRE(allclose(ops::index_add(z, 0, i64({1, 1}), x), f64({0, 0, 0, 5, 7, 9}, {2, 3})));
  // 0-d input and index, as torch
  Tensor s0 = ops::scalar_tensor(5, DType::Float64), i0 = ops::scalar_tensor(0, DType::Int64);
  REQUIRE(ops::gather(s0, 0, i0).item() == 5);
  REQUIRE(ops::scatter_add(s0, 0, i0, ops::scalar_tensor(2, DType::Float64)).item() == 7);
  REQUIRE_THROWS_SACCADE(ops::gather(s0, 0, ops::scalar_tensor(1, DType::Int64)),
                         "gather: index 1 is out of bounds");
  // embedding of 0-d indices gives one row
  REQUIRE(allclose(ops::embedding(x, ops::scalar_tensor(1, DType::Int64)), f64({4, 5, 6}, {3})));
}

TEST_CASE("ops index kernels: large inputs take the threaded path and match a serial loop", "[ops][index]") {
  // 64 x 3000 target rows, 512 updates with many collisions (index_add must not race)
  const int64_t n = 64, inner = 3000, m = 512;
  std::vector<int64_t> idx(m);
  for (int64_t j = 0; j < m; ++j) idx[j] = (j * 37) % n;
  Tensor index = ops::from_vector(idx, {m});
  Tensor src = rand64({m, inner}, 3);
  auto s = src.to_vector<double>();
  Tensor out = ops::index_add(ops::zeros({n, inner}, DType::Float64), 0, index, src);
  std::vector<double> want(n * inner, 0.0);
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < inner; ++i) want[idx[j] * inner + i] += s[j * inner + i];
  REQUIRE(allclose(out, ops::from_vector(want, {n, inner}), 1e-12, 1e-12));
  // scatter_add along dim 1 of (2, m, inner) with an index that is constant along the last dim
  Tensor full_index = index.reshape({1, m, 1}).expand({2, m, inner});
  Tensor sc = ops::scatter_add(ops::zeros({2, n, inner}, DType::Float64), 1, full_index,
                               src.unsqueeze(0).expand({2, m, inner}));
  REQUIRE(allclose(sc.select(0, 1), out, 1e-12, 1e-12));
  // index_select and gather read back the source rows
  Tensor rows = ops::index_select(src, 0, ops::arange(m - 1, -1, -1));
  REQUIRE(allclose(rows.select(0, 0), src.select(0, m - 1)));
  Tensor g = ops::gather(src.unsqueeze(0).expand({2, m, inner}), 1, ops::zeros({2, 3, inner}, DType::Int64));
  REQUIRE(allclose(g.select(0, 1).select(0, 2), src.select(0, 0)));
}

// ---- ops level: errors ----

TEST_CASE("ops index ops: bad input throws naming the op", "[ops][index]") {
  Tensor x = ops::zeros({2, 3}), ix = i64({0, 2});
  // index_select
  REQUIRE_THROWS_SACCADE(ops::index_select(x, 1, i64({0, 3})),
                         "index_select: index 3 is out of bounds for dim 1 of size 3");
  REQUIRE_THROWS_SACCADE(ops::index_select(x, 0, i64({-1})), "index_select: index -1 is out of bounds");
  REQUIRE_THROWS_SACCADE(ops::index_select(x, 0, ops::tensor({0, 1})),
                         "index_select: expected an int64 index, got float32");
  REQUIRE_THROWS_SACCADE(ops::index_select(x, 0, i64({0, 1}, {1, 2})), "index_select: index must be 1-d");
  REQUIRE_THROWS_SACCADE(ops::index_select(x, 2, ix), "index_select: dim 2 out of range");
  REQUIRE_THROWS_SACCADE(ops::index_select(Tensor(), 0, ix), "index_select: got an undefined tensor");
  REQUIRE_THROWS_SACCADE(ops::index_select(ops::zeros({}), 0, i64({0})), "index_select");
  // gather
  REQUIRE_THROWS_SACCADE(ops::gather(x, 1, i64({3}, {1, 1})),
                         "gather: index 3 is out of bounds for dim 1 of size 3");
  REQUIRE_THROWS_SACCADE(ops::gather(x, 1, ops::zeros({1, 1})), "gather: expected an int64 index");
  REQUIRE_THROWS_SACCADE(ops::gather(x, 1, i64({0, 1})), "gather: index of shape [2] must have as many dims");
  REQUIRE_THROWS_SACCADE(ops::gather(x, 1, i64({0, 0, 0}, {3, 1})),
                         "gather: index of shape [3, 1] is larger");
  REQUIRE_THROWS_SACCADE(ops::gather(x, -3, i64({0}, {1, 1})), "gather: dim -3 out of range");
  REQUIRE_THROWS_SACCADE(ops::gather(x, 0, Tensor()), "gather: got an undefined tensor");
  // scatter_add
  Tensor src = ops::ones({2, 3});
  REQUIRE_THROWS_SACCADE(ops::scatter_add(x, 0, i64({2}, {1, 1}), src),
                         "scatter_add: index 2 is out of bounds");
  REQUIRE_THROWS_SACCADE(ops::scatter_add(x, 0, ops::zeros({1, 1}), src),
                         "scatter_add: expected an int64 index");
  REQUIRE_THROWS_SACCADE(ops::scatter_add(x, 0, i64({0}, {1, 1}), ops::ones({2, 3}, DType::Float64)),
                         "scatter_add: src has dtype float64");
  REQUIRE_THROWS_SACCADE(ops::scatter_add(x, 0, i64({0, 0, 0}, {1, 3}), ops::ones({1, 2})),
                         "scatter_add: index of shape [1, 3] is larger than src's shape [1, 2]");
  REQUIRE_THROWS_SACCADE(ops::scatter_add(x, 0, i64({0}, {1, 1}), ops::ones({2})),
                         "scatter_add: src of shape [2]");
  REQUIRE_THROWS_SACCADE(ops::scatter_add(x, 2, i64({0}, {1, 1}), src), "scatter_add: dim 2 out of range");
  REQUIRE_THROWS_SACCADE(
      ops::scatter_add(ops::zeros({2}, DType::Bool), 0, i64({0}), ops::zeros({2}, DType::Bool)),
      "scatter_add: not defined for bool");
  // index_add
  REQUIRE_THROWS_SACCADE(ops::index_add(x, 0, i64({0, 2}), src),
                         "index_add: index 2 is out of bounds for dim 0 of size 2");
  REQUIRE_THROWS_SACCADE(ops::index_add(x, 0, ops::tensor({0, 1}), src),
                         "index_add: expected an int64 index");
  REQUIRE_THROWS_SACCADE(ops::index_add(x, 0, i64({0}), src),
                         "index_add: src of shape [2, 3] does not match [1, 3]");
  REQUIRE_THROWS_SACCADE(ops::index_add(x, 0, ix, ops::ones({2, 3}, DType::Float64)),
                         "index_add: src has dtype");
  REQUIRE_THROWS_SACCADE(ops::index_add(x, 0, i64({0, 1}, {2, 1}), src), "index_add: index must be 1-d");
  REQUIRE_THROWS_SACCADE(ops::index_add(x, 5, ix, src), "index_add: dim 5 out of range");
  // embedding
  REQUIRE_THROWS_SACCADE(ops::embedding(x, i64({0, 2})),
                         "embedding: index 2 is out of range for 2 embeddings");
  REQUIRE_THROWS_SACCADE(ops::embedding(x, i64({-1})), "embedding: index -1");
  REQUIRE_THROWS_SACCADE(ops::embedding(x, ops::tensor({0})),
                         "embedding: expected int64 indices, got float32");
  REQUIRE_THROWS_SACCADE(ops::embedding(ops::zeros({2, 3, 1}), i64({0})), "embedding: weight must be 2-d");
  REQUIRE_THROWS_SACCADE(ops::embedding(x, Tensor()), "embedding: got an undefined tensor");
}

// ---- autograd ----

TEST_CASE("index ops: gradcheck of index_select and gather", "[autograd][index]") {
  Tensor x = rand64({3, 4}, 1), nc = rand64({4, 3}, 2).t();
  for (const Tensor& in : {x, nc}) {
    REQUIRE(gradcheck(
        [](auto& v) {
          return index_select(v[0], 0, i64({2, 0, 2, 2}));
        },
        {Variable(in, true)}));
    REQUIRE(gradcheck([](auto& v) { return index_select(v[0], -1, i64({3, 1})); }, {Variable(in, true)}));
    REQUIRE(gradcheck(
        [](auto& v) {
          return gather(v[0], 1, i64({0, 3, 3, 1, 2, 2}, {2, 3}));
        },
        {Variable(in, true)}));
    REQUIRE(gradcheck(
        [](auto& v) {
          return gather(v[0], 0, i64({0, 2, 2, 1, 1, 1, 0, 0}, {2, 4}));
        },
        {Variable(in, true)}));
  }
  Tensor x3 = rand64({2, 3, 2}, 3);
  REQUIRE(gradcheck([](auto& v) { return index_select(v[0], 1, i64({1, 1, 0})); }, {Variable(x3, true)}));
  REQUIRE(gradcheck(
      [](auto& v) {
        return gather(v[0], 2, i64({1, 0, 1, 1, 0, 0}, {2, 3, 1}));
      },
      {Variable(x3, true)}));
  // an expanded (broadcast) operand feeding the op
  REQUIRE(gradcheck(
      [](auto& v) {
        return gather(expand(v[0], {3, 4}), 1, i64({3, 3, 0}, {3, 1}));
      },
      {Variable(rand64({1, 4}, 4), true)}));
}

TEST_CASE("index ops: gradcheck of scatter_add and index_add in both inputs", "[autograd][index]") {
  Tensor a = rand64({3, 4}, 5), anc = rand64({4, 3}, 6).t();
  Tensor src = rand64({2, 4}, 7), srcnc = rand64({4, 2}, 8).t();
  Tensor six = i64({2, 0, 2, 2, 1, 2, 0, 0}, {2, 4});
  for (const Tensor& x : {a, anc})
    for (const Tensor& s : {src, srcnc}) {
      REQUIRE(gradcheck([&](auto& v) { return scatter_add(v[0], 0, six, v[1]); },
                        {Variable(x, true), Variable(s, true)}));
      REQUIRE(gradcheck(
          [](auto& v) {
            return index_add(v[0], 0, i64({2, 2}), v[1]);
          },
          {Variable(x, true), Variable(s, true)}));
    }
  // src larger than index: the entries index does not reach get zero gradient
  REQUIRE(gradcheck(
      [](auto& v) {
        return scatter_add(v[0], 1, i64({3, 0, 3}, {1, 3}), v[1]);
      },
      {Variable(a, true), Variable(rand64({2, 5}, 9), true)}));
  // only one input requires grad
  REQUIRE(gradcheck([&](auto& v) { return scatter_add(v[0], 0, six, v[1]); },
                    {Variable(a), Variable(src, true)}));
  REQUIRE(gradcheck([&](auto& v) { return scatter_add(v[0], 0, six, v[1]); },
                    {Variable(a, true), Variable(src)}));
  REQUIRE(gradcheck(
      [](auto& v) {
        return index_add(v[0], 1, i64({0, 0, 3}), v[1]);
      },
      {Variable(a, true), Variable(rand64({3, 3}, 10))}));
}

TEST_CASE("index ops: embedding gradient and padding_idx", "[autograd][index]") {
  Tensor ids = i64({0, 3, 3, 1, 0, 3}, {2, 3});
  REQUIRE(gradcheck([&](auto& v) { return embedding(v[0], ids); }, {Variable(rand64({4, 3}, 11), true)}));
  REQUIRE(gradcheck([&](auto& v) { return embedding(v[0], ids); }, {Variable(rand64({3, 4}, 12).t(), true)}));
  // an absent padding_idx changes nothing (a present one breaks gradcheck by design: it drops a gradient)
  REQUIRE(gradcheck([&](auto& v) { return embedding(v[0], ids, 2); }, {Variable(rand64({4, 3}, 14), true)}));
  // by hand: row r gets (number of times r appears) * 1, the padding row nothing
  Variable w(rand64({4, 2}, 13), true);
  sum(embedding(w, ids, -1)).backward();  // -1 is row 3
  REQUIRE(allclose(w.grad(), f64({2, 2, 1, 1, 0, 0, 0, 0}, {4, 2})));
  // the forward keeps the padding row's values
  REQUIRE(allclose(embedding(w, ids, 3).data(), ops::embedding(w.data(), ids)));
}

TEST_CASE("index ops: embedding of a 0-d index", "[autograd][index]") {
  Variable w(rand64({3, 2}, 15), true);
  Variable row = embedding(w, ops::scalar_tensor(2, DType::Int64), 0);
  REQUIRE(row.shape() == Shape{2});
  sum(row).backward();
  REQUIRE(allclose(w.grad(), f64({0, 0, 0, 0, 1, 1}, {3, 2})));
}

TEST_CASE("index ops: a saved index modified in place is caught", "[autograd][index]") {
  Variable x(rand64({3, 2}), true);
  Tensor ix = i64({0, 2});
  Variable y = index_select(x, 0, ix);
  ops::fill_(ix, 1);
  REQUIRE_THROWS_SACCADE(sum(y).backward(), "index_select");
}

TEST_CASE("index ops: autograd bad input throws naming the op", "[autograd][index]") {
  Variable x(rand64({2, 3}), true), s(rand64({2, 3}), true);
  REQUIRE_THROWS_SACCADE(index_select(x, 0, i64({2})), "index_select: index 2 is out of bounds");
  REQUIRE_THROWS_SACCADE(index_select(x, 0, ops::tensor({0})), "index_select: expected an int64 index");
  REQUIRE_THROWS_SACCADE(gather(x, 0, i64({0, 5}, {1, 2})), "gather: index 5");
  REQUIRE_THROWS_SACCADE(gather(x, 3, i64({0}, {1, 1})), "gather: dim 3");
  REQUIRE_THROWS_SACCADE(scatter_add(x, 1, i64({3}, {1, 1}), s), "scatter_add: index 3");
  REQUIRE_THROWS_SACCADE(scatter_add(x, 1, i64({0}, {1, 1}), Variable(rand64({2}))),
                         "scatter_add: src of shape");
  REQUIRE_THROWS_SACCADE(index_add(x, 1, i64({0, 1}), s),
                         "index_add: src of shape [2, 3] does not match [2, 2]");
  REQUIRE_THROWS_SACCADE(index_add(x, 0, i64({0, 7}), s), "index_add: index 7");
  REQUIRE_THROWS_SACCADE(embedding(x, i64({2})), "embedding: index 2 is out of range");
  REQUIRE_THROWS_SACCADE(embedding(x, i64({0}), 2), "embedding: padding_idx 2 is out of range");
  REQUIRE_THROWS_SACCADE(embedding(x, i64({0}), -3), "embedding: padding_idx -3");
  REQUIRE_THROWS_SACCADE(embedding(x, ops::tensor({0})), "embedding: expected int64 indices");
}
