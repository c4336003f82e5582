#include "examples/common/step_profiler.h"

#include <filesystem>

#include "examples/common/plots.h"
#include "core/error.h"

namespace saccade::examples {

StepProfiler::StepProfiler(std::string path, int64_t skip, int64_t steps, std::FILE* out)
    : path_(std::move(path)), skip_(skip), steps_(steps), out_(out ? out : stdout) {
  SACCADE_CHECK(skip >= 0 && steps >= 1, "--profile: need skip >= 0 and steps >= 1, got {} and {}", skip,
                steps);
  if (!path_.empty()) profiler::check_trace_path(path_, "--profile");
}

StepProfiler::~StepProfiler() {
  try {
    finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "--profile: %s\n", e.what());
  }
}

std::string StepProfiler::png_path(const std::string& trace) {
  std::filesystem::path png(trace);
  png.replace_extension(".png");
  if (png == std::filesystem::path(trace)) png.replace_extension(".summary.png");  // never the trace itself
  return png.string();
}

void StepProfiler::step() {
  if (path_.empty()) return;
  range_.reset();
  if (done_ == skip_ + steps_) finish();
  if (done_ == skip_)
    profile_ = std::make_unique<profiler::Profile>(profiler::ProfileOptions{
        .record_shapes = true, .profile_memory = true, .with_flops = true, .trace_path = path_});
  ++done_;
  if (profile_) range_ = std::make_unique<profiler::RecordFunction>("step " + std::to_string(done_));
}

void StepProfiler::end_step(bool stop) {
  range_.reset();
  if (profile_ && (stop || done_ == skip_ + steps_)) finish();
}

void StepProfiler::finish() {
  range_.reset();
  if (!profile_) return;
  std::unique_ptr<profiler::Profile> p = std::move(profile_);
  p->stop();  // writes the trace
  std::fprintf(out_, "profile of %lld step(s) (after %lld), slowest ops by self time:\n%s",
               static_cast<long long>(std::min(steps_, done_ - skip_)), static_cast<long long>(skip_),
               p->table("self_cpu_time_total", 15).c_str());
  StackedBars bars;
  bars.title = "where the time goes: self time by op family, all threads";
  bars.x_label = "seconds";
  bars.parts = {"forward", "backward", "optimizer, all-reduce"};
  for (const auto& f : p->time_by_family()) {
    bars.categories.push_back(f.family);
    bars.values.push_back({f.forward_s, f.backward_s, f.other_s});
  }
  const std::string png = png_path(path_);
  if (!bars.categories.empty()) write_stacked_bars(png, bars);
  std::fprintf(out_, "trace: %s (open in https://ui.perfetto.dev or chrome://tracing), summary: %s\n",
               path_.c_str(), png.c_str());
  std::fflush(out_);
}

}  // namespace saccade::examples
