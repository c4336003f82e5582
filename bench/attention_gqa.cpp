// Grouped-query attention on the CPU (issue 40, goal 1; Ainslie et al. 2023): causal forward + backward of
// nn::scaled_dot_product_attention with enable_gqa and need_weights = false (the fused kernel) on q (B, H, T,
// D), k, v (B, H_kv, T, D), H = 32, H_kv = 8, D = 64, B·T = 8192 tokens, T = 512, 2048, 4096, float32 and
// bfloat16, against
//   - torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True) on the same
//     shapes and dtype (bench/attention_torch.py; PyTorch 2.x runs its CPU flash kernel for both dtypes, bf16
//     tensors in and out, which is its best bf16 route on the CPU), with its defaults and with
//     OMP_WAIT_POLICY=PASSIVE (the better of the two is shown), and
//   - our own MHA kernel at H = H_kv = 32, the same FLOPs: FlashAttention's count, forward + backward
//     3.5 · 4 B H T² D, halved for the causal mask (Dao 2023, the benchmark of FlashAttention-2).
// The three alternate run by run; each backward starts from one fixed random output gradient. Cells: median
// ms [min-max] of `samples` runs and GFLOP/s at the median. Then the peak-memory increment of one
// forward + backward at the largest T, each in a fresh process after one call at T = 64: VmHWM (resident
// high-water mark) for both frameworks, and our caching allocator's peak bytes in use (blocks of 64 KiB and
// more) beside it.
//
// Usage:
//   build/bench/attention --gqa [samples] [max_T] [f32|bf16|both] [threads] [tokens]
//       default 5 runs, max_T 4096, both, 2 threads, B·T = 8192; `--gqa 2 512 both 2 512` is a smoke run
//   build/bench/attention --gqa-peak B T H H_kv D f32|bf16 threads
//       one forward + backward in this process: prints peak_mib (VmHWM) and alloc_mib (the allocator's)
//   build/bench/attention --gqa-check
//       a small float32 case against PyTorch: output and gradients
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/torch_check.h"
#include "saccade.h"

using namespace saccade;
namespace sb = saccade::bench;

namespace {

struct GqaShape {
  int64_t B, T, H, H_kv, D;
};

std::string shape_args(const GqaShape& s) {
  return fmt::format("{} {} {} {} {}", s.B, s.T, s.H, s.H_kv, s.D);  // as the twin reads them
}

DType parse_dtype(const std::string& s) { return s == "bf16" ? DType::BFloat16 : DType::Float32; }
const char* dtype_arg(DType dt) { return dt == DType::BFloat16 ? "bf16" : "f32"; }

// Causal attention forward + backward on q (B, H, T, D), k, v (B, H_kv, T, D) of one dtype, from a fixed
// output gradient g (B, H, T, D).
struct GqaCase {
  GqaShape s;
  Variable q, k, v;
  Variable g;
  GqaCase(const GqaShape& shape, DType dt) : s(shape) {
    Generator gen(0);
    auto randn = [&](int64_t heads) {
      return ops::randn({s.B, heads, s.T, s.D}, DType::Float32, Device::cpu(), &gen).to(dt);
    };
    q = Variable(randn(s.H), true), k = Variable(randn(s.H_kv), true), v = Variable(randn(s.H_kv), true);
    g = Variable(randn(s.H));
  }
  Variable forward() const {
    return nn::scaled_dot_product_attention(q, k, v, {.is_causal = true, .enable_gqa = s.H != s.H_kv}).output;
  }
  void run() {
    forward().backward(g);
    q.zero_grad(), k.zero_grad(), v.zero_grad();
  }
};

// FLOPs of one causal forward + backward as FlashAttention counts them: 3.5 · 4 B H T² D / 2.
double flash_flops(const GqaShape& s) { return 3.5 * 4.0 * s.B * s.H * double(s.T) * s.T * s.D / 2.0; }

// "median [min-max] GFLOP/s" of ms samples.
std::string cell(const std::vector<double>& ms, double flops, const char* tag = "") {
  const sb::Stats st = sb::stats(ms);
  return fmt::format("{:.1f} [{:.1f}-{:.1f}] {:.0f}{}", st.median, st.min, st.max,
                     flops / (st.median * 1e-3) / 1e9, tag);
}

// One forward + backward in this (fresh) process, after one at T = 64 (so that what the first call of a
// kernel sets up once is not counted): the VmHWM increment and the allocator's peak over the bytes in use
// before, in MiB.
int peak_mode(char** argv) {
  GqaShape s{std::atol(argv[2]), std::atol(argv[3]), std::atol(argv[4]), std::atol(argv[5]),
             std::atol(argv[6])};
  set_num_threads(std::max(1, std::atoi(argv[8])));
  GqaCase({1, 64, s.H, s.H_kv, s.D}, parse_dtype(argv[7]))
      .run();  // the libraries' first-call setup, off the count
  GqaCase c(s, parse_dtype(argv[7]));
  const long rss_before = sb::peak_rss_kib();
  const int64_t in_use = memory_stats().bytes_in_use;
  c.run();
  std::printf("peak_mib %.1f\nalloc_mib %.1f\n", (sb::peak_rss_kib() - rss_before) / 1024.0,
              double(memory_stats().peak_bytes_in_use - in_use) / (1 << 20));
  return 0;
}

// Our output and gradients against PyTorch's on one small float32 case (T not a multiple of any tile).
int check_mode() {
  const GqaShape s{2, 77, 8, 2, 64};
  GqaCase c(s, DType::Float32);
  Variable out = c.forward();
  out.backward(c.g);
  const bool ok = sb::check_against_torch(
      fmt::format("GQA causal attention, (B, T, H, H_kv, D) = ({}, {}, {}, {}, {}), float32", s.B, s.T, s.H,
                  s.H_kv, s.D),
      {{"q", c.q.data()}, {"k", c.k.data()}, {"v", c.v.data()}, {"g", c.g.data()}},
      {{"out", out.data()}, {"dq", c.q.grad()}, {"dk", c.k.grad()}, {"dv", c.v.grad()}},
      std::string(SACCADE_BENCH_DIR) + "/attention_torch.py --gqa-check " + shape_args(s), 1e-5);
  return ok ? 0 : 1;
}

void table(sb::TorchPair& torch, DType dt, int samples, int64_t max_t, int threads, int64_t tokens) {
  std::printf(
      "\ncausal attention fwd+bwd, %s, H = 32, D = 64, B·T = %lld, %d thread(s), %d runs alternating; "
      "GFLOP/s = 3.5·4·B·H·T²·D/2 per run (FlashAttention's count, causal half)\n",
      std::string(dtype_name(dt)).c_str(), (long long)tokens, threads, samples);
  std::printf("%-6s %-4s %-28s %-28s %-8s %-30s %s\n", "T", "B", "ours GQA (H_kv 8) ms GFLOP/s",
              "ours MHA (H_kv 32) ms GFLOP/s", "GQA/MHA", "torch GQA ms GFLOP/s", "torch/ours");
  for (int64_t T : {512, 2048, 4096}) {
    if (T > max_t || T > tokens) continue;
    const GqaShape gqa{tokens / T, T, 32, 8, 64}, mha{tokens / T, T, 32, 32, 64};
    GqaCase ours(gqa, dt), ours_mha(mha, dt);
    const std::string request =
        "gqa " + shape_args(gqa) + " " + dtype_arg(dt) + " " + std::to_string(threads);
    ours.run(), ours_mha.run(), torch.warm_up(request);  // warm-up, all sides
    torch.clear();
    std::vector<double> ms[2];  // ours GQA, ours MHA
    for (int i = 0; i < samples; ++i) {
      ms[0].push_back(sb::ms_of([&] { ours.run(); }));
      ms[1].push_back(sb::ms_of([&] { ours_mha.run(); }));
      torch.run(request);
    }
    const double flops = flash_flops(gqa), ours_med = sb::stats(ms[0]).median;
    const char* tag = "";
    const std::vector<double>& theirs = torch.best(&tag);
    std::printf("%-6lld %-4lld %-28s %-28s %-8.2f %-30s %s\n", (long long)T, (long long)gqa.B,
                cell(ms[0], flops).c_str(), cell(ms[1], flops).c_str(), sb::stats(ms[1]).median / ours_med,
                torch.answered() ? cell(theirs, flops, tag).c_str() : "-",
                torch.answered() ? fmt::format("{:.2f}", sb::stats(theirs).median / ours_med).c_str() : "-");
    std::fflush(stdout);
  }
}

void peaks(const char* self, DType dt, int64_t T, int threads, int64_t tokens) {
  const GqaShape gqa{tokens / T, T, 32, 8, 64}, mha{tokens / T, T, 32, 32, 64};
  const std::string tail = std::string(" ") + dtype_arg(dt) + " " + std::to_string(threads);
  auto ours = sb::key_values(std::string(self) + " --gqa-peak " + shape_args(gqa) + tail);
  auto ours_mha = sb::key_values(std::string(self) + " --gqa-peak " + shape_args(mha) + tail);
  auto theirs = sb::run_torch(std::string(SACCADE_BENCH_DIR) + "/attention_torch.py",
                              "--peak-gqa " + shape_args(gqa) + tail);
  auto mib = [](std::map<std::string, double>& kv, const char* key) {
    return kv.count(key) ? fmt::format("{:.1f}", kv[key]) : std::string("-");
  };
  std::printf(
      "peak memory increment of one fwd+bwd, %s, (B, T) = (%lld, %lld), fresh processes: ours GQA %s MiB "
      "(allocator %s), ours MHA %s MiB (allocator %s), torch GQA %s MiB",
      std::string(dtype_name(dt)).c_str(), (long long)gqa.B, (long long)T, mib(ours, "peak_mib").c_str(),
      mib(ours, "alloc_mib").c_str(), mib(ours_mha, "peak_mib").c_str(), mib(ours_mha, "alloc_mib").c_str(),
      mib(theirs, "peak_mib").c_str());
  if (ours.count("peak_mib") && theirs.count("peak_mib") && theirs["peak_mib"] > 0)
    std::printf(", ours/torch %.2f", ours["peak_mib"] / theirs["peak_mib"]);
  std::printf("\n");
}

}  // namespace

/// The --gqa, --gqa-peak and --gqa-check modes of build/bench/attention (see the file comment); argv[1] is
/// the mode. Returns the program's exit status.
int attention_gqa_main(int argc, char** argv) {
  const std::string mode = argv[1];
  if (mode == "--gqa-peak" && argc == 9) return peak_mode(argv);
  if (mode == "--gqa-check") return check_mode();
  if (mode != "--gqa")
    return std::fprintf(stderr,
                        "usage: attention --gqa [samples] [max_T] [f32|bf16|both] [threads] [tokens]\n"
                        "       attention --gqa-peak B T H H_kv D f32|bf16 threads\n"
                        "       attention --gqa-check\n"),
           2;
  int64_t samples = 5, max_t = 4096, threads = 2, tokens = 8192;
  if ((argc > 2 && !sb::positive_int(argv[2], samples)) || (argc > 3 && !sb::positive_int(argv[3], max_t)) ||
      (argc > 5 && !sb::positive_int(argv[5], threads)) || (argc > 6 && !sb::positive_int(argv[6], tokens)))
    return std::fprintf(stderr,
                        "attention --gqa: samples, max_T, threads and tokens are whole numbers >= 1\n"),
           2;
  const std::string which = argc > 4 ? argv[4] : "both";
  if (which != "f32" && which != "bf16" && which != "both")
    return std::fprintf(stderr, "attention --gqa: dtype f32, bf16 or both\n"), 2;
  set_num_threads(int(threads));
  std::printf(
      "grouped-query attention (issue 40), ours against PyTorch and our MHA kernel\n%s\nload average %.2f\n",
      blas_info_line().c_str(), sb::load_average());
  const std::string script = std::string(SACCADE_BENCH_DIR) + "/attention_torch.py";
  sb::TorchPair torch(script);
  std::printf("%s\n", sb::torch_line(torch).c_str());
  std::vector<DType> dtypes;
  if (which != "bf16") dtypes.push_back(DType::Float32);
  if (which != "f32") dtypes.push_back(DType::BFloat16);
  for (DType dt : dtypes) table(torch, dt, int(samples), max_t, int(threads), tokens);
  std::printf(
      "(GQA/MHA = MHA ms / GQA ms at equal FLOPs, goal >= 1; torch/ours = torch ms / ours ms, goal >= 1.5; "
      "d/p = torch's better thread setting: defaults / OMP_WAIT_POLICY=PASSIVE)\n\n");
  int64_t largest = 0;
  for (int64_t T : {512, 2048, 4096})
    if (T <= max_t && T <= tokens) largest = T;
  if (largest > 0)
    for (DType dt : dtypes) peaks(argv[0], dt, largest, int(threads), tokens);
  std::printf("(goal: ours/torch <= 0.5)\nload average at end %.2f\n", sb::load_average());
  return 0;
}
