// What the CPU offers against the OpenBLAS core that runs (blas_check.h).
#include "ops/cpu/blas_check.h"

#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include <fmt/format.h>

namespace saccade::cpu {

const char* vector_level_name(VectorLevel level) {
  switch (level) {
    case VectorLevel::Avx512:
      return "AVX-512";
    case VectorLevel::Avx2:
      return "AVX2+FMA";
    default:
      return "baseline (SSE2)";
  }
}

VectorLevel cpu_vector_level() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return VectorLevel::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VectorLevel::Avx2;
#endif
  return VectorLevel::Baseline;
}

VectorLevel core_vector_level(std::string_view core) {
  std::string c(core);
  std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (c == "skylakex" || c == "cooperlake" || c == "sapphirerapids") return VectorLevel::Avx512;
  if (c == "haswell" || c == "zen" || c == "excavator") return VectorLevel::Avx2;
  return VectorLevel::Baseline;
}

std::string better_blas_core(std::string_view chosen, VectorLevel cpu) {
  if (core_vector_level(chosen) >= cpu) return "";
  return cpu == VectorLevel::Avx512 ? "SkylakeX" : "Haswell";
}

std::string blas_core() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

namespace {

// The largest |sgemm - reference| / (Σ_p |a||b| + tiny) over C (m, n) = op(A) op(B).
double sgemm_error(bool ta, bool tb, int m, int n, int k) {
  std::vector<float> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(k) * n),
      c(static_cast<size_t>(m) * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 37 % 101) / 50.0 - 1.0);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 53 % 89) / 44.0 - 1.0);
  const int lda = ta ? m : k, ldb = tb ? k : n;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
              a.data(), lda, b.data(), ldb, 0.0f, c.data(), n);
  double worst = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0, mag = 0;
      for (int p = 0; p < k; ++p) {
        const double x = ta ? a[p * lda + i] : a[i * lda + p], y = tb ? b[j * ldb + p] : b[p * ldb + j];
        sum += x * y;
        mag += std::abs(x * y);
      }
      const double err = std::abs(c[i * n + j] - sum) / (mag + 1e-30);
      if (!(err <= worst)) worst = err;  // NaN counts as the worst
    }
  return worst;
}

}  // namespace

std::string check_sgemm() {
  struct Case {
    bool ta, tb;
    int m, n, k;
  };
  for (const Case& t : {Case{false, false, 37, 29, 67}, Case{false, true, 64, 64, 64},
                        Case{true, false, 5, 71, 33}, Case{true, true, 1, 17, 130}}) {
    const double err = sgemm_error(t.ta, t.tb, t.m, t.n, t.k);
    if (!(err < 1e-4))
      return fmt::format("OpenBLAS's sgemm ({} core) is off by {:.3g} (relative) on a {}x{}x{} product{}{}",
                         blas_core(), err, t.m, t.n, t.k, t.ta ? ", A transposed" : "",
                         t.tb ? ", B transposed" : "");
  }
  return "";
}

void blas_first_use() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string core = blas_core();
    const VectorLevel cpu = cpu_vector_level();
    const std::string better = better_blas_core(core, cpu);
    const char* env = std::getenv("OPENBLAS_CORETYPE");
    if (!better.empty())
      std::fprintf(
          stderr,
          "saccade: OpenBLAS runs its %s kernels (%s) on a CPU with %s%s: GEMMs run at a fraction of "
          "the machine's speed. Start the program with OPENBLAS_CORETYPE=%s in its environment (the "
          "examples do it themselves when it is unset; see ops/README.md, \"OpenBLAS core\").\n",
          core.c_str(), vector_level_name(core_vector_level(core)), vector_level_name(cpu),
          env ? fmt::format(" (OPENBLAS_CORETYPE={} is set)", env).c_str() : "", better.c_str());
    const std::string bad = check_sgemm();
    if (!bad.empty())
      std::fprintf(stderr,
                   "saccade: %s: results of matrix products will be wrong. Set OPENBLAS_CORETYPE to an older "
                   "core (e.g. Haswell or Prescott) or unset it.\n",
                   bad.c_str());
  });
}

}  // namespace saccade::cpu
