// The float32 AVX-512 tile products of the CPU flash attention (ops/cpu/flash_tiles_f32.h, through
// flash::TileGemm as the kernels call them) against the readable loop_gemm (ops/cpu/attention_tiles.h):
// every (ta, tb) combination, m, n, k that are not multiples of the 4-row, 16-lane or 64-column blocks,
// leading dimensions past the columns, alpha and beta = 0 (C unread) or 1. Bound: two float32 sums of the
// same products in different orders, each within (k + 2) 2^-24 (|alpha| Σ|a b| + |beta c|) of the exact one.
// Then the packed-operand cache (TransposedTiles) and the fallback under an IsaGuard. The fused attention
// with these products against the composed path is in test_flash_attention.cpp, test_gqa.cpp,
// test_window.cpp and test_isa_dispatch.cpp (TileProducts::Avx512).
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "helpers.h"
#include "ops/cpu/attention_tiles.h"
#include "ops/cpu/flash_tiles_f32.h"
#include "ops/cpu/simd.h"

using namespace saccade;
using saccade::testing::ErrorContains;

namespace {

struct Shape3 {
  int m, n, k;
};

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d;
  std::vector<float> x(n);
  for (float& v : x) v = d(g);
  return x;
}

// The worst |kernel - loop_gemm| / bound over C for one product (1e30 when the padding past n of C changed).
double worst_error(bool ta, bool tb, Shape3 s, float alpha, float beta, unsigned seed) {
  const int m = s.m, n = s.n, k = s.k;
  // A: op(A) (m, k), stored (m, k) or (k, m); B: op(B) (k, n), stored (k, n) or (n, k); leading dims + 3
  const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 3, ldc = n + 5;
  const std::vector<float> a = random_floats(size_t((ta ? k : m) * lda + 1), seed),
                           b = random_floats(size_t((tb ? n : k) * ldb + 1), seed + 1);
  std::vector<float> c0 = random_floats(size_t(m * ldc), seed + 2);
  if (beta == 0.0f)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) c0[size_t(i * ldc + j)] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> got = c0, ref = c0, scratch(size_t(std::max(1, k * n)));
  cpu::flash::TileGemm<float> gemm(cpu::TileProducts::Avx512, 0);
  REQUIRE(gemm.how == cpu::TileProducts::Avx512);
  gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, got.data(), ldc);
  cpu::flash::loop_gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, ref.data(), ldc,
                        scratch.data());
  auto A = [&](int i, int p) { return double(ta ? a[size_t(p * lda + i)] : a[size_t(i * lda + p)]); };
  auto B = [&](int p, int j) { return double(tb ? b[size_t(j * ldb + p)] : b[size_t(p * ldb + j)]); };
  double worst = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double abs_sum = 0;
      for (int p = 0; p < k; ++p) abs_sum += std::abs(A(i, p) * B(p, j));
      const double cij = beta == 0.0f ? 0.0 : double(c0[size_t(i * ldc + j)]);
      const double bound = 2 * (k + 2) * 0x1p-24 * (std::abs(alpha) * abs_sum + std::abs(beta * cij)) + 1e-30;
      const double e = std::abs(double(got[size_t(i * ldc + j)]) - double(ref[size_t(i * ldc + j)])) / bound;
      worst = std::max(worst, std::isfinite(e) ? e : 1e30);
    }
    for (int j = n; j < ldc; ++j)  // the padding past n is untouched
      if (got[size_t(i * ldc + j)] != c0[size_t(i * ldc + j)]) return 1e30;
  }
  return worst;
}

}  // namespace

TEST_CASE("tile_gemm_f32: every transpose, ragged sizes, alpha and beta, against loop_gemm",
          "[attention][flash][tiles]") {
  if (!cpu::tile_gemm_f32_available()) {
    WARN(
        "tile_gemm_f32 is not used here: this CPU has no AVX-512, or this build is not GCC's (the kernel is "
        "GCC-only)");
    return;
  }
  // the kernels' shapes (64 queries, 64 keys, D = 64; the last tiles shorter) and every edge: m % 4, n % 16,
  // n past one 64-column chunk, k = 0 and 1
  const std::vector<Shape3> shapes = {{1, 1, 1},    {3, 5, 7},     {5, 17, 3},   {64, 64, 64},
                                      {67, 70, 75}, {13, 130, 9},  {4, 16, 0},   {61, 48, 1},
                                      {2, 33, 64},  {64, 128, 50}, {7, 64, 128}, {64, 15, 64}};
  unsigned seed = 1;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const Shape3& s : shapes)
        for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, {1.0f, 1.0f}, {0.125f, 1.0f}, {-0.3f, 0.0f}}) {
          INFO("ta " << ta << ", tb " << tb << ", m " << s.m << ", n " << s.n << ", k " << s.k << ", alpha "
                     << alpha << ", beta " << beta);
          CHECK(worst_error(ta, tb, s, alpha, beta, seed += 3) <= 1.0);
        }
}

TEST_CASE("tile_gemm_f32: the packed B-transposed operands are reused, and forgotten on request",
          "[attention][flash][tiles]") {
  if (!cpu::tile_gemm_f32_available()) {
    WARN(
        "tile_gemm_f32 is not used here: this CPU has no AVX-512, or this build is not GCC's (the kernel is "
        "GCC-only)");
    return;
  }
  const int m = 9, n = 21, k = 13;
  std::vector<float> a = random_floats(size_t(m * k), 1), b = random_floats(size_t(n * k), 2);
  std::vector<float> first(size_t(m * n)), again(size_t(m * n)), ref(size_t(m * n)), scratch(size_t(n * k));
  cpu::flash::TileGemm<float> gemm(cpu::TileProducts::Avx512, 0);
  gemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, first.data(), n);
  gemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, again.data(), n);
  CHECK(first == again);
  // a different shape of the same memory is a different entry: the first n - 5 rows of B
  gemm(false, true, m, n - 5, k, 1.0f, a.data(), k, b.data(), k, 0.0f, again.data(), n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n - 5; ++j) CHECK(again[size_t(i * n + j)] == first[size_t(i * n + j)]);
  // B rewritten in place: after forget() the product reads the new values
  for (float& x : b) x = -2 * x;
  gemm.forget();
  gemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, again.data(), n);
  cpu::flash::loop_gemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, ref.data(), n,
                        scratch.data());
  for (size_t i = 0; i < ref.size(); ++i)
    CHECK(std::abs(again[i] - ref[i]) <= 1e-4f * (1 + std::abs(ref[i])));
  // a budget smaller than one tile still packs it (every entry dropped first)
  cpu::TransposedTiles small(16);
  const float* bt = small.get(b.data(), k, n, k);
  for (int p = 0; p < k; ++p)
    for (int j = 0; j < n; ++j) CHECK(bt[p * cpu::TransposedTiles::ld(n) + j] == b[size_t(j * k + p)]);
}

TEST_CASE("tile_gemm_f32: below AVX-512 the tile products fall back to sgemm, and the kernel refuses",
          "[attention][flash][tiles][isa]") {
  cpu::IsaGuard guard(cpu::Isa::Avx2);
  CHECK_FALSE(cpu::tile_gemm_f32_available());
  CHECK(cpu::flash::TileGemm<float>(cpu::TileProducts::Avx512, 0).how == cpu::TileProducts::Gemm);
  CHECK(cpu::tile_products(64) != cpu::TileProducts::Avx512);
  float a = 1, b = 2, c = 0;
  CHECK_THROWS_MATCHES(cpu::tile_gemm_f32(false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1), Error,
                       ErrorContains("tile_gemm_f32"));
  // float64 tiles never take the float32 kernel
  cpu::IsaGuard none(cpu::cpu_isa());
  CHECK(cpu::flash::TileGemm<double>(cpu::TileProducts::Avx512, 0).how == cpu::TileProducts::Gemm);
}
