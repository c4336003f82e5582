#pragma once
// Runtime dispatch of saccade's own loops to the widest vector unit of the machine they run on, so one build
// (plain x86-64, no -march=native) uses AVX-512 or AVX2 where the CPU has them, whatever OpenBLAS guessed.
//
//   with_isa([&] { for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]); });
//
// runs the lambda compiled three times: for AVX-512 (F, BW, VL, DQ, with FMA; 512-bit vectors preferred),
// for AVX2+FMA, and for baseline x86-64 (SSE2), and calls the one kernel_isa() names. `flatten` inlines
// everything the lambda calls (the per-element functors, inline helpers) into each copy, so the loops inside
// are vectorised for that width; calls the compiler cannot inline (cblas, libm, std::function) stay calls.
// A test or a benchmark can lower the width for a scope with IsaGuard, so every width the machine runs is
// checked against the baseline one (tests/test_isa_dispatch.cpp). Off x86-64, with_isa just calls f.
// The dispatch is a branch on a relaxed atomic per call: call it around a loop, never inside one.
#include <atomic>
#include <cstdint>
#include <limits>

#include "ops/cpu/blas_check.h"

namespace saccade::cpu {

/// A width the kernels can be compiled for (the widths blas_check.h names: Baseline, Avx2, Avx512).
using Isa = VectorLevel;

/// The widest Isa this CPU runs (cpu_vector_level(), computed once).
Isa cpu_isa();

namespace detail {
extern std::atomic<int> g_isa_cap;  // IsaGuard's cap, as an int; kNoIsaCap when no guard
constexpr int kNoIsaCap = static_cast<int>(Isa::Avx512) + 1;  // above every width: AVX512-BF16 allowed
}  // namespace detail

/// Whether this CPU has AVX512-BF16 (VDPBF16PS, two bf16 products per float lane) besides AVX-512 (CPUID,
/// once).
bool cpu_has_avx512_bf16();

/// Whether a kernel may use VDPBF16PS now: the CPU has it and no IsaGuard is live (any guard, even
/// IsaGuard(Isa::Avx512), turns it off, so that tests reach the widened-float path at every width).
inline bool kernel_avx512_bf16() {
  return cpu_has_avx512_bf16() && detail::g_isa_cap.load(std::memory_order_relaxed) == detail::kNoIsaCap;
}

/// Whether this CPU has AMX tiles with TDPBF16PS (AMX-TILE and AMX-BF16, CPUID) besides AVX512-BF16, and
/// Linux granted this process the tile state (arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA), asked once, on
/// the first call).
bool cpu_has_amx_bf16();

namespace detail {
extern std::atomic<bool> g_amx_off;  // AmxOff's switch
}  // namespace detail

/// Whether a kernel may use AMX tiles now: the CPU has them, kernel_avx512_bf16() holds (no IsaGuard) and no
/// AmxOff is live.
inline bool kernel_amx_bf16() {
  return kernel_avx512_bf16() && !detail::g_amx_off.load(std::memory_order_relaxed) && cpu_has_amx_bf16();
}

/// While it lives, no kernel uses AMX tiles (VDPBF16PS still runs): tests and benchmarks reach the kernel
/// below AMX on a CPU that has it. Process-wide, as IsaGuard: make it while no kernel runs.
class AmxOff {
 public:
  AmxOff() : prev_(detail::g_amx_off.exchange(true)) {}
  ~AmxOff() { detail::g_amx_off.store(prev_); }
  AmxOff(const AmxOff&) = delete;
  AmxOff& operator=(const AmxOff&) = delete;

 private:
  bool prev_;
};

/// The width with_isa uses now: cpu_isa(), lowered by a live IsaGuard.
inline Isa kernel_isa() {
  const int cap = detail::g_isa_cap.load(std::memory_order_relaxed);
  const Isa c = cpu_isa();
  return static_cast<int>(c) < cap ? c : static_cast<Isa>(cap);
}

/// While it lives, with_isa uses at most `cap` in every thread of the process (tests and benchmarks only:
/// it is process-wide, so make it while no kernel runs). Restores the previous cap.
class IsaGuard {
 public:
  explicit IsaGuard(Isa cap) : prev_(detail::g_isa_cap.exchange(static_cast<int>(cap))) {}
  ~IsaGuard() { detail::g_isa_cap.store(prev_); }
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;

 private:
  int prev_;
};

/// Repairs the result m of `#pragma omp simd reduction(max : m)` over x[0 .. n), for m started at -inf.
/// OpenMP starts each lane's private copy at the type's "least representable value": GCC takes -inf, clang
/// lowest() (-FLT_MAX), so under clang a row whose entries are all -inf (a fully masked attention row)
/// reduces to lowest() instead of -inf. Returns -inf in that case and m otherwise (the scalar re-check runs
/// only when m == lowest()).
template <class T>
inline T simd_max_result(T m, const T* x, int64_t n) {
  if (m != std::numeric_limits<T>::lowest()) return m;
  for (int64_t i = 0; i < n; ++i)
    if (x[i] == m) return m;  // a real lowest() entry
  return -std::numeric_limits<T>::infinity();
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
template <class F>
[[gnu::target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,prefer-vector-width=512"),
  gnu::flatten]] inline auto
isa_avx512(F& f) {
  return f();
}
template <class F>
[[gnu::target("avx2,fma"), gnu::flatten]] inline auto isa_avx2(F& f) {
  return f();
}
template <class F>
[[gnu::flatten]] inline auto isa_baseline(F& f) {
  return f();
}

/// Calls f() compiled for kernel_isa() (see the file comment); returns what f returns.
template <class F>
inline auto with_isa(F&& f) {
  switch (kernel_isa()) {
    case Isa::Avx512:
      return isa_avx512(f);
    case Isa::Avx2:
      return isa_avx2(f);
    default:
      return isa_baseline(f);
  }
}
#else
template <class F>
inline auto with_isa(F&& f) {
  return f();
}
#endif

}  // namespace saccade::cpu
