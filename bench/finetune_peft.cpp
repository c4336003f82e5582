// saccade's side of the LoRA fine-tuning comparison with PEFT + transformers (issue 52's speed and memory
// goals; finetune_peft.py runs both sides alternately and prints the table). One process trains a Llama of
// SmolLM-135M's shapes (random weights) with LoRA r 16, lora_alpha 32 on every Linear, the base frozen in
// bfloat16 and the adapters, their gradients and AdamW's state in float32 (`gpt finetune --dtype bf16`), on
// batches of 4 rows of 512 tokens: random ids, each row packed with documents of 16..320 ids that attend only
// to themselves (LlamaForCausalLM::forward(idx, document_ids)), or plain causal rows ("plain"). One sample is
// a whole step: forward, the mean cross-entropy of every next token, backward, AdamW (lr 1e-4). Prints one
// "key value" line each (finetune_peft.py reads them): the median step and its min-max after the first two
// steps, tokens/s, the process's peak RSS, the base's bf16 bytes, the OpenBLAS core and the load average.
//
//   build/release/bench/finetune_peft [layers] [steps] [threads] [packed|plain] [checkpoint]
//   # defaults 30 10 2 packed; "checkpoint": --checkpoint-activations (each block recomputed in the backward)
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "nn/llama.h"
#include "nn/lora.h"
#include "nn/optim.h"
#include "saccade.h"

extern "C" char* openblas_get_corename();

using namespace saccade;
namespace sb = saccade::bench;

int main(int argc, char** argv) {
  int64_t layers = 30, steps = 10, threads = 2;
  const bool packed = !(argc > 4 && std::strcmp(argv[4], "plain") == 0);
  const bool recompute = argc > 5 && std::strcmp(argv[5], "checkpoint") == 0;
  if ((argc > 1 && !sb::positive_int(argv[1], layers)) || (argc > 2 && !sb::positive_int(argv[2], steps)) ||
      (argc > 3 && !sb::positive_int(argv[3], threads)) || steps < 3) {
    std::fprintf(stderr, "usage: %s [layers] [steps >= 3] [threads] [packed|plain] [checkpoint]\n", argv[0]);
    return 2;
  }
  set_num_threads(static_cast<int>(threads));
  mallopt(M_MMAP_THRESHOLD, 1 << 30);  // as `gpt finetune`: big freed blocks stay in the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const long rss_start = sb::peak_rss_kib();
  const int64_t B = 4, T = 512;
  nn::LlamaConfig c;  // SmolLM-135M's shapes
  c.vocab_size = 49152, c.hidden_size = 576, c.intermediate_size = 1536, c.num_hidden_layers = layers;
  c.num_attention_heads = 9, c.num_key_value_heads = 3, c.max_position_embeddings = 2048;
  c.rms_norm_eps = 1e-5, c.tie_word_embeddings = true;
  nn::LlamaForCausalLM model(c, 1);
  model.to(DType::BFloat16);
  int64_t base_bytes = 0;
  for (const Variable& p : model.parameters()) base_bytes += 2 * p.numel();
  nn::LoraConfig lora;
  lora.r = 16, lora.lora_alpha = 32, lora.target_modules = {"all-linear"};
  Generator gen(2);
  nn::apply_lora(model, lora, &gen);
  for (auto& block : model.model->layers) block->checkpoint_activations = recompute;
  model.train();
  nn::AdamOptions o;
  o.lr = 1e-4, o.weight_decay = 0;
  nn::AdamW opt(nn::trainable_parameters(model), o);

  std::mt19937_64 rng(3);
  std::vector<double> ms;
  double loss = 0;
  for (int64_t s = 0; s < steps; ++s) {
    Tensor idx = ops::empty({B, T}, DType::Int64), docs = ops::empty({B, T}, DType::Int64);
    Tensor y = ops::empty({B * T}, DType::Int64);
    int64_t* pi = idx.data<int64_t>();
    int64_t* pd = docs.data<int64_t>();
    int64_t* py = y.data<int64_t>();
    for (int64_t b = 0; b < B; ++b) {
      int64_t doc = 0, left = 16 + static_cast<int64_t>(rng() % 305);
      for (int64_t t = 0; t < T; ++t, --left) {
        if (left == 0) ++doc, left = 16 + static_cast<int64_t>(rng() % 305);
        pi[b * T + t] = static_cast<int64_t>(rng() % c.vocab_size), pd[b * T + t] = doc;
      }
      for (int64_t t = 0; t < T; ++t)  // the next token of the same document, else ignored
        py[b * T + t] =
            t + 1 < T && (!packed || pd[b * T + t + 1] == pd[b * T + t]) ? pi[b * T + t + 1] : -100;
    }
    std::unique_ptr<profiler::Profile> prof;  // FT_PROFILE=1: the profiler's table of the third step
    if (s == 2 && std::getenv("FT_PROFILE")) prof = std::make_unique<profiler::Profile>();
    ms.push_back(sb::ms_of([&] {
      const Variable z = packed ? model.forward(idx, docs) : model.forward(idx);
      const Variable l = cross_entropy(reshape(z, {-1, z.size(-1)}), y, -100);
      opt.zero_grad();
      l.backward();
      opt.step();
      loss = l.data().to(DType::Float64).item<double>();
    }));
    if (prof) std::fprintf(stderr, "%s\n", prof->table("self_cpu_time_total", 16).c_str());
  }
  const sb::Stats st = sb::stats(std::vector<double>(ms.begin() + 2, ms.end()));
  std::printf("framework saccade\ncore %s\ncpu %s\nthreads %lld\nlayers %lld\nform %s%s\n",
              openblas_get_corename(), sb::cpu_model().c_str(), static_cast<long long>(threads),
              static_cast<long long>(layers), packed ? "packed" : "plain", recompute ? " checkpoint" : "");
  std::printf("step_ms %.1f\nstep_ms_min %.1f\nstep_ms_max %.1f\ntokens_per_s %.1f\n", st.median, st.min,
              st.max, 1e3 * static_cast<double>(B * T) / st.median);
  std::printf("peak_rss_mib %.1f\nstart_rss_mib %.1f\nbase_bf16_mib %.1f\nlast_loss %.4f\nload %.2f\n",
              sb::peak_rss_kib() / 1024.0, rss_start / 1024.0, base_bytes / 1048576.0, loss,
              sb::load_average());
  return 0;
}
