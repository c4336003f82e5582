// Placeholder kernels, replaced by ops/cpu/index.cpp.
#include "ops/cpu/backend.h"
namespace saccade::cpu {
void CpuBackend::index_select(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t) {
  missing("index_select");
}
void CpuBackend::index_add(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t) { missing("index_add"); }
void CpuBackend::gather(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t) { missing("gather"); }
void CpuBackend::scatter_add(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t) {
  missing("scatter_add");
}
}  // namespace saccade::cpu
