#pragma once
// saccade's CPU thread pool and the one loop helper every parallel kernel goes through:
//
//   parallel_for(begin, end, grain, [&](int64_t b, int64_t e) { ... for i in [b, e) ... });
//
// Why our own pool rather than `#pragma omp parallel` (measured, ops/README.md "Threads"): libgomp's idle
// threads spin at the end of every region (GOMP_SPINCOUNT, read once when the library loads, before main,
// so a program cannot change it), and OpenBLAS's pthread pool spins (sched_yield loops) after every threaded
// GEMM. On a core shared with another process, a spinning thread takes time from the thread doing the work.
// This pool's idle threads spin for 100 microseconds at most, then sleep on a futex; work is handed out in
// chunks from an atomic counter, so when one thread is descheduled the others take its chunks; and GEMMs
// run single-threaded inside it (ops/cpu/linalg.cpp), so OpenBLAS's pool never starts.
#include <atomic>
#include <cstdint>
#include <functional>

namespace saccade::cpu {

/// Runs body(0) on the calling thread and body(t) on each of up to nt - 1 pool threads that wake up while
/// the caller's call is still running (t in [1, nt), each at most once); returns when every call returned,
/// rethrowing the first exception one threw. So body must share its work dynamically (parallel_for's chunk
/// counter): a thread the OS has not scheduled is never waited for. Runs only body(0) when nt <= 1, when
/// called from inside a pool task (no nested parallelism), or while another thread of the program is using
/// the pool. nt is capped at the pool's size.
void run_on_pool(int nt, const std::function<void(int)>& body);

/// The pool's size: the current thread budget (saccade::get_num_threads()).
int pool_size();
/// Resizes the pool to n threads (the caller included) and keeps OpenBLAS at one thread; the body of
/// saccade::set_num_threads (ops/threads.h). Throws saccade::Error naming set_num_threads when n < 1.
void set_pool_size(int n);

/// Calls fn(b, e) on disjoint sub-ranges covering [begin, end), in parallel when the range holds at least two
/// `grain`s: at most (end - begin) / grain threads are used, and the range is handed out in chunks of at
/// least `grain` from a shared counter (threads that start late find the work already done).
/// `grain` is the number of iterations worth one thread's wake-up (tens of microseconds of work). fn must
/// be safe to call concurrently on disjoint ranges.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t max_threads = n / grain;
  const int nt = static_cast<int>(max_threads < pool_size() ? max_threads : pool_size());
  if (nt <= 1) {
    fn(begin, end);
    return;
  }
  // Chunks: about four per thread, never smaller than grain.
  const int64_t chunk = n / (4 * nt) > grain ? n / (4 * nt) : grain;
  std::atomic<int64_t> next{begin};
  run_on_pool(nt, [&](int) {
    for (int64_t b; (b = next.fetch_add(chunk, std::memory_order_relaxed)) < end;)
      fn(b, b + chunk < end ? b + chunk : end);
  });
}

}  // namespace saccade::cpu
