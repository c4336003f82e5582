// blas_info and use_best_blas_core (ops/blas.h) on top of the checks in ops/cpu/blas_check.h.
#include "ops/blas.h"

#include <cblas.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "ops/cpu/blas_check.h"
#include "ops/threads.h"

namespace saccade {

namespace {

constexpr const char* kMarker = "SACCADE_BLAS_REEXEC";

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Replaces this process by a fresh run of its own executable; returns (with a warning, the variables put back
// as the user had them) only when exec fails.
void reexec(char** argv, const std::string& user_coretype) {
  std::fflush(stdout);
  std::fflush(stderr);
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "saccade: could not re-execute %s (%s); going on with OpenBLAS's core %s\n", argv[0],
               std::strerror(errno), cpu::blas_core().c_str());
  if (user_coretype.empty()) unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kMarker);
}

}  // namespace

BlasInfo blas_info() {
  BlasInfo info;
  const char* config = openblas_get_config();
  info.library = config ? config : "OpenBLAS";
  info.core = cpu::blas_core();
  const cpu::VectorLevel level = cpu::cpu_vector_level();
  info.cpu = cpu::vector_level_name(level);
  info.better_core = cpu::better_blas_core(info.core, level);
  info.coretype_env = env_or_empty("OPENBLAS_CORETYPE");
  info.set_by_saccade = !info.coretype_env.empty() && env_or_empty(kMarker) == info.coretype_env;
  info.threads = get_num_threads();
  info.blas_threads = openblas_get_num_threads();
  return info;
}

std::string blas_info_line() {
  const BlasInfo i = blas_info();
  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64" -> "OpenBLAS 0.3.21"
  std::string lib = i.library.substr(0, i.library.find(' ', i.library.find(' ') + 1));
  if (i.library.find("DYNAMIC_ARCH") != std::string::npos) lib += " (DYNAMIC_ARCH)";
  std::string env = i.coretype_env.empty() ? "OPENBLAS_CORETYPE unset"
                                           : fmt::format("OPENBLAS_CORETYPE={}{}", i.coretype_env,
                                                         i.set_by_saccade ? " (set by saccade)" : "");
  std::string line = fmt::format("BLAS: {}, core {} on an {} CPU, {}, {} threads (OpenBLAS {})", lib, i.core,
                                 i.cpu, env, i.threads, i.blas_threads);
  if (!i.better_core.empty()) line += fmt::format("; BELOW THE CPU: set OPENBLAS_CORETYPE={}", i.better_core);
  return line;
}

namespace {

// use_best_blas_core's choice: returns only when this process goes on (no re-execution, or exec failed).
void choose_blas_core(char** argv) {
#ifdef __linux__
  if (argv == nullptr || argv[0] == nullptr) return;
  const std::string env = env_or_empty("OPENBLAS_CORETYPE"), marker = env_or_empty(kMarker);
  if (marker == "fallback") return;  // we tried a core and it failed: OpenBLAS's own choice stands
  if (!env.empty()) {
    if (env != marker) return;  // the user's value: never changed
    // We set it in the process that re-executed this one: trust the core only if it took and computes right.
    std::string why;
    if (cpu::blas_core() != env)
      why = fmt::format("OpenBLAS did not take OPENBLAS_CORETYPE={} (it runs {})", env, cpu::blas_core());
    else
      why = cpu::check_sgemm();
    if (why.empty()) return;
    std::fprintf(stderr, "saccade: %s; going back to OpenBLAS's own choice of core\n", why.c_str());
    unsetenv("OPENBLAS_CORETYPE");
    setenv(kMarker, "fallback", 1);
    reexec(argv, "");
    return;
  }
  const std::string better = cpu::better_blas_core(cpu::blas_core(), cpu::cpu_vector_level());
  if (better.empty() || !marker.empty()) return;
  setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  setenv(kMarker, better.c_str(), 1);
  reexec(argv, "");
#else
  (void)argv;
#endif
}

}  // namespace

void use_best_blas_core(char** argv) {
  choose_blas_core(argv);
  // The core is final here: its warning (if any) goes to stderr now, before the program prints anything, not
  // at the first GEMM in the middle of a line of output.
  cpu::blas_first_use();
}

}  // namespace saccade
