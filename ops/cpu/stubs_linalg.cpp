// Placeholder kernels, replaced by ops/cpu/linalg.cpp.
#include "ops/cpu/backend.h"
namespace saccade::cpu {
void CpuBackend::bmm(const Tensor&, const Tensor&, const Tensor&) { missing("bmm"); }
void CpuBackend::im2col(const Tensor&, const Tensor&, int, int, int, int, int, int) { missing("im2col"); }
void CpuBackend::col2im(const Tensor&, const Tensor&, int, int, int, int, int, int) { missing("col2im"); }
void CpuBackend::max_pool2d(const Tensor&, const Tensor&, const Tensor&, int, int, int, int, int, int) {
  missing("max_pool2d");
}
void CpuBackend::max_pool2d_backward(const Tensor&, const Tensor&, const Tensor&) { missing("max_pool2d_backward"); }
void CpuBackend::avg_pool2d(const Tensor&, const Tensor&, int, int, int, int, int, int) { missing("avg_pool2d"); }
void CpuBackend::avg_pool2d_backward(const Tensor&, const Tensor&, int, int, int, int, int, int) {
  missing("avg_pool2d_backward");
}
}  // namespace saccade::cpu
