// The one-row products of batch-1 decoding, one weight matrix at a time (issue 53): y (1, N) = x (1, K) · Wᵀ
// for W (N, K) in float32 (ops::matmul on w.t(): OpenBLAS's sgemv), bfloat16 (our gemv_half) and Q8_0
// (ops::linear_q8_0), at the shapes of GPT-2 124M and SmolLM-135M's projections and of a 4096-wide layer.
// Each product reads every weight once, so its floor is W's bytes at the streaming read's rate, measured here
// in the same process on the same threads; the table gives each dtype's GB/s and that share, with the matrix
// in the caches (the same one each call) and from memory (512 MB of copies used in turn).
//
// Usage: build/release/bench/gemv [threads] [calls]   (default 2 threads, 200 calls a shape; the median call)
// Prints the OpenBLAS core, the CPU and the load average. Not a test: speed is measured here, never asserted.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "saccade.h"

extern "C" char* openblas_get_corename();

using namespace saccade;
namespace sb = saccade::bench;

int main(int argc, char** argv) {
  int64_t threads = 2, calls = 200;
  if ((argc > 1 && !sb::positive_int(argv[1], threads)) || (argc > 2 && !sb::positive_int(argv[2], calls))) {
    std::fprintf(stderr, "usage: %s [threads] [calls]\n", argv[0]);
    return 2;
  }
  set_num_threads(static_cast<int>(threads));
  const double read_rate = sb::read_gb_per_s(static_cast<int>(threads));
  std::printf("gemv: OpenBLAS core %s, CPU %s, %lld threads, load average %.2f; streaming read %.1f GB/s\n",
              openblas_get_corename(), sb::cpu_model().c_str(), static_cast<long long>(threads),
              sb::load_average(), read_rate);
  std::printf("%-22s %-6s %9s %9s %8s %7s\n", "shape (N x K)", "dtype", "us/call", "min-max", "GB/s",
              "floor");
  const std::pair<int64_t, int64_t> shapes[] = {{576, 576},   {1536, 576}, {576, 1536},
                                                {49152, 576}, {768, 768},  {2304, 768},
                                                {3072, 768},  {768, 3072}, {4096, 4096}};
  Generator gen(1);
  NoGradGuard no_grad;
  for (const auto& [n, k] : shapes) {
    // `copies` matrices of the shape, used in turn: one copy stays in the caches from call to call ("cache");
    // copies of 512 MB of float32 together are read from memory each time ("memory"), as a decoding step
    // reads a model's layers
    const int64_t copies = std::max<int64_t>(1, (int64_t{512} << 20) / (4 * n * k));
    std::vector<Tensor> w, wb;
    std::vector<Q8_0Matrix> wq;
    for (int64_t c = 0; c < copies; ++c) {
      w.push_back(ops::randn({n, k}, DType::Float32, Device::cpu(), &gen));
      wb.push_back(w.back().to(DType::BFloat16));
      wq.push_back(ops::quantize_q8_0(w.back()));
    }
    const Tensor x = ops::randn({1, k}, DType::Float32, Device::cpu(), &gen), xb = x.to(DType::BFloat16);
    struct Row {
      const char* dtype;
      double bytes;
      std::function<void(int64_t)> f;
    };
    const Row rows[] = {
        {"f32", 4.0 * n * k, [&](int64_t c) { ops::matmul(x, w[c].t()); }},
        {"bf16", 2.0 * n * k, [&](int64_t c) { ops::matmul(xb, wb[c].t()); }},
        {"q8_0", static_cast<double>(wq[0].bytes()), [&](int64_t c) { ops::linear_q8_0(x, wq[c]); }},
    };
    for (const Row& r : rows)
      for (const bool from_memory : {false, true}) {
        int64_t c = 0;
        const sb::Stats s = sb::stats(sb::time_ms(static_cast<int>(calls), [&] {
          r.f(c);
          if (from_memory) c = (c + 1) % copies;
        }));
        const double gbs = r.bytes / (s.median * 1e6);
        std::printf("%-14s %-6s %-7s %9.1f %5.0f-%-5.0f %8.1f %6.0f%%\n",
                    (std::to_string(n) + " x " + std::to_string(k)).c_str(), r.dtype,
                    from_memory ? "memory" : "cache", 1e3 * s.median, 1e3 * s.min, 1e3 * s.max, gbs,
                    100 * gbs / read_rate);
      }
  }
  std::printf("load average after: %.2f\n", sb::load_average());
  return 0;
}
