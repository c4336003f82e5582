// The 16-bit dtypes: conversions to and from float (against bit patterns derived by hand from the formats),
// the promotion lattice, the dtype table, printing, and Tensor::to both ways.
//
// Bit patterns: bfloat16 = sign | 8 exponent bits (bias 127) | 7 mantissa bits; float16 = sign | 5 exponent
// bits (bias 15) | 10 mantissa bits.
#include <cmath>
#include <limits>

#include "ops/cpu/bf16_lanes.h"
#include "ops/creation.h"
#include "ops/format.h"
#include "tests/helpers.h"

using namespace saccade;

namespace {
uint16_t bf(float f) { return float_to_bf16_bits(f); }
uint16_t h(float f) { return float_to_f16_bits(f); }
const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
}  // namespace

TEST_CASE("bfloat16: rounding to nearest even, range, NaN", "[half]") {
  CHECK(bf(1.0f) == 0x3f80);  // 2^0: exponent 127 = 0x7f
  CHECK(bf(-2.0f) == 0xc000);
  CHECK(bf(0.0f) == 0x0000);
  CHECK(bf(-0.0f) == 0x8000);
  // 1 + 2^-8 lies halfway between 1 (0x3f80, even) and 1 + 2^-7 (0x3f81): ties to even -> 1
  CHECK(bf(1.0f + 0x1p-8f) == 0x3f80);
  // 1 + 3*2^-8 lies halfway between 0x3f81 (odd) and 0x3f82 (even) -> 0x3f82
  CHECK(bf(1.0f + 3 * 0x1p-8f) == 0x3f82);
  // just above the tie rounds up, just below rounds down
  CHECK(bf(1.0f + 0x1p-8f + 0x1p-23f) == 0x3f81);
  CHECK(bf(1.0f + 0x1p-8f - 0x1p-23f) == 0x3f80);
  // largest finite bfloat16: (2 - 2^-7) * 2^127 = 0x7f7f; float's max (above it + half an ulp) rounds to inf
  CHECK(bf(0x1.fep127f) == 0x7f7f);
  CHECK(bf(std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(bf(kInf) == 0x7f80);
  CHECK(bf(-kInf) == 0xff80);
  // smallest normal 2^-126 and a float subnormal (2^-133 = bfloat16 subnormal mantissa 1 at 2^-133)
  CHECK(bf(0x1p-126f) == 0x0080);
  CHECK(bf(0x1p-133f) == 0x0001);
  // NaN stays NaN, quiet, with its sign; even a payload in the low (dropped) bits only
  const float low_nan = std::bit_cast<float>(0x7f800001u);
  CHECK((bf(low_nan) & 0x7fc0) == 0x7fc0);
  CHECK(bf(kNaN) == 0x7fc0);
  CHECK((bf(-kNaN) & 0x8000) == 0x8000);
  // widening is exact: every bit pattern round-trips (NaNs excepted: compared as NaN)
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bf16_bits_to_float(static_cast<uint16_t>(b));
    if (std::isnan(f))
      REQUIRE(std::isnan(bf16_bits_to_float(bf(f))));
    else
      REQUIRE(bf(f) == b);
  }
  CHECK(bf16_bits_to_float(0x3f80) == 1.0f);
  CHECK(static_cast<float>(bfloat16(3.0f)) == 3.0f);
}

TEST_CASE("bfloat16: the vectorisable conversions (cpu/bf16_lanes.h) give half.h's bits", "[half]") {
  // every bf16 pattern, and floats just around each one and halfway to the next (ties both ways), NaNs
  // with payloads in the dropped bits
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint32_t u = b << 16;
    REQUIRE(std::bit_cast<uint32_t>(cpu::bf16_widen(static_cast<uint16_t>(b))) == u);
    for (uint32_t low : {0u, 1u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const float f = std::bit_cast<float>(u | low);
      INFO("float bits " << (u | low));
      REQUIRE(cpu::bf16_round(f) == float_to_bf16_bits(f));
    }
  }
  // Tensor::to (the CPU copy's contiguous runs take these) against the struct, element by element
  Tensor x = ops::mul(ops::randn({4099}), 1e4);
  Tensor h = x.to(DType::BFloat16);
  const auto xv = x.to_vector<float>();
  const bfloat16* hp = h.data<bfloat16>();
  for (size_t i = 0; i < xv.size(); ++i) REQUIRE(hp[i].bits == bfloat16(xv[i]).bits);
  REQUIRE(testing::allclose(h.to(DType::Float32), x.to(DType::Float64).to(DType::BFloat16).to(DType::Float32),
                            0, 0));
}

TEST_CASE("float16: the branch-free widening (cpu/bf16_lanes.h) gives half.h's float for every pattern",
          "[half]") {
  // normals, subnormals (rebiased by one multiplication), zeros of both signs, infinities, NaN payloads
  for (uint32_t b = 0; b < 0x10000; ++b) {
    INFO("float16 bits " << b);
    REQUIRE(std::bit_cast<uint32_t>(cpu::f16_widen(static_cast<uint16_t>(b))) ==
            std::bit_cast<uint32_t>(f16_bits_to_float(static_cast<uint16_t>(b))));
  }
}

TEST_CASE("float16: rounding to nearest even, overflow to inf, subnormals, NaN", "[half]") {
  CHECK(h(1.0f) == 0x3c00);  // exponent 15 = 0b01111
  CHECK(h(-2.0f) == 0xc000);
  CHECK(h(0.0f) == 0x0000);
  CHECK(h(-0.0f) == 0x8000);
  CHECK(h(65504.0f) == 0x7bff);  // largest finite: (2 - 2^-10) * 2^15
  CHECK(h(65519.0f) == 0x7bff);  // below the midpoint 65520 to the next (2^16, inf)
  CHECK(h(65520.0f) == 0x7c00);  // the midpoint: ties to even = the odd 0x7bff loses -> inf
  CHECK(h(1e6f) == 0x7c00);      // overflow -> inf
  CHECK(h(-1e6f) == 0xfc00);
  CHECK(h(kInf) == 0x7c00);
  CHECK(h(0x1p-14f) == 0x0400);         // smallest normal
  CHECK(h(0x1p-24f) == 0x0001);         // smallest subnormal
  CHECK(h(0x1p-25f) == 0x0000);         // half of it: a tie, to even (zero)
  CHECK(h(0x1.8p-24f) == 0x0002);       // 1.5 steps: tie between 1 (odd) and 2 (even) -> 2
  CHECK(h(0x1.000002p-25f) == 0x0001);  // just above half a step rounds up
  CHECK(h(0x1.ffcp-15f) == 0x0400);     // 1023.5 steps: tie, to the even 1024 = the smallest normal
  CHECK(h(0x1.ff8p-15f) == 0x03ff);     // 1023 steps: the largest subnormal, exact
  CHECK(h(0x1.ff4p-15f) == 0x03fe);     // 1022.5 steps: tie, to the even 1022
  CHECK(h(3 * 0x1p-24f) == 0x0003);
  // ties in the normal range: 1 + 2^-11 is halfway between 0x3c00 (even) and 0x3c01
  CHECK(h(1.0f + 0x1p-11f) == 0x3c00);
  CHECK(h(1.0f + 3 * 0x1p-11f) == 0x3c02);
  CHECK(h(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);
  // NaN stays a (quiet) NaN with its sign
  CHECK(h(kNaN) == 0x7e00);
  CHECK(h(-kNaN) == 0xfe00);
  // widening is exact and every pattern round-trips
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = f16_bits_to_float(static_cast<uint16_t>(b));
    if (std::isnan(f))
      REQUIRE(std::isnan(f16_bits_to_float(h(f))));
    else
      REQUIRE(h(f) == b);
  }
  CHECK(f16_bits_to_float(0x0001) == 0x1p-24f);
  CHECK(f16_bits_to_float(0x8400) == -0x1p-14f);
  CHECK(f16_bits_to_float(0x7bff) == 65504.0f);
  CHECK(std::isinf(f16_bits_to_float(0xfc00)));
}

TEST_CASE("float16 rounding agrees with a direct rounding over a sweep of floats", "[half]") {
  // the reference: round |f| to the grid of its binade with nearbyint (ties to even) in double arithmetic
  auto reference = [](float f) -> float {
    const double a = std::abs(static_cast<double>(f));
    const int e = a < 0x1p-14 ? -14 : std::ilogb(a);  // subnormals share the step of the smallest binade
    const double step = std::ldexp(1.0, e - 10);
    const double r = std::nearbyint(a / step) * step;
    return static_cast<float>(std::copysign(r >= 65520.0 ? INFINITY : r, static_cast<double>(f)));
  };
  for (uint32_t b = 0x33000000u; b < 0x47800000u; b += 0x1235u) {  // 2^-25 .. 2^16, odd stride
    const float f = std::bit_cast<float>(b);
    REQUIRE(f16_bits_to_float(h(f)) == reference(f));
    REQUIRE(f16_bits_to_float(h(-f)) == reference(-f));
  }
}

TEST_CASE("dtype table and promotion", "[half]") {
  for (size_t i = 0; i < kNumDTypes; ++i) CHECK(static_cast<size_t>(kDTypes[i].dtype) == i);
  CHECK(dtype_size(DType::BFloat16) == 2);
  CHECK(dtype_size(DType::Float16) == 2);
  CHECK(dtype_name(DType::BFloat16) == "bfloat16");
  CHECK(is_floating(DType::Float16));
  CHECK(promote_types(DType::BFloat16, DType::Float16) == DType::Float32);
  CHECK(promote_types(DType::Float16, DType::BFloat16) == DType::Float32);
  CHECK(promote_types(DType::BFloat16, DType::Float32) == DType::Float32);
  CHECK(promote_types(DType::Float64, DType::Float16) == DType::Float64);
  CHECK(promote_types(DType::BFloat16, DType::Int64) == DType::BFloat16);
  CHECK(promote_types(DType::Bool, DType::Float16) == DType::Float16);
  CHECK(promote_types(DType::BFloat16, DType::BFloat16) == DType::BFloat16);
  DType t{};
  CHECK((dtype_from_safetensors("BF16", t) && t == DType::BFloat16));
  CHECK((dtype_from_npy("<f2", t) && t == DType::Float16));
  CHECK_FALSE(dtype_from_npy("", t));
  static_assert(std::is_same_v<compute_t<bfloat16>, float> && std::is_same_v<acc_t<float16>, float>);
  static_assert(std::is_same_v<acc_t<float>, double> && std::is_same_v<compute_t<double>, double>);
}

TEST_CASE("Tensor::to between 16-bit and other dtypes, and printing", "[half]") {
  Tensor x = ops::from_vector<float>({1.0f, 1.0f + 0x1p-8f, 65520.0f, -0x1p-24f, kNaN, 3.0f}, {6});
  Tensor b = x.to(DType::BFloat16);
  Tensor f = x.to(DType::Float16);
  CHECK(b.dtype() == DType::BFloat16);
  CHECK(b.itemsize() == 2);
  const bfloat16* pb = b.data<bfloat16>();
  const float16* pf = f.data<float16>();
  CHECK(pb[1].bits == 0x3f80);  // the tie, to even
  CHECK(pb[2].bits == 0x4780);  // 65520 = 1.999 * 2^15 -> 2^16 in bfloat16 (8 bits)
  CHECK(pf[2].bits == 0x7c00);  // overflows float16
  CHECK(pf[3].bits == 0x8001);  // the smallest negative subnormal
  CHECK(std::isnan(static_cast<float>(pf[4])));
  // back to float32 / float64 / int64 exactly; through bf16 -> f16 (via float)
  std::vector<float> back = b.to(DType::Float32).to_vector<float>();
  CHECK(back[0] == 1.0f);
  CHECK(back[2] == 65536.0f);
  CHECK(f.to(DType::Float64).to_vector<double>()[3] == -0x1p-24);
  CHECK(b.to(DType::Float16).to_vector<float>()[5] == 3.0f);
  CHECK(ops::from_vector<int64_t>({7, -3}, {2}).to(DType::BFloat16).to_vector<float>()[1] == -3.0f);
  CHECK(b.to(DType::Bool).to_vector<int64_t>()[0] == 1);
  CHECK(ops::full({2}, 0.5, DType::Float16).to_vector<float>()[1] == 0.5f);
  CHECK(ops::scalar_tensor(2.5, DType::BFloat16).item<double>() == 2.5);
  const std::string s = ops::format_tensor(ops::from_vector<float>({0.5f, 2.0f}, {2}).to(DType::BFloat16));
  CHECK(s == "tensor([0.5000, 2.0000], shape=[2], dtype=bfloat16, device=cpu)");
}
