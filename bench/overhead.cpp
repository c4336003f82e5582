// Per-op overhead: time per iteration of a tiny op, where the arithmetic is negligible and what is measured
// is allocation, dispatch and graph recording. a, b: 16-element float32 Variables with requires_grad.
//   forward:          c = a + b                    (one recorded op)
//   forward+backward: c = a + b; sum(c).backward()  (two ops, the engine, two accumulations)
// Also, for the breakdown: the same add on plain Tensors (ops::add) and on Variables under NoGradGuard.
// If /usr/bin/python3 can import torch, runs bench/overhead_torch.py (the same loops in PyTorch) and prints
// the ratios.
//
// Usage: build/bench/overhead [iterations]   (default 200000)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "saccade.h"

using namespace saccade;

namespace {

using Clock = std::chrono::steady_clock;

// ns per call of f: the best of `iters / kBatch` batches of kBatch calls. Short batches (about a millisecond)
// and the minimum over many keep the figure stable on a shared machine: some batches run undisturbed.
constexpr long kBatch = 1000;
template <class F>
double best_ns(F&& f, long iters) {
  double best = 1e300;
  for (long r = 0; r < std::max(1L, iters / kBatch); ++r) {
    auto t0 = Clock::now();
    for (long i = 0; i < kBatch; ++i) f();
    best = std::min(best, std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kBatch);
  }
  return best;
}

// Runs the PyTorch script; returns {forward ns, forward+backward ns}, or negatives when unavailable.
std::pair<double, double> torch_figures(long iters) {
  std::string cmd =
      "/usr/bin/python3 " SACCADE_BENCH_DIR "/overhead_torch.py " + std::to_string(iters) + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, -1};
  double fwd = -1, both = -1;
  char line[256];
  while (std::fgets(line, sizeof line, p)) {
    std::sscanf(line, "forward_ns %lf", &fwd);
    std::sscanf(line, "forward_backward_ns %lf", &both);
  }
  pclose(p);
  return {fwd, both};
}

}  // namespace

int main(int argc, char** argv) {
  const long iters = argc > 1 ? std::atol(argv[1]) : 200000;
  std::printf("%s\n", blas_info_line().c_str());
  Variable a(ops::randn({16}), true), b(ops::randn({16}), true);
  Tensor ta = a.data(), tb = b.data();

  double tensor_add = best_ns([&] { Tensor c = ops::add(ta, tb); }, iters);
  double nograd_add = best_ns(
      [&] {
        NoGradGuard ng;
        Variable c = a + b;
      },
      iters);
  double fwd = best_ns([&] { Variable c = a + b; }, iters);
  double both = best_ns(
      [&] {
        Variable c = a + b;
        sum(c).backward();
      },
      iters / 4);

  std::printf("saccade, add of two 16-element float32 tensors (best batch of 1000, ns per iteration):\n");
  std::printf("  ops::add (Tensor, no autograd)        %8.0f ns\n", tensor_add);
  std::printf("  Variable add under NoGradGuard        %8.0f ns\n", nograd_add);
  std::printf("  forward: c = a + b (recorded)         %8.0f ns   <- ns per forward op\n", fwd);
  std::printf("  forward+backward: sum(a + b).backward %8.0f ns\n", both);

  auto [tf, tb2] = torch_figures(iters);
  if (tf > 0 && tb2 > 0) {
    std::printf("PyTorch (bench/overhead_torch.py, same loops):\n");
    std::printf("  forward                                %8.0f ns   ratio torch/saccade %.1fx\n", tf,
                tf / fwd);
    std::printf("  forward+backward                       %8.0f ns   ratio torch/saccade %.1fx\n", tb2,
                tb2 / both);
  } else {
    std::printf("PyTorch: /usr/bin/python3 with torch not available; no comparison\n");
  }
  return 0;
}
