// `build/bench/matmul --dtype bf16 [threads ...]`: saccade's bf16 GEMM (ops/cpu/gemm_bf16.h, f32
// accumulation) against OpenBLAS sgemm on the same values widened to f32, in the same run, samples
// alternating: square n = 256 ... 4096, then the GPT's products (examples/gpt defaults at batch 32: M = 32 ·
// 128 tokens, d_model 128, MLP 512, vocab 256; forward x Wᵀ, backward dX = dY W and dW = dYᵀ X), at 1 and
// 2 threads (or the threads given). sgemm runs as saccade runs it (CpuBackend::bmm: single-threaded
// OpenBLAS calls split over saccade's pool), into a preallocated output like the bf16 call. Prints GFLOP/s
// (median, min-max) of each and a line `bf16/sgemm <ratio of medians>` per size.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "ops/backend.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/gemm_ladder/blocked.h"
#include "ops/cpu/gemm_ladder/microkernel.h"
#include "ops/cpu/gemm_ladder/naive.h"
#include "ops/cpu/gemm_ladder/packed.h"
#include "ops/cpu/simd.h"
#include "saccade.h"

using namespace saccade;

namespace {

struct Shape3 {
  std::string name;
  int64_t m, n, k;
  bool ta, tb;
};

void run(const Shape3& s) {
  Generator gen(42);
  const int64_t ar = s.ta ? s.k : s.m, ac = s.ta ? s.m : s.k, br = s.tb ? s.n : s.k, bc = s.tb ? s.k : s.n;
  Tensor af = ops::randn({ar, ac}, DType::Float32, Device::cpu(), &gen);
  Tensor bf = ops::randn({br, bc}, DType::Float32, Device::cpu(), &gen);
  std::vector<bfloat16> a(ar * ac), b(br * bc);
  float *pa = af.data<float>(), *pb = bf.data<float>();
  for (int64_t i = 0; i < ar * ac; ++i) pa[i] = float(a[i] = bfloat16(pa[i]));
  for (int64_t i = 0; i < br * bc; ++i) pb[i] = float(b[i] = bfloat16(pb[i]));
  // op(a), op(b) as the (1, m, k) and (1, k, n) views bmm takes (transposed views: column-major)
  Tensor a3 = (s.ta ? af.t() : af).unsqueeze(0), b3 = (s.tb ? bf.t() : bf).unsqueeze(0);
  Tensor c32 = ops::empty({1, s.m, s.n});
  std::vector<float> c16(s.m * s.n);
  auto sgemm = [&] { backend(Device::cpu()).bmm(a3, b3, c32); };
  auto ours = [&] {
    cpu::gemm_bf16(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), ac, b.data(), bc, 0.0f, c16.data(), s.n);
  };
  const double flops = 2.0 * s.m * s.n * s.k;
  const int inner = std::max(1, static_cast<int>(4e9 / flops));  // ~10 ms a sample at 400 GFLOP/s
  const int samples = flops >= 1e11 ? 5 : 11;
  sgemm();
  ours();
  std::vector<double> g_ours, g_blas;
  for (int i = 0; i < samples; ++i) {  // alternating, so that drift in the machine's load hits both
    auto t0 = bench::Clock::now();
    for (int r = 0; r < inner; ++r) ours();
    g_ours.push_back(flops * inner / bench::seconds_since(t0) * 1e-9);
    t0 = bench::Clock::now();
    for (int r = 0; r < inner; ++r) sgemm();
    g_blas.push_back(flops * inner / bench::seconds_since(t0) * 1e-9);
  }
  // the same product: the f32 sums differ by rounding only (relative to Σ|a b| ~ sqrt(k) here)
  const float* c = c32.data<float>();
  double diff = 0;
  for (int64_t i = 0; i < s.m * s.n; ++i) diff = std::max(diff, std::abs(double(c[i]) - c16[i]));
  const bench::Stats o = bench::stats(g_ours), l = bench::stats(g_blas);
  std::printf(
      "%-22s %5lld %5lld %5lld %s%s | bf16 %6.1f (%6.1f-%6.1f) | sgemm %6.1f (%6.1f-%6.1f) GFLOP/s%s\n",
      s.name.c_str(), static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k),
      s.ta ? "T" : "N", s.tb ? "T" : "N", o.median, o.min, o.max, l.median, l.min, l.max,
      diff > 1e-4 * std::sqrt(double(s.k)) * 8 ? "  WARNING: results differ" : "");
  std::printf("bf16/sgemm %.3f\n", o.median / l.median);
}

}  // namespace

int matmul_bf16_main(const std::vector<int>& thread_counts) {
  std::printf("%s\n", blas_info_line().c_str());
  std::printf(
      "bf16 kernel: %s; load average %.2f\n",
      cpu::kernel_avx512_bf16() ? "VDPBF16PS (AVX512-BF16)" : cpu::vector_level_name(cpu::kernel_isa()),
      bench::load_average());
  std::vector<Shape3> shapes;
  for (int64_t n : {256, 512, 1024, 2048, 4096}) shapes.push_back({"square", n, n, n, false, false});
  const int64_t M = 32 * 128, d = 128;
  struct Layer {
    const char* name;
    int64_t out, in;
  };
  for (Layer L : {Layer{"gpt attn q/k/v/o", d, d}, Layer{"gpt mlp c_fc", 4 * d, d},
                  Layer{"gpt mlp c_proj", d, 4 * d}, Layer{"gpt lm head", 256, d}}) {
    shapes.push_back({std::string(L.name) + " fwd", M, L.out, L.in, false, true});  // x Wᵀ
    shapes.push_back({std::string(L.name) + " dX", M, L.in, L.out, false, false});  // dY W
    shapes.push_back({std::string(L.name) + " dW", L.out, L.in, M, true, false});   // dYᵀ X
  }
  for (int t : thread_counts) {
    set_num_threads(t);
    std::printf("-- %d thread%s (load average %.2f)\n", t, t > 1 ? "s" : "", bench::load_average());
    for (const Shape3& s : shapes) run(s);
  }
  std::printf("load average at the end %.2f\n", bench::load_average());
  return 0;
}

// `build/bench/matmul --ladder [n]`: each step of ops/cpu/gemm_ladder/ and gemm_bf16 at n³ (default 480, a
// multiple of every step's tile), one thread, GFLOP/s: median (min-max) of 3 runs, alternating; steps 1-3 at
// the widest width with_isa offers (AVX-512 here), step 4 with AVX512-BF16 (skipped without it).
int matmul_ladder_main(int64_t n) {
  set_num_threads(1);
  std::printf("%s\nload average %.2f; n = %lld, 1 thread\n", blas_info_line().c_str(), bench::load_average(),
              static_cast<long long>(n));
  std::vector<bfloat16> a(n * n), b(n * n);
  Generator gen(42);
  Tensor r = ops::randn({2, n, n}, DType::Float32, Device::cpu(), &gen);
  for (int64_t i = 0; i < n * n; ++i) {
    a[i] = bfloat16(r.data<float>()[i]);
    b[i] = bfloat16(r.data<float>()[n * n + i]);
  }
  std::vector<float> c(n * n);
  using Step = void (*)(const bfloat16*, const bfloat16*, float*, int64_t, int64_t, int64_t);
  // steps 1-3 compiled for the CPU's widest vector unit (with_isa), as the library's loops are
#define SACCADE_LADDER_STEP(f)                                                          \
  [](const bfloat16* a, const bfloat16* b, float* c, int64_t m, int64_t n, int64_t k) { \
    cpu::with_isa([&] { f(a, b, c, m, n, k); });                                        \
  }
  std::vector<std::pair<const char*, Step>> steps = {
      {"1 naive", SACCADE_LADDER_STEP(ladder::gemm_naive)},
      {"2 blocked", SACCADE_LADDER_STEP(ladder::gemm_blocked<>)},
      {"3 packed", SACCADE_LADDER_STEP(ladder::gemm_packed<>)}};
#undef SACCADE_LADDER_STEP
#ifdef SACCADE_LADDER_MICROKERNEL
  if (cpu::cpu_has_avx512_bf16()) steps.push_back({"4 microkernel", ladder::gemm_microkernel});
#endif
  steps.push_back(
      {"5 gemm_bf16", [](const bfloat16* a, const bfloat16* b, float* c, int64_t m, int64_t n, int64_t k) {
         cpu::gemm_bf16(false, false, m, n, k, 1, a, k, b, n, 0, c, n);
       }});
  std::vector<std::vector<double>> g(steps.size());
  const double flops = 2.0 * n * n * n;
  for (int s = 0; s < 3; ++s)
    for (size_t i = 0; i < steps.size(); ++i) {
      const int inner = i < 2 ? 1 : 10;
      auto t0 = bench::Clock::now();
      for (int r = 0; r < inner; ++r) steps[i].second(a.data(), b.data(), c.data(), n, n, n);
      g[i].push_back(flops * inner / bench::seconds_since(t0) * 1e-9);
    }
  for (size_t i = 0; i < steps.size(); ++i) {
    const bench::Stats st = bench::stats(g[i]);
    std::printf("%-14s %7.1f GFLOP/s (%.1f-%.1f)\n", steps[i].first, st.median, st.min, st.max);
  }
  return 0;
}
