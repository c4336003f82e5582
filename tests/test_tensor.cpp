// Tensor views, creation and copies.
#include "helpers.h"

using namespace saccade;
using saccade::testing::allclose;

TEST_CASE("tensor: views share storage and rewrite strides", "[ops][tensor]") {
  Tensor a = ops::arange(0, 24, 1, DType::Float32).view({2, 3, 4});
  REQUIRE(a.shape() == Shape{2, 3, 4});
  REQUIRE(a.strides() == Shape{12, 4, 1});
  Tensor p = a.permute({2, 0, 1});
  REQUIRE(p.shape() == Shape{4, 2, 3});
  REQUIRE(p.strides() == Shape{1, 12, 4});
  REQUIRE_FALSE(p.is_contiguous());
  REQUIRE(p.storage() == a.storage());
  // p[1][0][2] = a[0][2][1] = 9
  REQUIRE(p.select(0, 1).select(0, 0).select(0, 2).item<float>() == 9.0f);
  Tensor c = p.contiguous();
  REQUIRE(c.is_contiguous());
  REQUIRE(c.to_vector<float>()[0 * 6 + 1 * 3 + 0] == 12.0f);  // p[0][1][0] = a[1][0][0]
}

TEST_CASE("tensor: reshape of a non-viewable layout copies", "[ops][tensor]") {
  Tensor a = ops::arange(0, 6, 1, DType::Float32).view({2, 3});
  Tensor t = a.t();
  REQUIRE_THROWS_SACCADE(t.view({6}), "view");
  Tensor r = t.reshape({6});
  REQUIRE(r.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("tensor: expand, slice, narrow, squeeze", "[ops][tensor]") {
  Tensor a = ops::tensor({1, 2, 3});
  Tensor e = a.unsqueeze(0).expand({4, 3});
  REQUIRE(e.strides() == Shape{0, 1});
  REQUIRE(e.contiguous().to_vector<float>() == std::vector<float>{1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3});
  Tensor s = ops::arange(0, 10, 1, DType::Int64).slice(0, 1, 8, 3);
  REQUIRE(s.to_vector<int64_t>() == std::vector<int64_t>{1, 4, 7});
  REQUIRE(ops::arange(0, 10, 1).narrow(0, 2, 3).to_vector<int64_t>() == std::vector<int64_t>{2, 3, 4});
  REQUIRE(ops::zeros({1, 3, 1}).squeeze().shape() == Shape{3});
  REQUIRE_THROWS_SACCADE(a.expand({3, 2}), "expand");
  REQUIRE_THROWS_SACCADE(a.narrow(0, 2, 5), "narrow");
  REQUIRE_THROWS_SACCADE(a.select(0, 3), "select");
  REQUIRE_THROWS_SACCADE(a.permute({0, 0}), "permute");
}

TEST_CASE("tensor: bad input throws saccade::Error naming the op", "[ops][tensor]") {
  Tensor a = ops::zeros({2, 3});
  REQUIRE_THROWS_SACCADE(a.view({4, 2}), "view");
  REQUIRE_THROWS_SACCADE(a.view({-1, -1}), "view");
  REQUIRE_THROWS_SACCADE(a.transpose(0, 2), "transpose");
  REQUIRE_THROWS_SACCADE(a.to(Device::cuda()), "cuda");
  REQUIRE_THROWS_SACCADE(a.item<float>(), "item");
  REQUIRE_THROWS_SACCADE(a.data<double>(), "float32");
  REQUIRE_THROWS_SACCADE(Tensor::empty({-1}), "empty");
}

TEST_CASE("creation: eye, tril, triu, linspace, from_vector", "[ops][creation]") {
  REQUIRE(ops::eye(2, 3).to_vector<float>() == std::vector<float>{1, 0, 0, 0, 1, 0});
  Tensor o = ops::ones({3, 3});
  REQUIRE(ops::tril(o).to_vector<float>() == std::vector<float>{1, 0, 0, 1, 1, 0, 1, 1, 1});
  REQUIRE(ops::triu(o, 1).to_vector<float>() == std::vector<float>{0, 1, 1, 0, 0, 1, 0, 0, 0});
  REQUIRE(allclose(ops::linspace(0, 1, 5), ops::tensor({0, 0.25, 0.5, 0.75, 1})));
  REQUIRE_THROWS_SACCADE(ops::from_vector(std::vector<float>{1, 2, 3}, {2, 2}), "from_vector");
  REQUIRE_THROWS_SACCADE(ops::arange(0, 5, -1), "arange");
  REQUIRE_THROWS_SACCADE(ops::tril(ops::ones({3})), "tril");
}

TEST_CASE("random: same seed gives same numbers and moments are right", "[ops][random]") {
  Generator g1(42), g2(42);
  Tensor a = ops::randn({1000}, DType::Float64, Device::cpu(), &g1);
  Tensor b = ops::randn({1000}, DType::Float64, Device::cpu(), &g2);
  REQUIRE(allclose(a, b, 0, 0));
  Tensor c = ops::randn({1000}, DType::Float64, Device::cpu(), &g1);
  REQUIRE_FALSE(allclose(a, c));
  Tensor big = ops::randn({100000}, DType::Float64, Device::cpu(), &g1);
  REQUIRE(std::abs(ops::mean(big).item()) < 0.02);
  REQUIRE(std::abs(ops::var(big).item() - 1.0) < 0.02);
  Tensor u = ops::rand({100000}, DType::Float32, Device::cpu(), &g1);
  REQUIRE(ops::min(u).item() >= 0.0);
  REQUIRE(ops::max(u).item() < 1.0);
  REQUIRE(std::abs(ops::mean(u).item() - 0.5) < 0.01);
  Tensor r = ops::randint(3, 7, {1000}, Device::cpu(), &g1);
  REQUIRE(ops::min(r).item() == 3);
  REQUIRE(ops::max(r).item() == 6);
  auto perm = ops::randperm(10, &g1).to_vector<int64_t>();
  std::sort(perm.begin(), perm.end());
  REQUIRE(perm == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("tensor: a 0-d tensor reshapes to one element and back", "[ops][tensor]") {
  Tensor s = ops::scalar_tensor(3.0);
  REQUIRE(s.reshape({1}).shape() == Shape{1});
  REQUIRE(s.view({1, 1}).item<float>() == 3.0f);
  REQUIRE(s.reshape({1}).view({}).dim() == 0);
  REQUIRE(ops::zeros({2, 0, 4}).is_contiguous());
}
