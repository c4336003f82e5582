#pragma once
// Which OpenBLAS kernels run, against what the CPU offers. OpenBLAS (a DYNAMIC_ARCH build such as Debian's)
// picks its kernels ("core") from the CPU model when it loads; a model it does not know falls back to old
// SSE3 kernels (Prescott) on a CPU with AVX-512, at a fraction of the speed and without a word (ops/blas.h).
// This file says what the CPU offers (CPUID), what OpenBLAS chose, which core of this OpenBLAS would use the
// CPU fully, and checks a core's sgemm against the readable product. The library calls blas_first_use() from
// its GEMM kernels (one warning on stderr, once); the examples' re-execution lives in ops/blas.h.
#include <cstdint>
#include <string>
#include <string_view>

namespace saccade::cpu {

/// A width of vector unit: what a CPU offers or an OpenBLAS core uses. Ordered: a larger value is wider.
enum class VectorLevel { Baseline = 0, Avx2 = 1, Avx512 = 2 };

/// "baseline (SSE2)", "AVX2+FMA" or "AVX-512".
const char* vector_level_name(VectorLevel level);

/// What this CPU (and the OS, which must save the wide registers) offers, by CPUID through
/// `__builtin_cpu_supports`: Avx512 needs AVX-512 F, BW, VL and DQ; Avx2 needs AVX2 and FMA. Always
/// Baseline off x86-64.
VectorLevel cpu_vector_level();

/// The widest vector unit an OpenBLAS core name (`openblas_get_corename()`, any case) uses: SkylakeX,
/// Cooperlake, SapphireRapids: Avx512; Haswell, Zen, Excavator: Avx2; any other (Prescott, Nehalem,
/// Sandybridge, ..., unknown names): Baseline.
VectorLevel core_vector_level(std::string_view core);

/// The core to ask of OpenBLAS (`OPENBLAS_CORETYPE`) when it chose `chosen` on a CPU offering `cpu`:
/// "SkylakeX" (cpu Avx512) or "Haswell" (cpu Avx2) when that is wider than what `chosen` uses, else "" (the
/// choice is already as wide as the CPU). Only these two cores: the ones this OpenBLAS runs safely there.
std::string better_blas_core(std::string_view chosen, VectorLevel cpu);

/// The core OpenBLAS runs (`openblas_get_corename()`), e.g. "Prescott", "SkylakeX".
std::string blas_core();

/// Checks OpenBLAS's sgemm against the readable triple loop (double sums) on small products with odd sizes
/// and each transpose (the edge kernels of every core run). Returns "" when they agree (relative error
/// below 1e-4 of Σ|a||b|), else a sentence naming the worst difference.
std::string check_sgemm();

/// Called by the GEMM kernels before they use OpenBLAS; the first call (only) warns once on stderr when
/// OpenBLAS runs kernels narrower than the CPU's (naming the OPENBLAS_CORETYPE that fixes it) or when its
/// sgemm disagrees with check_sgemm's reference. Thread-safe; after the first call one atomic load.
void blas_first_use();

}  // namespace saccade::cpu
