#include "examples/common/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace saccade::examples {

ProgressBar::ProgressBar(int64_t total_steps, int64_t print_every, std::FILE* out, int tty,
                         int64_t first_step)
    : total_(total_steps),
      every_(print_every),
      first_(first_step),
      out_(out),
      start_(Clock::now()),
      last_draw_(start_) {
  SACCADE_CHECK(total_steps >= 1 && print_every >= 1,
                "ProgressBar: total_steps and print_every must be positive, got {} and {}", total_steps,
                print_every);
  SACCADE_CHECK(first_step >= 0 && first_step < total_steps,
                "ProgressBar: first_step must be in [0, total_steps = {}), got {}", total_steps, first_step);
  SACCADE_CHECK(out != nullptr, "ProgressBar: no output stream");
  tty_ = tty < 0 ? isatty(fileno(out)) != 0 : tty != 0;
}

std::string ProgressBar::format_line(int64_t step, int64_t total, double loss, double steps_per_s,
                                     int bar_width, double seconds_left, const std::string& loss_label,
                                     double time_limit) {
  double frac =
      total > 0 ? std::clamp(static_cast<double>(step) / static_cast<double>(total), 0.0, 1.0) : 0.0;
  // the time ends the run first when what is left of it is shorter than the steps left at this rate (or,
  // before a rate, when more of it than of the steps is used)
  bool timed = false;
  if (time_limit > 0 && seconds_left >= 0) {
    double time_frac = std::clamp(1.0 - seconds_left / time_limit, 0.0, 1.0);
    timed = steps_per_s > 0
                ? seconds_left < static_cast<double>(std::max<int64_t>(total - step, 0)) / steps_per_s
                : time_frac > frac;
    if (timed) frac = time_frac;
  }
  auto filled = static_cast<int>(frac * bar_width);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < bar_width) bar += '>';
  bar.resize(static_cast<size_t>(bar_width), ' ');
  std::string rate = "--", eta = "--";
  if (steps_per_s > 0) {
    rate = fmt::format("{:.1f}", steps_per_s);
    double left = static_cast<double>(std::max<int64_t>(total - step, 0)) / steps_per_s;
    if (seconds_left >= 0) left = std::min(left, seconds_left);  // whichever limit ends the run
    auto s = static_cast<int64_t>(std::llround(left));
    eta = s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                    : fmt::format("{:02}:{:02}", s / 60, s % 60);
  }
  return fmt::format("step {}/{} [{}] {:3}%{}  {} {:.4f}  {} steps/s  ETA {}", step, total, bar,
                     static_cast<int>(frac * 100), timed ? " of --time-limit" : "", loss_label, loss, rate,
                     eta);
}

void ProgressBar::update(int64_t step, double loss, const std::string& extra, double seconds_left) {
  auto now = Clock::now();
  double elapsed = train_seconds_ >= 0 ? train_seconds_ : std::chrono::duration<double>(now - start_).count();
  double rate = elapsed > 0 ? static_cast<double>(step - first_) / elapsed : 0.0;
  bool last = step >= total_ || (time_limit_ > 0 && seconds_left == 0);
  auto line = [&] {
    return format_line(step, total_, loss, rate, 20, seconds_left, loss_label_, time_limit_) +
           (extra.empty() ? "" : "  " + extra);
  };
  if (tty_) {
    if (!last && now - last_draw_ < std::chrono::milliseconds(100)) return;
    std::fprintf(out_, "\r%s", line().c_str());
    open_line_ = true;
  } else {
    if (!last && step % every_ != 0) return;
    std::fprintf(out_, "%s\n", line().c_str());
  }
  last_draw_ = now;
  std::fflush(out_);
}

void ProgressBar::finish() {
  if (open_line_) std::fputc('\n', out_), std::fflush(out_);
  open_line_ = false;
}

}  // namespace saccade::examples
