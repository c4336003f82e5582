#pragma once
// A training progress printer: step, bar, loss, steps/s and ETA on one line.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace saccade::examples {

/// Prints training progress to `out`. On a terminal the line is redrawn in place with '\r' (at most ~10 times
/// a second, and always at the last step); otherwise (a log file, a pipe) one line is printed every
/// `print_every` steps and at the last step. finish() ends the line.
class ProgressBar {
 public:
  /// `total_steps` > 0: the run's last step; `tty`: -1 asks isatty(out), 0 / 1 force the mode;
  /// `first_step`: the steps done before this process (a resumed run: 20 when it goes on from step 20 to
  /// total_steps 30), so that the line reads "step 21/30" and the rate counts only the steps timed here.
  /// Throws saccade::Error for total_steps or print_every < 1, or first_step outside [0, total_steps).
  explicit ProgressBar(int64_t total_steps, int64_t print_every = 100, std::FILE* out = stdout, int tty = -1,
                       int64_t first_step = 0);
  /// Reports that steps up to `step` (1-based, first_step < step <= total_steps) are done and the current
  /// loss; `extra` (e.g.
  /// "1234 tokens/s") is appended to the line. `seconds_left` >= 0: the run also stops when that much more
  /// time has passed (a time limit), and the ETA is whichever limit comes first; with set_time_limit, the bar
  /// and the percentage too, and `seconds_left` == 0 is the last step (its line is always printed).
  void update(int64_t step, double loss, const std::string& extra = "", double seconds_left = -1);
  /// The run's time limit in seconds (> 0), of which update's `seconds_left` is what remains: the line then
  /// shows progress against whichever of the steps and the time will end the run first.
  void set_time_limit(double seconds) { time_limit_ = seconds; }
  /// The seconds this process has spent on training steps so far, when the caller times them itself
  /// (validation and checkpoints left out): the rate and the ETA are then (step - first_step) / seconds, the
  /// figure the run's summary gives. Without it they use the wall-clock time since construction.
  void set_train_seconds(double seconds) { train_seconds_ = seconds; }
  /// Ends the in-place line (on a terminal) with a newline; safe to call more than once.
  void finish();
  /// The name printed before the loss ("loss" by default): the trainers pass a running average and say so
  /// ("avg loss"), so that it is not taken for the final mean or a step's loss in a log.
  void set_loss_label(std::string label) { loss_label_ = std::move(label); }

  /// One progress line: "step 50/200 [=====>              ]  25%  loss 0.1235  12.5 steps/s  ETA 00:12"
  /// (bar of `bar_width` characters; ETA as MM:SS or H:MM:SS; "--" for steps/s and ETA when rate <= 0).
  /// With `seconds_left` >= 0 (a time limit), the ETA is the sooner of the steps left at this rate and
  /// seconds_left: a 5-minute run capped at 10⁶ steps shows the 5 minutes, not the million steps.
  /// `loss_label` names the loss ("loss"). With `time_limit` > 0 as well (seconds_left of it remain), the bar
  /// and the percentage follow the time when the time will end the run first, and say so:
  /// "step 1450/100000 [============>       ]  60% of --time-limit  loss ...".
  static std::string format_line(int64_t step, int64_t total, double loss, double steps_per_s,
                                 int bar_width = 20, double seconds_left = -1,
                                 const std::string& loss_label = "loss", double time_limit = 0);

 private:
  using Clock = std::chrono::steady_clock;
  int64_t total_, every_, first_;
  double train_seconds_ = -1;
  std::FILE* out_;
  bool tty_, open_line_ = false;
  std::string loss_label_ = "loss";
  double time_limit_ = 0;
  Clock::time_point start_, last_draw_;
};

}  // namespace saccade::examples
