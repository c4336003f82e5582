#pragma once
// What the benchmarks share: timing, medians, the machine's load, a CPU-bound competitor process, and the
// PyTorch twin run through python() ($SACCADE_PYTHON, else /usr/bin/python3).
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace saccade::bench {

/// Whether s is a whole decimal integer >= 1 (then in `out`): the benchmarks' numeric arguments, so that a
/// flag they do not know ("--help") gets their usage instead of running with 0 or stopping on a bad size.
inline bool positive_int(const char* s, int64_t& out) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < 1) return false;
  out = v;
  return true;
}

using Clock = std::chrono::steady_clock;

/// Seconds since t.
inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// Median, minimum and maximum of samples (all 0 when empty).
struct Stats {
  double median = 0, min = 0, max = 0;
};
inline Stats stats(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return {v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]), v.front(), v.back()};
}

/// Milliseconds of one call of f().
template <class F>
double ms_of(F&& f) {
  const auto t0 = Clock::now();
  f();
  return 1e3 * seconds_since(t0);
}

/// Milliseconds of each of `samples` calls of f(), after one untimed warm-up call (allocator, OpenBLAS
/// buffers).
template <class F>
std::vector<double> time_ms(int samples, F&& f) {
  f();
  std::vector<double> ms;
  for (int i = 0; i < samples; ++i) ms.push_back(ms_of(f));
  return ms;
}

/// The 1-minute load average (/proc/loadavg), or -1.
inline double load_average() {
  double l = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1;
    std::fclose(f);
  }
  return l;
}

/// Peak resident memory of this process so far (VmHWM of /proc/self/status), in KiB; -1 when unreadable.
inline long peak_rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

/// Writes n floats to `path` as raw native-endian float32 (numpy.fromfile(path, "<f4") on x86); false on
/// failure. The agreement checks hand their inputs to the PyTorch twin this way.
inline bool write_floats(const std::string& path, const float* data, size_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(float)));
  return static_cast<bool>(f);
}

/// The raw float32 values of `path` (as write_floats or numpy's tofile wrote them); empty when unreadable.
inline std::vector<float> read_floats(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return {};
  std::vector<float> v(static_cast<size_t>(f.tellg()) / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return f ? v : std::vector<float>{};
}

/// A CPU-bound competitor: `timeout <seconds> sh -c 'while :; do :; done'` in a child process, stopped when
/// this object goes out of scope (timeout bounds it even if this program dies).
class BusyProcess {
 public:
  explicit BusyProcess(int seconds) {
    pid_ = fork();
    if (pid_ == 0) {
      std::string s = std::to_string(seconds);
      execlp("timeout", "timeout", s.c_str(), "sh", "-c", "while :; do :; done", static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~BusyProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);  // timeout passes it on to the shell loop
      waitpid(pid_, nullptr, 0);
    }
  }
  BusyProcess(const BusyProcess&) = delete;
  BusyProcess& operator=(const BusyProcess&) = delete;

 private:
  pid_t pid_ = -1;
};

/// Runs the shell command `cmd` and returns the `key value` pairs it printed, one a line; empty when it
/// failed.
inline std::map<std::string, double> key_values(const std::string& cmd) {
  std::map<std::string, double> out;
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return out;
  char key[128], line[512];
  double value;
  while (std::fgets(line, sizeof line, p))
    if (std::sscanf(line, "%127s %lf", key, &value) == 2) out[key] = value;
  if (pclose(p) != 0) out.clear();
  return out;
}

/// The command that runs the PyTorch twins' Python: $SACCADE_PYTHON when set (e.g. the GPU machine's torch
/// venv; it may start with `env ...`), else /usr/bin/python3.
inline std::string python() {
  const char* p = std::getenv("SACCADE_PYTHON");
  return p && *p ? p : "/usr/bin/python3";
}

/// key_values of `env python() script args` (env e.g. "OMP_WAIT_POLICY=PASSIVE"): empty when
/// python3 or torch is missing.
inline std::map<std::string, double> run_torch(const std::string& script, const std::string& args,
                                               const std::string& env = "") {
  return key_values(env + " " + python() + " " + script + " " + args);
}

/// A long-running PyTorch twin: `env python() script <mode>` (mode "--serve" unless given), fed one request
/// line at a time on its stdin and answering one line (usually a number) on its stdout, so that its runs can
/// alternate with ours run by run. It must answer "ping" with 1; ok() is false when it could not start.
class TorchServer {
 public:
  TorchServer(const std::string& script, const std::string& env, const std::string& mode = "--serve") {
    signal(SIGPIPE, SIG_IGN);  // a twin that died answers -1 (a failed write), instead of ending this program
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to_child[0], 0), dup2(from_child[1], 1);
      close(to_child[1]), close(from_child[0]);
      std::string cmd = env + " exec " + python() + " " + script + " " + mode + " 2>/dev/null";
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_child[0]), close(from_child[1]);
    in_ = fdopen(to_child[1], "w");
    out_ = fdopen(from_child[0], "r");
    ok_ = ask("ping") == 1.0;
  }
  ~TorchServer() {
    if (in_) std::fclose(in_);  // the server exits at end of input
    if (out_) std::fclose(out_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  TorchServer(const TorchServer&) = delete;
  TorchServer& operator=(const TorchServer&) = delete;

  bool ok() const { return ok_; }
  /// Sends one request line, returns the line answered without its newline ("" on failure).
  std::string ask_text(const std::string& request) {
    if (!in_ || !out_) return "";
    std::fprintf(in_, "%s\n", request.c_str());
    std::fflush(in_);
    char line[512];
    if (!std::fgets(line, sizeof line, out_)) return "";
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  /// Sends one request line, returns the number answered (-1 on failure).
  double ask(const std::string& request) {
    double v;
    return std::sscanf(ask_text(request).c_str(), "%lf", &v) == 1 ? v : -1;
  }

 private:
  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
  bool ok_ = false;
};

/// A PyTorch twin run twice side by side, with its defaults ("d") and with OMP_WAIT_POLICY=PASSIVE ("p": its
/// better setting on a machine shared with other processes), recording each one's answers (ms) to the
/// requests of one table cell; the tables show the setting with the lower median.
class TorchPair {
 public:
  explicit TorchPair(const std::string& script) : d_(script, ""), p_(script, "OMP_WAIT_POLICY=PASSIVE") {}
  bool ok() const { return d_.ok(); }
  /// Forgets the recorded answers (a new cell).
  void clear() { ms_d_.clear(), ms_p_.clear(); }
  /// Sends `request` to both, without recording (a warm-up).
  void warm_up(const std::string& request) {
    if (ok()) d_.ask(request), p_.ask(request);
  }
  /// Sends `request` to both and records their answers.
  void run(const std::string& request) {
    if (ok()) ms_d_.push_back(d_.ask(request)), ms_p_.push_back(p_.ask(request));
  }
  /// Whether both settings answered every request with a time (-1: the twin lacks the op).
  bool answered() const {
    auto good = [](const std::vector<double>& v) {
      return !v.empty() && std::all_of(v.begin(), v.end(), [](double x) { return x >= 0; });
    };
    return good(ms_d_) && good(ms_p_);
  }
  /// The recorded answers of the setting with the lower median; `tag` gets " d" or " p".
  const std::vector<double>& best(const char** tag) const {
    const bool p = stats(ms_p_).median < stats(ms_d_).median;
    *tag = p ? " p" : " d";
    return p ? ms_p_ : ms_d_;
  }

 private:
  TorchServer d_, p_;
  std::vector<double> ms_d_, ms_p_;
};

#ifdef SACCADE_BENCH_DIR
/// One line on the PyTorch python() runs (bench/torch_info.py: version, BLAS and its core, CPU capability,
/// threads), or a line saying it cannot import torch.
inline std::string torch_info() {
  std::string line;
  if (FILE* p = popen((python() + " " + SACCADE_BENCH_DIR + "/torch_info.py 2>/dev/null").c_str(), "r")) {
    char buf[512];
    if (std::fgets(buf, sizeof buf, p)) line = buf;
    pclose(p);
  }
  while (!line.empty() && line.back() == '\n') line.pop_back();
  return line.empty() ? python() + " cannot import torch" : line;
}

/// torch_info() when `torch` started, else a line saying the tables have no PyTorch columns.
inline std::string torch_line(const TorchPair& torch) {
  return torch.ok() ? torch_info() : python() + " cannot import torch: no PyTorch columns";
}
#endif

/// True when python() imports torch (and, with `cuda`, torch sees a CUDA GPU).
inline bool torch_available(bool cuda = false) {
  const std::string check =
      cuda ? "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" : "import torch";
  return std::system((python() + " -c '" + check + "' > /dev/null 2>&1").c_str()) == 0;
}

/// The CPU's model name (/proc/cpuinfo), or "?".
inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "?";
}

/// GB/s (read + write bytes) of a memcpy of 512 MiB split over `threads` threads; the best of 5.
inline double copy_gb_per_s(int threads) {
  const size_t n = size_t{512} << 20, part = n / static_cast<size_t>(threads);
  std::vector<char> src(n, 1), dst(n, 0);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double ms = ms_of([&] {
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] { std::memcpy(dst.data() + t * part, src.data() + t * part, part); });
      for (auto& th : pool) th.join();
    });
    best = std::max(best, 2.0 * static_cast<double>(n) / (ms * 1e6));
  }
  return best;
}

/// GB/s of a streaming read of 512 MiB split over `threads` threads (eight running sums per thread); the best
/// of 5: the floor of a GEMV that reads each weight once.
inline double read_gb_per_s(int threads) {
  const size_t n = (size_t{512} << 20) / sizeof(uint64_t), part = n / static_cast<size_t>(threads);
  std::vector<uint64_t> src(n, 1);
  std::vector<uint64_t> sums(static_cast<size_t>(threads) * 8);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double ms = ms_of([&] {
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          const uint64_t* p = src.data() + t * part;
          uint64_t a[8] = {};
          for (size_t i = 0; i + 8 <= part; i += 8)
            for (int j = 0; j < 8; ++j) a[j] += p[i + j];
          for (int j = 0; j < 8; ++j) sums[t * 8 + j] = a[j];
        });
      for (auto& th : pool) th.join();
    });
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / (ms * 1e6));
  }
  uint64_t all = 0;
  for (uint64_t v : sums) all += v;
  if (all != n) std::printf("(read check: %llu)\n", static_cast<unsigned long long>(all));
  return best;
}

}  // namespace saccade::bench
