// The CPU kernels' fast paths added for the captioning example (ops/cpu/elementwise.cpp): the vectorised
// float32 tanh (Eigen's rational approximation) and the scalar-first / sub / div loops of the binary kernel;
// and for the GPT example, the vectorised float32 erf (gelu) and e^x on x <= 0 (gelu's derivative, the fused
// attention's softmax). Expected values come from double-precision libm and plain arithmetic computed here.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "helpers.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/elementwise_math.h"

using namespace saccade;

TEST_CASE("cpu fast paths: float tanh within 4e-7 relative of tanh", "[ops][elementwise][tanh]") {
  // A sweep over 14 decades either side of 0, the clamp region and beyond.
  std::vector<float> xs;
  for (double m = 1e-40; m < 50; m *= 1.37)
    xs.push_back(static_cast<float>(m)), xs.push_back(static_cast<float>(-m));
  for (float x : {0.0f, -0.0f, 0.0004f, 7.9f, 7.99881172f, 8.0f, 9.0f, 20.0f, 1e30f})
    xs.push_back(x), xs.push_back(-x);
  const auto n = static_cast<int64_t>(xs.size());
  Tensor y = ops::tanh(ops::from_vector(xs, {n}));
  std::vector<float> got = y.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    double want = std::tanh(static_cast<double>(xs[i]));
    INFO("x = " << xs[i] << " got " << got[i] << " want " << want);
    CHECK(std::abs(got[i] - want) <= 4e-7 * std::abs(want) + 1e-45);
    CHECK(std::signbit(got[i]) == std::signbit(xs[i]));
    CHECK(std::abs(got[i]) <= 1.0f);
  }
  // Non-finite inputs: +-inf saturate, NaN propagates.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> special = ops::tanh(ops::from_vector<float>({inf, -inf, nan}, {3})).to_vector<float>();
  CHECK((special[0] <= 1.0f && special[0] > 1.0f - 4e-7f));
  CHECK((special[1] >= -1.0f && special[1] < -1.0f + 4e-7f));
  CHECK(std::isnan(special[2]));
  // A strided (non-contiguous) input takes the generic path and agrees.
  Tensor a = ops::from_vector(xs, {n / 2, 2});
  CHECK(testing::allclose(ops::tanh(a.t()), ops::tanh(a.t().contiguous()), 4e-7, 1e-30));
  // float64 keeps libm's tanh.
  Tensor d = ops::from_vector<double>({0.5, -3.0}, {2});
  std::vector<double> dv = ops::tanh(d).to_vector<double>();
  CHECK(dv[0] == std::tanh(0.5));
  CHECK(dv[1] == std::tanh(-3.0));
}

TEST_CASE("cpu fast paths: float erf within 1e-7 of erf, e^x (x <= 0) within 2e-7 relative",
          "[ops][elementwise][gelu]") {
  // every 97th float from 0 to +inf, both signs: the fit's range, the clamp at 4 and beyond
  double worst = 0;
  for (uint32_t b = 0; b < 0x7f800000u; b += 97)
    for (float x : {std::bit_cast<float>(b), -std::bit_cast<float>(b)}) {
      const float got = math::erf_float(x);
      const double err = std::abs(got - std::erf(static_cast<double>(x)));
      worst = std::max(worst, err);
      if (err > 1e-7) FAIL_CHECK("x = " << x << " erf_float " << got << " erf " << std::erf(double(x)));
      CHECK((std::signbit(got) == std::signbit(x) && std::abs(got) <= 1.0f));
    }
  INFO("largest |erf_float - erf| " << worst);
  CHECK(worst > 0);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(math::erf_float(inf) == 1.0f);
  CHECK(math::erf_float(-inf) == -1.0f);
  CHECK(std::isnan(math::erf_float(nan)));
  // e^x on x <= 0: relative 2e-7 down to the clamp at -87, exactly 0 below it, for -inf and NaN
  for (double x = -87; x <= 0; x += 0.00731) {
    const double want = std::exp(static_cast<double>(static_cast<float>(x)));
    CHECK(std::abs(math::exp_nonpositive(static_cast<float>(x)) - want) <= 2e-7 * want);
  }
  CHECK(math::exp_nonpositive(0.0f) == 1.0f);
  for (float x : {-87.5f, -1e30f, -inf, nan}) CHECK(math::exp_nonpositive(x) == 0.0f);
}

TEST_CASE("cpu fast paths: scalar-first and tensor-scalar sub and div", "[ops][elementwise]") {
  Tensor x = ops::from_vector<float>({1.0f, 2.0f, -4.0f, 0.5f}, {4});
  CHECK(ops::rsub(x, 1.0).to_vector<float>() == std::vector<float>{0.0f, -1.0f, 5.0f, 0.5f});
  CHECK(ops::rdiv(x, 2.0).to_vector<float>() == std::vector<float>{2.0f, 1.0f, -0.5f, 4.0f});
  CHECK(ops::sub(x, 1.0).to_vector<float>() == std::vector<float>{0.0f, 1.0f, -5.0f, -0.5f});
  CHECK(ops::div(x, 2.0).to_vector<float>() == std::vector<float>{0.5f, 1.0f, -2.0f, 0.25f});
  // Other ops with a scalar first operand still go through the generic loop.
  CHECK(ops::maximum(x, 1.0).to_vector<float>() == std::vector<float>{1.0f, 2.0f, 1.0f, 1.0f});
  Tensor i = ops::from_vector<int64_t>({3, 7}, {2});
  CHECK(ops::rsub(i, 10.0).to_vector<int64_t>() == std::vector<int64_t>{7, 3});
}

TEST_CASE("CPU allocator reuses a freed large block of the same size and leaves small ones to malloc",
          "[cpu][memory]") {
  // 1 MiB: kept by the block cache when freed (ops/cpu/memory.cpp), so the next tensor of that size gets it.
  // Emptied first: a 1 MiB block that an earlier test in this process left in the cache could be the one
  // handed out below (the tests run as one process outside CTest).
  empty_cache();
  const void* first;
  {
    Tensor a = Tensor::empty({256 * 1024}, DType::Float32, Device::cpu());
    first = a.raw_data();
    ops::fill_(a, 1.0);
  }
  Tensor b = Tensor::empty({256 * 1024}, DType::Float32, Device::cpu());
#if !defined(SACCADE_ASAN)  // AddressSanitizer builds cache nothing
  CHECK(b.raw_data() == first);
#endif
  // a block of another size does not take it
  Tensor c = Tensor::empty({256 * 1024 + 16}, DType::Float32, Device::cpu());
  CHECK(c.raw_data() != first);
  CHECK(reinterpret_cast<uintptr_t>(c.raw_data()) % 64 == 0);
  // zeros over a reused block full of ones is still zeros
  ops::fill_(b, 1.0);
  b = Tensor();
  Tensor z = ops::zeros({256 * 1024}, DType::Float32);
#if !defined(SACCADE_ASAN)
  CHECK(z.raw_data() == first);
#endif
  CHECK(ops::sum(z).item<double>() == 0.0);
}
