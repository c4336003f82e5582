#pragma once
// What only one rank should do: print progress and write checkpoints. Every replica holds the same
// parameters after each synchronized step, so rank 0's copy speaks for all.
#include <cstdio>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "distributed/process_group.h"
#include "nn/serialization.h"

namespace saccade::distributed {

/// fmt::print to `out` on rank 0 only (and flushes, so that mpirun forwards the line at once).
template <class... Args>
void print(std::FILE* out, fmt::format_string<Args...> format, Args&&... args) {
  if (!is_main_process()) return;
  fmt::print(out, format, std::forward<Args>(args)...);
  std::fflush(out);
}

/// nn::save_checkpoint on rank 0 (atomic: a temporary file renamed over `path`), then a barrier, so that when
/// any rank returns the file is complete and readable by all (on a shared file system). Collective. The file
/// is an ordinary checkpoint: a single-process run loads it with nn::load_checkpoint, and a distributed run
/// loads a single-process checkpoint on every rank the same way. Throws what nn::save_checkpoint throws, on
/// rank 0 only (the others then time out or are aborted with the job).
void save_checkpoint(const std::string& path, const nn::Module& module, const nn::Optimizer& optimizer,
                     int64_t step, const nn::Metadata& metadata = {}, const nn::GradScaler* scaler = nullptr);

}  // namespace saccade::distributed
