// The CPU flash-attention kernel's tile products through OpenBLAS (small sgemm calls) against our own
// AVX-512 kernel (ops/cpu/flash_tiles_f32.h, where the CPU has AVX-512) and plain loops the compiler
// vectorises (ops/cpu/flash_tiles.h), at head dims 32, 64 and 128: forward + backward of
// ops::flash_attention_forward / _backward on (B, H, T, D), float32, causal and not, median of `samples`
// runs alternating the variants. Issue 8 item 1 asked which wins; the kernel's default per head dim
// (tile_products in ops/cpu/attention.cpp) follows these figures. The loops run at each vector width this
// CPU has (cpu::IsaGuard: AVX-512, AVX2, baseline), the sgemm calls on the OpenBLAS core in use (set another
// with OPENBLAS_CORETYPE=Haswell / Prescott to compare core types; the program does not re-execute itself).
//
// Usage: build/bench/flash_tiles [samples] [threads]   (default 7 samples, 1 thread)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "ops/cpu/flash_tiles.h"
#include "ops/cpu/flash_tiles_f32.h"
#include "ops/cpu/simd.h"
#include "saccade.h"

using namespace saccade;
namespace sb = saccade::bench;

namespace {

// One forward+backward with the tile products `how`, loops compiled for at most `isa`.
double fwd_bwd_ms(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                  const ops::AttentionMask& mask, cpu::TileProducts how, cpu::Isa isa) {
  cpu::TileProductsGuard guard(how);
  cpu::IsaGuard width(isa);
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
  std::printf("flash attention fwd+bwd, float32, %d thread(s), %d samples; load %.2f\n%s\n", threads, samples,
              sb::load_average(), blas_info_line().c_str());
  // The variants: sgemm tiles (the loops around them at the CPU's width), then loops at each width.
  struct Variant {
    cpu::TileProducts how;
    cpu::Isa isa;
    std::string name;
  };
  std::vector<Variant> variants{{cpu::TileProducts::Gemm, cpu::cpu_isa(), "sgemm"}};
  if (cpu::tile_gemm_f32_available())  // our own AVX-512 tile products (ops/cpu/flash_tiles_f32.h)
    variants.push_back({cpu::TileProducts::Avx512, cpu::cpu_isa(), "avx512 kernel"});
  for (cpu::Isa isa : {cpu::Isa::Avx512, cpu::Isa::Avx2, cpu::Isa::Baseline})
    if (isa <= cpu::cpu_isa())
      variants.push_back(
          {cpu::TileProducts::Loops, isa, std::string("loops ") + cpu::vector_level_name(isa)});
  std::printf("%-18s %-7s", "(B, H, T, D)", "causal");
  for (const Variant& v : variants) std::printf(" %-26s", (v.name + " ms (median [min])").c_str());
  std::printf(" best other/sgemm\n");
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
      std::vector<std::vector<double>> ms(variants.size());
      for (const Variant& x : variants) fwd_bwd_ms(q, k, v, g, mask, x.how, x.isa);  // warm-up
      for (int i = 0; i < samples; ++i)
        for (size_t j = 0; j < variants.size(); ++j)
          ms[j].push_back(fwd_bwd_ms(q, k, v, g, mask, variants[j].how, variants[j].isa));
      char shape[32];
      std::snprintf(shape, sizeof shape, "(%lld, %lld, %lld, %lld)", (long long)B, (long long)H, (long long)T,
                    (long long)D);
      std::printf("%-18s %-7s", shape, causal ? "yes" : "no");
      double best_other = 1e300;
      for (size_t j = 0; j < variants.size(); ++j) {
        const sb::Stats st = sb::stats(ms[j]);
        if (j > 0) best_other = std::min(best_other, st.median);
        char cell[48];
        std::snprintf(cell, sizeof cell, "%.1f [%.1f]", st.median, st.min);
        std::printf(" %-26s", cell);
      }
      std::printf(" %.2f\n", best_other / sb::stats(ms[0]).median);
    }
  }
  std::printf("load at end %.2f\n", sb::load_average());
  return 0;
}
