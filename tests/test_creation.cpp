// Creation and random ops: values derived by hand, seeded determinism, bad input.
#include <algorithm>
#include <cmath>

#include "helpers.h"

using namespace saccade;
using saccade::testing::allclose;

TEST_CASE("creation: filled ranges identity and triangles", "[ops][creation]") {
  CHECK(ops::zeros({2, 3}).to_vector<float>() == std::vector<float>(6, 0));
  CHECK(ops::ones({2}, DType::Int64).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  CHECK(ops::full({2}, 2.5, DType::Float64).to_vector<double>() == std::vector<double>{2.5, 2.5});
  CHECK(ops::full({3}, -4, DType::Bool).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1});
  Tensor t = ops::full({2, 2}, 7, DType::Int64);
  CHECK(ops::zeros_like(t).dtype() == DType::Int64);
  CHECK(ops::full_like(t, 3).to_vector<int64_t>() == std::vector<int64_t>{3, 3, 3, 3});
  CHECK(ops::ones_like(t).shape() == Shape{2, 2});
  CHECK(ops::scalar_tensor(1.5).dim() == 0);
  // arange excludes the end, like torch.arange; negative steps count down
  CHECK(ops::arange(5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(ops::arange(1, 2, 0.25, DType::Float64).to_vector<double>() ==
        std::vector<double>{1, 1.25, 1.5, 1.75});
  CHECK(ops::arange(3, 0, -1).to_vector<int64_t>() == std::vector<int64_t>{3, 2, 1});
  CHECK(ops::arange(0, 0, 1).numel() == 0);
  // linspace includes both ends
  CHECK(
      allclose(ops::linspace(0, 1, 5, DType::Float64), ops::tensor({0, 0.25, 0.5, 0.75, 1}, DType::Float64)));
  CHECK(ops::linspace(2, 3, 1).to_vector<float>() == std::vector<float>{2});
  CHECK(ops::eye(2, 3).to_vector<float>() == std::vector<float>{1, 0, 0, 0, 1, 0});
  CHECK(ops::eye(3).to_vector<float>() == std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  Tensor m = ops::add(ops::arange(0, 9, 1, DType::Float32).view({3, 3}), 1.0);  // 1..9
  CHECK(ops::tril(m).to_vector<float>() == std::vector<float>{1, 0, 0, 4, 5, 0, 7, 8, 9});
  CHECK(ops::triu(m, 1).to_vector<float>() == std::vector<float>{0, 2, 3, 0, 0, 6, 0, 0, 0});
  CHECK(ops::tril(m, -1).to_vector<float>() == std::vector<float>{0, 0, 0, 4, 0, 0, 7, 8, 0});
  CHECK(ops::triu(m.t()).to_vector<float>() == std::vector<float>{1, 4, 7, 0, 5, 8, 0, 0, 9});
  CHECK(ops::tensor({1, 2, 3, 4}, {2, 2}, DType::Int64).to_vector<int64_t>() ==
        std::vector<int64_t>{1, 2, 3, 4});
}

TEST_CASE("random: seeded draws are reproducible and in range", "[ops][random]") {
  Generator g1(7), g2(7);
  Tensor a = ops::rand({1000}, DType::Float64, Device::cpu(), &g1);
  Tensor b = ops::rand({1000}, DType::Float64, Device::cpu(), &g2);
  CHECK(a.to_vector<double>() == b.to_vector<double>());
  // the stream advances: the next draw differs
  CHECK(ops::rand({4}, DType::Float64, Device::cpu(), &g1).to_vector<double>() !=
        ops::rand({4}, DType::Float64, Device::cpu(), &g1).to_vector<double>());
  auto v = a.to_vector<double>();
  CHECK(*std::min_element(v.begin(), v.end()) >= 0);
  CHECK(*std::max_element(v.begin(), v.end()) < 1);
  CHECK(std::abs(ops::mean(a).item() - 0.5) < 0.05);  // 1000 uniforms: sd of the mean ~0.009
  Tensor u = ops::uniform({1000}, -2, 3, DType::Float32, Device::cpu(), &g1);
  CHECK(ops::amin(u, {0}).item() >= -2);
  CHECK(ops::amax(u, {0}).item() < 3);
  Tensor n = ops::normal({4000}, 1.0, 2.0, DType::Float64, Device::cpu(), &g1);
  CHECK(std::abs(ops::mean(n).item() - 1.0) < 0.15);  // sd of the mean ~0.03
  CHECK(std::abs(std::sqrt(ops::var(n).item()) - 2.0) < 0.15);
  Tensor r = ops::randint(-3, 4, {500}, Device::cpu(), &g1);
  CHECK(r.dtype() == DType::Int64);
  CHECK(ops::amin(r, {0}).item<int64_t>() == -3);  // 500 draws over 7 values reach both ends
  CHECK(ops::amax(r, {0}).item<int64_t>() == 3);
  std::vector<int64_t> p = ops::randperm(50, &g1).to_vector<int64_t>();
  std::sort(p.begin(), p.end());
  std::vector<int64_t> want(50);
  for (int i = 0; i < 50; ++i) want[i] = i;
  CHECK(p == want);
}

TEST_CASE("creation and random: bad input names the op", "[ops][creation][random][errors]") {
  REQUIRE_THROWS_SACCADE(ops::zeros({2, -1}), "zeros: negative size in shape [2, -1]");
  REQUIRE_THROWS_SACCADE(ops::full({-2}, 1.0), "full: negative size");
  REQUIRE_THROWS_SACCADE(ops::arange(0, 5, 0), "arange: step must be nonzero");
  REQUIRE_THROWS_SACCADE(ops::arange(0, 5, -1), "arange: start 0 end 5 and step -1 are inconsistent");
  REQUIRE_THROWS_SACCADE(ops::arange(0, INFINITY, 1), "arange: start 0, end inf and step 1 must be finite");
  REQUIRE_THROWS_SACCADE(ops::arange(0, 5, 1, DType::Bool), "arange: bool");
  REQUIRE_THROWS_SACCADE(ops::linspace(0, 1, -1), "linspace: steps must be non-negative");
  REQUIRE_THROWS_SACCADE(ops::linspace(0, 1, 3, DType::Bool), "linspace: bool");
  REQUIRE_THROWS_SACCADE(ops::linspace(0, NAN, 3), "linspace: start 0 and end nan must be finite");
  REQUIRE_THROWS_SACCADE(ops::eye(-1), "eye: n must be non-negative");
  REQUIRE_THROWS_SACCADE(ops::tril(ops::zeros({3})),
                         "tril: expected a tensor of at least 2 dims, got shape [3]");
  REQUIRE_THROWS_SACCADE(ops::triu(Tensor()), "triu");
  REQUIRE_THROWS_SACCADE(ops::from_vector(std::vector<float>{1, 2}, {3}),
                         "from_vector: 2 values do not fill shape [3]");
  REQUIRE_THROWS_SACCADE(ops::tensor({1, 2}, {3}), "tensor: 2 values do not fill shape [3]");
  REQUIRE_THROWS_SACCADE(ops::rand({2}, DType::Int64), "rand: expected a float dtype, got int64");
  REQUIRE_THROWS_SACCADE(ops::randn({2}, DType::Bool), "randn: expected a float dtype, got bool");
  REQUIRE_THROWS_SACCADE(ops::rand({-2}), "rand: negative size");
  REQUIRE_THROWS_SACCADE(ops::uniform({2}, 1, 0), "uniform: low 1 is greater than high 0");
  REQUIRE_THROWS_SACCADE(ops::normal({2}, 0, -1), "normal: std must be non-negative, got -1");
  REQUIRE_THROWS_SACCADE(ops::randint(3, 3, {2}), "randint: low 3 must be less than high 3");
  REQUIRE_THROWS_SACCADE(ops::randint(0, 3, {-1}), "randint: negative size");
  REQUIRE_THROWS_SACCADE(ops::randperm(-1), "randperm: n must be non-negative");
}
