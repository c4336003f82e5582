// The OpenBLAS core checks (ops/cpu/blas_check.h) and blas_info (ops/blas.h). The tests keep the
// environment's OPENBLAS_CORETYPE (they never call use_best_blas_core, which would re-execute the test
// program).
#include <cstdlib>
#include <string>

#include "helpers.h"
#include "ops/blas.h"
#include "ops/cpu/blas_check.h"

using namespace saccade;
using cpu::VectorLevel;

TEST_CASE("blas: the width an OpenBLAS core uses, by name in any case", "[ops][blas]") {
  CHECK(cpu::core_vector_level("SkylakeX") == VectorLevel::Avx512);
  CHECK(cpu::core_vector_level("COOPERLAKE") == VectorLevel::Avx512);
  CHECK(cpu::core_vector_level("SapphireRapids") == VectorLevel::Avx512);
  CHECK(cpu::core_vector_level("haswell") == VectorLevel::Avx2);
  CHECK(cpu::core_vector_level("Zen") == VectorLevel::Avx2);
  CHECK(cpu::core_vector_level("Prescott") == VectorLevel::Baseline);
  CHECK(cpu::core_vector_level("Sandybridge") == VectorLevel::Baseline);  // AVX without FMA
  CHECK(cpu::core_vector_level("") == VectorLevel::Baseline);
}

TEST_CASE("blas: the better core is SkylakeX or Haswell, only when wider than the chosen one",
          "[ops][blas]") {
  // Issue 20's machine: an AVX-512 Xeon that OpenBLAS 0.3.21 does not know runs Prescott.
  CHECK(cpu::better_blas_core("Prescott", VectorLevel::Avx512) == "SkylakeX");
  CHECK(cpu::better_blas_core("Haswell", VectorLevel::Avx512) == "SkylakeX");
  CHECK(cpu::better_blas_core("Zen", VectorLevel::Avx512) == "SkylakeX");
  CHECK(cpu::better_blas_core("Prescott", VectorLevel::Avx2) == "Haswell");
  CHECK(cpu::better_blas_core("Sandybridge", VectorLevel::Avx2) == "Haswell");
  // Already as wide as the CPU: nothing to change (an AMD Zen 4 gets Cooperlake from this OpenBLAS).
  CHECK(cpu::better_blas_core("Cooperlake", VectorLevel::Avx512).empty());
  CHECK(cpu::better_blas_core("SkylakeX", VectorLevel::Avx512).empty());
  CHECK(cpu::better_blas_core("Zen", VectorLevel::Avx2).empty());
  CHECK(cpu::better_blas_core("Prescott", VectorLevel::Baseline).empty());
  // Never a core wider than the CPU.
  CHECK(cpu::better_blas_core("Haswell", VectorLevel::Avx2).empty());
}

TEST_CASE("blas: this OpenBLAS's sgemm agrees with the readable product", "[ops][blas]") {
  CHECK(cpu::check_sgemm().empty());
}

TEST_CASE("blas: blas_info names the library, the core and the CPU", "[ops][blas]") {
  const BlasInfo info = blas_info();
  CHECK(info.library.find("OpenBLAS") != std::string::npos);
  CHECK(info.core == cpu::blas_core());
  CHECK(info.cpu == cpu::vector_level_name(cpu::cpu_vector_level()));
  CHECK(info.better_core == cpu::better_blas_core(info.core, cpu::cpu_vector_level()));
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  CHECK(info.coretype_env == (env ? env : ""));
  CHECK(info.threads >= 1);
  CHECK(info.blas_threads >= 1);
  const std::string line = blas_info_line();
  CHECK(line.rfind("BLAS: OpenBLAS", 0) == 0);
  CHECK(line.find("core " + info.core) != std::string::npos);
  CHECK((line.find("BELOW THE CPU") != std::string::npos) == !info.better_core.empty());
}
