#pragma once
// What the family rows' tests share (tests/test_hf_llama.cpp, tests/test_hf_moe.cpp): greedy continuations
// with and without the KV cache, and check_family_fixture, a row's fixture against what transformers computed
// with it (tests/fixtures/make_hf_families.py).
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "hf/llama.h"
#include "hf_fixture.h"
#include "ops/creation.h"
#include "ops/reduce.h"
#include "temp_dir.h"

namespace saccade::testing {

// The argmax of the last position's logits (1, T, V).
inline int64_t last_argmax(const Variable& logits) {
  const int64_t T = logits.size(1);
  return ops::argmax(logits.data().narrow(1, T - 1, 1).reshape({-1}), 0).item<int64_t>();
}

// `n` greedy tokens after `prompt` (1, T): with the KV cache (one step per token), or the whole sequence
// each time.
inline std::vector<int64_t> greedy(nn::LlamaForCausalLM& model, const Tensor& prompt, int64_t n, bool cache) {
  NoGradGuard no_grad;
  std::vector<int64_t> seq(prompt.data<int64_t>(), prompt.data<int64_t>() + prompt.numel()), out;
  auto state = model.init_state();
  Variable logits = cache ? model.step(prompt, state) : model.forward(prompt);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t next = last_argmax(logits);
    out.push_back(next);
    seq.push_back(next);
    logits = cache ? model.step(ops::from_vector(std::vector<int64_t>{next}, {1, 1}), state)
                   : model.forward(ops::from_vector(seq, {1, static_cast<int64_t>(seq.size())}));
  }
  return out;
}

// The greedy continuation of the first row of want's "ids" equals want's "greedy" (transformers' generate),
// with the KV cache and without (or as `caches` says).
inline void check_greedy(nn::LlamaForCausalLM& model, const nn::Safetensors& want,
                         const std::vector<bool>& caches = {true, false}) {
  const Tensor& ids = want.tensors.at("ids");
  const Tensor prompt = ids.narrow(0, 0, 1).contiguous();
  const Tensor& g = want.tensors.at("greedy");
  const std::vector<int64_t> continuation(g.data<int64_t>() + ids.size(1), g.data<int64_t>() + g.numel());
  for (bool cache : caches) {
    CAPTURE(cache);
    CHECK(greedy(model, prompt, static_cast<int64_t>(continuation.size()), cache) == continuation);
  }
}

// `text` with its first `from` replaced by `to` (which must be there).
inline std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// The family row's fixture tests/data/`name` against what transformers computed with it
// (`name`_expected.safetensors): the logits to 1e-5 (a strict load, model_type `model_type`), other logits
// once `perturb` changes a weight the row adds (so it is applied), greedy continuations with and without the
// KV cache, an export naming `architecture` that reads back to the same logits, and ten AdamW steps' losses.
// `tol`: the logits' rtol and atol.
inline void check_family_fixture(const std::string& name, const std::string& model_type,
                                 const std::string& architecture,
                                 const std::function<void(nn::LlamaForCausalLM&)>& perturb,
                                 double tol = 1e-5) {
  const nn::Safetensors want = nn::load_safetensors(hf_data(name + "_expected.safetensors"));
  const Tensor& ids = want.tensors.at("ids");
  auto model = hf::load_llama(hf_data(name), /*strict=*/true);
  CHECK(hf::llama_hf_config(model->config()).model_type == model_type);
  {
    NoGradGuard no_grad;
    CHECK(allclose(model->forward(ids).data(), want.tensors.at("logits"), tol, tol));
    perturb(*model);
    CHECK_FALSE(allclose(model->forward(ids).data(), want.tensors.at("logits"), 1e-3, 1e-3));
  }
  model = hf::load_llama(hf_data(name));
  check_greedy(*model, want);
  TempDir dir(name + "_export");
  hf::save_llama(*model, dir.path.string());
  CHECK(file_bytes(dir.file("config.json")).find(architecture) != std::string::npos);
  CHECK(hf::load_config(dir.file("config.json")).model_type == model_type);
  {
    NoGradGuard no_grad;
    CHECK(allclose(hf::load_llama(dir.path.string(), true)->forward(ids).data(), want.tensors.at("logits"),
                   tol, tol));
  }
  check_adamw_losses(*model, want, model->config().vocab_size);
}

// config_json of `model`'s configuration names `model_type` and `architecture`, and reads back to the same
// text.
inline void check_written_as(const nn::LlamaForCausalLM& model, const std::string& model_type,
                             const std::string& architecture) {
  const std::string written = hf::config_json(hf::llama_hf_config(model.config()));
  CHECK(written.find(fmt::format(R"("model_type": "{}")", model_type)) != std::string::npos);
  CHECK(written.find(architecture) != std::string::npos);
  CHECK(hf::config_json(hf::parse_config(written)) == written);
}

}  // namespace saccade::testing
