// Placeholder kernels, replaced by ops/cpu/nn.cpp.
#include "ops/cpu/backend.h"
namespace saccade::cpu {
void CpuBackend::softmax(const Tensor&, const Tensor&, bool) { missing("softmax"); }
void CpuBackend::softmax_backward(const Tensor&, const Tensor&, const Tensor&, bool) { missing("softmax_backward"); }
void CpuBackend::layer_norm(const Tensor&, const Tensor&, const Tensor&, double, const Tensor&, const Tensor&,
                            const Tensor&) {
  missing("layer_norm");
}
void CpuBackend::layer_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                     const Tensor&, const Tensor&, const Tensor&) {
  missing("layer_norm_backward");
}
}  // namespace saccade::cpu
