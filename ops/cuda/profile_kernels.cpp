// The profiler's GPU times (CUDA builds): every kernel launch, checked by SACCADE_CUDA_CHECK_LAUNCH, records
// a cudaEvent on the current stream while a profile is active; at stop() the events are read back
// (cudaEventElapsedTime) and each kernel becomes a range on the trace's "cuda stream" lane.
//
// NOTE: a launch is marked only after it was queued (the check follows the launch), so a kernel's range runs
// from the previous kernel's end to its own: its GPU time exactly while the GPU is busy (the queue ahead of
// the CPU, as in training), plus the idle gap before it otherwise. The lane's clock is the host's at the
// first launch of the profile, when its first event was queued.
#include <cuda_runtime_api.h>

#include <mutex>
#include <vector>

#include "ops/cuda/backend.h"
#include "ops/cuda/error.h"
#include "profiler/profiler.h"

namespace saccade::cuda {

namespace {

struct Launch {
  const char* op;
  cudaEvent_t event;
};

struct Timers {
  std::mutex mutex;
  uint64_t generation = 0;
  cudaEvent_t origin = nullptr;
  int64_t origin_ns = 0;
  std::vector<Launch> launches;
};

Timers& timers() {
  static auto* t = new Timers;  // NOTE: never destroyed (a profile may stop during static destruction)
  return *t;
}

void read_back() {
  Timers& t = timers();
  std::lock_guard<std::mutex> lock(t.mutex);
  if (t.launches.empty()) return;
  const uint64_t gen = profiler::detail::generation();
  if (cudaEventSynchronize(t.launches.back().event) == cudaSuccess) {
    int64_t previous = t.origin_ns;
    for (const Launch& l : t.launches) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, t.origin, l.event) != cudaSuccess) break;
      profiler::Event e;
      e.name = l.op;
      e.category = "cuda kernel";
      e.start_ns = previous;
      e.end_ns = t.origin_ns + static_cast<int64_t>(static_cast<double>(ms) * 1e6);
      if (e.end_ns < e.start_ns) e.end_ns = e.start_ns;
      previous = e.end_ns;
      if (gen == t.generation) profiler::detail::record_lane("cuda stream", std::move(e));
    }
  }
  for (const Launch& l : t.launches) cudaEventDestroy(l.event);
  t.launches.clear();
  cudaEventDestroy(t.origin);
  t.origin = nullptr;
  (void)cudaGetLastError();  // a failure here must not surface in the next op's launch check
}

}  // namespace

void profile_launch(const char* op) {
  static const bool registered = (profiler::detail::add_stop_hook(&read_back), true);
  (void)registered;
  Timers& t = timers();
  std::lock_guard<std::mutex> lock(t.mutex);
  const uint64_t gen = profiler::detail::generation();
  if (t.generation != gen || !t.origin) {  // the first launch of this profile
    for (const Launch& l : t.launches) cudaEventDestroy(l.event);
    t.launches.clear();
    if (t.origin) cudaEventDestroy(t.origin);
    t.generation = gen;
    SACCADE_CUDA_CHECK(op, cudaEventCreate(&t.origin));
    SACCADE_CUDA_CHECK(op, cudaEventRecord(t.origin, current_stream()));
    t.origin_ns = profiler::detail::now_ns();
  }
  cudaEvent_t e;
  SACCADE_CUDA_CHECK(op, cudaEventCreate(&e));
  SACCADE_CUDA_CHECK(op, cudaEventRecord(e, current_stream()));
  t.launches.push_back({op, e});
}

}  // namespace saccade::cuda
