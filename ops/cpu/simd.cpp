// The kernels' vector-width dispatch (simd.h): the CPU's width, once, and IsaGuard's cap.
#include "ops/cpu/simd.h"

namespace saccade::cpu {

namespace detail {
std::atomic<int> g_isa_cap{static_cast<int>(Isa::Avx512)};
}  // namespace detail

Isa cpu_isa() {
  static const Isa isa = cpu_vector_level();
  return isa;
}

}  // namespace saccade::cpu
