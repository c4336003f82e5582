// Where a decoded token's time goes (issue 53, item 1: measure first). Batch-1 greedy decoding of random
// models of two real shapes, GPT-2 124M (examples/gpt's GPT, arch gpt2) and a Llama of SmolLM-135M's shapes
// (nn::LlamaForCausalLM: 30 layers of hidden 576, 9 query and 3 key/value heads, SwiGLU 1536, vocabulary
// 49152, tied), in float32, bf16 and Q8_0 weights (every Linear and the tied output layer quantized,
// ops/quant.h). First the prefill of a 32- and a 512-token prompt in one step each (the median of 3); then a
// 32-token prompt is prefilled, 4 tokens are decoded untimed, then `tokens` tokens are timed one by one (wall
// clock, no profiler), then as many again under a profiler::Profile, whose forward ops' self times are summed
// per family (profiler::family_of):
//
//   GEMM         the projections and the output layer: one-row products that read every weight once a
//                token, so their floor is the weights' bytes at the speed of a streaming read, measured here
//                in the same process on the same threads (a memcpy's read + write rate printed beside it)
//   attention    the fused attention over the KV cache
//   elementwise, normalization, shape, indexing, other   the remaining ops
//   outside ops  the wall time of the profiled tokens minus every op's self time: the Python-free
//                framework's own overhead (module calls, Variable bookkeeping, dispatch, argmax)
//
// The profiler adds its own cost to the profiled tokens (one event per op), so the shares are of the
// profiled wall time and the tokens/s column is the unprofiled one.
//
// Usage: build/release/bench/decode_profile [tokens] [threads]   (default 32 tokens, 2 threads)
//        build/release/bench/decode_profile --model PATH [--dtype f32|bf16|q8_0] [--no-profile] [tokens]
//        [threads]
// The second form times one model from a file instead: a GGUF file (hf::load_llama_gguf, its Q8_0 tensors
// kept quantized) or a Hugging Face folder (GPT-2 or the Llama family), converted to --dtype after loading
// (q8_0: every Linear and a tied output layer quantized, as `gpt sample --quantize q8_0`),
// so that bench/decode_llamacpp.py can time llama.cpp and saccade on the same weights; --no-profile skips
// the profiled pass (the tokens/s and prefill lines only).
// Prints the OpenBLAS core, the CPU and the load average. Not a test: speed is measured here, never asserted.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "examples/gpt/causal_lm.h"
#include "examples/gpt/model.h"
#ifdef SACCADE_HAVE_HF
#include "examples/gpt/hf_gpt2.h"
#include "hf/gguf_model.h"
#include "hf/llama.h"
#endif
#include "nn/llama.h"
#include "saccade.h"

extern "C" char* openblas_get_corename();

using namespace saccade;
namespace ex = saccade::examples;
namespace sb = saccade::bench;

namespace {

constexpr int64_t kPrompt = 32, kWarm = 4;

// The bytes of the model's parameters (a tied output layer counted once): what a token's GEMVs read. A
// Linear quantized to Q8_0 reads its blocks instead of its weight.
int64_t weight_bytes(nn::Module& m) {
  int64_t b = 0;
  for (const Variable& p : m.parameters()) b += p.numel() * static_cast<int64_t>(dtype_size(p.dtype()));
  // a tied output layer in Q8_0 reads its blocks, and the embedding only one row of its float weight
  auto tied = [&](const Q8_0Matrix& q, const Variable& embedding) {
    if (q.defined()) b += q.bytes() - embedding.numel() * static_cast<int64_t>(dtype_size(embedding.dtype()));
  };
  if (auto* gpt = dynamic_cast<ex::GPT*>(&m)) tied(gpt->output_q8_0, gpt->wte->weight);
  if (auto* llama = dynamic_cast<nn::LlamaForCausalLM*>(&m))
    tied(llama->output_q8_0, llama->model->embed_tokens->weight);
  for (const auto& [name, lin] : nn::named_linears(m))
    if (lin->weight_q8_0.defined())
      b += lin->weight_q8_0.bytes() -
           lin->weight.numel() * static_cast<int64_t>(dtype_size(lin->weight.dtype()));
  return b;
}

int64_t argmax_last(const Variable& logits) {  // (1, 1, V) -> the greedy token
  const Tensor row = logits.data().select(1, 0).select(0, 0).to(DType::Float32).contiguous();
  const float* p = row.data<float>();
  return std::max_element(p, p + row.numel()) - p;
}

void run(const char* name, ex::CausalLM& lm, int64_t tokens, double read_rate, bool profile = true) {
  nn::Module& m = lm.module();
  m.eval();
  NoGradGuard no_grad;
  const int64_t V = lm.vocab_size();
  std::vector<int64_t> prompt(kPrompt);
  for (int64_t i = 0; i < kPrompt; ++i) prompt[i] = (i * 7919 + 13) % V;
  // prefill: a prompt of P tokens in one step (the last position's logits), the median of 3 after a warm-up
  std::string prefill;
  for (const int64_t P : {int64_t{32}, int64_t{512}}) {
    if (P > lm.context()) continue;  // a small model file (a test fixture)
    std::vector<int64_t> ids(static_cast<size_t>(P));
    for (int64_t i = 0; i < P; ++i) ids[static_cast<size_t>(i)] = (i * 7919 + 13) % V;
    const Tensor x = ops::from_vector(ids, {1, P});
    const sb::Stats p = sb::stats(sb::time_ms(3, [&] {
      lm.reset();
      lm.step(x, 1);
    }));
    prefill += fmt::format("{}prefill {} tokens {:.1f} ms ({:.0f} tokens/s)", prefill.empty() ? "" : ", ", P,
                           p.median, 1e3 * static_cast<double>(P) / p.median);
  }
  lm.reset();
  lm.reserve(kPrompt + kWarm + 2 * tokens);
  int64_t next = argmax_last(lm.step(ops::from_vector(prompt, {1, kPrompt}), 1));
  auto decode_one = [&] {
    next = argmax_last(lm.step(ops::from_vector(std::vector<int64_t>{next}, {1, 1}), 1));
  };
  for (int64_t i = 0; i < kWarm; ++i) decode_one();
  std::vector<double> ms;
  for (int64_t i = 0; i < tokens; ++i) ms.push_back(sb::ms_of(decode_one));
  const sb::Stats s = sb::stats(ms);
  if (!profile) {
    std::printf("%s: %.1f tokens/s unprofiled (ms/token median %.2f, min-max %.2f-%.2f)\n  %s\n", name,
                1e3 / s.median, s.median, s.min, s.max, prefill.c_str());
    return;
  }

  profiler::Profile prof({.with_flops = true});
  const double wall_ms = sb::ms_of([&] {
    for (int64_t i = 0; i < tokens; ++i) decode_one();
  });
  prof.stop();
  std::map<std::string, double> family_ms;
  double ops_ms = 0;
  for (const auto& f : prof.time_by_family()) {
    family_ms[f.family] += 1e3 * f.forward_s / static_cast<double>(tokens);
    ops_ms += 1e3 * f.forward_s / static_cast<double>(tokens);
  }
  const double per_token = wall_ms / static_cast<double>(tokens);
  const double bytes = static_cast<double>(weight_bytes(m));
  const double floor_ms = bytes / (read_rate * 1e6);
  auto share = [&](double v) { return fmt::format("{:.3f} ({:.0f} %)", v, 100 * v / per_token); };
  std::printf(
      "%s: %.1f tokens/s unprofiled (ms/token median %.2f, min-max %.2f-%.2f); profiled %.2f ms/token\n",
      name, 1e3 / s.median, s.median, s.min, s.max, per_token);
  std::printf("  %s\n", prefill.c_str());
  std::printf("  weights %.1f MB: read at the streaming read's %.1f GB/s they take %.2f ms\n", bytes / 1e6,
              read_rate, floor_ms);
  const double gemm = family_ms["GEMM"];
  std::printf("  GEMM        %s ms  -> weights read at %.1f GB/s (%.0f %% of the streaming read)\n",
              share(gemm).c_str(), bytes / (gemm * 1e6), 100 * floor_ms / gemm);
  for (const auto& [family, v] : family_ms)
    if (family != "GEMM" && v > 0) std::printf("  %-11s %s ms\n", family.c_str(), share(v).c_str());
  std::printf("  outside ops %s ms\n", share(per_token - ops_ms).c_str());
  std::printf("%s\n", prof.table("self_cpu_time_total", 12).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  int64_t tokens = 32, threads = 2;
  std::string model_path, model_dtype = "f32";
  bool profile = true;
  std::vector<const char*> numbers;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--model") == 0 && i + 1 < argc)
      model_path = argv[++i];
    else if (std::strcmp(argv[i], "--dtype") == 0 && i + 1 < argc)
      model_dtype = argv[++i];
    else if (std::strcmp(argv[i], "--no-profile") == 0)
      profile = false;
    else
      numbers.push_back(argv[i]);
  }
  if (numbers.size() > 2 || (numbers.size() > 0 && !sb::positive_int(numbers[0], tokens)) ||
      (numbers.size() > 1 && !sb::positive_int(numbers[1], threads)) ||
      (model_dtype != "f32" && model_dtype != "bf16" && model_dtype != "q8_0")) {
    std::fprintf(stderr,
                 "usage: %s [--model PATH [--dtype f32|bf16|q8_0] [--no-profile]] [tokens] [threads]\n",
                 argv[0]);
    return 2;
  }
  set_num_threads(static_cast<int>(threads));
  const double copy_rate = sb::copy_gb_per_s(static_cast<int>(threads));
  const double read_rate = sb::read_gb_per_s(static_cast<int>(threads));
  std::printf(
      "decode_profile: OpenBLAS core %s, CPU %s, %lld threads, load average %.2f; memcpy %.1f GB/s "
      "(read + write), streaming read %.1f GB/s\n",
      openblas_get_corename(), sb::cpu_model().c_str(), static_cast<long long>(threads), sb::load_average(),
      copy_rate, read_rate);
  if (!model_path.empty()) {
#ifdef SACCADE_HAVE_HF
    const DType dtype = model_dtype == "bf16" ? DType::BFloat16 : DType::Float32;
    std::shared_ptr<ex::GPT> gpt;
    std::shared_ptr<nn::LlamaForCausalLM> llama;
    if (hf::is_gguf_path(model_path)) {
      const hf::GgufFile file(model_path);
      const hf::Config config = hf::gguf_config(file);
      if (config.architecture == hf::Architecture::GPT2)
        gpt = ex::load_hf_gpt2(hf::GgufWeights(file, config), config);
      else
        llama = hf::load_llama_gguf(file, config);
    } else if (hf::load_config(model_path + "/config.json").architecture == hf::Architecture::GPT2) {
      gpt = ex::load_hf_gpt2(model_path);
    } else {
      llama = hf::load_llama(model_path);
    }
    std::unique_ptr<ex::CausalLM> lm = gpt ? ex::as_causal_lm(*gpt) : ex::as_causal_lm(*llama);
    lm->module().to(dtype);
    if (model_dtype == "q8_0") gpt ? gpt->quantize_q8_0() : llama->quantize_q8_0();
    run(fmt::format("{}, {}", model_path, model_dtype).c_str(), *lm, tokens, read_rate, profile);
    std::printf("load average after: %.2f\n", sb::load_average());
    return 0;
#else
    std::fprintf(stderr, "decode_profile: --model needs hf/ (built without it)\n");
    return 2;
#endif
  }
  for (const char* dt : {"f32", "bf16", "q8_0"}) {  // q8_0: float32 activations, every Linear in Q8_0
    const DType dtype = std::strcmp(dt, "bf16") == 0 ? DType::BFloat16 : DType::Float32;
    const bool q8 = std::strcmp(dt, "q8_0") == 0;
    {
      ex::GPTConfig c;  // GPT-2 124M
      c.vocab_size = 50257, c.context = 1024, c.n_layer = 12, c.n_head = 12, c.d_model = 768, c.dropout = 0;
      ex::GPT gpt(c, 1);
      gpt.to(dtype);
      if (q8) gpt.quantize_q8_0();  // its tied output layer too
      run(fmt::format("GPT-2 124M, {}", dt).c_str(), *ex::as_causal_lm(gpt), tokens, read_rate);
    }
    {
      nn::LlamaConfig c;  // SmolLM-135M's shapes
      c.vocab_size = 49152, c.hidden_size = 576, c.intermediate_size = 1536, c.num_hidden_layers = 30;
      c.num_attention_heads = 9, c.num_key_value_heads = 3, c.max_position_embeddings = 2048;
      c.rms_norm_eps = 1e-5, c.tie_word_embeddings = true;
      nn::LlamaForCausalLM llama(c, 1);
      llama.to(dtype);
      if (q8) llama.quantize_q8_0();  // its tied output layer too
      run(fmt::format("Llama (SmolLM-135M's shapes), {}", dt).c_str(), *ex::as_causal_lm(llama), tokens,
          read_rate);
    }
  }
  std::printf("load average after: %.2f\n", sb::load_average());
  return 0;
}
