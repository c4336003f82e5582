#pragma once
// Internal: what a transport file (process_group_mpi.cpp or process_group_local.cpp) provides to
// process_group.cpp. Not installed.
#include <memory>

#include "distributed/process_group.h"

namespace saccade::distributed::detail {
/// Initialises the library (when it is not yet) and returns the world group.
std::unique_ptr<ProcessGroup> start(int* argc, char*** argv);
/// Finalises what start() initialised.
void stop();
/// The checks every transport makes on a collective's buffer: defined, CPU, contiguous, at most INT_MAX
/// elements, float32/float64 (or also int64 when !float_only). Throws saccade::Error naming `op`.
void check_buffer(const Tensor& t, const char* op, bool float_only);
}  // namespace saccade::distributed::detail
