#pragma once
// A training run's hold on its output folder (one run at a time writes it) and its Ctrl-C (the run stops
// after the step under way, saved, instead of dying in the middle of writing a checkpoint).
#include <memory>
#include <string>
#include <vector>

namespace saccade::examples {

/// An exclusive lock of one training run on its output folder: flock(2) on `dir`/train.lock, a file that
/// holds the holder's process id (so a refused run can name it). The kernel releases the lock when the
/// holder exits, however it exits; a lock file left by a killed run is taken over by the next run.
class RunLock {
 public:
  /// The lock file's name in the folder.
  static constexpr const char* kFileName = "train.lock";
  /// Takes the lock of folder `dir` (which must exist): the lock, or nullptr when another process holds
  /// it, with that process's id in `holder` (-1 when it has not written it yet). Throws saccade::Error
  /// naming "RunLock" and the file when it cannot be opened or locked for another reason.
  static std::unique_ptr<RunLock> acquire(const std::string& dir, long* holder = nullptr);
  /// Removes the lock file and releases the lock.
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  /// The lock file.
  const std::string& path() const { return path_; }

 private:
  RunLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

/// Ctrl-C (SIGINT) and SIGTERM for the lifetime of the object: the first one only sets a flag (read with
/// requested(); a training loop stops after its step, saved) and prints `message` on stderr; a second one
/// removes the files `partial_files` (the .tmp files of writes under way) and ends the process as the signal
/// would have. The previous handlers come back when the object is destroyed. One at a time per process (the
/// handler's state is process-wide, as signals are): constructing a second throws saccade::Error.
class InterruptGuard {
 public:
  /// Installs the handlers. At most 8 `partial_files`, each under 4096 bytes (saccade::Error otherwise).
  InterruptGuard(const std::string& message, const std::vector<std::string>& partial_files);
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  /// Whether a signal came since the object was made.
  static bool requested();
};

}  // namespace saccade::examples
