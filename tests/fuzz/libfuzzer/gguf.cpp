// libFuzzer target: a GGUF file (hf::GgufFile, hf::gguf_config, hf::GgufWeights, hf::gguf_tokenizer,
// hf::load_llama_gguf). Input: the file's bytes, written to a scratch file and mapped (as `gpt sample --hf
// x.gguf` reads it).
// Properties: a rejected file raises saccade::Error naming it; in an accepted one every tensor of a type read
// (F32, F16, BF16, Q8_0) lies inside the file and reads, a Q8_0 one dequantizing to what its blocks say; an
// accepted config loads (when the model is small) into a model that holds each file tensor under its Hugging
// Face name, or the load refuses naming the file; an accepted vocabulary encodes text into ids in
// [0, vocab_size()) and decodes them.
#include <algorithm>
#include <cctype>
#include <string>

#include "autograd/grad_mode.h"
#include "hf/gguf.h"
#include "hf/gguf_model.h"
#include "ops/quant.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"

using namespace saccade;

namespace {

bool readable(uint32_t type) { return type == 0 || type == 1 || type == 8 || type == 30; }

// The parameters a config asks for, roughly (to skip loading what would take over the fuzzer's memory).
double parameters(const hf::Config& c) {
  const double d = static_cast<double>(c.hidden_size), layers = static_cast<double>(c.num_hidden_layers);
  const double attn = d * static_cast<double>(c.head_dim) *
                      static_cast<double>(2 * c.num_attention_heads + 2 * c.num_key_value_heads);
  return 2 * static_cast<double>(c.vocab_size) * d +
         layers * (attn + 3 * d * static_cast<double>(c.intermediate_size));
}

void check_file(const hf::GgufFile& f, const std::string& path) {
  for (const hf::GgufTensorInfo& t : f.tensors()) {
    if (!readable(t.type) || t.shape.numel() > (int64_t{1} << 22)) continue;
    Tensor out = Tensor::empty(t.shape, DType::Float32);
    f.read_into(t, out);
    if (t.type == 8 && t.shape.size() == 2) {
      const Q8_0Matrix q = f.q8_0(t);
      FUZZ_CHECK(fuzz::same_tensor(ops::dequantize_q8_0(q), out),
                 "tensor '{}': its blocks and its read differ", t.name);
    }
  }
  hf::Config config;
  try {
    config = hf::gguf_config(f);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    return;
  }
  std::unique_ptr<hf::GgufWeights> w;
  try {
    w = std::make_unique<hf::GgufWeights>(f, config);
  } catch (const Error& e) {  // two tensors under one name, q or k rows that are not whole heads
    fuzz::check_rejection(e, path);
    return;
  }
  const hf::GgufWeights& weights = *w;
  // every tensor under a name (a Llama-family stack of experts, blk.N.ffn_{gate,up,down}_exps.weight, under
  // one an expert), but Llama 3's rope_freqs.weight and Phi-3's rope_factors_long / _short.weight, which
  // gguf_config read into the rope scaling
  size_t named = 0;
  for (const hf::GgufTensorInfo& t : f.tensors()) {
    const size_t dot = t.name.find('.', 4);
    const std::string layer = dot == std::string::npos ? "" : t.name.substr(4, dot - 4);
    const std::string rest = dot == std::string::npos ? "" : t.name.substr(dot + 1);
    const bool stack =
        config.model_type != "gpt2" && t.name.starts_with("blk.") && !layer.empty() && layer.size() <= 9 &&
        std::all_of(layer.begin(), layer.end(), ::isdigit) &&
        (rest == "ffn_gate_exps.weight" || rest == "ffn_up_exps.weight" || rest == "ffn_down_exps.weight");
    named += stack ? static_cast<size_t>(t.shape[0]) : 1;
  }
  using Type = ops::RopeScaling::Type;
  const size_t read_as_config =
      (config.rope_scaling.type == Type::Llama3 && f.tensor("rope_freqs.weight") ? 1 : 0) +
      (config.rope_scaling.type == Type::LongRope && config.model_type == "phi3" ? 2 : 0);
  FUZZ_CHECK(weights.names().size() + read_as_config == named, "{} names for {} tensors ({} names expected)",
             weights.names().size(), f.tensors().size(), named);
  if (parameters(config) > 4e6) return;
  try {
    auto model = hf::load_llama_gguf(f, config, /*keep_q8_0=*/true, /*strict=*/true);
    const nn::StateDict sd = model->state_dict();
    for (const std::string& name : weights.names()) {
      const Tensor* t = sd.find(name);
      if (!t) continue;  // a tied file's lm_head, which the model does not hold
      FUZZ_CHECK(fuzz::same_tensor(weights.read(name).to(DType::Float32), *t), "'{}' differs from the file's",
                 name);
    }
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
  }
}

void check_tokenizer(const hf::GgufFile& f, const std::string& path) {
  std::unique_ptr<hf::Tokenizer> tok;
  try {
    tok = hf::gguf_tokenizer(f);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    return;
  }
  const std::string text = "Hello world, 123 times!\n";
  for (bool special : {false, true}) {
    const std::vector<int64_t> ids = tok->encode(text, special);
    for (int64_t id : ids)
      FUZZ_CHECK(id >= 0 && id < tok->vocab_size(), "id {} of {}", id, tok->vocab_size());
    tok->decode(ids);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, "model.gguf");
  std::unique_ptr<hf::GgufFile> f;
  try {
    f = std::make_unique<hf::GgufFile>(path);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    return 0;
  }
  NoGradGuard no_grad;
  check_file(*f, path);
  check_tokenizer(*f, path);
  return 0;
}
