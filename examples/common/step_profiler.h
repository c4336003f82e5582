#pragma once
// The examples' --profile FILE: profiles a few training steps with saccade's profiler (profiler/profiler.h)
// and writes what it saw:
//   FILE            the Chrome trace: open it in https://ui.perfetto.dev or chrome://tracing
//   FILE's stem.png time by op family, forward and backward stacked (self time, all threads); for a FILE
//                   that ends in .png itself, FILE's stem.summary.png
//   the table       calls, self / total time, FLOPs, GFLOP/s, bytes per op (like torch's key_averages)
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "profiler/profiler.h"

namespace saccade::examples {

/// Call step() at the top of every training step and end_step() after its optimizer step. The profile
/// starts at step skip + 1 (the first steps allocate the optimizer's state and warm the caches) and covers
/// `steps` steps, each a "step N" range; it is written at the end_step() of the last of them, or earlier at
/// an end_step(true) (the run ends, or validation comes next), so that it holds those steps and nothing
/// after them: its table's call counts are the steps' own. Without end_step() calls, it is written at the
/// next step() or when the StepProfiler is destroyed.
class StepProfiler {
 public:
  /// An empty `path` profiles nothing. Throws saccade::Error naming --profile when `path` can't be written
  /// (checked here, before training starts), or when skip < 0 or steps < 1.
  explicit StepProfiler(std::string path, int64_t skip = 1, int64_t steps = 3, std::FILE* out = stdout);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  /// Marks the start of the next training step (and the end of the previous one).
  void step();
  /// Marks the end of the current training step: closes its range, and writes the profile when it has
  /// covered its steps, or now when `stop` (work that is not a training step follows: validation, the end
  /// of the run). Does nothing before the profile starts or after it is written.
  void end_step(bool stop = false);
  /// Stops and writes the trace, the PNG and the table now, if a profile is running.
  void finish();
  /// The PNG's path for a trace at `trace`: "out/trace.json" -> "out/trace.png", never `trace` itself
  /// ("p.png" -> "p.summary.png").
  static std::string png_path(const std::string& trace);

 private:
  std::string path_;
  int64_t skip_, steps_, done_ = 0;
  std::FILE* out_;
  std::unique_ptr<profiler::Profile> profile_;
  std::unique_ptr<profiler::RecordFunction> range_;
};

}  // namespace saccade::examples
