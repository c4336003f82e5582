// One training step of the g2p `bahdanau` model (examples/g2p: embedding 64, bidirectional GRU encoder 256x2,
// GRU decoder 256 with additive attention over the letters; batch 128 of 12 letters and 12 phones, random
// lengths, 42 phones): teacher-forced forward, cross-entropy ignoring <pad>, backward, clip_grad_norm_(1),
// Adam; at 1 and 2 threads, beside the same model in PyTorch (bench/g2p_step_torch.py, same sizes and
// batch), run after ours at the same thread count, with its defaults and with OMP_WAIT_POLICY=PASSIVE.
//
// Usage: build/bench/g2p_step [samples] [notorch]   (default 5 timed steps per setting after one warm-up)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "examples/g2p/data.h"
#include "examples/g2p/model.h"
#include "saccade.h"

using namespace saccade;
namespace ex = saccade::examples;
namespace sb = saccade::bench;

namespace {

constexpr int64_t kBatch = 128, kLetters = 12, kPhones = 12, kVocab = 42;  // 3 specials + 39 ARPAbet phones

struct Setup {
  ex::G2PConfig config = [] {
    ex::G2PConfig c = ex::G2PConfig::defaults("bahdanau");
    std::string phones;
    for (int i = 0; i < kVocab - 3; ++i) phones += (i ? " p" : "p") + std::to_string(i);
    c.phones = phones;
    return c;
  }();
  std::shared_ptr<ex::G2PModel> model = ex::make_g2p_model(config, 0);
  std::vector<Variable> params = model->parameters();
  nn::Adam adam{params, nn::AdamOptions{.lr = 2e-3}};
  Generator gen{1};
  Tensor lens = ops::randint(kLetters / 2, kLetters + 1, {kBatch}, Device::cpu(), &gen);
  Tensor letters = ops::randint(1, 29, {kBatch, kLetters}, Device::cpu(), &gen);
  Tensor phones_in = ops::randint(3, kVocab, {kBatch, kPhones}, Device::cpu(), &gen);
  Tensor target = ops::randint(3, kVocab, {kBatch * kPhones}, Device::cpu(), &gen);

  void step() {
    Variable logits = model->forward(letters, lens, phones_in);
    Variable loss = cross_entropy(reshape(logits, {-1, kVocab}), target, ex::G2PVocab::kPad);
    adam.zero_grad();
    loss.backward();
    nn::clip_grad_norm_(params, 1.0);
    adam.step();
  }
};

}  // namespace

int main(int argc, char** argv) {
  use_best_blas_core(argv);
  const int samples = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  bool torch = !(argc > 2 && std::string(argv[2]) == "notorch");
  std::printf("g2p bahdanau training step, batch %lld, %lld letters, %lld phones; %d samples per setting\n",
              static_cast<long long>(kBatch), static_cast<long long>(kLetters),
              static_cast<long long>(kPhones), samples);
  std::printf("%s\nload average at start %.2f\n", blas_info_line().c_str(), sb::load_average());
  torch = torch && sb::torch_available();
  if (torch) std::printf("%s\n", sb::torch_info().c_str());
  const std::string script = std::string(SACCADE_BENCH_DIR) + "/g2p_step_torch.py";
  Setup s;
  std::printf("\n%-8s %-26s %-26s %-7s %-26s %s\n", "threads", "saccade ms (median [min-max])",
              "torch ms (median [min-max])", "ratio", "torch PASSIVE ms", "ratio");
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    s.step();  // warm-up: allocator, OpenBLAS buffers, Adam's state
    std::vector<double> ms;
    for (int i = 0; i < samples; ++i) {
      auto t0 = sb::Clock::now();
      s.step();
      ms.push_back(1e3 * sb::seconds_since(t0));
    }
    const sb::Stats st = sb::stats(ms);
    std::printf("%-8d %-26s", threads,
                fmt::format("{:.0f} [{:.0f}-{:.0f}]", st.median, st.min, st.max).c_str());
    for (const char* env : {"", "OMP_WAIT_POLICY=PASSIVE"}) {
      std::map<std::string, double> t;
      if (torch) t = sb::run_torch(script, std::to_string(threads) + " " + std::to_string(samples), env);
      if (t.empty()) {
        std::printf(" %-26s %-7s", "-", "-");
        continue;
      }
      std::printf(" %-26s %-7.2f",
                  fmt::format("{:.0f} [{:.0f}-{:.0f}]", t["median_ms"], t["min_ms"], t["max_ms"]).c_str(),
                  t["median_ms"] / st.median);
    }
    std::printf("\n");
  }
  std::printf("(ratio = torch ms / saccade ms: above 1, saccade is faster)\nload average at end %.2f\n",
              sb::load_average());
  return 0;
}
