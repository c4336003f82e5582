// NVTX ranges for Nsight Systems: every range the profiler records is also an NVTX range in a CUDA build
// (the CUDA toolkit's header-only nvtx3), so a CUDA trace shows saccade's op names above its kernels.
// A CPU build compiles the no-op versions. Started / ended ranges (not push / pop): a forward op that never
// makes its result (a composite, or one that threw) is ended when it is dropped, in any order.
#include "profiler/profiler.h"

#if SACCADE_WITH_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace saccade::profiler::detail {

#if SACCADE_WITH_CUDA
uint64_t nvtx_start(const char* name) { return nvtxRangeStartA(name); }
void nvtx_end(uint64_t id) {
  if (id) nvtxRangeEnd(id);
}
#else
uint64_t nvtx_start(const char*) { return 0; }
void nvtx_end(uint64_t) {}
#endif

}  // namespace saccade::profiler::detail
