// saccade's ops::matmul against a raw cblas_sgemm call in the same run: square float32 n x n, GFLOP/s of each
// (2 n^3 flops per product) and their ratio. ops::matmul's figure includes allocating its result, as a user
// sees it; the raw call writes into a preallocated matrix.
//
// Usage: build/bench/matmul [n ...]   (default n = 64 256 1024 2048)
//        build/bench/matmul --dtype bf16 [threads ...]   (our bf16 GEMM against sgemm: matmul_bf16.cpp)
//        build/bench/matmul --ladder [n]   (the steps of ops/cpu/gemm_ladder/, one thread)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/bench_util.h"
#include "saccade.h"

using namespace saccade;

namespace {

using Clock = std::chrono::steady_clock;

// Seconds per call of f: runs it `inner` times per sample.
template <class F>
double seconds_per_call(F&& f, int inner) {
  auto t0 = Clock::now();
  for (int i = 0; i < inner; ++i) f();
  return std::chrono::duration<double>(Clock::now() - t0).count() / inner;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace

int matmul_bf16_main(const std::vector<int>& thread_counts);  // matmul_bf16.cpp
int matmul_ladder_main(int64_t n);                            // matmul_bf16.cpp

int usage(const char* bad) {
  std::fprintf(
      stderr,
      "matmul: not a size or thread count: %s\nusage: matmul [n ...] | matmul --dtype bf16 [threads ...] | "
      "matmul --ladder [n]   (integers >= 1)\n",
      bad);
  return 2;
}

int main(int argc, char** argv) {
  int64_t v = 0;
  if (argc >= 2 && std::strcmp(argv[1], "--ladder") == 0) {
    if (argc > 2 && !bench::positive_int(argv[2], v)) return usage(argv[2]);
    return matmul_ladder_main(argc > 2 ? v : 480);
  }
  if (argc >= 3 && std::strcmp(argv[1], "--dtype") == 0) {
    if (std::strcmp(argv[2], "bf16") != 0) {
      std::fprintf(stderr, "matmul: --dtype takes bf16 (float32 is the default), not %s\n", argv[2]);
      return 2;
    }
    std::vector<int> threads;
    for (int i = 3; i < argc; ++i) {
      if (!bench::positive_int(argv[i], v) || v > 1024) return usage(argv[i]);
      threads.push_back(static_cast<int>(v));
    }
    if (threads.empty()) threads = {1, 2};
    return matmul_bf16_main(threads);
  }
  std::vector<int64_t> sizes;
  for (int i = 1; i < argc; ++i) {
    if (!bench::positive_int(argv[i], v)) return usage(argv[i]);
    sizes.push_back(v);
  }
  if (sizes.empty()) sizes = {64, 256, 1024, 2048};

  std::printf("%s\n", blas_info_line().c_str());  // the core as found: this program does not re-execute
  std::printf("%6s %8s | %14s %14s | %14s %14s | %7s %7s\n", "n", "samples", "saccade best", "saccade med",
              "cblas best", "cblas med", "r best", "r med");

  for (int64_t n : sizes) {
    Generator gen(42);
    Tensor a = ops::randn({n, n}, DType::Float32, Device::cpu(), &gen);
    Tensor b = ops::randn({n, n}, DType::Float32, Device::cpu(), &gen);
    Tensor c = ops::empty({n, n});
    const float *pa = a.data<float>(), *pb = b.data<float>();
    float* pc = c.data<float>();
    const double flops = 2.0 * n * n * n;
    // about 0.1 s of work per sample (at ~50 GFLOP/s), at least one call; fewer samples for the big sizes
    const int inner = std::max(1, static_cast<int>(5e9 / flops));
    const int samples = n >= 2048 ? 5 : n >= 1024 ? 9 : 15;

    auto ours = [&] { Tensor y = ops::matmul(a, b); };
    auto raw = [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(n),
                  static_cast<int>(n), 1.0f, pa, static_cast<int>(n), pb, static_cast<int>(n), 0.0f, pc,
                  static_cast<int>(n));
    };
    ours();  // warm up (thread pools, page faults)
    raw();
    std::vector<double> t_ours, t_raw;
    for (int s = 0; s < samples; ++s) {  // interleaved, so that drift in machine load hits both alike
      t_ours.push_back(seconds_per_call(ours, inner));
      t_raw.push_back(seconds_per_call(raw, inner));
    }
    // the two results agree (same GEMM)
    double diff = ops::max(ops::abs(ops::sub(ops::matmul(a, b), c))).item();
    if (diff > 1e-3 * n) std::printf("WARNING: results differ by %g\n", diff);

    auto gf = [&](double sec) { return flops / sec * 1e-9; };
    double ob = gf(*std::min_element(t_ours.begin(), t_ours.end())), om = gf(median(t_ours));
    double rb = gf(*std::min_element(t_raw.begin(), t_raw.end())), rm = gf(median(t_raw));
    std::printf("%6lld %8d | %9.1f GF/s %9.1f GF/s | %9.1f GF/s %9.1f GF/s | %7.3f %7.3f\n",
                static_cast<long long>(n), samples * inner, ob, om, rb, rm, ob / rb, om / rm);
  }
  return 0;
}
