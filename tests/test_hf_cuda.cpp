// Hugging Face checkpoints on the GPU (issue 39, step 6): the tiny GPT-2 and Llama fixtures of
// tests/data (written by transformers; test_hf_gpt2.cpp and test_hf_llama.cpp check them against it on the
// CPU) loaded, moved to CUDA with Module::to, and their logits and greedy continuations with the KV cache
// compared with the CPU's, in float32 (TF32 off: the default) and in bfloat16. Without a GPU only the CPU
// half runs, and the test skips with a warning.
#if defined(SACCADE_HAVE_GPT) && \
    defined(SACCADE_HAVE_HF)  // the GPT example and hf/ (examples/gpt/CMakeLists.txt)
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "cuda_helpers.h"
#include "examples/gpt/causal_lm.h"
#include "examples/gpt/generate.h"
#include "examples/gpt/hf_gpt2.h"
#include "helpers.h"
#include "hf/llama.h"
#include "nn/serialization.h"

using namespace saccade;
using namespace saccade::examples;
using saccade::testing::allclose;
using saccade::testing::kCpu;
using saccade::testing::kGpu;

namespace {

const std::string kData = SACCADE_TEST_DATA_DIR;

// The first prompt of a fixture's expected ids (int64 (B, T)) as a list.
std::vector<int64_t> first_prompt(const std::string& expected_file) {
  const Tensor ids = nn::load_safetensors(kData + expected_file).tensors.at("ids");
  const int64_t T = ids.size(1);
  return std::vector<int64_t>(ids.data<int64_t>(), ids.data<int64_t>() + T);
}

// Logits of `prompt` and 8 greedy tokens with the KV cache, on the model's device; logits back on the CPU.
std::pair<Tensor, std::vector<int64_t>> run(CausalLM& lm, const std::vector<int64_t>& prompt) {
  NoGradGuard no_grad;
  const Tensor ids = ops::from_vector(prompt, {1, static_cast<int64_t>(prompt.size())}).to(lm.device());
  Tensor logits = lm.forward(ids).data().to(kCpu).to(DType::Float32);
  SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = 8;
  lm.reset();
  return {logits, generate(lm, {prompt}, greedy, /*use_cache=*/true).tokens[0]};
}

// The model on the CPU, then the same model moved to the GPU in `dtype`: logits within tol, and the same
// greedy tokens (float32 only: in bfloat16 a near tie may break differently on the two devices).
void check_devices(CausalLM& lm, nn::Module& module, const std::vector<int64_t>& prompt, DType dtype,
                   double tol) {
  module.to(dtype);
  const auto [cpu_logits, cpu_tokens] = run(lm, prompt);
  if (testing::no_gpu()) return;
  module.to(kGpu);
  const auto [gpu_logits, gpu_tokens] = run(lm, prompt);
  CHECK(allclose(gpu_logits, cpu_logits, tol, tol));
  if (dtype == DType::Float32) CHECK(gpu_tokens == cpu_tokens);
  module.to(kCpu);
}

}  // namespace

TEST_CASE("cuda hf: GPT-2 and Llama checkpoints give the CPU's logits and greedy tokens on the GPU",
          "[cuda][hf]") {
  const std::vector<int64_t> gpt2_prompt = first_prompt("/hf_gpt2_expected.safetensors");
  const std::vector<int64_t> llama_prompt = first_prompt("/hf_llama_expected.safetensors");
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    INFO("dtype " << dtype_name(dtype));
    const double tol = dtype == DType::Float32 ? 1e-4 : 5e-2;
    auto gpt2 = load_hf_gpt2(kData + "/hf_gpt2");
    auto gpt2_lm = as_causal_lm(*gpt2);
    check_devices(*gpt2_lm, *gpt2, gpt2_prompt, dtype, tol);
    auto llama = hf::load_llama(kData + "/hf_llama");  // grouped-query heads, two shards
    auto llama_lm = as_causal_lm(*llama);
    check_devices(*llama_lm, *llama, llama_prompt, dtype, tol);
  }
}

#endif
