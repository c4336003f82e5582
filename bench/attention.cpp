// Causal multi-head self-attention, forward + backward, saccade's nn::MultiHeadAttention (torch's Packed
// layout, need_weights = false, causal) against torch.nn.MultiheadAttention(batch_first=True,
// need_weights=False, causal bool attn_mask) run by bench/attention_torch.py, at 1 and 2 threads. The two
// frameworks alternate run by run (torch runs in a long-lived child process, once with its defaults and once
// with OMP_WAIT_POLICY=PASSIVE). Beside each time, the roofline share: useful FLOP/s, 3 (8 B T D^2 + 2 B T^2
// D) per forward+backward over the time, as a share of one 2048^3 cblas_sgemm measured in the same run at the
// same thread count. Then the peak-memory increment (VmHWM of a fresh process) of one forward+backward at
// (1, 4096, 256, 4) for both. Beside the module, bare attention: saccade's scaled_dot_product_attention
// (causal, need_weights = false: the fused kernel) against torch.nn.functional.scaled_dot_product_attention
// (is_causal=True; PyTorch 2.x's CPU flash kernel) on q, k, v (B, H, T, D/H). The torch cells give the better
// of its two thread settings (d: defaults, p: OMP_WAIT_POLICY=PASSIVE). The program re-executes itself with
// OPENBLAS_CORETYPE set when OpenBLAS runs below the CPU (use_best_blas_core), so both sides get that core.
//
// Usage: build/bench/attention [samples] [max_T]   (default 5 runs per setting; max_T skips larger shapes)
//        build/bench/attention --peak B T D H      (one forward+backward in this process: prints its peak)
//        build/bench/attention --device cuda [samples] [max_T]   (the GPU table: bench/attention_cuda.cpp)
//        build/bench/attention --gqa ...   (grouped-query attention, issue 40: bench/attention_gqa.cpp)
#include <cblas.h>

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

struct Shape4 {
  int64_t B, T, D, H;
};

struct Case {
  std::shared_ptr<nn::MultiHeadAttention> mha;
  Variable x;
  explicit Case(const Shape4& s) {
    Generator g(0);
    mha = std::make_shared<nn::MultiHeadAttention>(
        s.D, s.H,
        nn::MultiHeadAttentionOptions{.bias = true, .layout = nn::ParameterLayout::Packed, .generator = &g});
    x = Variable(ops::randn({s.B, s.T, s.D}, DType::Float32, Device::cpu(), &g), true);
  }
  void run() {
    Variable out = mha->forward(x, x, x, {.need_weights = false, .is_causal = true}).output;
    sum(out).backward();
    mha->zero_grad();
    x.zero_grad();
  }
};

// Bare causal attention on q, k, v (B, H, T, D/H), forward + backward.
struct SdpaCase {
  Variable q, k, v;
  explicit SdpaCase(const Shape4& s) {
    Generator g(0);
    auto make = [&] {
      return Variable(ops::randn({s.B, s.H, s.T, s.D / s.H}, DType::Float32, Device::cpu(), &g), true);
    };
    q = make(), k = make(), v = make();
  }
  void run() {
    Variable out = nn::scaled_dot_product_attention(q, k, v, {.is_causal = true}).output;
    sum(out).backward();
    q.zero_grad(), k.zero_grad(), v.zero_grad();
  }
};

// Useful FLOPs of one forward+backward (3x the forward): the four projections 8 B T D^2 (MHA only) and the
// two causal products, half of 4 B T^2 D.
double useful_flops(const Shape4& s, bool projections = true) {
  return 3.0 * ((projections ? 8.0 * s.B * s.T * s.D * s.D : 0.0) + 2.0 * s.B * s.T * s.T * s.D);
}

// GFLOP/s of one 2048^3 cblas_sgemm on `threads` OpenBLAS threads (then OpenBLAS goes back to saccade's 1).
double sgemm_gflops(int threads) {
  const int n = 2048;
  std::vector<float> a(size_t(n) * n, 1.0f), b(size_t(n) * n, 0.5f), c(size_t(n) * n);
  openblas_set_num_threads(threads);
  auto once = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                c.data(), n);
  };
  once();  // warm-up
  auto t0 = sb::Clock::now();
  once();
  double s = sb::seconds_since(t0);
  set_num_threads(get_num_threads());  // back to one OpenBLAS thread
  return 2.0 * n * n * n / s / 1e9;
}

int peak_mode(char** argv) {
  Shape4 s{std::atol(argv[2]), std::atol(argv[3]), std::atol(argv[4]), std::atol(argv[5])};
  set_num_threads(1);
  Case c(s);
  long before = sb::peak_rss_kib();
  c.run();
  std::printf("peak_mib %.1f\n", (sb::peak_rss_kib() - before) / 1024.0);
  return 0;
}

}  // namespace

// bench/attention_cuda.cpp: the --device cuda table.
int attention_cuda_main(int samples, int64_t max_t);
// bench/attention_gqa.cpp: the --gqa, --gqa-peak and --gqa-check modes.
int attention_gqa_main(int argc, char** argv);

int main(int argc, char** argv) {
  use_best_blas_core(argv);
  if (argc == 6 && std::strcmp(argv[1], "--peak") == 0) return peak_mode(argv);
  if (argc >= 2 && std::strncmp(argv[1], "--gqa", 5) == 0) return attention_gqa_main(argc, argv);
  int first = 1;  // the first of [samples] [max_T]
  if (argc >= 3 && std::strcmp(argv[1], "--device") == 0) {
    const std::string device = argv[2];
    if (device != "cpu" && device != "cuda") return std::fprintf(stderr, "--device: cpu or cuda\n"), 2;
    first = 3;
    if (device == "cuda")
      return attention_cuda_main(argc > first ? std::max(1, std::atoi(argv[first])) : 5,
                                 argc > first + 1 ? std::atol(argv[first + 1]) : int64_t{1} << 30);
  }
  const int samples = argc > first ? std::max(1, std::atoi(argv[first])) : 5;
  const int64_t max_t = argc > first + 1 ? std::atol(argv[first + 1]) : 1 << 30;
  std::printf("causal MHA forward+backward, float32; %d runs per setting, frameworks alternating\n", samples);
  std::printf("%s\nload average %.2f\n", blas_info_line().c_str(), sb::load_average());
  const std::string script = std::string(SACCADE_BENCH_DIR) + "/attention_torch.py";
  sb::TorchServer torch_default(script, ""), torch_passive(script, "OMP_WAIT_POLICY=PASSIVE");
  if (!torch_default.ok())
    std::printf("(%s cannot import torch: no PyTorch columns)\n", sb::python().c_str());
  else
    std::printf("%s\n", sb::torch_info().c_str());

  const std::vector<Shape4> shapes = {
      {32, 64, 128, 8}, {8, 512, 256, 8}, {4, 1024, 256, 4}, {1, 2048, 256, 4}};
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    const double peak = sgemm_gflops(threads);
    std::printf("\n%d thread(s): roofline = one 2048^3 cblas_sgemm, %.1f GFLOP/s\n", threads, peak);
    std::printf("%-18s %-27s %-29s %-6s %-27s %-29s %-6s\n", "(B, T, D, H)", "saccade MHA ms [min-max] roof",
                "torch MHA ms [min-max] roof", "ratio", "saccade SDPA ms [min-max] roof",
                "torch SDPA ms [min-max] roof", "ratio");
    for (const Shape4& s : shapes) {
      if (s.T > max_t) continue;
      Case c(s);
      SdpaCase bare(s);
      c.run(), bare.run();  // warm-up
      const std::string args = " " + std::to_string(s.B) + " " + std::to_string(s.T) + " " +
                               std::to_string(s.D) + " " + std::to_string(s.H) + " " +
                               std::to_string(threads);
      const bool torch = torch_default.ok();
      for (const char* kind : {"run", "sdpa"})  // their warm-up
        if (torch) torch_default.ask(kind + args), torch_passive.ask(kind + args);
      // [0] saccade MHA, [1] torch MHA, [2] torch MHA passive, [3] saccade SDPA, [4] torch SDPA, [5] passive
      std::vector<double> ms[6];
      for (int i = 0; i < samples; ++i) {
        ms[0].push_back(sb::ms_of([&] { c.run(); }));
        ms[3].push_back(sb::ms_of([&] { bare.run(); }));
        if (!torch) continue;
        ms[1].push_back(torch_default.ask("run" + args)), ms[2].push_back(torch_passive.ask("run" + args));
        ms[4].push_back(torch_default.ask("sdpa" + args)), ms[5].push_back(torch_passive.ask("sdpa" + args));
      }
      auto cell = [&](const std::vector<double>& t, double flops, const char* tag) {
        if (t.empty() || t[0] < 0) return std::string("-");
        const sb::Stats st = sb::stats(t);
        return fmt::format("{:.1f} [{:.1f}-{:.1f}] {:.2f}{}", st.median, st.min, st.max,
                           flops / (st.median * 1e-3) / 1e9 / peak, tag);
      };
      // torch's better thread setting of the two, by median
      auto best = [&](int i) -> int {
        if (ms[i].empty() || ms[i][0] < 0) return i;
        return sb::stats(ms[i + 1]).median < sb::stats(ms[i]).median ? i + 1 : i;
      };
      auto ratio = [&](int t, int ours) {
        if (ms[t].empty() || ms[t][0] < 0) return std::string("-");
        return fmt::format("{:.2f}", sb::stats(ms[t]).median / sb::stats(ms[ours]).median);
      };
      const int tm = best(1), ts = best(4);
      const double f_mha = useful_flops(s), f_sdpa = useful_flops(s, false);
      const std::string name = fmt::format("({}, {}, {}, {})", s.B, s.T, s.D, s.H);
      std::printf("%-18s %-27s %-29s %-6s %-27s %-29s %-6s\n", name.c_str(), cell(ms[0], f_mha, "").c_str(),
                  cell(ms[tm], f_mha, tm == 1 ? " d" : " p").c_str(), ratio(tm, 0).c_str(),
                  cell(ms[3], f_sdpa, "").c_str(), cell(ms[ts], f_sdpa, ts == 4 ? " d" : " p").c_str(),
                  ratio(ts, 3).c_str());
    }
  }
  std::printf(
      "(ratio = torch ms / saccade ms: above 1, saccade is faster; roof = share of the sgemm's FLOP/s; d/p = "
      "torch's better thread setting: defaults / OMP_WAIT_POLICY=PASSIVE)\n");

  // Peak memory: each framework in a fresh process.
  const Shape4 big{1, 4096, 256, 4};
  if (big.T <= max_t) {
    const std::string args = "1 4096 256 4";
    auto ours = sb::key_values(std::string(argv[0]) + " --peak " + args);
    auto theirs = sb::run_torch(script, "--peak " + args);
    std::printf("\npeak memory increment of one forward+backward at (1, 4096, 256, 4): saccade %.1f MiB",
                ours.count("peak_mib") ? ours["peak_mib"] : -1.0);
    if (theirs.count("peak_mib"))
      std::printf(", torch %.1f MiB, saccade/torch %.2f", theirs["peak_mib"],
                  ours["peak_mib"] / theirs["peak_mib"]);
    std::printf("\n");
  }
  std::printf("load average at end %.2f\n", sb::load_average());
  return 0;
}
