// The kernels' vector-width dispatch (simd.h): the CPU's width, once, and IsaGuard's cap.
#include "ops/cpu/simd.h"

namespace saccade::cpu {

namespace detail {
std::atomic<int> g_isa_cap{kNoIsaCap};
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

}  // namespace saccade::cpu
