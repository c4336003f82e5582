// One training step of the sat captioner (examples/image_caption: CNN grid encoder, GRU decoder with additive
// attention over a 7x7 grid; batch 64 of 56x56 scenes, 18 decoder steps): encode, decode, cross-entropy,
// backward, gradient clipping, Adam. Timed at 1 and 2 threads, on the machine as it is ("idle") and with one
// CPU-bound process started here (`timeout`-bounded `while :; do :; done`), beside the same model in PyTorch
// (bench/caption_step_torch.py, same sizes) run under the same conditions.
//
// Usage: build/bench/caption_step [samples] [composed]   (default 5 timed steps per setting, after one
// warm-up step; `composed` scores the additive attention through nn::additive_scores_composed, the reference
// path, instead of the fused kernel; `notorch` skips the PyTorch column; `idle` skips the rows with a
// competing process)
//        build/bench/caption_step [samples] --device cuda [notorch]
// On the GPU: the same step with the model and the batch on cuda:0 against the same model in PyTorch CUDA
// eager (caption_step_torch.py ... cuda), each step ended by a synchronisation, and the caching allocator's
// cudaMalloc calls (cuda::memory_stats().raw_alloc_count) over `samples` steps after the warm-up steps: the
// issue asks for none in a training loop's steady state.
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "examples/common/scenes.h"
#include "examples/image_caption/captioner.h"
#include "ops/cuda/api.h"
#include "saccade.h"

using namespace saccade;
namespace ex = saccade::examples;
namespace sb = saccade::bench;

namespace {

// Sets use_fused on every AdditiveAttention in `m`.
void set_fused(nn::Module& m, bool fused) {
  if (auto* a = dynamic_cast<nn::AdditiveAttention*>(&m)) a->use_fused = fused;
  for (const auto& c : m.children()) set_fused(*c, fused);
}

constexpr int64_t kBatch = 64, kSteps = 18;  // 18 decoder steps: the longest caption of a typical batch

// The model (built on the CPU from seed 0, then moved), its optimizer and one random batch, on `device`.
struct Setup {
  Device device;
  std::shared_ptr<ex::Captioner> model = ex::make_captioner(ex::CaptionConfig::defaults("sat"), 0);
  std::vector<Variable> params = model->parameters();
  nn::Adam adam{params, nn::AdamOptions{.lr = 3e-3}};
  Generator gen{1};
  Tensor images = ops::rand({kBatch, 1, 56, 56}, DType::Float32, Device::cpu(), &gen);
  Tensor tokens = ops::randint(0, ex::Vocab().size(), {kBatch, kSteps + 1}, Device::cpu(), &gen);
  Tensor input = tokens.narrow(1, 0, kSteps).contiguous();
  Tensor target = tokens.narrow(1, 1, kSteps).contiguous().reshape({-1});

  explicit Setup(Device d = Device::cpu()) : device(d) {
    model->to(d);  // Adam holds the same parameter handles: it sees the moved data (its state is made lazily)
    images = images.to(d), input = input.to(d), target = target.to(d);
  }

  void step() {
    Variable logits = model->decode(model->encode(images), input);
    Variable loss = cross_entropy(reshape(logits, {-1, ex::Vocab().size()}), target, ex::Vocab::kPad);
    adam.zero_grad();
    loss.backward();
    nn::clip_grad_norm_(params, 1.0);
    adam.step();
  }
};

// The --device cuda table: one row (saccade, torch CUDA eager, their ratio), then the cudaMalloc count.
int cuda_main(int samples, bool torch) {
  if (!cuda_is_available()) {
    std::printf("caption_step --device cuda: no CUDA GPU present (or saccade was built without CUDA)\n");
    return 1;
  }
  torch = torch && sb::torch_available(/*cuda=*/true);
  const std::string script = std::string(SACCADE_BENCH_DIR) + "/caption_step_torch.py";
  Setup s(Device::cuda());
  auto timed_step = [&] {
    auto t0 = sb::Clock::now();
    s.step();
    cuda::synchronize();
    return 1e3 * sb::seconds_since(t0);
  };
  // Warm-up to the fixed point: the allocator's blocks, cuBLAS's handle and workspace, Adam's state. The
  // cache serves a request from a block up to 2x its size without splitting, so which blocks the early steps
  // get may still shift; the fixed point is the first whole step without a cudaMalloc (at most 20 steps).
  timed_step();
  int warmup = 1;
  for (; warmup < 20; ++warmup) {
    const int64_t raw = cuda::memory_stats().raw_alloc_count;
    timed_step();
    if (cuda::memory_stats().raw_alloc_count == raw) break;
  }
  ++warmup;
  const AllocatorStats before = cuda::memory_stats();
  std::vector<double> ms;
  for (int i = 0; i < samples; ++i) ms.push_back(timed_step());
  const AllocatorStats after = cuda::memory_stats();
  sb::Stats st = sb::stats(ms);
  std::map<std::string, double> t;
  if (torch) t = sb::run_torch(script, "1 " + std::to_string(samples) + " cuda");
  std::printf("%-6s %-28s %-28s %s\n", "device", "saccade ms (median [min-max])",
              "torch ms (median [min-max])", "torch/saccade");
  char sac[64], tor[64] = "-", ratio[32] = "-";
  std::snprintf(sac, sizeof sac, "%.2f [%.2f-%.2f]", st.median, st.min, st.max);
  if (!t.empty()) {
    std::snprintf(tor, sizeof tor, "%.2f [%.2f-%.2f]", t["median_ms"], t["min_ms"], t["max_ms"]);
    std::snprintf(ratio, sizeof ratio, "%.2f", t["median_ms"] / st.median);
  }
  std::printf("%-6s %-28s %-28s %s\n", "cuda", sac, tor, ratio);
  std::printf(
      "\nsteady state, %d steps after %d warm-up steps (the last without a cudaMalloc): %lld cudaMalloc "
      "calls, "
      "%lld allocations served, %lld from the cache\n",
      samples, warmup, static_cast<long long>(after.raw_alloc_count - before.raw_alloc_count),
      static_cast<long long>(after.alloc_count - before.alloc_count),
      static_cast<long long>(after.cache_hit_count - before.cache_hit_count));
  std::printf("device memory: %.1f MiB in use, %.1f MiB cached, peak %.1f MiB\n",
              after.bytes_in_use / 1048576.0, after.bytes_cached / 1048576.0,
              after.peak_bytes_in_use / 1048576.0);
  if (!torch) std::printf("(%s cannot import torch with CUDA: no PyTorch column)\n", sb::python().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  use_best_blas_core(argv);
  const int samples = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  std::printf("sat captioner training step, batch %lld, %lld decoder steps; %d samples per setting\n",
              static_cast<long long>(kBatch), static_cast<long long>(kSteps), samples);
  std::printf("%s\nload average at start %.2f\n", blas_info_line().c_str(), sb::load_average());
  bool composed = false, torch = true, idle_only = false, gpu = false;
  for (int i = 2; i < argc; ++i) {
    composed = composed || std::string(argv[i]) == "composed";
    torch = torch && std::string(argv[i]) != "notorch";
    idle_only = idle_only || std::string(argv[i]) == "idle";
    gpu = gpu || (std::string(argv[i]) == "--device" && i + 1 < argc && std::string(argv[i + 1]) == "cuda");
  }
  if (gpu) return cuda_main(samples, torch);
  torch = torch && sb::torch_available();
  if (torch) std::printf("%s\n", sb::torch_info().c_str());
  const std::string script = std::string(SACCADE_BENCH_DIR) + "/caption_step_torch.py";
  Setup s;
  set_fused(*s.model, !composed);
  std::printf("additive-attention scores: %s\n", composed ? "composed (reference)" : "fused");
  std::printf("\n%-6s %-8s %-28s %-28s %s\n", "setting", "threads", "saccade ms (median [min-max])",
              "torch ms (median [min-max])", "torch/saccade");
  double one_thread[2] = {0, 0};
  for (int busy = 0; busy < (idle_only ? 1 : 2); ++busy) {
    for (int threads : {1, 2}) {
      std::unique_ptr<sb::BusyProcess> competitor;
      if (busy) competitor = std::make_unique<sb::BusyProcess>(100);
      set_num_threads(threads);
      sb::Stats st = sb::stats(sb::time_ms(samples, [&] { s.step(); }));
      std::map<std::string, double> t;
      if (torch) t = sb::run_torch(script, std::to_string(threads) + " " + std::to_string(samples));
      char sac[64], tor[64] = "-", ratio[32] = "-";
      std::snprintf(sac, sizeof sac, "%.0f [%.0f-%.0f]", st.median, st.min, st.max);
      if (!t.empty()) {
        std::snprintf(tor, sizeof tor, "%.0f [%.0f-%.0f]", t["median_ms"], t["min_ms"], t["max_ms"]);
        std::snprintf(ratio, sizeof ratio, "%.2f", t["median_ms"] / st.median);
      }
      std::printf("%-6s %-8d %-28s %-28s %s", busy ? "busy" : "idle", threads, sac, tor, ratio);
      if (threads == 1)
        one_thread[busy] = st.median;
      else
        std::printf("   saccade 2/1 threads: %.2fx", st.median / one_thread[busy]);
      std::printf("\n");
    }
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("\npeak RSS of this process %.0f MiB", static_cast<double>(ru.ru_maxrss) / 1024.0);
  std::printf("\nload average at end %.2f%s\n", sb::load_average(),
              torch ? "" : "   (python cannot import torch: no PyTorch column)");
  return 0;
}
