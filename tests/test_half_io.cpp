// 16-bit tensors in files: safetensors BF16 / F16 written and read as themselves, byte for byte as PyTorch's
// safetensors.torch writes them (tests/fixtures/make_half.py made tests/data/half_torch.safetensors and
// half_f16.npy); a 16-bit checkpoint loads into a float32 module; .npy holds float16 ('<f2') and refuses
// bfloat16 by name (numpy has no bfloat16).
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "helpers.h"
#include "nn/linear.h"
#include "nn/serialization.h"
#include "temp_dir.h"

using namespace saccade;

namespace {
const std::string kData = SACCADE_TEST_DATA_DIR;

std::string bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

template <class T>
std::vector<uint16_t> bits(const Tensor& t) {
  std::vector<uint16_t> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.data<T>()[i].bits);
  return out;
}
}  // namespace

TEST_CASE("safetensors: PyTorch's BF16 and F16 read as themselves and written back byte for byte", "[half]") {
  const std::string fixture = kData + "/half_torch.safetensors";
  nn::Safetensors st = nn::load_safetensors(fixture);
  const Tensor& b = *st.tensors.find("b");
  const Tensor& h = *st.tensors.find("h");
  REQUIRE(b.dtype() == DType::BFloat16);
  REQUIRE(h.dtype() == DType::Float16);
  REQUIRE(b.shape() == Shape{2, 3});
  // bfloat16: 1 + 2^-8 (a tie, to 1.0), 3, the largest finite, -inf, NaN, 2^-133 (a subnormal)
  std::vector<uint16_t> bb = bits<bfloat16>(b);
  CHECK(bb[0] == 0x3f80);
  CHECK(bb[1] == 0x4040);
  CHECK(bb[2] == 0x7f7f);
  CHECK(bb[3] == 0xff80);
  CHECK(std::isnan(bf16_bits_to_float(bb[4])));
  CHECK(bb[5] == 0x0001);
  // float16: 65504, 2^-24, 65520 (-> inf), -0, 1/3 (0x3555: 0.333251953125)
  CHECK(bits<float16>(h) == std::vector<uint16_t>{0x7bff, 0x0001, 0x7c00, 0x8000, 0x3555});
  // our own writer on the same tensors and metadata: the same bytes
  testing::TempDir dir("half_io");
  const std::string ours = dir.file("ours.safetensors");
  nn::save_safetensors(st.tensors, ours, st.metadata);
  CHECK(bytes_of(ours) == bytes_of(fixture));
  // for the manual interop check (tests/fixtures/make_half.py --verify FILE): keep a copy where asked
  if (const char* keep = std::getenv("SACCADE_HALF_KEEP"))
    nn::save_safetensors(st.tensors, keep, st.metadata);
}

TEST_CASE("safetensors: a 16-bit checkpoint loads into a float32 module by conversion", "[half]") {
  Generator g(3);
  nn::Linear lin(3, 2, true, &g);
  nn::StateDict half;
  for (const auto& [k, t] : lin.state_dict()) half.insert(k, t.to(DType::BFloat16));
  testing::TempDir dir("half_io");
  nn::save_safetensors(half, dir.file("bf16.safetensors"));
  nn::Linear other(3, 2, true, &g);
  nn::load(other, dir.file("bf16.safetensors"));
  for (const auto& [k, t] : other.state_dict()) {
    REQUIRE(t.dtype() == DType::Float32);
    REQUIRE(testing::allclose(t, half.find(k)->to(DType::Float32), 0, 0));  // bfloat16 values, exactly
  }
}

TEST_CASE(".npy: float16 as '<f2' both ways; bfloat16 refused by name", "[half]") {
  const std::string fixture = kData + "/half_f16.npy";
  Tensor t = ops::load_npy(fixture);
  REQUIRE(t.dtype() == DType::Float16);
  REQUIRE(t.shape() == Shape{2, 3});
  CHECK(bits<float16>(t) == std::vector<uint16_t>{0x3c00, 0xc100, 0x7bff, 0x0001, 0x7c00, 0x3555});
  testing::TempDir dir("half_io");
  ops::save_npy(t, dir.file("f16.npy"));
  CHECK(bytes_of(dir.file("f16.npy")) == bytes_of(fixture));  // numpy's header and bytes
  REQUIRE_THROWS_SACCADE(ops::save_npy(t.to(DType::BFloat16), dir.file("bf16.npy")), "numpy has no bfloat16");
  CHECK_FALSE(std::filesystem::exists(dir.file("bf16.npy")));
}
