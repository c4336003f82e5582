// What packing buys a LoRA fine-tuning step (issue 52): the same batches of instruction examples of mixed
// lengths, padded (one example a row, padded to the longest: examples::instruct_batch) or packed (the
// examples in rows of the context, each attending to itself only: packed_instruct_batch and
// LlamaForCausalLM::forward(idx, document_ids)), through a Llama of SmolLM-135M's shapes (its first `layers`
// blocks, random weights) with LoRA r 16 on every Linear, float32. One sample is the forward and backward of
// one batch's completion-only loss (no optimizer step, so that both forms see the same weights and their
// losses can be compared); padded and packed alternate batch by batch, and with them, as the third form, the
// same padded batch through the same model fully trainable, without adapters ("full": every weight gets its
// dW; the adapters start with B = 0, so all three losses are one).
//
//   build/release/bench/finetune_pack [layers] [batches] [threads]   # defaults 4, 8, 2
//   FT_PROFILE=1 build/release/bench/finetune_pack [layers]          # instead: the profiler's table of one
//                                                                     # padded batch, LoRA then full
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "bench/bench_util.h"
#include "examples/gpt/instruct.h"
#include "nn/llama.h"
#include "nn/lora.h"
#include "saccade.h"

extern "C" char* openblas_get_corename();

using namespace saccade;
namespace ex = saccade::examples;
namespace sb = saccade::bench;

int main(int argc, char** argv) {
  int64_t layers = 4, batches = 8, threads = 2;
  if ((argc > 1 && !sb::positive_int(argv[1], layers)) || (argc > 2 && !sb::positive_int(argv[2], batches)) ||
      (argc > 3 && !sb::positive_int(argv[3], threads))) {
    std::fprintf(stderr, "usage: %s [layers] [batches] [threads]\n", argv[0]);
    return 2;
  }
  set_num_threads(static_cast<int>(threads));
  const int64_t batch = 8, context = 512, min_len = 16, max_len = 320;
  nn::LlamaConfig c;  // SmolLM-135M's shapes, `layers` blocks
  c.vocab_size = 49152, c.hidden_size = 576, c.intermediate_size = 1536, c.num_hidden_layers = layers;
  c.num_attention_heads = 9, c.num_key_value_heads = 3, c.max_position_embeddings = context;
  c.rms_norm_eps = 1e-5, c.tie_word_embeddings = true;
  nn::LlamaForCausalLM model(c, 1), full(c, 1);  // the same weights; `full` without adapters
  full.train();
  nn::LoraConfig lora;
  lora.r = 16, lora.lora_alpha = 32, lora.target_modules = {"all-linear"};
  Generator gen(2);
  nn::apply_lora(model, lora, &gen);
  model.train();
  // examples of uniform lengths in [min_len, max_len] ids, the second half of each scored (the completion)
  std::mt19937_64 rng(3);
  std::vector<ex::TokenizedExample> examples(static_cast<size_t>(batch * batches));
  int64_t real = 0;
  for (ex::TokenizedExample& e : examples) {
    const int64_t n = min_len + static_cast<int64_t>(rng() % (max_len - min_len + 1));
    for (int64_t i = 0; i < n; ++i)
      e.ids.push_back(static_cast<int64_t>(rng() % c.vocab_size)), e.scored.push_back(i >= n / 2);
    real += n - 1;
  }
  std::printf(
      "finetune_pack: OpenBLAS core %s, CPU %s, %lld threads, load average %.2f\n"
      "Llama of SmolLM-135M's shapes, %lld layers, LoRA r 16 on every Linear, float32; %lld batches of %lld "
      "examples of %lld..%lld ids, rows of %lld tokens when packed\n",
      openblas_get_corename(), sb::cpu_model().c_str(), static_cast<long long>(threads), sb::load_average(),
      static_cast<long long>(layers), static_cast<long long>(batches), static_cast<long long>(batch),
      static_cast<long long>(min_len), static_cast<long long>(max_len), static_cast<long long>(context));
  // one sample: the batch's forward (packed rows with their document ids), the completion-only loss, its
  // backward; returns the loss
  auto step = [](nn::LlamaForCausalLM& m, const ex::Batch& b) {
    const Variable z = b.document_ids.defined() ? m.forward(b.x, b.document_ids) : m.forward(b.x);
    const Variable l = cross_entropy(reshape(z, {-1, z.size(-1)}), b.y.reshape({-1}), -100);
    for (Variable p : m.parameters()) p.zero_grad();
    l.backward();
    return l.data().to(DType::Float64).item<double>();
  };
  if (std::getenv("FT_PROFILE")) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < batch; ++i) rows.push_back(i);
    const ex::Batch b = ex::instruct_batch(examples, rows, 0);
    for (nn::LlamaForCausalLM* m : {&model, &full}) {
      for (int rep = 0; rep < 2; ++rep) {
        std::unique_ptr<profiler::Profile> prof;
        if (rep == 1) prof = std::make_unique<profiler::Profile>();
        step(*m, b);
        if (prof)
          std::printf("%s\n%s\n", m == &model ? "LoRA" : "full",
                      prof->table("self_cpu_time_total", 14).c_str());
      }
    }
    return 0;
  }
  std::vector<double> ms[3];
  int64_t cells[3] = {0, 0, 0};
  double worst = 0;
  for (int64_t k = -1; k < batches; ++k) {  // k = -1: an untimed warm-up on batch 0
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < batch; ++i) rows.push_back(std::max<int64_t>(k, 0) * batch + i);
    double loss[3] = {0, 0, 0};
    for (int j = 0; j < 3; ++j) {
      const int form = static_cast<int>((j + std::max<int64_t>(k, 0)) % 3);  // rotate which form runs first
      const bool packed = form == 1;
      nn::LlamaForCausalLM& m = form == 2 ? full : model;
      const ex::Batch b = packed ? ex::packed_instruct_batch(examples, rows, 0, context)
                                 : ex::instruct_batch(examples, rows, 0);
      const double t = sb::ms_of([&] { loss[form] = step(m, b); });
      if (k >= 0) ms[form].push_back(t), cells[form] += b.x.numel();
    }
    for (int f = 1; f < 3; ++f) worst = std::max(worst, std::abs(loss[f] - loss[0]) / std::abs(loss[0]));
    if (k >= 0)
      std::printf("batch %lld: loss %.9f padded, %.9f packed, %.9f full\n", static_cast<long long>(k),
                  loss[0], loss[1], loss[2]);
  }
  const sb::Stats p = sb::stats(ms[0]), q = sb::stats(ms[1]), f = sb::stats(ms[2]);
  std::printf("%-8s %28s %14s %14s\n", "form", "ms a batch (median [min-max])", "tokens in rows",
              "real tokens/s");
  const char* name[3] = {"padded", "packed", "full"};
  const sb::Stats* all[3] = {&p, &q, &f};
  for (int i = 0; i < 3; ++i) {
    const sb::Stats& s = *all[i];
    std::printf("%-8s %12.1f [%.1f-%.1f] %14lld %14.0f\n", name[i], s.median, s.min, s.max,
                static_cast<long long>(cells[i]), 1e3 * static_cast<double>(real) / (s.median * batches));
  }
  std::printf(
      "packed / padded time: %.3f (median of each); rows' tokens %.3f; losses agree to %.1e (relative)\n",
      q.median / p.median, static_cast<double>(cells[1]) / static_cast<double>(cells[0]), worst);
  std::printf("LoRA (padded) / full fine-tuning (padded) time: %.3f (median of each)\n", p.median / f.median);
  std::printf("load average after: %.2f\n", sb::load_average());
  return 0;
}
