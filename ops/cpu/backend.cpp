// The CPU backend's one instance, handed out by backend(Device::cpu()) (ops/backend.cpp). Its kernels live in
// the family files beside this one; CpuBackend (backend.h) lists them.
#include "ops/cpu/backend.h"

namespace saccade {

Backend* detail::cpu_backend() {
  static cpu::CpuBackend instance;
  return &instance;
}

}  // namespace saccade
