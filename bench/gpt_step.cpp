// One training step of the default GPT of examples/gpt (4 layers, 4 heads, d_model 128, context 128, bytes;
// batch 32 windows; dropout 0.1, GPTConfig's default): forward, cross-entropy, backward, clipping, AdamW; and
// greedy generation with the KV cache (batch 1, a 1-token prompt, 127 new tokens), each at 1 and 2 threads
// beside the same model in PyTorch (bench/gpt_step_torch.py, eager; its generation loops over
// past_key_values-style tensors) run right after under the same conditions. Which PyTorch: $SACCADE_PYTHON
// (default /usr/bin/python3, Debian's 1.13), e.g. SACCADE_PYTHON=/work/.venv-bench/bin/python for 2.x.
//
// Usage: build/bench/gpt_step [samples] [notorch]   (default 5 timed runs per setting, after one warm-up)
//        build/bench/gpt_step [samples] profile     the train step with a profiler::Profile active (shapes,
//        memory, FLOPs: what --profile records) against none, alternated step by step, at 1 and 2 threads
//        build/bench/gpt_step [samples] [notorch] --dtype bf16|f16
//   With --dtype, the training step runs under
//   saccade::AutocastGuard beside our float32 step (alternated run by run) and PyTorch's
//   torch.autocast("cpu", torch.bfloat16) step, and the peak memory of one step of each is printed
//   (the CPU caching allocator's peak_bytes_in_use: the 16-bit step is measured first, so the float32
//   figure is that step's own peak whenever it is the larger one).
//        build/bench/gpt_step [samples] [notorch] --dtype bf16 --no-avx512-bf16
//   The same with VDPBF16PS turned off (cpu::IsaGuard): the bf16 GEMM widens its tiles to float32 FMAs, as
//   on a CPU without AVX512-BF16 (issue 26's bound: such a step at most 1.2x our float32 step's time).
//        build/bench/gpt_step [samples] --checkpoint-activations [--context T] [--batch N]
//   The step with every block checkpointed (gpt train --checkpoint-activations) against the plain step, at
//   context T (default 512) and batch N (default 16): the activation peak of one step of each (the most bytes
//   of tensor storage live during the step above the level before it, from the profiler's memory track, so
//   parameters, gradients and AdamW's state are left out), then both steps' times alternated step by step.
//        build/bench/gpt_step [samples] steps [--dtype bf16|f16] [--threads N]
//   Only `samples` training steps of that dtype (float32 without --dtype) after one warm-up, each time
//   printed: a steady workload to run under `perf record` (no PyTorch, no other dtype, no generation).
//        build/bench/gpt_step [samples] [notorch] --device cuda [--batch N]
//   On the GPU: the same training step with the model and the batch on cuda:0, in float32 and under
//   AutocastGuard(bf16), each step ended by cuda::synchronize(), against gpt_step_torch.py's `train-cuda`
//   (PyTorch CUDA eager in float32 and under torch.autocast("cuda", torch.bfloat16), SDPA inside; and, for
//   information only, torch.compile of the bf16 step), in ms and tokens/s; then the cudaMalloc calls of the
//   steady state.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "examples/gpt/generate.h"
#include "examples/gpt/model.h"
#include "ops/cpu/simd.h"
#include "ops/cuda/api.h"
#include "saccade.h"

extern "C" char* openblas_get_corename();

using namespace saccade;
namespace ex = saccade::examples;
namespace sb = saccade::bench;

namespace {

constexpr int64_t kBatch = 32, kNewTokens = 127;

ex::GPTConfig config_with_context(int64_t context) {
  ex::GPTConfig c;
  c.context = context;
  return c;
}

struct Setup {
  explicit Setup(Device device = Device::cpu(), int64_t batch = kBatch, int64_t context = 128)
      : batch(batch), context(context) {
    if (!device.is_cpu()) {
      model.to(device);
      x = x.to(device), y = y.to(device);
    }
  }
  int64_t batch, context;
  ex::GPT model{config_with_context(context), 0};
  std::vector<Variable> params = model.parameters();
  nn::AdamW adamw{{nn::ParamGroup{model.decayed_parameters(), std::nullopt, 0.1},
                   nn::ParamGroup{model.undecayed_parameters(), std::nullopt, 0.0}},
                  nn::AdamOptions{.lr = 1e-3, .beta2 = 0.99, .weight_decay = 0.1}};
  Generator gen{1};
  Tensor x = ops::randint(0, 256, {batch, context}, Device::cpu(), &gen);
  Tensor y = ops::randint(0, 256, {batch * context}, Device::cpu(), &gen);

  void step(DType dtype = DType::Float32) {
    model.train();
    Variable loss;
    {
      std::optional<AutocastGuard> autocast;
      if (dtype != DType::Float32) autocast.emplace(dtype);
      loss = cross_entropy(reshape(model.forward(x), {batch * context, 256}), y);
    }
    adamw.zero_grad();
    loss.backward();
    nn::clip_grad_norm_(params, 1.0);
    adamw.step();
  }
  void checkpoint_activations(bool on) {
    for (auto& block : model.h) block->checkpoint_activations = on;
  }
  double generate() {  // tokens per second
    auto t0 = sb::Clock::now();
    ex::generate(model, {{10}}, ex::SamplingOptions{.max_new_tokens = kNewTokens, .temperature = 0});
    return kNewTokens / sb::seconds_since(t0);
  }
};

std::string cell(const sb::Stats& s, const char* fmt) {
  char a[32], b[32], c[32];
  std::snprintf(a, sizeof a, fmt, s.median), std::snprintf(b, sizeof b, fmt, s.min),
      std::snprintf(c, sizeof c, fmt, s.max);
  return std::string(a) + " [" + b + "-" + c + "]";
}

// The profiler's cost: steps without and with an active profile, alternated (off, on, off, ...) so that both
// see the same machine; each profiled step is its own Profile (started and stopped around it, collected,
// not written).
int profile_cost(Setup& s, int samples) {
  std::printf("GPT train step without / with a profiler::Profile active, alternated; %d samples each\n",
              samples);
  std::printf("%s\nload average at start %.2f\n", blas_info_line().c_str(), sb::load_average());
  std::printf("%-8s %-26s %-26s %s\n", "threads", "off (ms, median [min-max])", "on (ms, median [min-max])",
              "on / off (median of pairs)");
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    s.step();
    std::vector<double> off, on, ratio;
    size_t events = 0;
    for (int i = 0; i < samples; ++i) {
      auto t0 = sb::Clock::now();
      s.step();
      off.push_back(1e3 * sb::seconds_since(t0));
      auto t1 = sb::Clock::now();
      {
        profiler::Profile p({.record_shapes = true, .profile_memory = true, .with_flops = true});
        s.step();
        p.stop();
        events = p.events().size();
      }
      on.push_back(1e3 * sb::seconds_since(t1));
      ratio.push_back(on.back() / off.back());
    }
    std::printf("%-8d %-26s %-26s %.3f  (%zu events per step)\n", threads,
                cell(sb::stats(off), "%.1f").c_str(), cell(sb::stats(on), "%.1f").c_str(),
                sb::stats(ratio).median, events);
  }
  std::printf("load average at end %.2f\n", sb::load_average());
  return 0;
}

// The most bytes of tensor storage live at once during one training step (forward, loss, backward, clipping,
// AdamW) above the level before it: the activations and the gradients' transients, without the parameters,
// gradients and optimizer state that live across steps. From the profiler's memory track (every storage
// allocation and free, any size), whose level starts at 0 with the profile.
int64_t step_activation_peak(Setup& s) {
  profiler::Profile p({.profile_memory = true});
  s.step();
  p.stop();
  int64_t level = 0, peak = 0;
  for (const profiler::MemoryEvent& m : p.memory_events()) {
    level += m.delta;
    peak = std::max(peak, level);
  }
  return peak;
}

// --checkpoint-activations: the step with every block checkpointed (saccade::checkpoint) against the plain
// step: each one's activation peak (step_activation_peak), then their times alternated step by step at 1
// and 2 threads.
int checkpoint_cost(int samples, int64_t batch, int64_t context) {
  Setup s(Device::cpu(), batch, context);
  std::printf(
      "GPT (examples/gpt defaults but context %lld, batch %lld; dropout %.1f): every block checkpointed "
      "against none, %d samples\n",
      static_cast<long long>(context), static_cast<long long>(batch), s.model.config().dropout, samples);
  std::printf("%s\nload average at start %.2f\n", blas_info_line().c_str(), sb::load_average());
  s.step();  // AdamW's state is made in the first step
  int64_t peak[2];
  for (int ckpt : {0, 1}) {
    s.checkpoint_activations(ckpt);
    peak[ckpt] = step_activation_peak(s);
  }
  std::printf("activation peak of a step (MiB): plain %.1f, checkpointed %.1f, ratio %.3f\n",
              peak[0] / 1048576.0, peak[1] / 1048576.0,
              static_cast<double>(peak[1]) / static_cast<double>(peak[0]));
  std::printf("%-8s %-26s %-26s %s\n", "threads", "plain (ms, median [min-max])", "checkpointed (ms)",
              "checkpointed / plain (median of pairs)");
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::vector<double> plain, ckpt, ratio;
    for (int i = 0; i <= samples; ++i) {  // alternated; the first pair warms up
      double ms[2];
      for (int c : {0, 1}) {
        s.checkpoint_activations(c);
        auto t0 = sb::Clock::now();
        s.step();
        ms[c] = 1e3 * sb::seconds_since(t0);
      }
      if (i == 0) continue;
      plain.push_back(ms[0]), ckpt.push_back(ms[1]), ratio.push_back(ms[1] / ms[0]);
    }
    const sb::Stats r = sb::stats(ratio);
    std::printf("%-8d %-26s %-26s %.3f [%.3f-%.3f]\n", threads, cell(sb::stats(plain), "%.1f").c_str(),
                cell(sb::stats(ckpt), "%.1f").c_str(), r.median, r.min, r.max);
  }
  std::printf("load average at end %.2f\n", sb::load_average());
  return 0;
}

// --dtype: our 16-bit step against our float32 step (alternated run by run) and against PyTorch's autocast
// step (bf16 only: PyTorch's CPU autocast has no float16 GEMM worth timing), then one step's peak memory.
int run_dtype(DType dtype, int samples, bool torch) {
  const std::string script = std::string(SACCADE_BENCH_DIR) + "/gpt_step_torch.py";
  const char* name = dtype == DType::BFloat16 ? "bf16" : "f16";
  std::printf("GPT (examples/gpt defaults, batch %lld), %s autocast step against float32, %d samples\n",
              static_cast<long long>(kBatch), name, samples);
  std::printf("OpenBLAS core %s; load average at start %.2f\n", openblas_get_corename(), sb::load_average());
  Setup s;
  empty_cache();
  const int64_t base = memory_stats().bytes_in_use;
  s.step(dtype);
  const int64_t peak_half = memory_stats().peak_bytes_in_use - base;
  s.step();
  const int64_t peak_f32 = memory_stats().peak_bytes_in_use - base;
  std::printf("peak memory of one step above the model: %s %.1f MiB, float32 %.1f MiB, ratio %.2f\n", name,
              peak_half / 1048576.0, peak_f32 / 1048576.0,
              static_cast<double>(peak_half) / static_cast<double>(peak_f32));
  std::printf("\n%-8s %-26s %-26s %-26s %-12s %s\n", "threads", "f32 (ms)",
              (std::string(name) + " (ms)").c_str(), "torch bf16 (ms)", "f32 / ours", "torch / ours");
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::vector<double> f32, half;
    for (int i = 0; i <= samples; ++i) {  // alternated; the first pair warms up
      auto t0 = sb::Clock::now();
      s.step();
      const double a = 1e3 * sb::seconds_since(t0);
      t0 = sb::Clock::now();
      s.step(dtype);
      const double b = 1e3 * sb::seconds_since(t0);
      if (i > 0) f32.push_back(a), half.push_back(b);
    }
    const sb::Stats sf = sb::stats(f32), sh = sb::stats(half);
    std::map<std::string, double> t;
    if (torch && dtype == DType::BFloat16)
      t = sb::run_torch(script, "train " + std::to_string(threads) + " " + std::to_string(samples) + " " +
                                    std::to_string(kBatch) + " bf16");
    const std::string tc = t.empty() ? "-" : cell({t["median_ms"], t["min_ms"], t["max_ms"]}, "%.1f");
    const std::string tr = t.empty() ? "-" : fmt::format("{:.2f}", t["median_ms"] / sh.median);
    std::printf("%-8d %-26s %-26s %-26s %-12s %s\n", threads, cell(sf, "%.1f").c_str(),
                cell(sh, "%.1f").c_str(), tc.c_str(), fmt::format("{:.2f}", sf.median / sh.median).c_str(),
                tr.c_str());
  }
  std::printf("\nload average at end %.2f\n", sb::load_average());
  return 0;
}

// --device cuda: float32 and bf16-autocast steps on the GPU against PyTorch CUDA eager (and torch.compile,
// for information), then the cudaMalloc count of the steady state.
int cuda_main(int samples, bool torch, int64_t batch) {
  if (!cuda_is_available()) {
    std::printf("gpt_step --device cuda: no CUDA GPU present (or saccade was built without CUDA)\n");
    return 1;
  }
  torch = torch && sb::torch_available(/*cuda=*/true);
  const std::string script = std::string(SACCADE_BENCH_DIR) + "/gpt_step_torch.py";
  std::printf("GPT (examples/gpt defaults, batch %lld, context 128) on cuda:0, %d samples per setting\n",
              static_cast<long long>(batch), samples);
  Setup s(Device::cuda(), batch);
  auto timed_step = [&](DType dtype) {
    auto t0 = sb::Clock::now();
    s.step(dtype);
    cuda::synchronize();
    return 1e3 * sb::seconds_since(t0);
  };
  std::printf("%-6s %-26s %-26s %-14s %-26s %s\n", "dtype", "saccade ms (median [min-max])", "torch eager ms",
              "torch/saccade", "torch.compile ms (info)", "saccade tokens/s");
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    for (int i = 0; i < 5; ++i) timed_step(dtype);  // warm-up: allocator blocks, cuBLAS, AdamW state
    std::vector<double> ms;
    for (int i = 0; i < samples; ++i) ms.push_back(timed_step(dtype));
    const sb::Stats st = sb::stats(ms);
    const char* name = dtype == DType::Float32 ? "f32" : "bf16";
    std::map<std::string, double> t, tc;
    if (torch) {
      const std::string args = std::to_string(samples) + " " + std::to_string(batch) + " " + name;
      t = sb::run_torch(script, "train-cuda " + args + " eager");
      tc = sb::run_torch(script, "train-cuda " + args + " compile");
    }
    const std::string tcell = t.empty() ? "-" : cell({t["median_ms"], t["min_ms"], t["max_ms"]}, "%.2f");
    const std::string ccell = tc.empty() ? "-" : cell({tc["median_ms"], tc["min_ms"], tc["max_ms"]}, "%.2f");
    const std::string ratio = t.empty() ? "-" : fmt::format("{:.2f}", t["median_ms"] / st.median);
    std::printf("%-6s %-26s %-26s %-14s %-26s %.0f\n", name, cell(st, "%.2f").c_str(), tcell.c_str(),
                ratio.c_str(), ccell.c_str(), static_cast<double>(batch * 128) / (st.median / 1e3));
  }
  const AllocatorStats before = cuda::memory_stats();
  for (int i = 0; i < samples; ++i) timed_step(DType::BFloat16);
  const AllocatorStats after = cuda::memory_stats();
  std::printf("\nsteady state, %d bf16 steps: %lld cudaMalloc calls; device memory peak %.1f MiB\n", samples,
              static_cast<long long>(after.raw_alloc_count - before.raw_alloc_count),
              after.peak_bytes_in_use / 1048576.0);
  if (!torch) std::printf("(%s cannot import torch with CUDA: no PyTorch column)\n", sb::python().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int samples = 5;
  bool torch = true, profile = false, gpu = false, checkpointed = false, steps_only = false;
  int64_t context = 512;  // --checkpoint-activations' context
  int threads_only = 1;
  std::optional<cpu::IsaGuard> no_bf16_dot;
  std::optional<int64_t> batch;
  DType dtype = DType::Float32;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "notorch") {
      torch = false;
    } else if (a == "profile") {
      profile = true;
    } else if (a == "steps") {
      steps_only = true;
    } else if (a == "--threads" && i + 1 < argc) {
      threads_only = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--device" && i + 1 < argc) {
      const std::string d = argv[++i];
      SACCADE_CHECK(d == "cuda" || d == "cpu", "gpt_step: --device cpu or cuda, got {}", d);
      gpu = d == "cuda";
    } else if (a == "--no-avx512-bf16") {
      no_bf16_dot.emplace(cpu::Isa::Avx512);  // any live guard turns VDPBF16PS off (ops/cpu/simd.h)
      std::printf("VDPBF16PS off: the bf16 GEMM widens to float32 FMAs\n");
    } else if (a == "--batch" && i + 1 < argc) {
      batch = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--checkpoint-activations") {
      checkpointed = true;
    } else if (a == "--context" && i + 1 < argc) {
      context = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--dtype" && i + 1 < argc) {
      const std::string d = argv[++i];
      SACCADE_CHECK(d == "bf16" || d == "f16", "gpt_step: --dtype bf16 or f16, got {}", d);
      dtype = d == "bf16" ? DType::BFloat16 : DType::Float16;
    } else {
      int64_t n = 0;
      if (!bench::positive_int(argv[i], n) || n > 100000) {
        std::fprintf(stderr,
                     "gpt_step: unknown argument %s (see the usage at the top of bench/gpt_step.cpp)\n",
                     argv[i]);
        return 2;
      }
      samples = static_cast<int>(n);
    }
  }
  if (profile) {
    Setup s;
    return profile_cost(s, samples);
  }
  if (gpu) return cuda_main(samples, torch, batch.value_or(kBatch));
  if (checkpointed) return checkpoint_cost(samples, batch.value_or(16), context);
  if (steps_only) {
    set_num_threads(threads_only);
    Setup s;
    s.step(dtype);
    for (int i = 0; i < samples; ++i) {
      auto t0 = sb::Clock::now();
      s.step(dtype);
      std::printf("step %d: %.1f ms\n", i + 1, 1e3 * sb::seconds_since(t0));
    }
    return 0;
  }
  torch = torch && sb::torch_available();
  if (dtype != DType::Float32) return run_dtype(dtype, samples, torch);
  const std::string script = std::string(SACCADE_BENCH_DIR) + "/gpt_step_torch.py";
  std::string torch_version = "-";
  if (torch) {
    FILE* p = popen((sb::python() + " -c 'import torch; print(torch.__version__)' 2>/dev/null").c_str(), "r");
    char line[128] = "";
    if (p && std::fgets(line, sizeof line, p))
      torch_version = std::string(line).substr(0, std::string(line).find('\n'));
    if (p) pclose(p);
  }
  std::printf(
      "GPT (examples/gpt defaults: 4 layers, 4 heads, d_model 128, context 128, vocab 256), %d samples\n",
      samples);
  std::printf("OpenBLAS core %s; PyTorch %s (%s); load average at start %.2f\n", openblas_get_corename(),
              torch_version.c_str(), sb::python().c_str(), sb::load_average());
  Setup s;
  std::printf("\n%-22s %-8s %-26s %-26s %s\n", "what", "threads", "saccade (median [min-max])",
              "torch (median [min-max])", "ratio (>1: saccade faster)");
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    sb::Stats st = sb::stats(sb::time_ms(samples, [&] { s.step(); }));
    std::map<std::string, double> t;
    if (torch)
      t = sb::run_torch(script, "train " + std::to_string(threads) + " " + std::to_string(samples) + " " +
                                    std::to_string(kBatch));
    std::string tc = t.empty() ? "-" : cell({t["median_ms"], t["min_ms"], t["max_ms"]}, "%.1f");
    std::printf("%-22s %-8d %-26s %-26s %s\n", "train step (ms)", threads, cell(st, "%.1f").c_str(),
                tc.c_str(), t.empty() ? "-" : fmt::format("{:.2f}", t["median_ms"] / st.median).c_str());
    s.generate();
    std::vector<double> rates;
    for (int i = 0; i < samples; ++i) rates.push_back(s.generate());
    sb::Stats g = sb::stats(rates);
    std::map<std::string, double> tg;
    if (torch)
      tg = sb::run_torch(script, "generate " + std::to_string(threads) + " " + std::to_string(samples) + " " +
                                     std::to_string(kNewTokens));
    std::string gc =
        tg.empty()
            ? "-"
            : cell({tg["median_tokens_per_s"], tg["min_tokens_per_s"], tg["max_tokens_per_s"]}, "%.0f");
    std::printf("%-22s %-8d %-26s %-26s %s\n", "generate (tokens/s)", threads, cell(g, "%.0f").c_str(),
                gc.c_str(),
                tg.empty() ? "-" : fmt::format("{:.2f}", g.median / tg["median_tokens_per_s"]).c_str());
  }
  std::printf("\nload average at end %.2f%s\n", sb::load_average(),
              torch ? "" : "   (python cannot import torch: no PyTorch column)");
  return 0;
}
