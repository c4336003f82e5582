// The CPU backend's one instance, handed out by backend(Device::cpu()) (ops/backend.cpp). Its kernels live in
// the family files beside this one; CpuBackend (backend.h) lists them, Widening adds the 16-bit route.
#include "ops/cpu/backend.h"

#include "ops/backend_widening.h"

namespace saccade {

Backend* detail::cpu_backend() {
  static Widening<cpu::CpuBackend> instance;
  return &instance;
}

}  // namespace saccade
