// Sliding-window causal attention on the CPU (issue 40, item 3; Beltagy et al. 2020, Longformer; Jiang et al.
// 2023, Mistral): forward + backward of ops::flash_attention_forward / _backward at a fixed window W = 512
// against full causal attention, T = 1024 ... max_T doubling, (B, H, T, D) = (1, 4, T, 64). The kernel skips
// the key tiles outside every window, so the windowed time should grow as T (its ms per 1k tokens stays flat
// within 20 %: the "linear" column is that figure over the first row's) while causal grows as T², and at
// T = 16384 the window should run >= 10x faster (the goals). Median of `samples` runs, the two
// variants alternating.
//
// Usage: build/bench/flash_window [samples] [threads] [max_T] [f32|bf16]   (default 3 1 16384 f32)
// NOTE: full causal fwd+bwd at T = 16384 takes several seconds a sample on one core; pass a smaller max_T for
// a smoke run (e.g. `flash_window 1 1 1024`).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "saccade.h"

using namespace saccade;
namespace sb = saccade::bench;

namespace {

// One forward + backward under `mask`, in ms.
double fwd_bwd_ms(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                  const ops::AttentionMask& mask) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto t0 = sb::Clock::now();
  ops::FlashAttentionForward f = ops::flash_attention_forward(q, k, v, mask, scale);
  ops::flash_attention_backward(g, q, k, v, f.out, f.lse, mask, scale);
  return 1e3 * sb::seconds_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  const int samples = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  const int threads = argc > 2 ? std::max(1, std::atoi(argv[2])) : 1;
  const int64_t max_t = argc > 3 ? std::max<int64_t>(1024, std::atoll(argv[3])) : 16384;
  const bool bf16 = argc > 4 && std::strcmp(argv[4], "bf16") == 0;
  const DType dt = bf16 ? DType::BFloat16 : DType::Float32;
  const int64_t B = 1, H = 4, D = 64, W = 512;
  set_num_threads(threads);
  std::printf(
      "flash attention fwd+bwd, (B, H, T, D) = (%lld, %lld, T, %lld), %s, window %lld against causal, "
      "%d thread(s), %d samples; load %.2f\n%s\n",
      (long long)B, (long long)H, (long long)D, std::string(dtype_name(dt)).c_str(), (long long)W, threads,
      samples, sb::load_average(), blas_info_line().c_str());
  std::printf("%-7s %-22s %-22s %-9s %-14s %s\n", "T", "window ms (med [min])", "causal ms (med [min])",
              "speedup", "window ms/1k T", "linear");
  double first_per_k = 0;
  for (int64_t T = 1024; T <= max_t; T *= 2) {
    Generator gen(1);
    auto randn = [&] { return ops::randn({B, H, T, D}, DType::Float32, Device::cpu(), &gen).to(dt); };
    const Tensor q = randn(), k = randn(), v = randn(), g = randn();
    ops::AttentionMask causal, window;
    causal.causal = window.causal = ops::CausalAlign::BottomRight;
    window.window = W;
    fwd_bwd_ms(q, k, v, g, window), fwd_bwd_ms(q, k, v, g, causal);  // warm-up
    std::vector<double> wm, cm;
    for (int i = 0; i < samples; ++i) {
      wm.push_back(fwd_bwd_ms(q, k, v, g, window));
      cm.push_back(fwd_bwd_ms(q, k, v, g, causal));
    }
    const sb::Stats ws = sb::stats(wm), cs = sb::stats(cm);
    const double per_k = ws.median / (double(T) / 1024);
    if (first_per_k == 0) first_per_k = per_k;
    char wcell[32], ccell[32];
    std::snprintf(wcell, sizeof wcell, "%.1f [%.1f]", ws.median, ws.min);
    std::snprintf(ccell, sizeof ccell, "%.1f [%.1f]", cs.median, cs.min);
    std::printf("%-7lld %-22s %-22s %-9.2f %-14.2f %.2f\n", (long long)T, wcell, ccell, cs.median / ws.median,
                per_k, per_k / first_per_k);
    std::fflush(stdout);
  }
  std::printf("load at end %.2f\n", sb::load_average());
  return 0;
}
