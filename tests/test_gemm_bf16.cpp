// saccade's bf16 GEMM (ops/cpu/gemm_bf16.h) against the readable product: the widened bf16 values summed in
// double. Odd sizes (every edge tile), k across several packed blocks, both transposes of each operand,
// leading dimensions past the columns, alpha and beta, 1 and 2 threads, at every width this CPU runs: with
// VDPBF16PS when it has AVX512-BF16, and widened to float under IsaGuard(AVX-512 / AVX2 / baseline).
// Bound: f32 sums of exact bf16 products, so |got - exact| <= (k + 2) 2^-24 (|alpha| Σ|a b| + |beta c|).
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "helpers.h"
#include "ops/cpu/flash_tiles_bf16.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/gemm_half.h"
#include "ops/cpu/gemm_ladder/amx.h"
#include "ops/cpu/gemm_ladder/blocked.h"
#include "ops/cpu/gemm_ladder/microkernel.h"
#include "ops/cpu/gemm_ladder/naive.h"
#include "ops/cpu/gemm_ladder/packed.h"
#include "ops/cpu/simd.h"

using namespace saccade;
using cpu::Isa;
using saccade::testing::ErrorContains;

namespace {

double widen(bfloat16 h) { return float(h); }

std::vector<bfloat16> random_bf16(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d;
  std::vector<bfloat16> v(n);
  for (auto& x : v) x = bfloat16(d(gen));
  return v;
}

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
};

// Runs one case at the current width and threads; returns the worst |got - want| / bound (must be <= 1).
double worst_error(const Case& t, uint32_t seed) {
  const int64_t pad = 3;  // leading dimensions past the columns
  const int64_t ar = t.ta ? t.k : t.m, ac = t.ta ? t.m : t.k, br = t.tb ? t.n : t.k, bc = t.tb ? t.k : t.n;
  const int64_t lda = ac + pad, ldb = bc + pad, ldc = t.n + pad;
  const auto a = random_bf16(ar * lda, seed), b = random_bf16(br * ldb, seed + 1);
  std::vector<float> c(t.m * ldc);
  std::mt19937 gen(seed + 2);
  std::normal_distribution<float> d;
  for (auto& x : c) x = t.beta == 0 ? NAN : d(gen);  // beta == 0 never reads C
  const std::vector<float> c0 = c;
  cpu::gemm_bf16(t.ta, t.tb, t.m, t.n, t.k, t.alpha, a.data(), lda, b.data(), ldb, t.beta, c.data(), ldc);
  auto A = [&](int64_t i, int64_t p) { return widen(t.ta ? a[p * lda + i] : a[i * lda + p]); };
  auto B = [&](int64_t p, int64_t j) { return widen(t.tb ? b[j * ldb + p] : b[p * ldb + j]); };
  double worst = 0;
  for (int64_t i = 0; i < t.m; ++i)
    for (int64_t j = 0; j < t.n; ++j) {
      double sum = 0, abs_sum = 0;
      for (int64_t p = 0; p < t.k; ++p) {
        sum += A(i, p) * B(p, j);
        abs_sum += std::abs(A(i, p) * B(p, j));
      }
      const double cij = t.beta == 0 ? 0 : c0[i * ldc + j];
      const double want = t.alpha * sum + t.beta * cij;
      const double bound =
          (t.k + 2) * 0x1p-24 * (std::abs(t.alpha) * abs_sum + std::abs(t.beta * cij)) + 1e-30;
      worst = std::max(worst, std::abs(c[i * ldc + j] - want) / bound);
    }
  for (int64_t i = 0; i < t.m; ++i)  // the padding past n is untouched
    for (int64_t j = t.n; j < ldc; ++j)
      if (!(std::isnan(c0[i * ldc + j]) ? std::isnan(c[i * ldc + j]) : c[i * ldc + j] == c0[i * ldc + j]))
        return 1e30;
  return worst;
}

// The kernels this CPU runs: AMX tiles (no guard) when it has them, VDPBF16PS (under AmxOff) when it has
// AVX512-BF16, then each width widened.
constexpr int kAmx = -2, kDot = -1;
std::vector<std::pair<std::string, int>> kernels() {
  std::vector<std::pair<std::string, int>> w;
  if (cpu::cpu_has_amx_bf16()) w.push_back({"AMX-BF16", kAmx});
  if (cpu::cpu_has_avx512_bf16()) w.push_back({"AVX512-BF16", kDot});
  for (Isa i : {Isa::Avx512, Isa::Avx2, Isa::Baseline})
    if (i <= cpu::cpu_isa()) w.push_back({cpu::vector_level_name(i), static_cast<int>(i)});
  return w;
}

}  // namespace

TEST_CASE("gemm_bf16: every transpose, odd sizes, alpha and beta, at every width, within f32 rounding",
          "[ops][gemm_bf16][isa]") {
  const int threads = get_num_threads();
  const std::vector<Case> sizes = {
      {1, 1, 1, false, false, 1, 0},              // one element
      {13, 37, 29, false, false, 1, 0},           // one edge tile each way, odd k
      {150, 33, 601, false, false, 0.5f, -1.5f},  // two row blocks, k over two blocks of 512 (odd)
      {7, 70, 1040, false, false, -2, 1},         // few rows: column groups across threads; three k blocks
      {40, 64, 130, false, false, 1, 0},  // even k: full row panels read in place, a 4-row edge packed
      {300, 270, 601, false, false, 1.5f, 0.5f},  // tall and wide: at 2 threads each owns a column range
      {200, 257, 601, true, false, 1, 0},         // column ranges from one row block (144) on, A transposed
      {32, 32, 32, false, false, 1, 0},           // AMX: one 32 × 32 block, one tile of k
      {97, 95, 1100, false, true, 0.5f, 2},       // AMX: edge blocks, k over three blocks, the last padded
  };
  for (const auto& [name, cap] : kernels()) {
    std::unique_ptr<cpu::IsaGuard> guard;
    std::optional<cpu::AmxOff> amx_off;
    if (cap >= 0) guard = std::make_unique<cpu::IsaGuard>(static_cast<Isa>(cap));
    if (cap == kDot) amx_off.emplace();
    INFO("kernel " << name);
    CHECK(cpu::kernel_avx512_bf16() == (cap < 0));
    CHECK(cpu::kernel_amx_bf16() == (cap == kAmx));
    for (int nt : {1, 2}) {
      set_num_threads(nt);
      for (Case t : sizes)
        for (int tr = 0; tr < 4; ++tr) {
          t.ta = tr & 1;
          t.tb = tr & 2;
          INFO("threads " << nt << " m " << t.m << " n " << t.n << " k " << t.k << " ta " << t.ta << " tb "
                          << t.tb << " alpha " << t.alpha << " beta " << t.beta);
          CHECK(worst_error(t, static_cast<uint32_t>(t.m + t.n + t.k + tr)) <= 1);
        }
    }
  }
  set_num_threads(threads);
}

TEST_CASE("gemm_bf16: the packs' padding past k is zero, whatever an earlier product left in the scratch",
          "[ops][gemm_bf16]") {
  // A product whose A and B hold NaN fills the per-thread scratch; then one of the same width with k = 33
  // (AMX pads A's and B's k to 64 with zeros, the other kernels B's pairs to 17): a stale NaN in the padding
  // would reach every element (0 · NaN = NaN).
  const int saved = get_num_threads();
  set_num_threads(1);
  for (const auto& [name, cap] : kernels()) {
    if (cap >= 0) continue;  // the bf16 kernels (the widened ones share their packs)
    std::optional<cpu::AmxOff> amx_off;
    if (cap == kDot) amx_off.emplace();
    INFO("kernel " << name);
    const int64_t m = 64, n = 64, k = 96;
    std::vector<bfloat16> nan_a(m * k, bfloat16(NAN)), nan_b(k * n, bfloat16(NAN));
    std::vector<float> c(m * n);
    cpu::gemm_bf16(false, false, m, n, k, 1, nan_a.data(), k, nan_b.data(), n, 0, c.data(), n);
    CHECK(std::isnan(c[0]));
    const Case t{m, n, 33, false, false, 1, 0};
    CHECK(worst_error(t, 21) <= 1);
  }
  set_num_threads(saved);
}

TEST_CASE("gemm_bf16: a bf16 output is the f32 result rounded once", "[ops][gemm_bf16]") {
  const int64_t m = 19, n = 45, k = 300;
  const auto a = random_bf16(m * k, 5), b = random_bf16(k * n, 6), c0 = random_bf16(m * n, 7);
  std::vector<float> want(m * n);
  for (int64_t i = 0; i < m * n; ++i) want[i] = static_cast<float>(widen(c0[i]));
  cpu::gemm_bf16(false, false, m, n, k, 0.75f, a.data(), k, b.data(), n, 0.5f, want.data(), n);
  std::vector<bfloat16> got = c0;
  cpu::gemm_bf16(false, false, m, n, k, 0.75f, a.data(), k, b.data(), n, 0.5f, got.data(), n);
  for (int64_t i = 0; i < m * n; ++i) {
    // nearest even: within half a bf16 ulp (at most 2^-8 relative) of the float result, and one of its
    // neighbours
    INFO("element " << i << " got " << widen(got[i]) << " want " << want[i]);
    CHECK(std::abs(widen(got[i]) - want[i]) <= 0x1p-8 * std::abs(want[i]) * (1 + 1e-6));
  }
}

TEST_CASE("gemm_bf16: a bf16 output with beta 0 rounds the float32 C of the same sums exactly",
          "[ops][gemm_bf16]") {
  // rows past one block of 144, k past one block of 512, a partial last panel of 32, ldc > n, 1 and 2
  // threads (2: row blocks split into column groups, each with its own float32 scratch)
  // k = 200: one k block, whose tiles round into C from their registers (VDPBF16PS), edges included
  // m 300 and n 270 (ldc 272): at 2 threads each thread owns a range of column panels (tall and wide C)
  const int saved = get_num_threads();
  for (auto [m, n, ldc] : {std::array<int64_t, 3>{150, 77, 80}, std::array<int64_t, 3>{300, 270, 272}})
    for (int64_t k : {600, 200})
      for (bool ta : {false, true})
        for (int threads : {1, 2}) {
          INFO("m " << m << ", n " << n << ", k " << k << ", trans_a " << ta << ", threads " << threads);
          set_num_threads(threads);
          const auto a = random_bf16(m * k, 8), b = random_bf16(k * n, 9);
          std::vector<float> want(m * ldc, 0.0f);
          cpu::gemm_bf16(ta, false, m, n, k, 1.0f, a.data(), ta ? m : k, b.data(), n, 0.0f, want.data(), ldc);
          std::vector<bfloat16> got(m * ldc, bfloat16(-7.0f));
          cpu::gemm_bf16(ta, false, m, n, k, 1.0f, a.data(), ta ? m : k, b.data(), n, 0.0f, got.data(), ldc);
          int bad = 0;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              const double g = widen(got[i * ldc + j]);
              const double w = j < n ? widen(bfloat16(want[i * ldc + j])) : -7.0;  // past n: left alone
              bad += g != w;
            }
          CHECK(bad == 0);
        }
  set_num_threads(saved);
}

TEST_CASE("gemm_bf16: bad sizes and leading dimensions are refused by name", "[ops][gemm_bf16]") {
  std::vector<bfloat16> a(64), b(64);
  std::vector<float> c(64);
  CHECK_THROWS_MATCHES(cpu::gemm_bf16(false, false, -1, 2, 2, 1, a.data(), 2, b.data(), 2, 0, c.data(), 2),
                       Error, ErrorContains("gemm_bf16: negative sizes"));
  CHECK_THROWS_MATCHES(cpu::gemm_bf16(false, false, 4, 4, 4, 1, a.data(), 3, b.data(), 4, 0, c.data(), 4),
                       Error, ErrorContains("gemm_bf16: leading dimensions"));
  CHECK_THROWS_MATCHES(cpu::gemm_bf16(true, true, 4, 5, 6, 1, a.data(), 4, b.data(), 5, 0, c.data(), 5),
                       Error, ErrorContains("gemm_bf16: leading dimensions"));
  // k = 0: C = beta C
  c.assign(4, 2.0f);
  cpu::gemm_bf16(false, false, 2, 2, 0, 1, a.data(), 1, b.data(), 2, 0.5f, c.data(), 2);
  CHECK(c[0] == 1.0f);
  CHECK(c[3] == 1.0f);
}

TEST_CASE("each step of the bf16 GEMM ladder equals the naive one", "[ops][gemm_bf16][ladder]") {
  const int64_t m = 48, n = 64, k = 522;  // multiples of every step's tile; k over three blocks
  const auto a = random_bf16(m * k, 11), b = random_bf16(k * n, 12);
  std::vector<float> want(m * n), got(m * n);
  ladder::gemm_naive(a.data(), b.data(), want.data(), m, n, k);
  // the naive sums themselves: within f32 rounding of the double sums
  double naive_err = 0;
  std::vector<double> abs_sum(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        s += widen(a[i * k + p]) * widen(b[p * n + j]);
        abs_sum[i * n + j] += std::abs(widen(a[i * k + p]) * widen(b[p * n + j]));
      }
      naive_err = std::max(naive_err, std::abs(want[i * n + j] - s) / (k * 0x1p-24 * abs_sum[i * n + j]));
    }
  CHECK(naive_err <= 1);
  ladder::gemm_blocked(a.data(), b.data(), got.data(), m, n, k);
  CHECK(got == want);  // the same sums in the same order
  // other orders of the same f32 sums: within twice the rounding bound
  auto close = [&] {
    double e = 0;
    for (int64_t i = 0; i < m * n; ++i)
      e = std::max(e, std::abs(got[i] - want[i]) / (2 * k * 0x1p-24 * abs_sum[i]));
    return e;
  };
  std::fill(got.begin(), got.end(), NAN);
  ladder::gemm_packed(a.data(), b.data(), got.data(), m, n, k);
  CHECK(close() <= 1);
#ifdef SACCADE_LADDER_MICROKERNEL
  if (cpu::cpu_has_avx512_bf16()) {
    std::fill(got.begin(), got.end(), NAN);
    ladder::gemm_microkernel(a.data(), b.data(), got.data(), m, n, k);
    CHECK(close() <= 1);
  }
#endif
#ifdef SACCADE_LADDER_AMX
  if (cpu::cpu_has_amx_bf16()) {  // multiples of 32: the first 32 rows and 512 k against naive
    const int64_t m32 = 32, k32 = 512;
    std::vector<bfloat16> a32(m32 * k32);
    for (int64_t i = 0; i < m32; ++i)
      for (int64_t p = 0; p < k32; ++p) a32[i * k32 + p] = a[i * k + p];
    std::vector<float> want32(m32 * n), got32(m32 * n, NAN);
    ladder::gemm_naive(a32.data(), b.data(), want32.data(), m32, n, k32);
    ladder::gemm_amx(a32.data(), b.data(), got32.data(), m32, n, k32);
    double e = 0;
    for (int64_t i = 0; i < m32 * n; ++i)
      e = std::max(e, std::abs(got32[i] - want32[i]) / (2 * k * 0x1p-24 * abs_sum[i]));
    CHECK(e <= 1);
  }
#endif
}

TEST_CASE("gemm_bf16: the bf16 matmul route (gemm_half) agrees with the readable widening GEMM",
          "[ops][gemm_bf16][half]") {
  const int64_t m = 70, n = 19, k = 300;  // odd sizes; b transposed (a Linear's x Wᵀ)
  const auto a = random_bf16(m * k, 21), b = random_bf16(n * k, 22);
  std::vector<bfloat16> got(m * n), want(m * n);
  cpu::gemm_half(false, true, m, n, k, a.data(), k, b.data(), k, got.data(), n);
  cpu::gemm_half_reference(false, true, m, n, k, a.data(), k, b.data(), k, want.data(), n);
  int differ = 0;
  for (int64_t i = 0; i < m * n; ++i) {
    // both round a float32 sum of the same exact products once: at most one bf16 step apart
    INFO("element " << i << " got " << widen(got[i]) << " want " << widen(want[i]));
    CHECK(std::abs(widen(got[i]) - widen(want[i])) <= 0x1p-7 * std::abs(widen(want[i])));
    differ += got[i].bits != want[i].bits;
  }
  CHECK(differ < m * n / 10);  // the sums differ by f32 rounding only, so nearly all round alike
}

TEST_CASE("flash attention's bf16 tile product (VDPBF16PS) against the widened float sums",
          "[ops][gemm_bf16][flash]") {
  if (!cpu::dot_rows_bf16_available(2)) {
    WARN("no AVX512-BF16 on this CPU: the kernel is not used, nothing to test");
    return;
  }
  CHECK_FALSE(cpu::dot_rows_bf16_available(3));  // odd head dims take the float32 route
  for (auto [nr, nc, d] :
       std::vector<std::array<int64_t, 3>>{{7, 64, 32}, {64, 40, 32}, {3, 1, 2}, {5, 17, 64}}) {
    INFO("nr " << nr << " nc " << nc << " d " << d);
    const int64_t lda = d + 6, ldb = d + 2, lds = 70;  // row strides past the rows
    const auto a = random_bf16(nr * lda, static_cast<uint32_t>(nr + d)),
               b = random_bf16(nc * ldb, static_cast<uint32_t>(nc + d));
    std::vector<float> s(static_cast<size_t>(nr * lds), -7.0f);
    std::vector<uint32_t> scratch(static_cast<size_t>(d / 2 * 64));
    cpu::dot_rows_bf16(nr, nc, d, 0.5f, a.data(), lda, b.data(), ldb, s.data(), lds, scratch.data());
    for (int64_t i = 0; i < nr; ++i)
      for (int64_t j = 0; j < lds; ++j) {
        if (j >= nc) {  // past nc: left alone
          CHECK(s[i * lds + j] == -7.0f);
          continue;
        }
        double want = 0, mag = 0;
        for (int64_t p = 0; p < d; ++p) {
          want += widen(a[i * lda + p]) * widen(b[j * ldb + p]);
          mag += std::abs(widen(a[i * lda + p]) * widen(b[j * ldb + p]));
        }
        // exact products, float32 sums: within d float32 roundings of the magnitude
        CHECK(std::abs(s[i * lds + j] - 0.5 * want) <= 0.5 * mag * d * 0x1p-24 + 1e-30);
      }
  }
}

namespace {

// gemv_half (both transposes of b) on random T against the widened values summed in double; returns the
// worst |got - exact| / bound, where bound = one rounding to T (2^-8 relative for bf16, 2^-11 for f16, a
// whole ulp: the float32 sum may sit on the other side of a tie) + f32 sums, (k + 2) 2^-24 Σ|a b|.
template <class T>
double worst_gemv_error(bool trans_b, int64_t n, int64_t k, int64_t inc_a, uint32_t seed) {
  const int64_t ldb = (trans_b ? k : n) + 5;  // rows past b's columns
  std::mt19937 gen(seed);
  std::normal_distribution<float> d;
  std::vector<T> a(static_cast<size_t>(k * inc_a)), b(static_cast<size_t>((trans_b ? n : k) * ldb));
  for (auto& x : a) x = T(d(gen));
  for (auto& x : b) x = T(d(gen));
  std::vector<T> c(static_cast<size_t>(n + 4), T(7.0f));  // 4 past n stay untouched
  cpu::gemv_half(trans_b, n, k, a.data(), inc_a, b.data(), ldb, c.data());
  const double rel = std::is_same_v<T, bfloat16> ? 0x1p-8 : 0x1p-11;
  double worst = 0;
  for (int64_t j = 0; j < n; ++j) {
    double sum = 0, abs_sum = 0;
    for (int64_t p = 0; p < k; ++p) {
      const double prod = double(float(a[p * inc_a])) * float(trans_b ? b[j * ldb + p] : b[p * ldb + j]);
      sum += prod;
      abs_sum += std::abs(prod);
    }
    const double bound = rel * std::abs(sum) + (k + 2) * 0x1p-24 * abs_sum * (1 + rel) + 1e-30;
    worst = std::max(worst, std::abs(double(float(c[j])) - sum) / bound);
  }
  for (int64_t j = n; j < n + 4; ++j)
    if (float(c[j]) != 7.0f) return 1e30;
  return worst;
}

}  // namespace

TEST_CASE("gemv_half: one output row (batch-1 decoding) within rounding of the exact sums, every kernel",
          "[ops][gemm_bf16][gemv]") {
  // ragged k (past every multiple of 16 and 32, below one vector), ragged n (past the 4-row groups and the
  // 64-output blocks), x contiguous and strided, b (n, k) (linear's weight) and (k, n)
  const std::array<std::array<int64_t, 2>, 7> shapes{
      {{1, 1}, {5, 31}, {4, 32}, {67, 33}, {203, 1000}, {130, 768}, {3, 17}}};
  for (const auto& [name, cap] : kernels()) {
    std::optional<cpu::IsaGuard> guard;
    if (cap >= 0) guard.emplace(static_cast<Isa>(cap));
    for (const auto& [n, k] : shapes)
      for (int64_t inc_a : {1, 3})
        for (bool trans_b : {true, false}) {
          INFO(name << ": n " << n << ", k " << k << ", inc_a " << inc_a << ", trans_b " << trans_b);
          CHECK(worst_gemv_error<bfloat16>(trans_b, n, k, inc_a, static_cast<uint32_t>(n * k)) <= 1);
          CHECK(worst_gemv_error<float16>(trans_b, n, k, inc_a, static_cast<uint32_t>(n + k)) <= 1);
        }
  }
}

TEST_CASE("gemv_half: the fast one-row product against the readable one (sdot of widened rows)",
          "[ops][gemm_bf16][gemv]") {
  // every kernel; both round a float32 sum of the same exact products once, in another order: at most one
  // step of T apart, and nearly all alike
  const int64_t n = 203, k = 1000;
  const auto a = random_bf16(k, 31), b = random_bf16(n * k, 32);
  std::vector<float16> a16(k), b16(n * k);
  for (int64_t i = 0; i < k; ++i) a16[i] = float16(float(a[i]));
  for (int64_t i = 0; i < n * k; ++i) b16[i] = float16(float(b[i]));
  for (const auto& [name, cap] : kernels()) {
    INFO(name);
    std::optional<cpu::IsaGuard> guard;
    if (cap >= 0) guard.emplace(static_cast<Isa>(cap));
    std::vector<bfloat16> got(n), want(n);
    cpu::gemv_half(true, n, k, a.data(), 1, b.data(), k, got.data());
    cpu::gemv_half_reference(true, n, k, a.data(), 1, b.data(), k, want.data());
    std::vector<float16> got16(n), want16(n);
    cpu::gemv_half(true, n, k, a16.data(), 1, b16.data(), k, got16.data());
    cpu::gemv_half_reference(true, n, k, a16.data(), 1, b16.data(), k, want16.data());
    int differ = 0;
    for (int64_t j = 0; j < n; ++j) {
      INFO("output " << j << ": " << float(got[j]) << " against " << float(want[j]) << ", f16 "
                     << float(got16[j]) << " against " << float(want16[j]));
      CHECK(std::abs(float(got[j]) - float(want[j])) <= 0x1p-7 * std::abs(float(want[j])));
      CHECK(std::abs(float(got16[j]) - float(want16[j])) <= 0x1p-10 * std::abs(float(want16[j])));
      differ += (got[j].bits != want[j].bits) + (got16[j].bits != want16[j].bits);
    }
    CHECK(differ < n / 5);
  }
}

TEST_CASE("gemv_bf16: bad sizes and leading dimensions are refused by name", "[ops][gemm_bf16][gemv]") {
  std::vector<bfloat16> x(16), w(64);
  std::vector<float> y(8);
  CHECK_THROWS_MATCHES(cpu::gemv_bf16(-1, 4, x.data(), w.data(), 4, y.data()), Error,
                       ErrorContains("gemv_bf16: need n, k >= 0"));
  CHECK_THROWS_MATCHES(cpu::gemv_bf16(4, 8, x.data(), w.data(), 5, y.data()), Error, ErrorContains("ldw 5"));
}
