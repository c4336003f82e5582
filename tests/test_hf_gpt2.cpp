// GPT-2 checkpoints in the Hugging Face layout (issue 41; llm.c's test_gpt2 at a tiny size): the folders
// tests/data/hf_gpt2 (float32) and hf_gpt2_bf16 were written by transformers' save_pretrained, and
// hf_gpt2_expected.safetensors holds what transformers computes with them (tests/fixtures/make_hf_gpt2.py).
#if defined(SACCADE_HAVE_GPT) && defined(SACCADE_HAVE_HF)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "autograd/grad_mode.h"
#include "examples/gpt/generate.h"
#include "examples/gpt/hf_gpt2.h"
#include "examples/gpt/training.h"
#include "helpers.h"
#include "hf/gguf_model.h"
#include "hf/llama.h"
#include "hf/tokenizer.h"
#include "hf_fixture.h"
#include "nn/linear.h"
#include "nn/serialization.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "temp_dir.h"

using namespace saccade;
using namespace saccade::examples;
using saccade::testing::allclose;
using saccade::testing::check_adamw_losses;
using saccade::testing::file_bytes;
using saccade::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kData = SACCADE_TEST_DATA_DIR;

const nn::Safetensors& expected() {
  static const nn::Safetensors e = nn::load_safetensors(kData + "/hf_gpt2_expected.safetensors");
  return e;
}

std::vector<int64_t> row(const Tensor& ids, int64_t b) {
  const int64_t T = ids.size(1);
  const int64_t* p = ids.data<int64_t>() + b * T;
  return {p, p + T};
}

// A copy of the float32 fixture folder in `dir`, with `edit` applied to its tensors before they are written.
void write_variant(const TempDir& dir, const std::function<void(nn::StateDict&)>& edit) {
  nn::Safetensors f = nn::load_safetensors(kData + "/hf_gpt2/model.safetensors");
  nn::StateDict t = f.tensors;
  edit(t);
  nn::save_safetensors(t, dir.file("model.safetensors"), f.metadata);
  fs::copy_file(kData + "/hf_gpt2/config.json", dir.file("config.json"));
}

}  // namespace

TEST_CASE("hf GPT-2: logits agree with transformers, float32 and bfloat16 checkpoints", "[hf][gpt]") {
  const Tensor& ids = expected().tensors.at("ids");
  NoGradGuard no_grad;
  auto model = load_hf_gpt2(kData + "/hf_gpt2");
  CHECK(model->config().activation == "gelu_new");
  CHECK(allclose(model->forward(ids).data(), expected().tensors.at("logits"), 1e-5, 1e-5));

  auto rounded = load_hf_gpt2(kData + "/hf_gpt2_bf16");
  CHECK(allclose(rounded->forward(ids).data(), expected().tensors.at("logits_bf16"), 1e-5, 1e-5));
  // the bf16 weights are not the float32 ones: the two logits differ beyond the tolerance
  CHECK_FALSE(allclose(rounded->forward(ids).data(), expected().tensors.at("logits"), 1e-5, 1e-5));
}

TEST_CASE("hf GPT-2: the GGUF file of the fixture loads to transformers' logits", "[hf][gpt][gguf]") {
  // tests/data/gguf/gpt2_f32.gguf: tests/fixtures/make_gguf.py, as convert_hf_to_gguf.py writes hf_gpt2
  // (Conv1D weights transposed to (out, in), no output.weight)
  const hf::GgufFile file(kData + "/gguf/gpt2_f32.gguf");
  const hf::Config config = hf::gguf_config(file);
  CHECK(hf::config_json(config) == hf::config_json(hf::load_config(kData + "/hf_gpt2/config.json")));
  auto model = load_hf_gpt2(hf::GgufWeights(file, config), config);
  NoGradGuard no_grad;
  CHECK(allclose(model->forward(expected().tensors.at("ids")).data(), expected().tensors.at("logits"), 1e-5,
                 1e-5));
  // the Conv1D weights back in (in, out): the GPT's W_q is c_attn's first third, transposed
  const hf::GgufWeights weights(file, config);
  CHECK(weights.shape("transformer.h.0.attn.c_attn.weight") == Shape({32, 96}));
  CHECK_FALSE(weights.q8_0("transformer.h.0.attn.c_attn.weight").defined());
}

TEST_CASE("hf GPT-2: greedy continuations equal transformers', with and without the KV cache", "[hf][gpt]") {
  auto model = load_hf_gpt2(kData + "/hf_gpt2");
  const Tensor& greedy = expected().tensors.at("greedy");
  const std::vector<int64_t> prompt = row(expected().tensors.at("ids"), 0);
  const std::vector<int64_t> all = row(greedy, 0);
  const std::vector<int64_t> want(all.begin() + static_cast<int64_t>(prompt.size()), all.end());
  SamplingOptions greedy_options;
  greedy_options.temperature = 0;
  greedy_options.max_new_tokens = static_cast<int64_t>(want.size());
  for (bool cache : {true, false}) {
    CAPTURE(cache);
    CHECK(generate(*model, {prompt}, greedy_options, cache).tokens[0] == want);
  }
}

TEST_CASE("hf GPT-2: ten AdamW steps give transformers' losses", "[hf][gpt]") {
  auto model = load_hf_gpt2(kData + "/hf_gpt2");
  check_adamw_losses(*model, expected(), model->config().vocab_size);
}

TEST_CASE("hf GPT-2: an export is transformers' own file, byte for byte", "[hf][gpt]") {
  auto model = load_hf_gpt2(kData + "/hf_gpt2");
  TempDir dir("hf_gpt2_export");
  save_hf_gpt2(*model, dir.path.string(), DType::Float32, 0);
  CHECK(file_bytes(dir.file("model.safetensors")) == file_bytes(kData + "/hf_gpt2/model.safetensors"));
  const hf::Config c = hf::load_config(dir.file("config.json"));
  CHECK(c.describe() == hf::load_config(kData + "/hf_gpt2/config.json").describe());
  CHECK(c.hidden_act == "gelu_new");
  CHECK(c.eos_token_id == std::vector<int64_t>{0});
  // and it loads back to the same logits
  NoGradGuard no_grad;
  const Tensor& ids = expected().tensors.at("ids");
  CHECK(allclose(load_hf_gpt2(dir.path.string())->forward(ids).data(), model->forward(ids).data(), 0, 0));
  // in bfloat16 it is transformers' bf16 file
  TempDir half("hf_gpt2_export_bf16");
  save_hf_gpt2(*model, half.path.string(), DType::BFloat16, 0);
  CHECK(file_bytes(half.file("model.safetensors")) == file_bytes(kData + "/hf_gpt2_bf16/model.safetensors"));
}

TEST_CASE("hf GPT-2: the published layout (no 'transformer.' prefix, mask buffers) and shards load",
          "[hf][gpt]") {
  NoGradGuard no_grad;
  const Tensor& ids = expected().tensors.at("ids");
  TempDir plain("hf_gpt2_plain");
  write_variant(plain, [](nn::StateDict& t) {
    nn::StateDict out;
    for (const auto& [k, v] : t) out.insert(k.substr(std::string("transformer.").size()), v);
    out.insert("h.0.attn.bias", ops::ones({1, 1, 32, 32}));
    out.insert("h.1.attn.masked_bias", ops::full({}, -1e4));
    t = out;
  });
  CHECK(allclose(load_hf_gpt2(plain.path.string())->forward(ids).data(), expected().tensors.at("logits"),
                 1e-5, 1e-5));

  // two shards and an index, as save_pretrained(max_shard_size=...) writes them
  TempDir sharded("hf_gpt2_shards");
  nn::StateDict all = nn::load_safetensors(kData + "/hf_gpt2/model.safetensors").tensors, a, b;
  std::string map;
  for (const auto& [k, v] : all) {
    const bool first = k.find("h.1.") == std::string::npos;
    (first ? a : b).insert(k, v);
    map += fmt::format("{}\"{}\": \"model-0000{}-of-00002.safetensors\"", map.empty() ? "" : ", ", k,
                       first ? 1 : 2);
  }
  nn::save_safetensors(a, sharded.file("model-00001-of-00002.safetensors"));
  nn::save_safetensors(b, sharded.file("model-00002-of-00002.safetensors"));
  std::ofstream(sharded.file("model.safetensors.index.json"))
      << "{\"metadata\": {}, \"weight_map\": {" << map << "}}";
  fs::copy_file(kData + "/hf_gpt2/config.json", sharded.file("config.json"));
  CHECK(allclose(load_hf_gpt2(sharded.path.string())->forward(ids).data(), expected().tensors.at("logits"),
                 1e-5, 1e-5));

  // an index naming a missing shard
  fs::remove(sharded.file("model-00002-of-00002.safetensors"));
  CHECK_THROWS_WITH(load_hf_gpt2(sharded.path.string()),
                    Catch::Contains("model.safetensors.index.json") &&
                        Catch::Contains("model-00002-of-00002.safetensors") && Catch::Contains("missing"));
}

TEST_CASE("hf: load_hf_gpt with a config read once builds what the folder's own config.json gives",
          "[hf][gpt]") {
  // gpt train --init-from-hf reads config.json once and hands it on: the overloads use the config they are
  // given (a config of one layer less loads that many blocks, the rest skipped when not strict)
  const Tensor& ids = expected().tensors.at("ids");
  NoGradGuard no_grad;
  for (const char* folder : {"/hf_gpt2", "/hf_llama"}) {
    INFO(folder);
    const std::string dir = kData + folder;
    hf::Config config = hf::load_config(dir + "/config.json");
    auto read_once = load_hf_gpt(dir, config), read_here = load_hf_gpt(dir);
    CHECK(read_once->config().arch == read_here->config().arch);
    CHECK(allclose(read_once->forward(ids).data(), read_here->forward(ids).data(), 0, 0));
    config.num_hidden_layers -= 1;
    CHECK_THROWS_AS(load_hf_gpt(dir, config), Error);  // strict: the last block's tensors have no place
    hf::LoadReport report;
    CHECK(load_hf_gpt(dir, config, /*strict=*/false, &report)->config().n_layer == config.num_hidden_layers);
    CHECK_FALSE(report.skipped.empty());
  }
}

TEST_CASE("hf GPT-2: bad checkpoints are refused naming the file and the tensor, nothing loaded",
          "[hf][gpt]") {
  SECTION("a missing tensor") {
    TempDir d("hf_bad");
    write_variant(d, [](nn::StateDict& t) {
      nn::StateDict out;
      for (const auto& [k, v] : t)
        if (k != "transformer.h.1.mlp.c_fc.bias") out.insert(k, v);
      t = out;
    });
    CHECK_THROWS_WITH(load_hf_gpt2(d.path.string()), Catch::Contains("hf::load_weights") &&
                                                         Catch::Contains("transformer.h.1.mlp.c_fc.bias"));
  }
  SECTION("a wrong shape") {
    TempDir d("hf_bad");
    write_variant(d, [](nn::StateDict& t) { t.insert_or_assign("transformer.ln_f.bias", ops::zeros({31})); });
    CHECK_THROWS_WITH(load_hf_gpt2(d.path.string()), Catch::Contains("transformer.ln_f.bias") &&
                                                         Catch::Contains("[31]") && Catch::Contains("[32]"));
  }
  SECTION("an extra tensor: strict refuses, non-strict reports it") {
    TempDir d("hf_bad");
    write_variant(d, [](nn::StateDict& t) { t.insert("transformer.extra.weight", ops::zeros({2})); });
    CHECK_THROWS_WITH(load_hf_gpt2(d.path.string()), Catch::Contains("transformer.extra.weight"));
    hf::LoadReport report;
    load_hf_gpt2(d.path.string(), /*strict=*/false, &report);
    CHECK(report.skipped == std::vector<std::string>{"transformer.extra.weight"});
  }
  SECTION("a config the GPT cannot hold, or that is not GPT-2's") {
    TempDir d("hf_bad");
    write_variant(d, [](nn::StateDict&) {});
    std::string text = file_bytes(d.file("config.json"));
    auto replace = [&](const std::string& from, const std::string& to) {
      std::string s = text;
      s.replace(s.find(from), from.size(), to);
      std::ofstream(d.file("config.json"), std::ios::trunc) << s;
    };
    replace("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false");
    CHECK_THROWS_WITH(load_hf_gpt2(d.path.string()), Catch::Contains("tie_word_embeddings"));
    replace("\"model_type\": \"gpt2\"", "\"model_type\": \"bert\"");
    CHECK_THROWS_WITH(load_hf_gpt2(d.path.string()), Catch::Contains("config.json") &&
                                                         Catch::Contains("model_type") &&
                                                         Catch::Contains("bert"));
    replace("\"n_embd\": 32,", "");
    CHECK_THROWS_WITH(load_hf_gpt2(d.path.string()), Catch::Contains("\"n_embd\": missing"));
  }
  SECTION("a failed load leaves the model unchanged") {
    TempDir d("hf_bad");
    write_variant(
        d, [](nn::StateDict& t) { t.insert_or_assign("transformer.h.1.ln_2.weight", ops::zeros({3})); });
    GPT model(hf_gpt2_config(hf::load_config(d.file("config.json"))));
    const Tensor before = model.wte->weight.data().clone();
    hf::Weights w(d.path.string());
    CHECK_THROWS(hf::load_weights(model, w, gpt2_name_table(2)));
    CHECK(allclose(model.wte->weight.data(), before, 0, 0));
  }
}

TEST_CASE("hf eval: the windowed score of a text equals transformers', GPT-2 and Llama", "[hf][gpt]") {
  const std::string text = file_bytes(kData + "/hf_eval.txt");
  auto gpt2 = load_hf_gpt2(kData + "/hf_gpt2");
  auto llama = hf::load_llama(kData + "/hf_llama");
  const std::pair<std::string, CausalLM*> cases[] = {{"hf_gpt2", as_causal_lm(*gpt2).release()},
                                                     {"hf_llama", as_causal_lm(*llama).release()}};
  for (const auto& [name, raw] : cases) {
    CAPTURE(name);
    std::unique_ptr<CausalLM> lm(raw);
    const nn::Safetensors want = nn::load_safetensors(kData + "/" + name + "_expected.safetensors");
    const std::vector<int64_t> ids = hf::load_tokenizer(kData + "/" + name)->encode(text, false);
    const WindowScore s = score_windows(*lm, ids);
    CHECK(s.tokens == want.tensors.at("eval_tokens").item<int64_t>());
    CHECK(s.tokens > 2 * lm->context());  // several windows, the last one shorter
    CHECK(s.nats == Approx(want.tensors.at("eval_nats").item<double>()).epsilon(1e-5));
  }
}

TEST_CASE("hf Llama through generate(): greedy tokens with and without the cache agree with transformers'",
          "[hf][gpt]") {
  auto llama = hf::load_llama(kData + "/hf_llama");
  const nn::Safetensors want = nn::load_safetensors(kData + "/hf_llama_expected.safetensors");
  const std::vector<int64_t> prompt = row(want.tensors.at("ids"), 0);
  const std::vector<int64_t> all = row(want.tensors.at("greedy"), 0);
  SamplingOptions o;
  o.temperature = 0;
  o.max_new_tokens = static_cast<int64_t>(all.size() - prompt.size());
  auto lm = as_causal_lm(*llama);
  for (bool cache : {true, false})
    CHECK(generate(*lm, {prompt}, o, cache).tokens[0] ==
          std::vector<int64_t>(all.begin() + static_cast<int64_t>(prompt.size()), all.end()));
}

TEST_CASE(
    "generate: a LongRoPE model re-reads its sequence once it passes the original context, as transformers",
    "[hf][gpt]") {
  // tests/data/hf_phi3_longrope (make_hf_families.py phi3_longrope): transformers' greedy run of 12 + 10
  // tokens passes the original context of 16; its Phi-3 generation drops the cache there and re-reads the
  // sequence, every position by the long factors. With the cache kept (steps one at a time, the earlier keys
  // as the short factors rotated them) this fixture's ninth token differs.
  auto model = hf::load_llama(kData + "/hf_phi3_longrope");
  const nn::Safetensors want = nn::load_safetensors(kData + "/hf_phi3_longrope_expected.safetensors");
  const std::vector<int64_t> prompt = row(want.tensors.at("ids"), 0);
  const std::vector<int64_t> all = row(want.tensors.at("greedy"), 0);
  const std::vector<int64_t> continuation(all.begin() + static_cast<int64_t>(prompt.size()), all.end());
  SamplingOptions o;
  o.temperature = 0;
  o.max_new_tokens = static_cast<int64_t>(continuation.size());
  auto lm = as_causal_lm(*model);
  CHECK(lm->rope_switch() == 16);
  for (bool cache : {true, false}) {
    CAPTURE(cache);
    CHECK(generate(*lm, {prompt}, o, cache).tokens[0] == continuation);
  }
  // the cache kept across position 16 instead: one step a token
  NoGradGuard no_grad;
  auto state = model->init_state();
  std::vector<int64_t> kept;
  Variable logits = model->step(ops::from_vector(prompt, {1, static_cast<int64_t>(prompt.size())}), state);
  for (size_t i = 0; i < continuation.size(); ++i) {
    const Tensor last = logits.data().select(1, logits.size(1) - 1).reshape({-1});
    kept.push_back(ops::argmax(last, 0).item<int64_t>());
    logits = model->step(ops::from_vector(std::vector<int64_t>{kept.back()}, {1, 1}), state);
  }
  CHECK(kept != continuation);
  CHECK(std::equal(kept.begin(), kept.begin() + 8, continuation.begin()));  // the same up to there
  CHECK(as_causal_lm(*hf::load_llama(kData + "/hf_llama"))->rope_switch() == 0);
}

TEST_CASE("hf Q8_0: the GPT-2 and Llama fixtures' logits near float32's, greedy flips only at near-ties",
          "[hf][gpt][quant]") {
  // issue 53's bar: logits within 2 % (max |difference| over a position's logits / max |logit| there, max
  // over positions) and the same greedy continuations on at least 9 of 10 prompts. These fixtures have random
  // weights, whose logits are flat: near-ties flip. GPT-2's logits stay within 2 %, and its continuations
  // are identical on 9 of 10 prompts with the output layer in float32, 8 with it quantized too (here). The
  // Llama fixture (hidden 32: each projection row one block) differs by up to 4.1 %. So the test asserts,
  // at every position of every continuation, what must hold whatever the fixture: a greedy token flips only
  // where float32's top two logits are within twice the largest logit difference (greedy_flips_within_error).
  auto gpt2 = load_hf_gpt2(kData + "/hf_gpt2"), gpt2_q = load_hf_gpt2(kData + "/hf_gpt2");
  auto llama = hf::load_llama(kData + "/hf_llama"), llama_q = hf::load_llama(kData + "/hf_llama");
  CHECK(gpt2_q->quantize_q8_0() == 6 * 2 + 1);   // W_q, W_k, W_v, W_o, c_fc, c_proj a block; the tied output
  CHECK(llama_q->quantize_q8_0() == 7 * 2 + 1);  // 7 a layer, and lm_head (not tied here)
  struct Case {
    std::string name;
    CausalLM *f32, *q8;
    double logits_bound;
    int same_at_least;
  };
  const Case cases[] = {
      {"hf_gpt2", as_causal_lm(*gpt2).release(), as_causal_lm(*gpt2_q).release(), 0.02, 8},
      {"hf_llama", as_causal_lm(*llama).release(), as_causal_lm(*llama_q).release(), 0.05, 0}};
  NoGradGuard no_grad;
  for (const Case& c : cases) {
    CAPTURE(c.name);
    std::unique_ptr<CausalLM> f32(c.f32), q8(c.q8);
    SamplingOptions o;
    o.temperature = 0;
    o.max_new_tokens = std::min<int64_t>(32, f32->context() - 5);
    int same = 0;
    for (int64_t p = 0; p < 10; ++p) {
      CAPTURE(p);
      std::vector<int64_t> prompt(5);
      for (int64_t i = 0; i < 5; ++i) prompt[i] = (p * 37 + i * 11 + 5) % f32->vocab_size();
      const Tensor x = ops::from_vector(prompt, {1, 5});
      const Tensor a = f32->forward(x).data(), b = q8->forward(x).data();
      const Tensor rel = ops::div(ops::amax(ops::abs(ops::sub(a, b)), {-1}), ops::amax(ops::abs(a), {-1}));
      CHECK(ops::max(rel).item<double>() < c.logits_bound);
      std::vector<int64_t> seq = prompt;
      const std::vector<int64_t> cont = generate(*f32, {prompt}, o, true).tokens[0];
      seq.insert(seq.end(), cont.begin(), cont.end());
      same += cont == generate(*q8, {prompt}, o, true).tokens[0];
      const Tensor ids = ops::from_vector(seq, {1, static_cast<int64_t>(seq.size())});
      testing::greedy_flips_within_error(*f32, *q8, ids);
    }
    CHECK(same >= c.same_at_least);
  }
}

// Issue 40's PyTorch twin for the Llama-style GPT (arch "llama"): transformers' LlamaForCausalLM with the
// fixture's random weights, loaded through the Llama name table.
TEST_CASE("GPT arch llama: transformers' Llama logits, greedy tokens and AdamW losses", "[hf][gpt]") {
  const nn::Safetensors want = nn::load_safetensors(kData + "/hf_llama_expected.safetensors");
  auto model = load_hf_gpt(kData + "/hf_llama");
  const GPTConfig& c = model->config();
  CHECK(c.arch == "llama");
  CHECK(c.kv_heads() == 2);
  CHECK(model->num_parameters() == c.num_parameters());
  {
    NoGradGuard no_grad;
    CHECK(allclose(model->forward(want.tensors.at("ids")).data(), want.tensors.at("logits"), 1e-5, 1e-5));
  }
  const std::vector<int64_t> prompt = row(want.tensors.at("ids"), 0), all = row(want.tensors.at("greedy"), 0);
  SamplingOptions o;
  o.temperature = 0;
  o.max_new_tokens = static_cast<int64_t>(all.size() - prompt.size());
  for (bool cache : {true, false})
    CHECK(generate(*model, {prompt}, o, cache).tokens[0] ==
          std::vector<int64_t>(all.begin() + static_cast<int64_t>(prompt.size()), all.end()));
  // the metadata carries the architecture: a checkpoint reads back the same model
  TempDir dir("gpt_llama");
  nn::save(*model, dir.file("m.safetensors"), c.to_metadata());
  auto back = load_gpt(dir.file("m.safetensors"));
  CHECK(back->config().to_metadata() == c.to_metadata());
  {
    NoGradGuard no_grad;
    CHECK(allclose(back->forward(want.tensors.at("ids")).data(), want.tensors.at("logits"), 1e-5, 1e-5));
  }
  check_adamw_losses(*model, want, c.vocab_size);
}

TEST_CASE("crop_context: a pretrained GPT-2 or Llama on shorter windows computes what it computed on them",
          "[hf][gpt]") {
  for (const char* folder : {"/hf_gpt2", "/hf_llama"}) {
    CAPTURE(folder);
    auto model = load_hf_gpt(kData + folder);
    const int64_t full = model->config().context;
    auto cropped = crop_context(*model, 8);
    CHECK(cropped->config().context == 8);
    GPTConfig c = model->config();
    c.context = 8;
    CHECK(cropped->config().to_metadata() == c.to_metadata());
    CHECK(cropped->num_parameters() == c.num_parameters());  // gpt2: 8 rows of positions instead of `full`
    if (model->wpe) CHECK(cropped->wpe->weight.shape() == Shape{8, c.d_model});
    // the same logits over windows of up to 8 tokens, and no storage shared with the original
    Generator g(3);
    const Tensor ids = ops::randint(0, c.vocab_size, {2, 8}, Device::cpu(), &g);
    {
      NoGradGuard no_grad;
      CHECK(allclose(cropped->forward(ids).data(), model->forward(ids).data(), 0, 0));
    }
    for (const auto& [name, t] : cropped->state_dict())
      CHECK(t.raw_data() != model->state_dict().at(name).raw_data());
    CHECK_THROWS_AS(cropped->forward(ops::zeros({1, 9}, DType::Int64)), Error);
    CHECK_THROWS_WITH(crop_context(*model, full + 1), Catch::Contains("crop_context: context"));
    CHECK_THROWS_WITH(crop_context(*model, 0), Catch::Contains("crop_context: context 0"));
  }
}

TEST_CASE("GPT arch llama: a fresh model's cache, its export, and what it refuses", "[hf][gpt]") {
  GPTConfig c;
  c.arch = "llama", c.vocab_size = 50, c.context = 24, c.n_layer = 2, c.n_head = 4, c.n_kv_head = 1,
  c.d_model = 16;
  c.tie = false;
  GPT model(c, 3);
  CHECK(model.num_parameters() == c.num_parameters());
  CHECK(model.lm_head != nullptr);
  std::vector<int64_t> prompt = {1, 7, 3, 9, 4};
  SamplingOptions o;
  o.temperature = 0, o.max_new_tokens = 19;  // to the context (beyond it the two refill differently)
  CHECK(generate(model, {prompt}, o, true).tokens[0] == generate(model, {prompt}, o, false).tokens[0]);
  // exported in the Llama layout, it loads back into nn::LlamaForCausalLM with the same logits
  TempDir dir("gpt_llama_hf");
  save_hf_gpt(model, dir.path.string());
  auto llama = hf::load_llama(dir.path.string());
  NoGradGuard no_grad;
  const Tensor ids = ops::from_vector(prompt, {1, 5});
  model.eval();  // its embedding dropout (0.1) off
  CHECK(allclose(llama->forward(ids).data(), model.forward(ids).data(), 1e-6, 1e-6));

  GPTConfig bad = c;
  bad.n_kv_head = 3;
  CHECK_THROWS_WITH(GPT(bad), Catch::Contains("n_kv_head 3 does not divide n_head 4"));
  bad = c;
  bad.arch = "mamba";
  CHECK_THROWS_WITH(GPT(bad), Catch::Contains("hf::load_config") && Catch::Contains("'mamba'"));
  bad = c;
  bad.arch = "gpt_neox", bad.d_model = 32;  // GPT-NeoX has a key/value head a head
  CHECK_THROWS_WITH(GPT(bad), Catch::Contains("not num_attention_heads"));
  bad = c;
  bad.arch = "qwen2", bad.window = 8;  // Qwen2 windows the layers from max_window_layers on
  CHECK_THROWS_WITH(GPT(bad), Catch::Contains("a 'qwen2' cannot window every layer by 8"));
  nn::Metadata m = c.to_metadata();
  m["tie"] = "maybe";
  CHECK_THROWS_WITH(GPTConfig::from_metadata(m), Catch::Contains("\"tie\" is 'maybe'"));
}

namespace {

// What `forward` computes with `model` in eval mode, without gradients
Tensor logits_of(nn::Module& model, const std::function<Variable()>& forward) {
  NoGradGuard no_grad;
  model.eval();
  return forward().data();
}

}  // namespace

TEST_CASE("GPT of every Llama-architecture fixture: the folder's model, its checkpoint and its export",
          "[hf][gpt]") {
  for (const char* name : {"hf_llama",         "hf_llama_rope", "hf_llama_tied",        "hf_llama_yarn",
                           "hf_llama_dynamic", "hf_qwen2",      "hf_qwen2_sliding",     "hf_qwen3",
                           "hf_gemma",         "hf_gemma2",     "hf_gemma3_text",       "hf_granite",
                           "hf_smollm3",       "hf_phi3",       "hf_phi3_longrope",     "hf_olmo2",
                           "hf_gpt_neox",      "hf_stablelm",   "hf_stablelm_parallel", "hf_falcon",
                           "hf_falcon_40b",    "hf_falcon_new", "hf_mixtral",           "hf_qwen2_moe",
                           "hf_qwen3_moe",     "hf_olmoe"}) {
    CAPTURE(name);
    const std::string dir = kData + "/" + name;
    auto gpt = load_hf_gpt(dir);
    auto llama = hf::load_llama(dir);
    const GPTConfig& c = gpt->config();
    CHECK(c.arch == hf::load_config(dir + "/config.json").model_type);
    CHECK(gpt->num_parameters() == c.num_parameters());
    CHECK(llama->num_parameters() == nn::num_parameters(llama->config()));
    Generator g(7);
    const Tensor ids = ops::randint(0, c.vocab_size, {2, 9}, Device::cpu(), &g);
    // the same blocks as nn::LlamaForCausalLM's (which the family tests hold to transformers' logits)
    const Tensor want = logits_of(*llama, [&] { return llama->forward(ids); });
    CHECK(allclose(logits_of(*gpt, [&] { return gpt->forward(ids); }), want, 0, 0));
    // a checkpoint carries the config.json: load_gpt builds the same model
    TempDir tmp("gpt_rows");
    nn::save(*gpt, tmp.file("m.safetensors"), c.to_metadata());
    auto back = load_gpt(tmp.file("m.safetensors"));
    CHECK(back->config().to_metadata() == c.to_metadata());
    CHECK(allclose(logits_of(*back, [&] { return back->forward(ids); }), want, 0, 0));
    // --save-hf writes the row's layout (fused tensors, experts one by one) and its config.json
    const std::string out = tmp.file("hf");
    save_hf_gpt(*gpt, out);
    CHECK(hf::load_config(out + "/config.json").model_type == c.arch);
    auto exported = hf::load_llama(out);
    CHECK(allclose(logits_of(*exported, [&] { return exported->forward(ids); }), want, 0, 0));
  }
}

TEST_CASE("GPT arch ROW: a fresh model of every row is that row's LlamaForCausalLM", "[hf][gpt]") {
  for (const std::string& row : hf::supported_model_types()) {
    if (row == "gpt2") continue;
    CAPTURE(row);
    GPTConfig c;
    c.arch = row, c.vocab_size = 40, c.context = 16, c.n_layer = 2, c.n_head = 4, c.d_model = 32;
    c.n_kv_head = row == "gpt_neox" ? 0 : 2;
    GPT model(c, 5);
    const nn::LlamaConfig lc = c.llama();
    CHECK(hf::llama_hf_config(lc).model_type == row);
    CHECK(lc.hidden_size == 32);
    CHECK(lc.num_key_value_heads == c.kv_heads());
    CHECK(!lc.pad_token_id);
    CHECK(model.num_parameters() == c.num_parameters());
    CHECK(c.num_parameters() == nn::num_parameters(lc));
    CHECK(model.llama_config().model_type == lc.model_type);
    // the metadata round trip, and its export loads as that row's transformers model would
    const GPTConfig back = GPTConfig::from_metadata(c.to_metadata());
    CHECK(back.to_metadata() == c.to_metadata());
    nn::Metadata edited = c.to_metadata();  // fields that are not the config.json's: refused
    edited["n_layer"] = "3";
    if (row != "llama")  // a llama of the fields holds no config.json
      CHECK_THROWS_WITH(GPTConfig::from_metadata(edited), Catch::Contains("says hidden 32, 2 layers"));
    CHECK(hf::llama_hf_config(back.llama()).model_type == row);
    TempDir tmp("gpt_fresh_row");
    save_hf_gpt(model, tmp.path.string());
    auto llama = hf::load_llama(tmp.path.string());
    Generator g(9);
    const Tensor ids = ops::randint(0, c.vocab_size, {2, 7}, Device::cpu(), &g);
    const Tensor got = logits_of(model, [&] { return model.forward(ids); });
    CHECK(allclose(logits_of(*llama, [&] { return llama->forward(ids); }), got, 0, 0));
    // the cache gives the forward's last logits
    std::vector<int64_t> prompt = {1, 7, 3, 9, 4};
    SamplingOptions o;
    o.temperature = 0, o.max_new_tokens = 6;
    CHECK(generate(model, {prompt}, o, true).tokens[0] == generate(model, {prompt}, o, false).tokens[0]);
  }
  // a MoE config that trains its router's load-balancing loss: train_gpt adds none, so it is refused
  hf::Config aux = hf::load_config(kData + "/hf_mixtral/config.json");
  aux.output_router_logits = true;
  CHECK_THROWS_WITH(GPT(hf_llama_gpt_config(aux)), Catch::Contains("output_router_logits"));
  aux.output_router_logits = false;
  CHECK(GPT(hf_llama_gpt_config(aux)).config().arch == "mixtral");
  // sizes no model could have: -1, before anything is allocated
  nn::LlamaConfig huge;
  huge.vocab_size = 0;
  CHECK(nn::num_parameters(huge) == -1);
  huge = nn::LlamaConfig{};
  huge.hidden_size = int64_t{1} << 40;
  CHECK(nn::num_parameters(huge) == -1);
  huge = nn::LlamaConfig{};
  huge.num_hidden_layers = int64_t{1} << 39, huge.hidden_size = int64_t{1} << 16;  // 2^71 parameters
  CHECK(nn::num_parameters(huge) == -1);
  huge = nn::LlamaConfig{};  // Llama 2 7B's sizes: 6,738,415,616 parameters
  CHECK(nn::num_parameters(huge) == 6738415616);
}

TEST_CASE(
    "GPT arch llama: a windowed export is Mistral's, a fine-tuned export keeps the source's BOS and EOS",
    "[hf][gpt]") {
  GPTConfig c;
  c.arch = "llama", c.vocab_size = 50, c.context = 24, c.n_layer = 1, c.n_head = 2, c.d_model = 16;
  c.window = 8;
  GPT model(c, 3);
  TempDir dir("gpt_llama_window_hf");
  save_hf_gpt(model, dir.path.string());
  // transformers' LlamaForCausalLM would read this folder without its window: it is a Mistral
  const std::string text = file_bytes(dir.file("config.json"));
  CHECK(text.find(R"("model_type": "mistral")") != std::string::npos);
  CHECK(text.find("MistralForCausalLM") != std::string::npos);
  CHECK(text.find(R"("sliding_window": 8)") != std::string::npos);
  CHECK(load_hf_gpt(dir.path.string())->config().window == 8);

  // `gpt train --init-from-hf hf_llama --save-hf`: the source's ids (bos 991, eos 992), not null
  const hf::Config source = hf::load_config(kData + "/hf_llama/config.json");
  REQUIRE(source.bos_token_id == std::vector<int64_t>{991});
  auto llama = load_hf_gpt(kData + "/hf_llama");
  TempDir out("gpt_llama_ids_hf");
  save_hf_gpt(*llama, out.path.string(), DType::Float32, -1, &source);
  hf::Config saved = hf::load_config(out.file("config.json"));
  CHECK(saved.bos_token_id == std::vector<int64_t>{991});
  CHECK(saved.eos_token_id == std::vector<int64_t>{992});
  // without a source (`gpt export --hf` of a checkpoint), the tokenizer's BOS and EOS where it has them
  const auto tok = hf::load_tokenizer(kData + "/hf_llama");
  save_hf_gpt(*llama, out.path.string(), DType::Float32, tok->eos_id().value_or(-1), nullptr,
              tok->bos_id().value_or(-1));
  saved = hf::load_config(out.file("config.json"));
  CHECK(saved.bos_token_id == std::vector<int64_t>{991});
  CHECK(saved.eos_token_id == std::vector<int64_t>{992});
  save_hf_gpt(*llama, out.path.string());
  saved = hf::load_config(out.file("config.json"));
  CHECK(saved.bos_token_id.empty());
  CHECK(saved.eos_token_id.empty());
}

TEST_CASE("hf: a model converted to bfloat16 or float16 after loading stays near transformers' logits",
          "[hf][gpt]") {
  NoGradGuard no_grad;
  for (const char* name : {"hf_gpt2", "hf_llama"}) {
    const nn::Safetensors want = nn::load_safetensors(kData + "/" + name + "_expected.safetensors");
    const Tensor& expected = want.tensors.at("logits");
    const double scale = ops::amax(ops::abs(expected), {}).item<double>();
    for (DType dtype : {DType::BFloat16, DType::Float16}) {
      CAPTURE(name, dtype_name(dtype));
      auto model = load_hf_gpt(kData + "/" + name);
      model->to(dtype);
      const Tensor got = model->forward(want.tensors.at("ids")).data();
      CHECK(got.dtype() == dtype);
      const double err = ops::amax(ops::abs(got.to(DType::Float32) - expected), {}).item<double>();
      CAPTURE(err, scale);
      // a few roundings of 2^-8 (bf16) or 2^-11 (f16) relative through two blocks
      CHECK(err < (dtype == DType::BFloat16 ? 0.03 : 0.005) * scale);
      CHECK(err > 0);  // it did compute in 16 bits
    }
  }
}

#endif
