// The CPU flash-attention kernel's tile products through OpenBLAS (small sgemm calls) against plain loops
// the compiler vectorises (ops/cpu/flash_tiles.h), at head dims 32, 64 and 128: forward + backward of
// ops::flash_attention_forward / _backward on (B, H, T, D), float32, causal and not, median of `samples`
// runs alternating the two variants. Issue 8 item 1 asked which wins; the kernel's default per head dim
// (tile_products in ops/cpu/attention.cpp) follows these figures.
//
// Usage: build/bench/flash_tiles [samples] [threads]   (default 7 samples, 1 thread)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/bench_util.h"
#include "ops/cpu/flash_tiles.h"
#include "saccade.h"

using namespace saccade;
namespace sb = saccade::bench;

namespace {

double fwd_bwd_ms(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                  const ops::AttentionMask& mask, cpu::TileProducts how) {
  cpu::TileProductsGuard guard(how);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto t0 = sb::Clock::now();
  ops::FlashAttentionForward f = ops::flash_attention_forward(q, k, v, mask, scale);
  ops::flash_attention_backward(g, q, k, v, f.out, f.lse, mask, scale);
  return 1e3 * sb::seconds_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  const int samples = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const int threads = argc > 2 ? std::max(1, std::atoi(argv[2])) : 1;
  set_num_threads(threads);
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("flash attention fwd+bwd, float32, %d thread(s), %d samples; OPENBLAS_CORETYPE=%s; load %.2f\n",
              threads, samples, coretype ? coretype : "(unset)", sb::load_average());
  std::printf("%-18s %-7s %-24s %-24s %s\n", "(B, H, T, D)", "causal", "sgemm ms (median [min])",
              "loops ms (median [min])", "loops/sgemm");
  const int64_t B = 4, H = 4, T = 512;
  for (int64_t D : {32, 64, 128}) {
    for (bool causal : {false, true}) {
      Generator gen(1);
      Tensor q = ops::randn({B, H, T, D}, DType::Float32, Device::cpu(), &gen);
      Tensor k = ops::randn({B, H, T, D}, DType::Float32, Device::cpu(), &gen);
      Tensor v = ops::randn({B, H, T, D}, DType::Float32, Device::cpu(), &gen);
      Tensor g = ops::randn({B, H, T, D}, DType::Float32, Device::cpu(), &gen);
      ops::AttentionMask mask;
      mask.causal = causal ? ops::CausalAlign::TopLeft : ops::CausalAlign::None;
      std::vector<double> gemm_ms, loop_ms;
      fwd_bwd_ms(q, k, v, g, mask, cpu::TileProducts::Gemm);  // warm-up
      fwd_bwd_ms(q, k, v, g, mask, cpu::TileProducts::Loops);
      for (int i = 0; i < samples; ++i) {
        gemm_ms.push_back(fwd_bwd_ms(q, k, v, g, mask, cpu::TileProducts::Gemm));
        loop_ms.push_back(fwd_bwd_ms(q, k, v, g, mask, cpu::TileProducts::Loops));
      }
      sb::Stats a = sb::stats(gemm_ms), b = sb::stats(loop_ms);
      char shape[32], x[32], y[32];
      std::snprintf(shape, sizeof shape, "(%lld, %lld, %lld, %lld)", (long long)B, (long long)H, (long long)T,
                    (long long)D);
      std::snprintf(x, sizeof x, "%.1f [%.1f]", a.median, a.min);
      std::snprintf(y, sizeof y, "%.1f [%.1f]", b.median, b.min);
      std::printf("%-18s %-7s %-24s %-24s %.2f\n", shape, causal ? "yes" : "no", x, y, b.median / a.median);
    }
  }
  std::printf("load at end %.2f\n", sb::load_average());
  return 0;
}
