// bench/attention --device cuda: saccade's fused attention forward + backward on the GPU
// (nn::scaled_dot_product_attention with need_weights = false, which calls saccade::flash_attention) against
// torch.nn.functional.scaled_dot_product_attention on CUDA (bench/attention_torch.py --serve-cuda) at the
// same shapes: q, k, v (B, H, T, D) = (8, 8, T, 64), T = 512, 2048, 8192, causal and not, float32, a fixed
// random output gradient. torch runs in a long-lived child process fed one request a line; the frameworks
// alternate sample by sample. torch is timed with its default backend choice (the script names the kernel it
// ran, read with torch.profiler) and with each backend forced by torch.nn.attention.sdpa_kernel: flash,
// efficient, math (a backend that refuses the shape or dtype, or runs out of memory, prints "n/a").
//
// A sample = `reps` calls between two cuda::synchronize() (reps chosen so that a sample takes ~0.2 s, at
// least 1); each cell: median ms per call [min-max] over the samples, after one warm-up call, and TFLOP/s.
// FLOPs as FlashAttention's benchmarks count them: forward 4 B H T^2 D (halved when causal), forward +
// backward 3.5x that. ratio = torch ms / saccade ms (above 1: saccade is faster; the goal is >= 0.8
// against torch's default).
//
// Before it, the 16-bit table (issue 27): bfloat16 q, k, v (8, 16, T, D), D = 64 and 128, T = 512 / 2048 /
// 8192, causal and not, the forward alone (f) and forward + backward (fb): saccade with its tensor-core
// kernels (ops/cuda/attention_mma.cu, switched on for the table) against torch SDPA's default and flash
// backends; and a (4096 x 4096) GEMM in bfloat16 and float32 against torch.matmul (ratio: the goal is >= 0.9
// in bf16). After the GEMM, grouped-query attention (H = 32, H_kv = 8, D = 128, causal, bfloat16) against
// SDPA enable_gqa=True, and a sliding window of 1024 keys against full causal attention (gqa_rows).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "ops/cuda/api.h"
#include "ops/cuda/attention_mma.h"
#include "saccade.h"

using namespace saccade;
namespace sb = saccade::bench;

namespace {

constexpr int64_t kB = 8, kH = 8, kD = 64;
constexpr double kSampleSeconds = 0.2;  // aim of one sample's length
constexpr double kCellSeconds =
    30.0;  // at most this long per framework and shape (slow kernels: fewer samples)

double forward_flops(int64_t H, int64_t T, int64_t D, bool causal) {
  return 4.0 * kB * H * double(T) * double(T) * D * (causal ? 0.5 : 1.0);
}

// One shape on the GPU: leaves q, k, v and the output gradient, made on the CPU from fixed seeds and copied.
// (B, H, T, D) in `dtype`; forward_only: the forward alone, recording nothing (NoGradGuard).
struct CudaCase {
  // H_kv: key/value heads (grouped-query attention when below H; 0: H); window: sliding window (0: none)
  Variable q, k, v;
  Tensor gout;
  bool causal, forward_only, gqa;
  int64_t window;
  CudaCase(int64_t T, bool causal_, DType dtype = DType::Float32, int64_t H = kH, int64_t D = kD,
           bool forward_only_ = false, int64_t H_kv = 0, int64_t window_ = 0)
      : causal(causal_), forward_only(forward_only_), gqa(H_kv > 0 && H_kv != H), window(window_) {
    Generator g(0);
    auto make = [&](int64_t heads) {
      return ops::randn({kB, heads, T, D}, DType::Float32, Device::cpu(), &g).to(dtype).to(Device::cuda());
    };
    const int64_t hkv = H_kv > 0 ? H_kv : H;
    q = Variable(make(H), true), k = Variable(make(hkv), true), v = Variable(make(hkv), true);
    gout = make(H);
  }
  // One forward + backward; the gradients are dropped (torch: .grad = None) so that none accumulates.
  void run() {
    if (forward_only) {
      NoGradGuard no_grad;
      nn::scaled_dot_product_attention(q, k, v, {.is_causal = causal, .window = window, .enable_gqa = gqa});
      return;
    }
    Variable out =
        nn::scaled_dot_product_attention(q, k, v, {.is_causal = causal, .window = window, .enable_gqa = gqa})
            .output;
    out.backward(gout);
    q.zero_grad(), k.zero_grad(), v.zero_grad();
  }
  // ms per call of `reps` calls, synchronised before and after.
  double sample(int reps) {
    cuda::synchronize();
    auto t0 = sb::Clock::now();
    for (int i = 0; i < reps; ++i) run();
    cuda::synchronize();
    return 1e3 * sb::seconds_since(t0) / reps;
  }
};

// One row of a table: saccade's case c and torch's twin (request `req` + `suffix`) under each backend,
// alternating sample by sample; prints saccade's cell, then each backend's cell and ratio, then the backend
// torch's default ran.
void table_row(CudaCase& c, const std::string& req, const std::string& suffix,
               const std::vector<std::string>& backends, double flops, int samples, sb::TorchServer& torch);

std::string cell(const std::vector<double>& ms, double flops) {
  if (ms.empty()) return "n/a";
  sb::Stats st = sb::stats(ms);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.3f [%.3f-%.3f] %.1f TF/s", st.median, st.min, st.max,
                flops / (st.median * 1e-3) / 1e12);
  return buf;
}

std::string ratio(const std::vector<double>& theirs, const std::vector<double>& ours) {
  if (theirs.empty() || ours.empty()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", sb::stats(theirs).median / sb::stats(ours).median);
  return buf;
}

// The kernels' ladder: saccade's own forward and backward kernels at one shape (B, H, T) = (8, 8, 2048), not
// causal, each dtype and head dim: readable (one thread per row), tiled (attention.cu: one row or one score a
// thread) and fast (attention_fast.cu: register-tiled, float32 only). Median ms of `samples` calls each.
void kernel_ladder(int samples) {
  constexpr int64_t T = 2048;
  std::printf(
      "kernel ladder, (B, H, T) = (%lld, %lld, %lld), not causal: forward ms / backward ms (median of %d)\n",
      static_cast<long long>(kB), static_cast<long long>(kH), static_cast<long long>(T), samples);
  std::printf("%-8s %-4s %-24s %-24s %-24s\n", "dtype", "D", "readable", "tiled", "fast");
  for (DType dt : {DType::Float32, DType::Float64})
    for (int64_t D : {64, 128}) {
      Generator g(1);
      auto make = [&] { return ops::randn({kB, kH, T, D}, dt, Device::cpu(), &g).to(Device::cuda()); };
      const Tensor q = make(), k = make(), v = make(), gout = make();
      const auto mask =
          ops::attention_mask(Tensor(), {kB, kH, T, T}, ops::CausalAlign::None, Device::cuda(), "bench");
      const double scale = 1.0 / std::sqrt(double(D));
      std::printf("%-8s %-4lld", dt == DType::Float32 ? "float32" : "float64", static_cast<long long>(D));
      for (int kind = 0; kind < 3; ++kind) {
        if (kind == 2 && dt != DType::Float32) {
          std::printf(" %-24s", "-");
          continue;
        }
        cuda::set_readable_attention(kind == 0);
        cuda::set_fast_attention(kind == 2);
        std::vector<double> fwd, bwd;
        for (int i = 0; i <= samples; ++i) {  // the first call is a warm-up
          cuda::synchronize();
          auto t0 = sb::Clock::now();
          auto f = ops::flash_attention_forward(q, k, v, mask, scale);
          cuda::synchronize();
          const double tf = 1e3 * sb::seconds_since(t0);
          t0 = sb::Clock::now();
          auto grads = ops::flash_attention_backward(gout, q, k, v, f.out, f.lse, mask, scale);
          cuda::synchronize();
          if (i > 0) fwd.push_back(tf), bwd.push_back(1e3 * sb::seconds_since(t0));
        }
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.2f / %.2f", sb::stats(fwd).median, sb::stats(bwd).median);
        std::printf(" %-24s", buf);
      }
      std::printf("\n");
    }
  cuda::set_readable_attention(false);
  cuda::set_fast_attention(true);
  std::printf("\n");
}

void table_row(CudaCase& c, const std::string& req, const std::string& suffix,
               const std::vector<std::string>& backends, double flops, int samples, sb::TorchServer& torch) {
  c.run();  // warm-up: the allocator's blocks, the first launch of each kernel
  cuda::synchronize();
  auto t0 = sb::Clock::now();
  c.run();  // one timed call sets the number of calls per sample
  cuda::synchronize();
  const double first = sb::seconds_since(t0);
  const int reps = std::max(1, static_cast<int>(kSampleSeconds / std::max(first, 1e-6)));
  const int n = std::clamp(static_cast<int>(kCellSeconds / (first * reps)), 1, samples);
  std::vector<std::vector<double>> theirs(backends.size());
  std::vector<bool> works(backends.size(), torch.ok());
  for (size_t b = 0; b < backends.size(); ++b)  // their warm-up; -1: the backend refused or failed
    if (works[b]) works[b] = torch.ask("run " + backends[b] + " " + req + suffix) > 0;
  std::vector<double> ours;
  for (int i = 0; i < n; ++i) {
    ours.push_back(c.sample(reps));
    for (size_t b = 0; b < backends.size(); ++b) {
      if (!works[b]) continue;
      const double ms = torch.ask("time " + backends[b] + " " + req + suffix);
      if (ms > 0) theirs[b].push_back(ms);
    }
  }
  std::printf("%-34s", cell(ours, flops).c_str());
  for (size_t b = 0; b < backends.size(); ++b)
    std::printf(" %-34s %-5s", cell(theirs[b], flops).c_str(), ratio(theirs[b], ours).c_str());
  std::printf(" %s\n", torch.ok() ? torch.ask_text("which " + req + suffix).c_str() : "-");
  std::fflush(stdout);
}

// The 16-bit table (issue 27's goals): bfloat16 q, k, v (8, 16, T, D), D = 64 and 128, the forward alone and
// forward + backward, saccade with its tensor-core kernels (cuda::set_tensor_core_attention(true)) against
// torch SDPA's default and its flash backend forced.
void half_table(int samples, int64_t max_t, sb::TorchServer& torch) {
  constexpr int64_t H = 16;
  const std::vector<std::string> backends = {"default", "flash"};
  cuda::set_tensor_core_attention(true);
  std::printf("\nbfloat16, (B, H) = (%lld, %lld), saccade on the tensor cores (attention_mma.cu)\n",
              static_cast<long long>(kB), static_cast<long long>(H));
  std::printf("%-4s %-6s %-6s %-4s %-34s", "D", "T", "causal", "pass", "saccade ms [min-max] TFLOP/s");
  for (const auto& b : backends) std::printf(" %-34s %-5s", ("torch " + b).c_str(), "ratio");
  std::printf(" torch default ran\n");
  for (int64_t D : {64, 128})
    for (int64_t T : {512, 2048, 8192}) {
      if (T > max_t) continue;
      for (bool causal : {false, true})
        for (bool fwd : {true, false}) {
          CudaCase c(T, causal, DType::BFloat16, H, D, fwd);
          const std::string req = std::to_string(T) + " " + (causal ? "1" : "0");
          const std::string suffix =
              " bfloat16 " + std::to_string(H) + " " + std::to_string(D) + (fwd ? " f" : " fb");
          std::printf("%-4lld %-6lld %-6s %-4s ", static_cast<long long>(D), static_cast<long long>(T),
                      causal ? "yes" : "no", fwd ? "f" : "fb");
          table_row(c, req, suffix, backends, (fwd ? 1.0 : 3.5) * forward_flops(H, T, D, causal), samples,
                    torch);
        }
    }
  cuda::set_tensor_core_attention(false);
}

// The GEMM beside it: ops::matmul of two (N, N) CUDA matrices (cuBLAS; bfloat16 on the tensor cores with
// float32 accumulation) against torch.matmul, N = 4096, bfloat16 and float32, alternating sample by sample.
void gemm_rows(int samples, sb::TorchServer& torch) {
  constexpr int64_t N = 4096;
  const double flops = 2.0 * N * N * N;
  std::printf("\nGEMM (%lld x %lld) x (%lld x %lld): saccade ops::matmul against torch.matmul\n",
              static_cast<long long>(N), static_cast<long long>(N), static_cast<long long>(N),
              static_cast<long long>(N));
  for (DType dt : {DType::BFloat16, DType::Float32}) {
    Generator g(3);
    const Tensor a = ops::randn({N, N}, DType::Float32, Device::cpu(), &g).to(dt).to(Device::cuda());
    const Tensor b = ops::randn({N, N}, DType::Float32, Device::cpu(), &g).to(dt).to(Device::cuda());
    auto once = [&] { ops::matmul(a, b); };
    once();
    cuda::synchronize();
    auto t0 = sb::Clock::now();
    once();
    cuda::synchronize();
    const int reps = std::max(1, static_cast<int>(kSampleSeconds / std::max(sb::seconds_since(t0), 1e-6)));
    std::vector<double> ours, theirs;
    const std::string req =
        "gemm " + std::to_string(N) + " " + (dt == DType::BFloat16 ? "bfloat16" : "float32");
    for (int i = 0; i < samples; ++i) {
      cuda::synchronize();
      t0 = sb::Clock::now();
      for (int r = 0; r < reps; ++r) once();
      cuda::synchronize();
      ours.push_back(1e3 * sb::seconds_since(t0) / reps);
      if (torch.ok()) {
        const double ms = torch.ask(req);
        if (ms > 0) theirs.push_back(ms);
      }
    }
    std::printf("%-8s saccade %-34s torch %-34s ratio %s\n", dt == DType::BFloat16 ? "bfloat16" : "float32",
                cell(ours, flops).c_str(), cell(theirs, flops).c_str(), ratio(theirs, ours).c_str());
  }
}

// The grouped-query and sliding-window rows (issue 40 on the GPU): bfloat16 on the tensor cores,
// (B, H, H_kv, D) = (8, 32, 8, 128), causal, forward and forward + backward, against torch SDPA with
// enable_gqa=True (its default backend and flash forced); then saccade's sliding window of 1024 keys against
// its own full causal attention at the same shape (torch SDPA has no sliding window).
void gqa_rows(int samples, int64_t max_t, sb::TorchServer& torch) {
  constexpr int64_t H = 32, H_kv = 8, D = 128, W = 1024;
  const std::vector<std::string> backends = {"default", "flash"};
  cuda::set_tensor_core_attention(true);
  std::printf(
      "\ngrouped-query, bfloat16, (B, H, H_kv, D) = (%lld, %lld, %lld, %lld), causal, against SDPA "
      "enable_gqa=True\n",
      static_cast<long long>(kB), static_cast<long long>(H), static_cast<long long>(H_kv),
      static_cast<long long>(D));
  std::printf("%-6s %-4s %-34s", "T", "pass", "saccade ms [min-max] TFLOP/s");
  for (const auto& b : backends) std::printf(" %-34s %-5s", ("torch " + b).c_str(), "ratio");
  std::printf(" torch default ran\n");
  for (int64_t T : {2048, 8192}) {
    if (T > max_t) continue;
    for (bool fwd : {true, false}) {
      CudaCase c(T, true, DType::BFloat16, H, D, fwd, H_kv);
      const std::string req = std::to_string(T) + " 1";
      const std::string suffix = " bfloat16 " + std::to_string(H) + " " + std::to_string(D) +
                                 (fwd ? " f" : " fb") + " " + std::to_string(H_kv);
      std::printf("%-6lld %-4s ", static_cast<long long>(T), fwd ? "f" : "fb");
      table_row(c, req, suffix, backends, (fwd ? 1.0 : 3.5) * forward_flops(H, T, D, true), samples, torch);
    }
  }
  std::printf("\nsliding window of %lld keys against full causal attention (both saccade), same shape\n",
              static_cast<long long>(W));
  for (int64_t T : {2048, 8192}) {
    if (T > max_t) continue;
    for (bool fwd : {true, false}) {
      CudaCase win(T, true, DType::BFloat16, H, D, fwd, H_kv, W),
          full(T, true, DType::BFloat16, H, D, fwd, H_kv);
      win.run(), full.run();
      std::vector<double> a, b;
      for (int i = 0; i < samples; ++i) a.push_back(win.sample(3)), b.push_back(full.sample(3));
      std::printf(
          "T %-6lld %-3s window %-12.3f causal %-12.3f ms (medians; min %.3f / %.3f)  causal/window %.2f\n",
          static_cast<long long>(T), fwd ? "f" : "fb", sb::stats(a).median, sb::stats(b).median,
          sb::stats(a).min, sb::stats(b).min, sb::stats(b).median / sb::stats(a).median);
    }
  }
  cuda::set_tensor_core_attention(false);
}

}  // namespace

/// `attention --device cuda [samples] [max_T]`: the table described at the top of this file. Returns the exit
/// status (1 when there is no GPU).
int attention_cuda_main(int samples, int64_t max_t) {
  if (!cuda_is_available()) {
    std::printf("attention --device cuda: no CUDA GPU present (or saccade was built without CUDA)\n");
    return 1;
  }
  std::printf(
      "fused attention forward+backward on the GPU, float32, (B, H, D) = (%lld, %lld, %lld); up to %d "
      "samples per cell, frameworks alternating\n",
      static_cast<long long>(kB), static_cast<long long>(kH), static_cast<long long>(kD), samples);
  std::printf("saccade: nn::scaled_dot_product_attention (fused), readable forward kernel: %s, TF32: %s\n",
              cuda::readable_attention() ? "yes" : "no", cuda::allow_tf32() ? "allowed" : "off");
  kernel_ladder(std::min(samples, 5));
  const std::string script = std::string(SACCADE_BENCH_DIR) + "/attention_torch.py";
  sb::TorchServer torch(script, "", "--serve-cuda");
  if (torch.ok())
    std::printf("torch: %s\n", torch.ask_text("version").c_str());
  else
    std::printf("(%s cannot import torch with CUDA: no PyTorch columns)\n", sb::python().c_str());
  // the 16-bit table and the GEMM first (issue 27's open goals), then the float32 table
  // both tensor-core kernels (ops/cuda/attention_mma.h): the pipelined one first, then the readable reference
  const cuda::MmaAttentionVariant before = cuda::mma_attention_variant();
  for (auto [variant, name] : {std::pair{cuda::MmaAttentionVariant::Pipelined, "pipelined"},
                               std::pair{cuda::MmaAttentionVariant::Readable, "readable"}}) {
    cuda::set_mma_attention_variant(variant);
    std::printf("\ntensor-core kernel: %s\n", name);
    half_table(samples, max_t, torch);
  }
  cuda::set_mma_attention_variant(before);
  gemm_rows(samples, torch);
  gqa_rows(samples, max_t, torch);
  std::printf("\nfloat32, (B, H, D) = (%lld, %lld, %lld)\n", static_cast<long long>(kB),
              static_cast<long long>(kH), static_cast<long long>(kD));
  const std::vector<std::string> backends = {"default", "flash", "efficient", "math"};
  std::printf("\n%-6s %-6s %-34s", "T", "causal", "saccade ms [min-max] TFLOP/s");
  for (const auto& b : backends) std::printf(" %-34s %-5s", ("torch " + b).c_str(), "ratio");
  std::printf(" torch default ran\n");

  for (int64_t T : {512, 2048, 8192}) {
    if (T > max_t) continue;
    for (bool causal : {false, true}) {
      CudaCase c(T, causal);
      const std::string req = std::to_string(T) + " " + (causal ? "1" : "0");
      std::printf("%-6lld %-6s ", static_cast<long long>(T), causal ? "yes" : "no");
      table_row(c, req, "", backends, 3.5 * forward_flops(kH, T, kD, causal), samples, torch);
    }
  }
  std::printf(
      "(ratio = torch ms / saccade ms; FLOPs: forward 4 B H T^2 D, forward+backward 3.5 x that, halved when "
      "causal)\n");
  return 0;
}
