// The CPU thread pool behind parallel_for (ops/cpu/thread_pool.h) and saccade::set_num_threads
// (ops/threads.h).
//
// One region: the caller publishes the task, opens the region (`state_`: an open bit and the number of
// workers inside), bumps `generation_` and wakes the workers, then runs the task itself. A worker that wakes
// while the region is open joins it (at most nt - 1 do) and runs the task too; the task hands out chunks
// from a shared counter, so whoever is running takes the work. When the caller's task returns, all chunks
// are taken: it closes the region and waits only for the workers that joined. A worker that has not been
// scheduled by then finds the region closed and goes back to sleep: nobody waits for a thread that has no
// core (waiting for every worker made 2 threads much slower than 1 on a loaded machine).
//
// Waits spin for up to kSpin (back-to-back regions then cost no system call and no wake-up) and then block
// on a futex (std::atomic::wait), so an idle thread never holds a core for long.
#include "ops/cpu/thread_pool.h"

#include <cblas.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "profiler/profiler.h"

namespace saccade::cpu {
namespace {

// How long a wait spins before it sleeps. A training step runs its regions back to back with a little serial
// work between them (the autograd engine, small ops): a worker that goes to sleep after a few microseconds
// (100 pauses, the earlier setting) is woken by a futex call for most regions, and bench/gpt_step's 2-thread
// step was faster with 100 microseconds of spinning, also beside a busy-looping process on one of the two
// cores (bench/RESULTS.md, "2026-11-26 — the GPT step in bf16 on the CPU").
// A time, not a count: a pause takes from a few ns to tens of ns from one x86 core to another.
constexpr auto kSpin = std::chrono::microseconds(100);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Waits until `a` differs from `old`: a short spin, then a futex wait.
template <class T>
T wait_while_equal(const std::atomic<T>& a, T old) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 1;; ++i) {
    T v = a.load(std::memory_order_acquire);
    if (v != old) return v;
    cpu_relax();
    if (i % 32 == 0 && std::chrono::steady_clock::now() >= until) break;  // the clock every 32 pauses
  }
  T v;
  while ((v = a.load(std::memory_order_acquire)) == old) a.wait(old, std::memory_order_acquire);
  return v;
}

thread_local bool tls_in_task = false;

int default_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    int n = std::atoi(env);  // "4" or "4,2" (nested levels): the first level
    if (n >= 1) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw >= 1 ? static_cast<int>(hw) : 1;
}

class ThreadPool {
 public:
  explicit ThreadPool(int n) { start(n); }
  ~ThreadPool() { stop(); }

  int size() const { return size_; }

  void resize(int n) {
    std::lock_guard<std::mutex> lock(run_mutex_);
    if (n == size_) return;
    stop();
    start(n);
  }

  void run(int nt, const std::function<void(int)>& body) {
    if (nt > size_) nt = size_;
    std::unique_lock<std::mutex> lock(run_mutex_, std::try_to_lock);
    if (nt <= 1 || tls_in_task || !lock.owns_lock()) {
      body(0);
      return;
    }
    body_ = &body;
    task_name_ = profiler::is_active() ? profiler::detail::current_range() : "";  // the op that asked
    if (!*task_name_) task_name_ = "pool task";
    max_joiners_ = nt - 1;
    error_ = nullptr;
    state_.store(kOpen, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    run_task(0);
    state_.fetch_and(~kOpen, std::memory_order_acq_rel);  // late workers now stay out
    for (int s; (s = state_.load(std::memory_order_acquire)) != 0;) wait_while_equal(state_, s);
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void start(int n) {
    size_ = n;
    stopping_ = false;
    // NOTE: the generation is read here, not by the new thread: a thread that starts late would otherwise
    // miss a stop() or a region posted before it ran, and wait forever.
    const uint32_t now = generation_.load(std::memory_order_acquire);
    for (int t = 1; t < n; ++t) workers_.emplace_back([this, t, now] { worker(t, now); });
  }

  void stop() {
    stopping_ = true;
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (std::thread& w : workers_) w.join();
    workers_.clear();
  }

  void run_task(int t) {
    tls_in_task = true;
    // each thread's share of the region, in its own lane of the trace
    profiler::RecordFunction range(profiler::detail::Interned{}, task_name_, "pool");
    try {
      (*body_)(t);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    tls_in_task = false;
  }

  void worker(int t, uint32_t seen) {
    profiler::set_thread_name(fmt::format("pool worker {}", t));
    for (;;) {
      seen = wait_while_equal(generation_, seen);
      if (stopping_) return;
      if (!join()) continue;
      run_task(t);
      if (state_.fetch_sub(1, std::memory_order_acq_rel) == 1) state_.notify_one();  // closed, last out
    }
  }

  // Enters the open region if it has room; false when it is closed or full.
  bool join() {
    int s = state_.load(std::memory_order_acquire);
    while ((s & kOpen) && (s & ~kOpen) < max_joiners_)
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) return true;
    return false;
  }

  static constexpr int kOpen = 1 << 30;
  int size_ = 1;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // one region at a time; also held while resizing
  // The task of the current region: written by the caller before it opens the region (release), read by
  // workers after they joined it (acquire); the caller changes it only once no worker is inside.
  const std::function<void(int)>* body_ = nullptr;
  const char* task_name_ = "";
  int max_joiners_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> state_{0};  // kOpen | the number of workers inside the region
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

ThreadPool& pool() {
  static ThreadPool* p = [] {
    openblas_set_num_threads(1);  // GEMMs run inside our pool (ops/cpu/linalg.cpp): one thread budget
    return new ThreadPool(default_threads());  // NOTE: leaked on purpose: no join at static destruction
  }();
  return *p;
}

}  // namespace

void run_on_pool(int nt, const std::function<void(int)>& body) { pool().run(nt, body); }

int pool_size() { return pool().size(); }

void set_pool_size(int n) {
  SACCADE_CHECK(n >= 1, "set_num_threads: need at least one thread, got {}", n);
  pool().resize(n);
  openblas_set_num_threads(1);
}

}  // namespace saccade::cpu
