// The CPU thread pool (ops/cpu/thread_pool.h) and the thread budget (ops/threads.h): every index visited
// exactly once at any grain and thread count, nesting runs serially instead of deadlocking, exceptions reach
// the caller, elementwise kernels give the same bits at 1 and 2 threads, bad input.
#include <atomic>
#include <stdexcept>
#include <vector>

#include "helpers.h"
#include "ops/cpu/thread_pool.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;

namespace {

// Restores the thread budget a test changed.
struct ThreadsGuard {
  int previous = get_num_threads();
  ~ThreadsGuard() { set_num_threads(previous); }
};

// How often parallel_for visited each index of [begin, end).
std::vector<int> visits(int64_t begin, int64_t end, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(end));
  cpu::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  std::vector<int> out;
  for (int64_t i = begin; i < end; ++i) out.push_back(hits[static_cast<size_t>(i)].load());
  return out;
}

}  // namespace

TEST_CASE("threads: parallel_for visits every index once at any grain and thread count", "[ops][thread_pool]") {
  ThreadsGuard guard;
  for (int nt : {1, 2, 3, 5}) {
    set_num_threads(nt);
    REQUIRE(get_num_threads() == nt);
    for (int64_t grain : {1, 7, 100, 5000}) {
      for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 1}, {3, 1000}, {0, 10007}}) {
        INFO("threads " << nt << " grain " << grain << " range [" << b << ", " << e << ")");
        REQUIRE(visits(b, e, grain) == std::vector<int>(static_cast<size_t>(e - b), 1));
      }
    }
  }
  int calls = 0;
  cpu::parallel_for(5, 5, 1, [&](int64_t, int64_t) { ++calls; });  // an empty range calls nothing
  REQUIRE(calls == 0);
}

TEST_CASE("threads: nested parallel_for runs serially inside a task, exceptions reach the caller",
          "[ops][thread_pool]") {
  ThreadsGuard guard;
  set_num_threads(2);
  std::vector<std::atomic<int>> hits(64 * 64);
  cpu::parallel_for(0, 64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      cpu::parallel_for(0, 64, 1, [&](int64_t b2, int64_t e2) {
        for (int64_t j = b2; j < e2; ++j) hits[static_cast<size_t>(i * 64 + j)].fetch_add(1);
      });
  });
  for (auto& h : hits) REQUIRE(h.load() == 1);

  auto throwing = [] {
    cpu::parallel_for(0, 1000, 1, [](int64_t b, int64_t e) {
      if (b <= 700 && 700 < e) throw std::runtime_error("index 700");
    });
  };
  REQUIRE_THROWS_WITH(throwing(), "index 700");
  REQUIRE(visits(0, 1000, 1) == std::vector<int>(1000, 1));  // the pool still works afterwards
}

TEST_CASE("threads: kernels give the same numbers at 1 and 2 threads", "[ops][thread_pool]") {
  ThreadsGuard guard;
  Tensor a = rand64({300, 700}, 1), b = rand64({700}, 2);  // 210k elements: split across threads
  auto compute = [&] {
    return std::vector<Tensor>{ops::tanh(a) * b, ops::sum(a, {1}), ops::softmax(a, -1),
                               ops::matmul(a, a.t())};
  };
  set_num_threads(1);
  std::vector<Tensor> one = compute();
  set_num_threads(2);
  std::vector<Tensor> two = compute();
  // Elementwise, row reductions and row softmax: each element is computed by one thread, in the same order.
  for (size_t i = 0; i < 3; ++i) REQUIRE(allclose(one[i], two[i], 0.0, 0.0));
  // GEMM: rows are split into slabs; OpenBLAS may use another micro-kernel at a slab's edge.
  REQUIRE(allclose(one[3], two[3], 1e-13, 1e-12));
}

TEST_CASE("threads: resizing right after starting threads does not hang", "[ops][thread_pool]") {
  // Regression: a worker that started after the pool was already being stopped used to wait forever (seen
  // as image_caption --threads 1 hanging at start on a loaded machine).
  ThreadsGuard guard;
  for (int i = 0; i < 50; ++i) {
    set_num_threads(2 + i % 3);
    set_num_threads(1);
  }
  set_num_threads(3);
  REQUIRE(visits(0, 3000, 1) == std::vector<int>(3000, 1));
}

TEST_CASE("threads: bad input throws naming the function", "[ops][thread_pool]") {
  REQUIRE_THROWS_SACCADE(set_num_threads(0), "set_num_threads: need at least one thread, got 0");
  REQUIRE_THROWS_SACCADE(set_num_threads(-3), "set_num_threads");
}
