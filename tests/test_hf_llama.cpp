// Llama-family checkpoints in the Hugging Face layout (issue 41): tests/data/hf_llama (grouped-query,
// untied, two shards) and hf_llama_tied (tied embeddings, head_dim != hidden / heads, bfloat16 on disk) were
// written by transformers, and hf_llama_expected.safetensors holds what transformers computes with them
// (tests/fixtures/make_hf_llama.py).
#ifdef SACCADE_HAVE_HF
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "autograd/grad_mode.h"
#include "helpers.h"
#include "hf/llama.h"
#include "hf_fixture.h"
#include "ops/creation.h"
#include "ops/reduce.h"
#include "temp_dir.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::check_adamw_losses;
using saccade::testing::file_bytes;
using saccade::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kData = SACCADE_TEST_DATA_DIR;

const nn::Safetensors& expected() {
  static const nn::Safetensors e = nn::load_safetensors(kData + "/hf_llama_expected.safetensors");
  return e;
}

// The argmax of the last position's logits (1, T, V).
int64_t last_argmax(const Variable& logits) {
  const int64_t T = logits.size(1);
  return ops::argmax(logits.data().narrow(1, T - 1, 1).reshape({-1}), 0).item<int64_t>();
}

// `n` greedy tokens after `prompt` (1, T): with the KV cache (one step per token), or the whole sequence
// each time.
std::vector<int64_t> greedy(nn::LlamaForCausalLM& model, const Tensor& prompt, int64_t n, bool cache) {
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

}  // namespace

TEST_CASE("hf Llama: config.json, both rotary spellings, and its refusals", "[hf]") {
  const hf::Config c = hf::load_config(kData + "/hf_llama/config.json");
  CHECK(c.architecture == hf::Architecture::Llama);
  CHECK(c.rope_theta == 500.0);  // from "rope_parameters"
  CHECK(c.num_key_value_heads == 2);
  CHECK(c.describe() == "llama: 2 layers, 4 heads (2 key/value), hidden 32, context 64, vocab 993");
  std::string text = file_bytes(kData + "/hf_llama/config.json");
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string s = text;
    REQUIRE(s.find(from) != std::string::npos);
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  // the published files' spelling: a top-level rope_theta
  const std::string old_style = edited(R"("rope_parameters": {
    "rope_theta": 500.0,
    "rope_type": "default"
  },)",
                                       R"("rope_theta": 250.0, "rope_scaling": null,)");
  CHECK(hf::parse_config(old_style).rope_theta == 250.0);
  CHECK(hf::parse_config(hf::config_json(c)).describe() == c.describe());
  CHECK(hf::parse_config(hf::config_json(c)).rope_theta == 500.0);
  CHECK_THROWS_WITH(
      hf::parse_config(edited("\"default\"", "\"llama3\""), "x/config.json"),
      Catch::Contains("x/config.json") && Catch::Contains("rope_parameters") && Catch::Contains("llama3"));
  CHECK_THROWS_WITH(hf::parse_config(edited("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3")),
                    Catch::Contains("num_key_value_heads") && Catch::Contains("does not divide"));
  CHECK_THROWS_WITH(hf::parse_config(edited("\"intermediate_size\": 48,", "")),
                    Catch::Contains("\"intermediate_size\": missing"));
  CHECK_THROWS_WITH(hf::parse_config(edited("\"LlamaForCausalLM\"", "\"MistralForCausalLM\"")),
                    Catch::Contains("architectures") && Catch::Contains("MistralForCausalLM"));
  CHECK_THROWS_WITH(hf::parse_config(edited("\"hidden_size\": 32", "\"hidden_size\": \"32\"")),
                    Catch::Contains("hidden_size") && Catch::Contains("not an integer"));
  CHECK_THROWS_WITH(hf::parse_config("[1, 2]"), Catch::Contains("not a JSON object"));
  CHECK_THROWS_WITH(hf::load_config(kData + "/nonexistent/config.json"), Catch::Contains("cannot read"));
}

TEST_CASE("hf Llama: logits agree with transformers (shards and grouped-query, or tied and bfloat16 on disk)",
          "[hf]") {
  NoGradGuard no_grad;
  const Tensor& ids = expected().tensors.at("ids");
  auto model = hf::load_llama(kData + "/hf_llama");
  CHECK(model->lm_head != nullptr);
  CHECK(allclose(model->forward(ids).data(), expected().tensors.at("logits"), 1e-5, 1e-5));
  auto tied = hf::load_llama(kData + "/hf_llama_tied");
  CHECK(tied->lm_head == nullptr);
  CHECK(tied->model->layers[0]->self_attn->head_dim == 12);
  CHECK(allclose(tied->forward(ids).data(), expected().tensors.at("tied_logits"), 1e-5, 1e-5));
}

TEST_CASE("hf Llama: greedy continuations equal transformers', with and without the KV cache", "[hf]") {
  auto model = hf::load_llama(kData + "/hf_llama");
  const Tensor& ids = expected().tensors.at("ids");
  const Tensor prompt = ids.narrow(0, 0, 1).contiguous();
  const Tensor& g = expected().tensors.at("greedy");
  const std::vector<int64_t> want(g.data<int64_t>() + ids.size(1), g.data<int64_t>() + g.numel());
  for (bool cache : {true, false}) {
    CAPTURE(cache);
    CHECK(greedy(*model, prompt, static_cast<int64_t>(want.size()), cache) == want);
  }
}

TEST_CASE("hf Llama: ten AdamW steps give transformers' losses", "[hf]") {
  auto model = hf::load_llama(kData + "/hf_llama");
  check_adamw_losses(*model, expected(), model->config().vocab_size);
}

TEST_CASE("hf Llama: an export loads back to the same model, in the layout transformers reads", "[hf]") {
  NoGradGuard no_grad;
  const Tensor& ids = expected().tensors.at("ids");
  for (const char* name : {"hf_llama", "hf_llama_tied"}) {
    CAPTURE(name);
    auto model = hf::load_llama(kData + "/" + name);
    TempDir dir("hf_llama_export");
    hf::save_llama(*model, dir.path.string());
    const nn::Safetensors file = nn::load_safetensors(dir.file("model.safetensors"));
    CHECK(file.metadata.at("format") == "pt");
    CHECK(file.tensors.contains("model.layers.0.self_attn.q_proj.weight"));
    CHECK(file.tensors.contains("lm_head.weight") == (model->lm_head != nullptr));
    CHECK(allclose(hf::load_llama(dir.path.string())->forward(ids).data(), model->forward(ids).data(), 0, 0));
  }
}

TEST_CASE("hf Llama: a checkpoint of another shape or architecture is refused, naming it", "[hf]") {
  TempDir d("hf_llama_bad");
  for (const auto& e : fs::directory_iterator(kData + "/hf_llama"))
    fs::copy_file(e.path(), d.path / e.path().filename());
  std::string text = file_bytes(d.file("config.json"));
  auto write = [&](const std::string& from, const std::string& to) {
    std::string s = text;
    s.replace(s.find(from), from.size(), to);
    std::ofstream(d.file("config.json"), std::ios::trunc) << s;
  };
  write("\"intermediate_size\": 48", "\"intermediate_size\": 40");
  CHECK_THROWS_WITH(hf::load_llama(d.path.string()),
                    Catch::Contains("hf::load_weights") && Catch::Contains("mlp.gate_proj.weight") &&
                        Catch::Contains("[48, 32]") && Catch::Contains("[40, 32]"));
  fs::copy_file(kData + "/hf_gpt2/config.json", d.file("config.json"), fs::copy_options::overwrite_existing);
  CHECK_THROWS_WITH(hf::load_llama(d.path.string()), Catch::Contains("'gpt2' model, not a Llama"));
  // an index that names a file outside the folder
  std::ofstream(d.file("config.json"), std::ios::trunc) << text;
  std::string index = file_bytes(d.file("model.safetensors.index.json"));
  index.replace(index.find("model-00002-of-00002"), 20, "../model-00002-of-02");
  std::ofstream(d.file("model.safetensors.index.json"), std::ios::trunc) << index;
  CHECK_THROWS_WITH(hf::load_llama(d.path.string()), Catch::Contains("not a file in the folder"));
  fs::remove(d.file("model.safetensors.index.json"));
  CHECK_THROWS_WITH(hf::load_llama(d.path.string()), Catch::Contains("neither model.safetensors nor"));
}

#endif
