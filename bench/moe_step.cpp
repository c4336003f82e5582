// saccade's side of a training step of the family table's decoder against transformers (moe_step.py runs both
// sides alternately and prints the table), for two of issue 51's goals:
// - "olmoe" (the default; the MoE goal): a decoder of OLMoE-1B-7B's per-token shapes (Muennighoff et al.
//   2024: d 2048, 16 heads, full-width q and k RMSNorms, experts of width 1024, top-k weights not
//   renormalised, vocabulary 50304), scaled down to `layers` blocks and `experts` experts with `top_k` a
//   token (defaults 2, 16, 2); the loss adds the router's load-balancing loss (coefficient 0.01,
//   output_router_logits as OLMoE was trained);
// - "qwen2.5-0.5b" (the dense step goal): Qwen2.5-0.5B's shapes (d 896, 14 heads, 2 key/value heads,
//   intermediate 4864, vocabulary 151936, q/k/v biases, tied embeddings) with `layers` blocks (24 in the
//   model); experts and top_k are not read.
// Random weights, batches of 4 rows of 256 random ids: the mean cross-entropy of every next token (plus the
// MoE loss), backward, AdamW (lr 3e-4) on every parameter, in float32 or under AutocastGuard(bfloat16)
// ("bf16": float32 weights and AdamW, 16-bit GEMMs). One sample is a whole step. Before the steps, one
// forward under the profiler counts the FLOPs of the expert products (grouped_mm) and of the whole forward,
// per token: the experts' share grows with top_k, not with experts.
//
// Prints one "key value" line each (moe_step.py reads them): the median step and its min-max after the first
// two steps, tokens/s, the FLOPs, the peak RSS, the OpenBLAS core and the load average.
//
//   build/release/bench/moe_step [layers] [steps] [threads] [f32|bf16] [experts] [top_k] [olmoe|qwen2.5-0.5b]
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "nn/llama.h"
#include "nn/optim.h"
#include "saccade.h"

extern "C" char* openblas_get_corename();

using namespace saccade;
namespace sb = saccade::bench;

int main(int argc, char** argv) {
  int64_t layers = 2, steps = 6, threads = 2, experts = 16, top_k = 2;
  const bool bf16 = argc > 4 && std::strcmp(argv[4], "bf16") == 0;
  const bool qwen = argc > 7 && std::strcmp(argv[7], "qwen2.5-0.5b") == 0;
  if ((argc > 1 && !sb::positive_int(argv[1], layers)) || (argc > 2 && !sb::positive_int(argv[2], steps)) ||
      (argc > 3 && !sb::positive_int(argv[3], threads)) ||
      (argc > 4 && !bf16 && std::strcmp(argv[4], "f32")) ||
      (argc > 5 && !sb::positive_int(argv[5], experts)) || (argc > 6 && !sb::positive_int(argv[6], top_k)) ||
      steps < 3 || top_k > experts || (argc > 7 && std::strcmp(argv[7], "olmoe") != 0 && !qwen)) {
    std::fprintf(stderr,
                 "usage: %s [layers] [steps >= 3] [threads] [f32|bf16] [experts] [top_k <= experts] "
                 "[olmoe|qwen2.5-0.5b]\n",
                 argv[0]);
    return 2;
  }
  set_num_threads(static_cast<int>(threads));
  mallopt(M_MMAP_THRESHOLD, 1 << 30);  // as `gpt train`: big freed blocks stay in the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const int64_t B = 4, T = 256;
  nn::LlamaConfig c;  // OlmoeConfig's shapes but for the layers and experts
  c.vocab_size = 50304, c.hidden_size = 2048, c.intermediate_size = 1024, c.num_hidden_layers = layers;
  c.num_attention_heads = 16, c.num_key_value_heads = 16, c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5, c.qk_norm_full_width = true, c.pad_token_id = 1;
  c.num_experts = experts, c.num_experts_per_tok = top_k, c.norm_topk_prob = false;
  c.output_router_logits = true, c.router_aux_loss_coef = 0.01;
  if (qwen) {  // Qwen2Config of Qwen2.5-0.5B but for the layers
    c = nn::LlamaConfig{};
    c.vocab_size = 151936, c.hidden_size = 896, c.intermediate_size = 4864, c.num_hidden_layers = layers;
    c.num_attention_heads = 14, c.num_key_value_heads = 2, c.max_position_embeddings = 32768;
    c.rms_norm_eps = 1e-6, c.rope_theta = 1e6, c.qkv_bias = true, c.tie_word_embeddings = true;
    experts = top_k = 0;
  }
  nn::LlamaForCausalLM model(c, 1);
  model.train();
  nn::AdamOptions o;
  o.lr = 3e-4, o.weight_decay = 0;
  nn::AdamW opt(model.parameters(), o);
  std::mt19937_64 rng(3);
  auto batch = [&] {
    Tensor idx = ops::empty({B, T + 1}, DType::Int64);
    for (int64_t i = 0; i < idx.numel(); ++i)
      idx.data<int64_t>()[i] = static_cast<int64_t>(rng() % c.vocab_size);
    return std::pair{idx.slice(1, 0, T).contiguous(), idx.slice(1, 1, T + 1).contiguous().reshape({-1})};
  };

  int64_t expert_flops = 0, forward_flops = 0;
  {
    const Tensor x = batch().first;
    NoGradGuard no_grad;
    std::optional<AutocastGuard> autocast;
    if (bf16) autocast.emplace(DType::BFloat16);
    profiler::Profile prof({.with_flops = true});
    model.forward(x);
    for (const profiler::Event& e : prof.events()) {
      forward_flops += e.flops;
      if (std::string(e.name) == "grouped_mm") expert_flops += e.flops;
    }
  }
  std::vector<double> ms;
  double loss = 0, aux = 0;
  for (int64_t s = 0; s < steps; ++s) {
    const auto xy = batch();  // (no structured binding: clang 14 cannot capture one)
    const Tensor &x = xy.first, &y = xy.second;
    std::unique_ptr<profiler::Profile> prof;  // MOE_PROFILE=1: the profiler's table of the third step
    if (s == 2 && std::getenv("MOE_PROFILE")) prof = std::make_unique<profiler::Profile>();
    ms.push_back(sb::ms_of([&] {
      std::optional<AutocastGuard> autocast;
      if (bf16) autocast.emplace(DType::BFloat16);
      const Variable z = model.forward(x);
      const Variable lm = cross_entropy(reshape(z, {-1, z.size(-1)}), y);
      const Variable a = model.aux_loss();  // undefined for a dense model
      const Variable l = a.defined() ? add(lm, a) : lm;
      autocast.reset();
      opt.zero_grad();
      l.backward();
      opt.step();
      loss = lm.data().to(DType::Float64).item<double>();
      aux = a.defined() ? a.data().to(DType::Float64).item<double>() : 0.0;
    }));
    if (prof) std::fprintf(stderr, "%s\n", prof->table("self_cpu_time_total", 20).c_str());
  }
  const sb::Stats st = sb::stats(std::vector<double>(ms.begin() + 2, ms.end()));
  const double tokens = static_cast<double>(B * T);
  std::printf(
      "framework saccade-%s\nmodel %s\ncore %s\ncpu %s\nthreads %lld\nlayers %lld\nexperts %lld\ntop_k "
      "%lld\n",
      bf16 ? "bf16" : "f32", qwen ? "qwen2.5-0.5b" : "olmoe", openblas_get_corename(),
      sb::cpu_model().c_str(), static_cast<long long>(threads), static_cast<long long>(layers),
      static_cast<long long>(experts), static_cast<long long>(top_k));
  int64_t parameters = 0;
  for (const Variable& p : model.parameters()) parameters += p.numel();
  std::printf("parameters %lld\n", static_cast<long long>(parameters));
  std::printf("step_ms %.1f\nstep_ms_min %.1f\nstep_ms_max %.1f\ntokens_per_s %.1f\n", st.median, st.min,
              st.max, 1e3 * tokens / st.median);
  std::printf("expert_mflops_per_token %.2f\nforward_mflops_per_token %.2f\n", expert_flops / tokens / 1e6,
              forward_flops / tokens / 1e6);
  std::printf("peak_rss_mib %.1f\nlast_loss %.4f\naux_loss %.5f\nload %.2f\n", sb::peak_rss_kib() / 1024.0,
              loss, aux, sb::load_average());
  return 0;
}
