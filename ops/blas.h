#pragma once
// The BLAS saccade runs on (OpenBLAS), which kernels of it run, and how a program gets the widest ones.
//
// OpenBLAS picks its kernels (its "core") from the CPU model once, when the library loads, reading
// OPENBLAS_CORETYPE then and never again. A CPU model it does not know gets its SSE3 kernels (Prescott), even
// with AVX-512: a fraction of the machine's GEMM speed (issue 20; bench/RESULTS.md, "figures moved out of
// code comments"). saccade's GEMM kernels warn once on stderr when that happens (ops/cpu/blas_check.h); a
// program can fix it for its user with use_best_blas_core(), which the examples call first thing in main().
#include <string>

namespace saccade {

/// What blas_info() reports.
struct BlasInfo {
  std::string library;          ///< openblas_get_config(), e.g. "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..."
  std::string core;             ///< the kernels in use, openblas_get_corename(), e.g. "SkylakeX", "Prescott"
  std::string cpu;              ///< what the CPU offers: "AVX-512", "AVX2+FMA" or "baseline (SSE2)"
  std::string better_core;      ///< the core that would use the CPU fully when `core` does not, else ""
  std::string coretype_env;     ///< OPENBLAS_CORETYPE as the process sees it, "" when unset
  bool set_by_saccade = false;  ///< OPENBLAS_CORETYPE was set by use_best_blas_core (not by the user)
  int blas_threads = 1;         ///< openblas_get_num_threads() (saccade keeps it at 1: ops/threads.h)
  int threads = 1;              ///< saccade's thread budget, get_num_threads()
};

/// The BLAS library, the core it runs, what the CPU offers and the threads, read now. Never throws.
BlasInfo blas_info();

/// blas_info() on one line, for the first lines of a program's output and beside benchmark figures:
/// "BLAS: OpenBLAS 0.3.21 (DYNAMIC_ARCH), core SkylakeX on an AVX-512 CPU, OPENBLAS_CORETYPE=SkylakeX (set by
/// saccade), 2 threads (OpenBLAS 1)"; a core narrower than the CPU ends with "; BELOW THE CPU: set
/// OPENBLAS_CORETYPE=SkylakeX".
std::string blas_info_line();

/// Makes this program run OpenBLAS's widest safe kernels: call it first thing in main(), before anything
/// else runs. When OPENBLAS_CORETYPE is unset and OpenBLAS chose a core narrower than the CPU offers (see
/// cpu::better_blas_core: SkylakeX for AVX-512 F/BW/VL/DQ, Haswell for AVX2+FMA), it sets OPENBLAS_CORETYPE
/// and re-executes the program (/proc/self/exe with the same argv) once, since OpenBLAS reads the variable
/// only when it loads. In the re-executed program it checks the new core's sgemm against the readable
/// product (cpu::check_sgemm); if that disagrees, or OpenBLAS did not take the core, it warns on stderr and
/// re-executes once more without the variable (OpenBLAS's own choice). A value the user set is never
/// changed. The marker variable SACCADE_BLAS_REEXEC (the core asked for, then "fallback") prevents loops.
/// Returns only when no re-execution happens (or exec failed, with a warning), after giving the core's
/// warning, if any, on stderr (cpu::blas_first_use), so that it comes before the program's first output
/// rather than at its first GEMM; argv must be main()'s.
/// Linux only: elsewhere it does nothing. Tests and CI do not call it: they keep the environment's value.
void use_best_blas_core(char** argv);

}  // namespace saccade
