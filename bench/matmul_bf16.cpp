// `build/bench/matmul --dtype bf16 [threads ...]`: saccade's bf16 GEMM (ops/cpu/gemm_bf16.h, f32
// accumulation) against OpenBLAS sgemm on the same values widened to f32, in the same run, samples
// alternating: square n = 256 ... 4096, then the GPT's products (examples/gpt defaults at batch 32: M = 32 ·
// 128 tokens, d_model 128, MLP 512, vocab 256; forward x Wᵀ, backward dX = dY W and dW = dYᵀ X), at 1 and
// 2 threads (or the threads given). sgemm runs as saccade runs it (CpuBackend::bmm: single-threaded
// OpenBLAS calls split over saccade's pool), into a preallocated output like the bf16 call. Prints GFLOP/s
// (median, min-max) of each and a line `bf16/sgemm <ratio of medians>` per size. Before each thread count's
// products, the machine's own limit at that thread count: VDPBF16PS and VFMADD231PS on registers only (no
// memory traffic), and at 2 threads or more the round trip of a cache line between two threads (how far apart
// the OS or the VM's host placed them), so that a slow GEMM can be told apart from slow or distant vCPUs.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "ops/backend.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/gemm_ladder/blocked.h"
#include "ops/cpu/gemm_ladder/microkernel.h"
#include "ops/cpu/gemm_ladder/naive.h"
#include "ops/cpu/gemm_ladder/packed.h"
#include "ops/cpu/simd.h"
#include "ops/cpu/thread_pool.h"
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

// Register-only throughput: 12 independent accumulator chains (enough to cover the instruction's latency on
// every x86 core with AVX-512), `iters` rounds of one instruction per chain; returns a value that depends on
// every chain so that nothing is optimised away. a = (1, 1) and b = (2^-20, 2^-20) keep the sums normal.
constexpr int kChains = 12;
// The sum of every lane of every chain (a horizontal sum by hand: GCC 12 warns inside _mm512_reduce_add_ps).
__attribute__((target("avx512f"))) float chains_sum(const __m512 (&acc)[kChains]) {
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  alignas(64) float v[16];
  _mm512_store_ps(v, s);
  float r = 0;
  for (float x : v) r += x;
  return r;
}
__attribute__((target("avx512f,avx512bf16"))) float dpbf16_chains(int64_t iters) {
  __m512 acc[kChains];
  for (__m512& x : acc) x = _mm512_setzero_ps();
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = (__m512bh)_mm512_set1_epi32(0x35803580);
  for (int64_t i = 0; i < iters; ++i)
    for (__m512& x : acc) x = _mm512_dpbf16_ps(x, a, b);
  return chains_sum(acc);
}
__attribute__((target("avx512f"))) float fma_chains(int64_t iters) {
  __m512 acc[kChains];
  for (__m512& x : acc) x = _mm512_setzero_ps();
  const __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(0x1p-20f);
  for (int64_t i = 0; i < iters; ++i)
    for (__m512& x : acc) x = _mm512_fmadd_ps(a, b, x);
  return chains_sum(acc);
}

// GFLOP/s of `chains` run in 64 pieces over saccade's pool at the current thread count (as the GEMMs run):
// median of 5 samples of about 0.1 s. flops_per_instr: 64 for VDPBF16PS (16 lanes, 2 products, 2 flops), 32
// for VFMADD231PS.
double register_peak(float (*chains)(int64_t), double flops_per_instr) {
  const int64_t pieces = 64, iters = 1000000;  // 64 · 10⁶ · 12 instructions a sample
  std::atomic<float> sink{0};
  std::vector<double> g;
  for (int s = 0; s < 5; ++s) {
    auto t0 = bench::Clock::now();
    cpu::parallel_for(0, pieces, 1, [&](int64_t b, int64_t e) {
      float x = 0;
      for (int64_t p = b; p < e; ++p) x += chains(iters);
      sink.store(sink.load() + x);
    });
    g.push_back(double(pieces) * iters * kChains * flops_per_instr / bench::seconds_since(t0) * 1e-9);
  }
  return bench::stats(g).median;
}

// The distance between two threads as the machine places them: the median round trip of one cache line
// handed back and forth 200k times (9 samples), in ns. On a VM the host decides where the vCPUs sit; far
// apart (bench/RESULTS.md, "the bf16 GEMM's two speeds explained", has both distances), data one thread
// wrote is slow for the other to read.
double cache_line_round_trip_ns() {
  alignas(64) static std::atomic<int> flag{0};
  std::vector<double> ns;
  for (int s = 0; s < 9; ++s) {
    constexpr int n = 200000;
    flag = 0;
    std::thread other([] {
      for (int i = 0; i < n; ++i) {
        while (flag.load(std::memory_order_acquire) != 2 * i + 1) {
        }
        flag.store(2 * i + 2, std::memory_order_release);
      }
    });
    auto t0 = bench::Clock::now();
    for (int i = 0; i < n; ++i) {
      flag.store(2 * i + 1, std::memory_order_release);
      while (flag.load(std::memory_order_acquire) != 2 * i + 2) {
      }
    }
    ns.push_back(bench::seconds_since(t0) * 1e9 / n);
    other.join();
  }
  return bench::stats(ns).median;
}

void print_register_peaks(int threads) {
  if (!__builtin_cpu_supports("avx512f")) return;
  std::printf("register-only limit at %d thread%s: VFMADD231PS %.1f GFLOP/s", threads, threads > 1 ? "s" : "",
              register_peak(fma_chains, 32));
  if (cpu::cpu_has_avx512_bf16()) std::printf(", VDPBF16PS %.1f GFLOP/s", register_peak(dpbf16_chains, 64));
  std::printf("\n");
  if (threads > 1)
    std::printf("cache-line round trip between two threads: %.0f ns\n", cache_line_round_trip_ns());
}

}  // namespace

int matmul_bf16_main(const std::vector<int>& thread_counts) {
  std::printf("%s\n", blas_info_line().c_str());
  std::printf("bf16 kernel: %s; load average %.2f\n",
              cpu::kernel_amx_bf16()      ? "AMX tiles (TDPBF16PS) from 32 x 32, else VDPBF16PS"
              : cpu::kernel_avx512_bf16() ? "VDPBF16PS (AVX512-BF16)"
                                          : cpu::vector_level_name(cpu::kernel_isa()),
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
  // a training step of a Llama of SmolLM-135M's shapes at 4 × 512 tokens (no dW: LoRA's frozen weights)
  const int64_t T = 2048;
  for (Layer L :
       {Layer{"smollm q/o", 576, 576}, Layer{"smollm k/v", 192, 576}, Layer{"smollm gate/up", 1536, 576},
        Layer{"smollm down", 576, 1536}, Layer{"smollm lm head", 49152, 576}}) {
    shapes.push_back({std::string(L.name) + " fwd", T, L.out, L.in, false, true});
    shapes.push_back({std::string(L.name) + " dX", T, L.in, L.out, false, false});
  }
  for (int t : thread_counts) {
    set_num_threads(t);
    std::printf("-- %d thread%s (load average %.2f)\n", t, t > 1 ? "s" : "", bench::load_average());
    print_register_peaks(t);
    for (const Shape3& s : shapes) {
      run(s);
      if (cpu::cpu_has_amx_bf16()) {  // the same shape without AMX tiles: VDPBF16PS
        cpu::AmxOff off;
        std::printf("  without AMX: ");
        run(s);
      }
    }
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
