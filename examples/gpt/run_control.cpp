#include "examples/gpt/run_control.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace saccade::examples {
namespace {

// The holder's process id written in the lock file `fd`, or -1 when it holds none (yet).
long read_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  char* end = nullptr;
  const long pid = std::strtol(buf, &end, 10);
  return end != buf && pid > 0 ? pid : -1;
}

// The signal handler's state. Process-wide because signal dispositions are; only InterruptGuard writes it,
// before it installs the handler (the handler reads it, and writes only g_signals).
volatile std::sig_atomic_t g_signals = 0;
std::atomic<bool> g_installed{false};
char g_message[1024];
size_t g_message_len = 0;
constexpr int kMaxFiles = 8;
char g_files[kMaxFiles][4096];
int g_num_files = 0;
struct sigaction g_old_int, g_old_term;

// NOTE: only async-signal-safe calls here (write, unlink, signal, raise).
extern "C" void on_interrupt(int sig) {
  if (g_signals == 0) {
    g_signals = 1;
    const ssize_t written = ::write(STDERR_FILENO, g_message, g_message_len);
    (void)written;  // a message that cannot be written changes nothing
    return;
  }
  for (int i = 0; i < g_num_files; ++i) ::unlink(g_files[i]);
  std::signal(sig, SIG_DFL);
  std::raise(sig);  // delivered when the handler returns: the process ends as the signal ends it
}

}  // namespace

std::unique_ptr<RunLock> RunLock::acquire(const std::string& dir, long* holder) {
  const std::string path = dir + "/" + kFileName;
  // A holder removes the file when it ends: a lock taken on a file that is no longer at `path` locks
  // nothing, so the file is opened and locked again until the locked file is the one at `path`.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    SACCADE_CHECK(fd >= 0, "RunLock: cannot open '{}': {}", path, std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err != EWOULDBLOCK) {
        ::close(fd);
        SACCADE_CHECK(false, "RunLock: cannot lock '{}': {}", path, std::strerror(err));
      }
      long pid = read_pid(fd);  // the holder writes it just after it locks: wait for it a little
      for (int i = 0; i < 50 && pid < 0; ++i) {
        ::usleep(10000);
        pid = read_pid(fd);
      }
      ::close(fd);
      if (holder) *holder = pid;
      return nullptr;
    }
    struct stat held {
    }, named{};
    if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino) {
      const std::string pid = std::to_string(static_cast<long>(::getpid())) + "\n";
      const bool written = ::ftruncate(fd, 0) == 0 &&
                           ::pwrite(fd, pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size());
      if (!written) {
        const int err = errno;
        ::close(fd);
        SACCADE_CHECK(false, "RunLock: cannot write '{}': {}", path, std::strerror(err));
      }
      return std::unique_ptr<RunLock>(new RunLock(fd, path));
    }
    ::close(fd);
  }
  SACCADE_CHECK(false, "RunLock: '{}' was removed and made again 100 times while it was being locked", path);
  return nullptr;
}

RunLock::~RunLock() {
  ::unlink(path_.c_str());  // before the lock goes: the next run makes a new file (acquire's loop)
  ::close(fd_);
}

InterruptGuard::InterruptGuard(const std::string& message, const std::vector<std::string>& partial_files) {
  SACCADE_CHECK(partial_files.size() <= kMaxFiles && message.size() < sizeof g_message,
                "InterruptGuard: at most {} files and a message under {} bytes, got {} and {}", kMaxFiles,
                sizeof g_message, partial_files.size(), message.size());
  for (const std::string& f : partial_files)
    SACCADE_CHECK(f.size() < sizeof g_files[0], "InterruptGuard: the path '{}' is too long", f);
  SACCADE_CHECK(!g_installed.exchange(true), "InterruptGuard: one is already installed in this process");
  g_signals = 0;
  std::memcpy(g_message, message.data(), message.size());
  g_message_len = message.size();
  g_num_files = static_cast<int>(partial_files.size());
  for (int i = 0; i < g_num_files; ++i) {
    std::memcpy(g_files[i], partial_files[i].c_str(), partial_files[i].size() + 1);
  }
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a read or write under way goes on
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
}

InterruptGuard::~InterruptGuard() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  g_installed = false;
}

bool InterruptGuard::requested() { return g_signals != 0; }

}  // namespace saccade::examples
