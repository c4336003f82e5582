// The kernels' vector-width dispatch (simd.h): the CPU's width and its bf16 units, once, and the guards'
// switches.
#include "ops/cpu/simd.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace saccade::cpu {

namespace detail {
std::atomic<int> g_isa_cap{kNoIsaCap};
std::atomic<bool> g_amx_off{false};
}  // namespace detail

Isa cpu_isa() {
  static const Isa isa = cpu_vector_level();
  return isa;
}

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = cpu_isa() == Isa::Avx512 && __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

bool cpu_has_amx_bf16() {
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!cpu_has_avx512_bf16() || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    if (!(edx & (1u << 22)) || !(edx & (1u << 24))) return false;  // AMX-BF16, AMX-TILE
    // Linux keeps the 8 KB tile state off until a process asks (kernel 5.16 on): ARCH_REQ_XCOMP_PERM for
    // XFEATURE_XTILEDATA, granted to every thread of the process
    constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace saccade::cpu
