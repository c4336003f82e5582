// Llama-family checkpoints in the Hugging Face layout (issue 41): tests/data/hf_llama (grouped-query,
// untied, two shards) and hf_llama_tied (tied embeddings, head_dim != hidden / heads, bfloat16 on disk) were
// written by transformers, and hf_llama_expected.safetensors holds what transformers computes with them
// (tests/fixtures/make_hf_llama.py); the family rows' fixtures (hf_qwen2, hf_qwen3, hf_gemma, hf_granite,
// hf_smollm3, hf_phi3, hf_phi3_longrope, hf_olmo2, hf_gemma2, hf_gemma3_text, hf_llama_yarn,
// hf_llama_yarn_mscale, hf_llama_dynamic, hf_llama_rope) likewise.
#ifdef SACCADE_HAVE_HF
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "autograd/grad_mode.h"
#include "helpers.h"
#include "hf/llama.h"
#include "hf_family.h"
#include "hf_fixture.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "temp_dir.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::check_adamw_losses;
using saccade::testing::check_family_fixture;
using saccade::testing::check_greedy;
using saccade::testing::check_written_as;
using saccade::testing::file_bytes;
using saccade::testing::greedy;
using saccade::testing::replaced;
using saccade::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kData = SACCADE_TEST_DATA_DIR;

const nn::Safetensors& expected() {
  static const nn::Safetensors e = nn::load_safetensors(kData + "/hf_llama_expected.safetensors");
  return e;
}

// A copy of the fixture folder tests/data/`name` in a new temporary folder.
void copy_fixture(const std::string& name, const TempDir& to) {
  for (const auto& e : fs::directory_iterator(kData + "/" + name))
    fs::copy_file(e.path(), to.path / e.path().filename());
}

// What `f` writes to stderr (file descriptor 2), read back from a file it is sent to meanwhile.
std::string stderr_of(const std::function<void()>& f) {
  TempDir d("hf_stderr");
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int file = ::open(d.file("err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE((saved >= 0 && file >= 0));
  ::dup2(file, 2);
  ::close(file);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  return file_bytes(d.file("err"));
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
  // a rotary base at or below 1, in either spelling, is refused naming the file (RotaryEmbedding would
  // refuse it later, naming no file)
  for (const char* theta : {"1.0", "1e-45", "0.5"}) {
    CHECK_THROWS_WITH(
        hf::parse_config(edited("\"rope_theta\": 500.0", fmt::format("\"rope_theta\": {}", theta)),
                         "x/config.json"),
        Catch::Contains("x/config.json") && Catch::Contains("rope_parameters.rope_theta") &&
            Catch::Contains("is not a finite rotary base above 1"));
    const std::string top = old_style;
    CHECK_THROWS_WITH(
        hf::parse_config(std::string(top).replace(top.find("250.0"), 5, theta), "x/config.json"),
        Catch::Contains("x/config.json") && Catch::Contains("\"rope_theta\": ") &&
            Catch::Contains("is not a finite rotary base above 1"));
  }
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
  check_greedy(*model, expected());
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

TEST_CASE("hf config: rope_type wins over the older type, as transformers reads rope_parameters", "[hf]") {
  const std::string text = file_bytes(kData + "/hf_llama/config.json");
  const std::string both =
      replaced(text, R"("rope_type": "default")", R"("type": "linear", "rope_type": "default")");
  CHECK(hf::parse_config(both).rope_theta == 500.0);
  CHECK(hf::parse_config(both).rope_scaling == ops::RopeScaling{});
  const std::string other = replaced(text, R"("rope_type": "default")",
                                     R"("rope_type": "linear", "type": "default", "factor": 2.0)");
  CHECK(hf::parse_config(other).rope_scaling ==
        ops::RopeScaling{.type = ops::RopeScaling::Type::Linear, .factor = 2.0});
  CHECK_THROWS_WITH(hf::parse_config(replaced(other, R"("rope_type": "linear")", R"("rope_type": "mrope")"),
                                     "x/config.json"),
                    Catch::Contains("x/config.json") && Catch::Contains("rope_parameters") &&
                        Catch::Contains("'mrope' is not supported"));
  // the older spelling alone still counts
  const std::string old = replaced(text, R"("rope_type": "default")", R"("type": "dynamic", "factor": 2.0)");
  CHECK(hf::parse_config(old).rope_scaling.type == ops::RopeScaling::Type::Dynamic);
  CHECK_THROWS_WITH(hf::parse_config(replaced(text, R"("rope_type": "default")", R"("type": "mrope")")),
                    Catch::Contains("'mrope' is not supported"));
}

TEST_CASE(
    "hf Llama: a 'llama' file's sliding_window is ignored, as transformers ignores it, and 'mistral' has one",
    "[hf]") {
  NoGradGuard no_grad;
  const Tensor& ids = expected().tensors.at("ids");  // 12 positions, past a window of 4
  TempDir d("hf_llama_window");
  copy_fixture("hf_llama", d);
  const std::string text = file_bytes(d.file("config.json"));
  std::ofstream(d.file("config.json"), std::ios::trunc) << replaced(text, "{", R"({"sliding_window": 4,)");
  const std::string warning =
      stderr_of([&] { CHECK(hf::load_config(d.file("config.json")).sliding_window == 0); });
  CHECK_THAT(warning, Catch::Contains("warning") && Catch::Contains(d.file("config.json")) &&
                          Catch::Contains("\"sliding_window\": 4 ignored") && Catch::Contains("mistral"));
  // transformers' LlamaForCausalLM computes these logits with or without the key
  CHECK(allclose(hf::load_llama(d.path.string())->forward(ids).data(), expected().tensors.at("logits"), 1e-5,
                 1e-5));

  // "mistral": the same blocks with MistralConfig's window (absent: 4096, null: none)
  const std::string mistral =
      replaced(replaced(text, R"("model_type": "llama")", R"("model_type": "mistral")"),
               "\"LlamaForCausalLM\"", "\"MistralForCausalLM\"");
  CHECK(hf::parse_config(mistral).sliding_window == 4096);
  CHECK(hf::parse_config(mistral).describe().rfind("mistral: 2 layers", 0) == 0);
  CHECK(hf::parse_config(replaced(mistral, "{", R"({"sliding_window": null,)")).sliding_window == 0);
  const hf::Config m = hf::parse_config(replaced(mistral, "{", R"({"sliding_window": 4,)"));
  CHECK(m.model_type == "mistral");
  CHECK(m.architecture == hf::Architecture::Llama);
  CHECK(m.sliding_window == 4);
  CHECK(hf::llama_config(m).sliding_window == 4);
  // MistralConfig's num_key_value_heads is 8 when absent (and the heads when null)
  const std::string no_kv = replaced(mistral, R"("num_key_value_heads": 2,)", "");
  CHECK_THROWS_WITH(hf::parse_config(no_kv), Catch::Contains("8 does not divide num_attention_heads 4"));
  CHECK(hf::parse_config(replaced(mistral, R"("num_key_value_heads": 2)", R"("num_key_value_heads": null)"))
            .num_key_value_heads == 4);
  CHECK_THROWS_WITH(hf::parse_config(replaced(mistral, "\"MistralForCausalLM\"", "\"LlamaForCausalLM\"")),
                    Catch::Contains("architectures") && Catch::Contains("LlamaForCausalLM"));
  // the mistral folder runs with the window: the logits of the first 4 positions are transformers'
  // windowless ones, later ones are not
  std::ofstream(d.file("config.json"), std::ios::trunc) << replaced(mistral, "{", R"({"sliding_window": 4,)");
  const Tensor windowed = hf::load_llama(d.path.string())->forward(ids).data();
  const Tensor& want = expected().tensors.at("logits");
  CHECK(allclose(windowed.narrow(1, 0, 4).contiguous(), want.narrow(1, 0, 4).contiguous(), 1e-5, 1e-5));
  CHECK_FALSE(allclose(windowed.narrow(1, 4, 8).contiguous(), want.narrow(1, 4, 8).contiguous(), 1e-3, 1e-3));

  // a windowed model is written as the one transformers runs with a window, and reads back the same
  const std::string written = hf::config_json(m);
  CHECK(written.find(R"("model_type": "mistral")") != std::string::npos);
  CHECK(written.find("MistralForCausalLM") != std::string::npos);
  CHECK(hf::parse_config(written).sliding_window == 4);
  CHECK(hf::config_json(hf::parse_config(written)) == written);
  nn::LlamaConfig l = hf::llama_config(hf::load_config(kData + "/hf_llama/config.json"));
  CHECK(hf::llama_hf_config(l).model_type == "llama");
  l.sliding_window = 8;
  CHECK(hf::llama_hf_config(l).model_type == "mistral");
  hf::Config biased = hf::llama_hf_config(l);
  biased.attention_bias = true;
  CHECK_THROWS_WITH(hf::config_json(biased), Catch::Contains("hf::config_json") && Catch::Contains("biases"));
}

TEST_CASE("hf Qwen2: a row of the family table, Llama's blocks with biases on q, k and v only", "[hf]") {
  // hf_llama's config.json as Qwen2Config writes it
  const std::string llama = file_bytes(kData + "/hf_llama/config.json");
  const std::string qwen2 = replaced(replaced(llama, R"("model_type": "llama")", R"("model_type": "qwen2")"),
                                     "\"LlamaForCausalLM\"", "\"Qwen2ForCausalLM\"");
  const hf::Config c = hf::parse_config(qwen2);
  CHECK(c.model_type == "qwen2");
  CHECK(c.architecture == hf::Architecture::Llama);
  CHECK(c.qkv_bias);
  CHECK_FALSE(c.attention_bias);
  CHECK_FALSE(hf::parse_config(llama).qkv_bias);
  const std::vector<std::string> types = hf::supported_model_types();
  CHECK(std::find(types.begin(), types.end(), "qwen2") != types.end());

  // the model has q, k and v biases and no o_proj or MLP bias, as transformers' Qwen2Attention and Qwen2MLP
  nn::LlamaForCausalLM model(hf::llama_config(c));
  std::vector<std::string> biases;
  for (const auto& [name, p] : model.named_parameters())
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0) biases.push_back(name);
  CHECK(biases == std::vector<std::string>{
                      "model.layers.0.self_attn.q_proj.bias", "model.layers.0.self_attn.k_proj.bias",
                      "model.layers.0.self_attn.v_proj.bias", "model.layers.1.self_attn.q_proj.bias",
                      "model.layers.1.self_attn.k_proj.bias", "model.layers.1.self_attn.v_proj.bias"});

  // written back as the row that holds the layout, and read back the same
  const std::string written = hf::config_json(hf::llama_hf_config(model.config()));
  CHECK(written.find(R"("model_type": "qwen2")") != std::string::npos);
  CHECK(written.find("Qwen2ForCausalLM") != std::string::npos);
  CHECK(hf::parse_config(written).qkv_bias);
  CHECK(hf::config_json(hf::parse_config(written)) == written);

  // sliding layers as Qwen2Config makes them: with use_sliding_window, the layers from max_window_layers on
  const std::string slides =
      replaced(qwen2, "{", R"({"use_sliding_window": true, "max_window_layers": 1, "sliding_window": 4,)");
  const hf::Config slid = hf::parse_config(slides);
  CHECK((slid.sliding_window == 4 &&
         slid.layer_types == std::vector<std::string>{"full_attention", "sliding_attention"}));
  nn::LlamaForCausalLM slid_model(hf::llama_config(slid));
  CHECK((slid_model.model->layers[0]->self_attn->window == 0 &&
         slid_model.model->layers[1]->self_attn->window == 4));
  check_written_as(slid_model, "qwen2", "Qwen2ForCausalLM");
  CHECK(hf::parse_config(hf::config_json(slid)).layer_types == slid.layer_types);
  // ... while nothing slides without use_sliding_window (layer_types alone), without a window (null), or with
  // every layer below max_window_layers
  CHECK(hf::parse_config(replaced(qwen2, "{", R"({"layer_types": ["full_attention", "sliding_attention"],)"))
            .layer_types.empty());
  CHECK(hf::parse_config(replaced(slides, R"("sliding_window": 4)", R"("sliding_window": null)"))
            .sliding_window == 0);
  CHECK(hf::parse_config(replaced(slides, R"("max_window_layers": 1)", R"("max_window_layers": 2)"))
            .sliding_window == 0);
  CHECK(hf::parse_config(replaced(qwen2, "{", R"({"layer_types": ["full_attention", "full_attention"],)"))
            .qkv_bias);
  CHECK_THROWS_WITH(hf::parse_config(replaced(qwen2, "\"Qwen2ForCausalLM\"", "\"LlamaForCausalLM\"")),
                    Catch::Contains("architectures") && Catch::Contains("Qwen2ForCausalLM"));
  // an unknown model_type names every row
  CHECK_THROWS_WITH(
      hf::parse_config(replaced(llama, R"("model_type": "llama")", R"("model_type": "deepseek_v3")")),
      Catch::Contains("'deepseek_v3' is not supported") && Catch::Contains("'qwen2'") &&
          Catch::Contains("'qwen3'") && Catch::Contains("'mistral'"));
}

TEST_CASE(
    "hf Qwen2: transformers' logits, greedy continuations (with and without the KV cache), ten AdamW "
    "steps, and an export that reads back",
    "[hf]") {
  // tests/data/hf_qwen2: written by transformers' Qwen2ForCausalLM (tests/fixtures/make_hf_families.py
  // qwen2); without the q, k and v biases the logits are not transformers' (each bias shows in them)
  check_family_fixture("hf_qwen2", "qwen2", "Qwen2ForCausalLM", [](nn::LlamaForCausalLM& model) {
    Tensor b = model.model->layers[1]->self_attn->k_proj->bias.data();
    ops::fill_(b, 0.0);
  });
}

TEST_CASE(
    "hf Qwen2 with sliding layers: transformers' logits, greedy continuations (with and without the KV "
    "cache), "
    "ten AdamW steps, and an export that reads back",
    "[hf]") {
  // tests/data/hf_qwen2_sliding: written by transformers' Qwen2ForCausalLM with use_sliding_window and
  // max_window_layers 1 (make_hf_families.py qwen2_sliding); without the window in layer 1 the logits differ
  check_family_fixture("hf_qwen2_sliding", "qwen2", "Qwen2ForCausalLM",
                       [](nn::LlamaForCausalLM& model) { model.model->layers[1]->self_attn->window = 0; });
  CHECK(hf::load_config(kData + "/hf_qwen2_sliding/config.json").layer_types ==
        std::vector<std::string>{"full_attention", "sliding_attention"});
}

TEST_CASE("hf Qwen3: a row of the family table, Llama's blocks with RMSNorm on each head's queries and keys",
          "[hf]") {
  // tests/data/hf_qwen3/config.json: written by transformers' Qwen3Config (tests/fixtures/make_hf_families.py
  // qwen3)
  const std::string qwen3 = file_bytes(kData + "/hf_qwen3/config.json");
  const hf::Config c = hf::parse_config(qwen3);
  CHECK(c.model_type == "qwen3");
  CHECK(c.architecture == hf::Architecture::Llama);
  CHECK(c.qk_norm);
  CHECK_FALSE((c.attention_bias || c.qkv_bias || c.mlp_bias));
  CHECK(c.head_dim == 16);  // != hidden_size / num_attention_heads
  CHECK(c.rope_theta == 1e6);
  CHECK_FALSE(hf::load_config(kData + "/hf_llama/config.json").qk_norm);
  const std::vector<std::string> types = hf::supported_model_types();
  CHECK(std::find(types.begin(), types.end(), "qwen3") != types.end());
  // Qwen3Config's defaults: head_dim 128 (not hidden / heads) and 32 key/value heads when absent
  CHECK(hf::parse_config(replaced(qwen3, R"("head_dim": 16,)", "")).head_dim == 128);
  CHECK(hf::parse_config(replaced(replaced(qwen3, R"("num_key_value_heads": 2,)", ""),
                                  R"("num_attention_heads": 4,)", R"("num_attention_heads": 64,)"))
            .num_key_value_heads == 32);

  // the model has q_norm and k_norm over head_dim and no bias, as transformers' Qwen3Attention
  nn::LlamaForCausalLM model(hf::llama_config(c));
  std::vector<std::string> norms;
  for (const auto& [name, p] : model.named_parameters()) {
    CHECK(name.find("bias") == std::string::npos);
    if (name.find("_norm.") != std::string::npos) {
      CHECK(p.shape() == Shape{16});
      norms.push_back(name);
    }
  }
  CHECK(norms == std::vector<std::string>{
                     "model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight",
                     "model.layers.1.self_attn.q_norm.weight", "model.layers.1.self_attn.k_norm.weight"});

  // written back as the row that holds the layout, and read back the same
  const std::string written = hf::config_json(hf::llama_hf_config(model.config()));
  CHECK(written.find(R"("model_type": "qwen3")") != std::string::npos);
  CHECK(written.find("Qwen3ForCausalLM") != std::string::npos);
  CHECK(hf::parse_config(written).qk_norm);
  CHECK(hf::config_json(hf::parse_config(written)) == written);
  // attention_bias puts biases on all four projections (Qwen3Attention), kept both ways; mlp_bias is ignored
  const hf::Config biased =
      hf::parse_config(replaced(qwen3, R"("attention_bias": false)", R"("attention_bias": true)"));
  CHECK((biased.attention_bias && !biased.qkv_bias && biased.qk_norm));
  CHECK(nn::LlamaForCausalLM(hf::llama_config(biased)).model->layers[0]->self_attn->o_proj->bias.defined());
  CHECK(hf::parse_config(hf::config_json(biased)).attention_bias);
  const std::string warned = stderr_of(
      [&] { CHECK_FALSE(hf::parse_config(replaced(qwen3, "{", R"({"mlp_bias": true,)")).mlp_bias); });
  CHECK(warned.find("\"mlp_bias\"") != std::string::npos);

  // sliding layers as Qwen3Config makes them (layer_types, when there, is what transformers runs:
  // use_sliding_window and max_window_layers only make the default one)
  const std::string sliding =
      replaced(replaced(replaced(qwen3, R"("use_sliding_window": false)", R"("use_sliding_window": true)"),
                        R"("max_window_layers": 28)", R"("max_window_layers": 1)"),
               R"("sliding_window": null)", R"("sliding_window": 8)");
  CHECK(hf::parse_config(sliding).sliding_window == 0);  // its layer_types: full, full
  const hf::Config by_default = hf::parse_config(replaced(sliding, R"("layer_types": [
    "full_attention",
    "full_attention"
  ],)",
                                                          ""));
  CHECK((by_default.sliding_window == 8 &&
         by_default.layer_types == std::vector<std::string>{"full_attention", "sliding_attention"}));
  CHECK_THROWS_WITH(hf::parse_config(replaced(qwen3, R"("full_attention"
  ])",
                                              R"("global"
  ])")),
                    Catch::Contains("layer_types") && Catch::Contains("\"global\""));
  CHECK_THROWS_WITH(hf::parse_config(replaced(qwen3, "\"Qwen3ForCausalLM\"", "\"Qwen2ForCausalLM\"")),
                    Catch::Contains("architectures") && Catch::Contains("Qwen3ForCausalLM"));
  // q and k norms with what no transformers Qwen3 has
  hf::Config mlp = c;
  mlp.mlp_bias = true;
  CHECK_THROWS_WITH(hf::config_json(mlp),
                    Catch::Contains("hf::config_json") && Catch::Contains("MLP biases"));
}

TEST_CASE(
    "hf Qwen3: transformers' logits, greedy continuations (with and without the KV cache), ten AdamW "
    "steps, and an export that reads back",
    "[hf]") {
  // tests/data/hf_qwen3: written by transformers' Qwen3ForCausalLM (tests/fixtures/make_hf_families.py
  // qwen3); with another q_norm weight the logits are not transformers' (the norms are applied)
  check_family_fixture("hf_qwen3", "qwen3", "Qwen3ForCausalLM", [](nn::LlamaForCausalLM& model) {
    Tensor w = model.model->layers[1]->self_attn->q_norm->weight.data();
    ops::fill_(w, 1.0);
  });
  CHECK(hf::load_config(kData + "/hf_qwen3/config.json").qk_norm);
}

TEST_CASE("hf Gemma: a row of the family table, (1 + w) norms, sqrt(d) embeddings and a GeGLU MLP", "[hf]") {
  // tests/data/hf_gemma/config.json: written by transformers' GemmaConfig (tests/fixtures/make_hf_families.py
  // gemma)
  const std::string gemma = file_bytes(kData + "/hf_gemma/config.json");
  const hf::Config c = hf::parse_config(gemma);
  CHECK(c.model_type == "gemma");
  CHECK(c.architecture == hf::Architecture::Llama);
  CHECK(c.norm_unit_offset);
  CHECK(c.embedding_multiplier == std::sqrt(32.0));
  CHECK(c.hidden_act == "gelu_pytorch_tanh");
  CHECK(c.pad_token_id == std::optional<int64_t>(0));
  CHECK((c.head_dim == 16 && c.num_key_value_heads == 1 && c.tie_word_embeddings));
  CHECK_FALSE(hf::load_config(kData + "/hf_llama/config.json").pad_token_id.has_value());
  // GemmaConfig's defaults when absent: head_dim 256, 16 key/value heads, tied, pad 0; a legacy "gelu" is
  // its tanh form (GemmaConfig's own rule)
  const hf::Config bare = hf::parse_config(
      replaced(replaced(replaced(gemma, R"("head_dim": 16,)", ""), R"("tie_word_embeddings": true,)", ""),
               R"("pad_token_id": 0,)", ""));
  CHECK((bare.head_dim == 256 && bare.tie_word_embeddings));
  CHECK(bare.pad_token_id == std::optional<int64_t>(0));
  CHECK(hf::parse_config(replaced(replaced(gemma, R"("num_key_value_heads": 1,)", ""),
                                  R"("num_attention_heads": 4,)", R"("num_attention_heads": 32,)"))
            .num_key_value_heads == 16);
  CHECK(hf::parse_config(replaced(gemma, R"("gelu_pytorch_tanh")", R"("gelu")")).hidden_act ==
        "gelu_pytorch_tanh");
  CHECK(hf::parse_config(replaced(gemma, R"("pad_token_id": 0)", R"("pad_token_id": null)")).pad_token_id ==
        std::nullopt);
  CHECK_THROWS_WITH(hf::parse_config(replaced(gemma, R"("pad_token_id": 0)", R"("pad_token_id": 96)")),
                    Catch::Contains("pad_token_id") && Catch::Contains("vocab_size"));
  CHECK_THROWS_WITH(hf::parse_config(replaced(gemma, R"("use_bidirectional_attention": null)",
                                              R"("use_bidirectional_attention": true)")),
                    Catch::Contains("use_bidirectional_attention") && Catch::Contains("not supported"));
  CHECK_THROWS_WITH(hf::parse_config(replaced(gemma, R"("gelu_pytorch_tanh")", R"("relu")")),
                    Catch::Contains("hidden_act") && Catch::Contains("'relu' is not supported"));

  // the model: norms start at 0 (1 + w = 1), the embedding's padding row is the pad token
  nn::LlamaForCausalLM model(hf::llama_config(c));
  const auto rms = [](const std::shared_ptr<nn::UnaryModule>& m) {
    return std::dynamic_pointer_cast<nn::RMSNorm>(m);
  };
  REQUIRE((rms(model.model->norm) && rms(model.model->layers[0]->input_layernorm)));
  CHECK(rms(model.model->norm)->unit_offset());
  CHECK(ops::sum(ops::abs(rms(model.model->layers[0]->input_layernorm)->weight.data())).item<float>() ==
        0.0f);
  CHECK(model.model->embed_tokens->padding_idx() == std::optional<int64_t>(0));
  CHECK(model.model->layers[0]->mlp->hidden_act() == "gelu_pytorch_tanh");
  // written back as gemma, and read back the same
  check_written_as(model, "gemma", "GemmaForCausalLM");
  hf::Config exact = c;
  exact.hidden_act = "gelu";  // GemmaConfig would read it as the tanh form
  CHECK_THROWS_WITH(hf::config_json(exact), Catch::Contains("hf::config_json") && Catch::Contains("GELU"));
  hf::Config windowed = c;
  windowed.sliding_window = 8;
  CHECK_THROWS_WITH(hf::config_json(windowed), Catch::Contains("hf::config_json") &&
                                                   Catch::Contains("window") && Catch::Contains("gemma"));
}

TEST_CASE(
    "hf Gemma: transformers' logits, greedy continuations (with and without the KV cache), ten AdamW steps "
    "with a pad token in the batch, and an export that reads back",
    "[hf]") {
  // tests/data/hf_gemma: written by transformers' GemmaForCausalLM (tests/fixtures/make_hf_families.py
  // gemma); the stored norm weight is an offset from one (set to 1 it doubles the scale: other logits); the
  // training batch holds the pad token 0, whose embedding row transformers never updates but by weight decay.
  // The logits to 2e-5: this fixture's embeddings, scaled by sqrt(32), carry float32's reordering further
  // than the other rows', past 1e-5 on a CPU without AVX-512 (OpenBLAS's Haswell GEMM kernels, on AMD EPYC),
  // within it with AVX-512's
  check_family_fixture(
      "hf_gemma", "gemma", "GemmaForCausalLM",
      [](nn::LlamaForCausalLM& model) {
        Tensor w =
            std::dynamic_pointer_cast<nn::RMSNorm>(model.model->layers[1]->input_layernorm)->weight.data();
        ops::fill_(w, 1.0);
      },
      2e-5);
}

TEST_CASE("hf Granite: a row of the family table, Llama's blocks with four multipliers", "[hf]") {
  // tests/data/hf_granite/config.json: written by transformers' GraniteConfig (make_hf_families.py granite)
  const std::string granite = file_bytes(kData + "/hf_granite/config.json");
  const hf::Config c = hf::parse_config(granite);
  CHECK(c.model_type == "granite");
  CHECK((c.embedding_multiplier == 12.0 && c.residual_multiplier == 0.22 && c.attention_multiplier == 0.25 &&
         c.logits_scaling == 2.0));
  CHECK_FALSE(c.norm_unit_offset);
  // GraniteConfig's defaults: 1.0 each, the attention's too (not 1/sqrt(head_dim))
  std::string bare = granite;
  for (const char* key : {R"("embedding_multiplier": 12.0,)", R"("residual_multiplier": 0.22,)",
                          R"("attention_multiplier": 0.25,)", R"("logits_scaling": 2.0,)"})
    bare = replaced(bare, key, "");
  const hf::Config ones = hf::parse_config(bare);
  CHECK((ones.embedding_multiplier == 1.0 && ones.residual_multiplier == 1.0 &&
         ones.attention_multiplier == 1.0 && ones.logits_scaling == 1.0));
  CHECK(hf::llama_family(ones) == "granite");
  CHECK_THROWS_WITH(hf::parse_config(replaced(granite, R"("logits_scaling": 2.0)", R"("logits_scaling": 0)")),
                    Catch::Contains("logits_scaling") && Catch::Contains("not a positive number"));
  nn::LlamaForCausalLM model(hf::llama_config(c));
  CHECK(model.model->layers[0]->self_attn->scale == 0.25);
  CHECK(model.model->layers[1]->residual_multiplier == 0.22);
  check_written_as(model, "granite", "GraniteForCausalLM");
  // a Llama has none of them; multipliers with Qwen3's q and k norms have no transformers config
  CHECK(hf::llama_family(hf::load_config(kData + "/hf_llama/config.json")) == "llama");
  hf::Config normed = c;
  normed.qk_norm = true;
  CHECK_THROWS_WITH(hf::config_json(normed),
                    Catch::Contains("hf::config_json") && Catch::Contains("Granite's multipliers"));
}

TEST_CASE(
    "hf Granite: transformers' logits, greedy continuations (with and without the KV cache), ten AdamW "
    "steps, and an export that reads back",
    "[hf]") {
  // tests/data/hf_granite: written by transformers' GraniteForCausalLM (tests/fixtures/make_hf_families.py
  // granite); without the residual multiplier in one block the logits are not transformers'
  check_family_fixture("hf_granite", "granite", "GraniteForCausalLM", [](nn::LlamaForCausalLM& model) {
    model.model->layers[1]->residual_multiplier = 1.0;
  });
}

TEST_CASE("hf SmolLM3: a row of the family table, Llama's blocks with NoPE layers", "[hf]") {
  // tests/data/hf_smollm3/config.json: written by transformers' SmolLM3Config (make_hf_families.py smollm3)
  const std::string smol = file_bytes(kData + "/hf_smollm3/config.json");
  const hf::Config c = hf::parse_config(smol);
  CHECK(c.model_type == "smollm3");
  CHECK(c.no_rope_layers == std::vector<int64_t>{1, 1, 1, 0});
  CHECK(c.pad_token_id == std::optional<int64_t>(93));
  // absent: from no_rope_layer_interval (SmolLM3Config's rule), every interval-th layer without positions
  const std::string flags = R"("no_rope_layers": [
    1,
    1,
    1,
    0
  ],)";
  CHECK(hf::parse_config(replaced(smol, flags, "")).no_rope_layers == std::vector<int64_t>{1, 1, 1, 0});
  CHECK(hf::parse_config(replaced(replaced(smol, flags, ""), R"("no_rope_layer_interval": 4)",
                                  R"("no_rope_layer_interval": 2)"))
            .no_rope_layers == std::vector<int64_t>{1, 0, 1, 0});
  CHECK_THROWS_WITH(hf::parse_config(replaced(smol, "    0\n  ],", "    2\n  ],")),
                    Catch::Contains("no_rope_layers") && Catch::Contains("not 0 or 1"));
  CHECK_THROWS_WITH(hf::parse_config(replaced(smol, "    1,\n    0\n  ],", "    1\n  ],")),
                    Catch::Contains("no_rope_layers") && Catch::Contains("num_hidden_layers (4)"));
  // SmolLM3Config's pad_token_id 128004 when absent, which a 96-token vocabulary cannot embed
  CHECK_THROWS_WITH(hf::parse_config(replaced(smol, R"("pad_token_id": 93,)", "")),
                    Catch::Contains("pad_token_id") && Catch::Contains("128004"));
  // layer_types alone slides nothing (use_sliding_window is off), nor use_sliding_window without a window
  // (SmolLM3Config's default); with both, by default the NoPE layer slides
  const std::string sliding_types = replaced(smol, R"("full_attention"
  ],)",
                                             R"("sliding_attention"
  ],)");
  CHECK(hf::parse_config(sliding_types).sliding_window == 0);
  const std::string use =
      replaced(sliding_types, R"("use_sliding_window": false)", R"("use_sliding_window": true)");
  CHECK(hf::parse_config(use).sliding_window == 0);
  const hf::Config windowed_nope =
      hf::parse_config(replaced(use, R"("sliding_window": null)", R"("sliding_window": 4)"));
  CHECK((windowed_nope.sliding_window == 4 && windowed_nope.layer_types.back() == "sliding_attention"));
  // the model: no rotary module in layer 3, and the positions matter in the others only
  nn::LlamaForCausalLM model(hf::llama_config(c));
  CHECK(model.model->layers[2]->self_attn->rotary_emb != nullptr);
  CHECK(model.model->layers[3]->self_attn->rotary_emb == nullptr);
  check_written_as(model, "smollm3", "SmolLM3ForCausalLM");
  // its sliding layer written back and read the same
  nn::LlamaForCausalLM windowed_model(hf::llama_config(windowed_nope));
  CHECK((windowed_model.model->layers[3]->self_attn->window == 4 &&
         windowed_model.model->layers[2]->self_attn->window == 0));
  check_written_as(windowed_model, "smollm3", "SmolLM3ForCausalLM");
  CHECK(hf::parse_config(hf::config_json(windowed_nope)).layer_types == windowed_nope.layer_types);
  nn::LlamaConfig bad = model.config();
  bad.no_rope_layers.pop_back();
  CHECK_THROWS_WITH(nn::LlamaForCausalLM(bad), Catch::Contains("no_rope_layers has 3 flags"));
}

TEST_CASE(
    "hf SmolLM3: transformers' logits, greedy continuations (with and without the KV cache), ten AdamW "
    "steps, and an export that reads back",
    "[hf]") {
  // tests/data/hf_smollm3: written by transformers' SmolLM3ForCausalLM (make_hf_families.py smollm3); with
  // rotary positions in its NoPE layer the logits are not transformers'
  check_family_fixture("hf_smollm3", "smollm3", "SmolLM3ForCausalLM", [](nn::LlamaForCausalLM& model) {
    model.model->layers[3]->self_attn->rotary_emb = model.model->layers[2]->self_attn->rotary_emb;
  });
}

TEST_CASE(
    "hf SmolLM3 with a sliding layer: transformers' logits, greedy continuations (with and without the KV "
    "cache), ten AdamW steps, and an export that reads back",
    "[hf]") {
  // tests/data/hf_smollm3_sliding: written by transformers' SmolLM3ForCausalLM with use_sliding_window and a
  // window of 4 (make_hf_families.py smollm3_sliding): its NoPE layer 3 slides; without the window the logits
  // differ
  check_family_fixture("hf_smollm3_sliding", "smollm3", "SmolLM3ForCausalLM",
                       [](nn::LlamaForCausalLM& model) { model.model->layers[3]->self_attn->window = 0; });
}

TEST_CASE("hf Phi-3: a row of the family table, fused q/k/v and gate/up on disk, partial rotation, a window",
          "[hf]") {
  // tests/data/hf_phi3/config.json: written by transformers' Phi3Config (make_hf_families.py phi3)
  const std::string phi3 = file_bytes(kData + "/hf_phi3/config.json");
  const hf::Config c = hf::parse_config(phi3);
  CHECK(c.model_type == "phi3");
  CHECK((c.partial_rotary_factor == 0.75 && c.sliding_window == 8 && c.head_dim == 16));
  // the top-level key alone (published Phi-4-mini files), and Phi3Config's defaults when absent
  const std::string top_only = replaced(phi3, R"(    "partial_rotary_factor": 0.75,
)",
                                        "");
  CHECK(hf::parse_config(top_only).partial_rotary_factor == 0.75);
  CHECK(hf::parse_config(replaced(top_only, R"("partial_rotary_factor": 0.75,)", "")).partial_rotary_factor ==
        1.0);
  CHECK(hf::parse_config(replaced(phi3, R"("sliding_window": 8,)", R"("sliding_window": null,)"))
            .sliding_window == 0);
  CHECK_THROWS_WITH(hf::parse_config(replaced(phi3, R"("pad_token_id": 93,)", "")),
                    Catch::Contains("pad_token_id") && Catch::Contains("32000"));
  // a rotated share that is not whole pairs, and partial rotation in a row whose model rotates whole heads
  CHECK_THROWS_WITH(hf::parse_config(replaced(top_only, R"("partial_rotary_factor": 0.75,)",
                                              R"("partial_rotary_factor": 0.7,)")),
                    Catch::Contains("partial_rotary_factor") && Catch::Contains("rotates 11 dims"));
  std::string llama = file_bytes(kData + "/hf_llama/config.json");
  CHECK_THROWS_WITH(hf::parse_config(replaced(llama, "{", R"({"partial_rotary_factor": 0.5,)")),
                    Catch::Contains("partial_rotary_factor") && Catch::Contains("not supported for 'llama'"));
  CHECK_THROWS_WITH(  // longrope without its factors
      hf::parse_config(replaced(phi3, R"("rope_type": "default")", R"("rope_type": "longrope")")),
      Catch::Contains("rope_parameters.short_factor") && Catch::Contains("missing"));

  // the model: 12 of 16 dims rotate; the name table splits qkv_proj into 64, 32 and 32 rows (fewer key/value
  // heads) and gate_up_proj in halves
  nn::LlamaForCausalLM model(hf::llama_config(c));
  CHECK(model.model->layers[0]->self_attn->rotary_emb->rotary_dim() == 12);
  const std::vector<hf::NameRule> table = hf::llama_name_table(model);
  const auto row = [&](const std::string& name) {
    return *std::find_if(table.begin(), table.end(), [&](const hf::NameRule& r) { return r.hf == name; });
  };
  CHECK(row("model.layers.1.self_attn.qkv_proj.weight").ours ==
        std::vector<std::string>{"model.layers.1.self_attn.q_proj.weight",
                                 "model.layers.1.self_attn.k_proj.weight",
                                 "model.layers.1.self_attn.v_proj.weight"});
  CHECK(row("model.layers.0.mlp.gate_up_proj.weight").ours ==
        std::vector<std::string>{"model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"});
  CHECK(table.size() == 1 + 2 * 6 + 1);  // embed, per layer 2 norms + qkv + o + gate_up + down, norm (tied)
  check_written_as(model, "phi3", "Phi3ForCausalLM");
  // whole heads and no window: still written as the Phi-3 it was read as, fused on disk
  nn::LlamaConfig whole = model.config();
  whole.partial_rotary_factor = 1.0;
  whole.sliding_window = 0;
  CHECK(hf::llama_hf_config(whole).model_type == "phi3");
  whole.model_type.clear();
  CHECK(hf::llama_hf_config(whole).model_type == "llama");
  hf::Config biased = c;
  biased.attention_bias = true;
  CHECK_THROWS_WITH(hf::config_json(biased), Catch::Contains("hf::config_json") && Catch::Contains("biases"));
}

TEST_CASE(
    "hf Phi-3: transformers' logits, greedy continuations (with and without the KV cache), ten AdamW steps, "
    "and an export that reads back",
    "[hf]") {
  // tests/data/hf_phi3: written by transformers' Phi3ForCausalLM (make_hf_families.py phi3); the 22-token
  // greedy run passes its window of 8; with the whole head rotated the logits are not transformers'
  check_family_fixture("hf_phi3", "phi3", "Phi3ForCausalLM", [](nn::LlamaForCausalLM& model) {
    model.model->layers[0]->self_attn->rotary_emb = std::make_shared<nn::RotaryEmbedding>(16, 10000.0);
  });
}

TEST_CASE(
    "hf Phi-3 LongRoPE: short factors within the original context, long ones past it, as transformers "
    "(logits, "
    "greedy crossing it, export, AdamW)",
    "[hf]") {
  // tests/data/hf_phi3_longrope (make_hf_families.py phi3_longrope): an original context of 16 of 64
  // positions; logits of 12 tokens (short factors), logits_long of 20 (long), a greedy run of 12 + 10
  const std::string text = file_bytes(kData + "/hf_phi3_longrope/config.json");
  const hf::Config c = hf::parse_config(text);
  const ops::RopeScaling& s = c.rope_scaling;
  REQUIRE(s.type == ops::RopeScaling::Type::LongRope);
  CHECK((s.original_max_position_embeddings == 16 && s.factor == 4.0));
  CHECK(s.long_factor == std::vector<double>{1, 2, 4, 8, 16, 32});
  CHECK(ops::rotary_attention_factor(s) == Approx(std::sqrt(1 + std::log(4.0) / std::log(16.0))));
  CHECK(ops::rope_scaling_at(s, 16) == s);
  CHECK(ops::rope_scaling_at(s, 17).short_factor == s.long_factor);
  // Phi3Config's own original_max_position_embeddings (4096 when absent) wins over the rope dict's
  const std::string no_top = replaced(text, R"("original_max_position_embeddings": 16,)", "");
  CHECK(hf::parse_config(no_top).rope_scaling.original_max_position_embeddings == 4096);
  CHECK(ops::rotary_attention_factor(hf::parse_config(no_top).rope_scaling) == 1.0);  // factor 64/4096 < 1
  CHECK_THROWS_WITH(
      hf::parse_config(replaced(text, "32.0", "-32.0")),
      Catch::Contains("rope_parameters.long_factor") && Catch::Contains("-32 is not a positive"));
  // a factor a rotated pair: the reader names the file and the key (it took the list, and the model refused
  // it naming no file, before: tests/fuzz/libfuzzer/regressions/hf_config/longrope_factor_count)
  CHECK_THROWS_WITH(hf::parse_config(replaced(text, ",\n      32.0", "")),
                    Catch::Contains("config.json") && Catch::Contains("rope_parameters.long_factor") &&
                        Catch::Contains("5 factors for 12 rotated dims a head (need one a pair: 6)"));
  nn::LlamaConfig short_list = hf::llama_config(c);
  short_list.rope_scaling.short_factor.pop_back();
  CHECK_THROWS_WITH(nn::LlamaForCausalLM(short_list),
                    Catch::Contains("longrope") && Catch::Contains("rotary_dim / 2 = 6"));

  const nn::Safetensors want = nn::load_safetensors(kData + "/hf_phi3_longrope_expected.safetensors");
  const Tensor &ids = want.tensors.at("ids"), &ids_long = want.tensors.at("ids_long");
  auto model = hf::load_llama(kData + "/hf_phi3_longrope", /*strict=*/true);
  {
    NoGradGuard no_grad;
    CHECK(allclose(model->forward(ids).data(), want.tensors.at("logits"), 1e-5, 1e-5));
    CHECK(allclose(model->forward(ids_long).data(), want.tensors.at("logits_long"), 1e-5, 1e-5));
  }
  // transformers' greedy continuation crosses position 16: each whole-sequence forward past it rotates every
  // position by the long factors (its generate re-reads the sequence there rather than keep the keys its
  // cache rotated by the short ones: `gpt sample`'s generate too, tests/test_hf_gpt2.cpp)
  check_greedy(*model, want, {/*cache=*/false});
  // written back with its factors, read back the same
  TempDir dir("hf_phi3_longrope_export");
  hf::save_llama(*model, dir.path.string());
  CHECK(hf::load_config(dir.file("config.json")).rope_scaling == s);
  {
    NoGradGuard no_grad;
    CHECK(allclose(hf::load_llama(dir.path.string(), true)->forward(ids_long).data(),
                   want.tensors.at("logits_long"), 1e-5, 1e-5));
    // without the switch to the long factors the long logits are not transformers'
    ops::RopeScaling short_only = s;
    short_only.long_factor = s.short_factor;
    for (auto& layer : model->model->layers)
      layer->self_attn->rotary_emb =
          std::make_shared<nn::RotaryEmbedding>(16, 10000.0, ops::RotaryStyle::Half, 0.75, short_only);
    CHECK(allclose(model->forward(ids).data(), want.tensors.at("logits"), 1e-5, 1e-5));
    CHECK_FALSE(allclose(model->forward(ids_long).data(), want.tensors.at("logits_long"), 1e-3, 1e-3));
  }
  auto fresh = hf::load_llama(kData + "/hf_phi3_longrope", /*strict=*/true);
  check_adamw_losses(*fresh, want, fresh->config().vocab_size);  // 13 tokens: the short factors
}

TEST_CASE("hf OLMo 2: a row of the family table, norms after each sublayer and q/k norms over all heads",
          "[hf]") {
  // tests/data/hf_olmo2/config.json: written by transformers' Olmo2Config (make_hf_families.py olmo2)
  const std::string olmo2 = file_bytes(kData + "/hf_olmo2/config.json");
  const hf::Config c = hf::parse_config(olmo2);
  CHECK(c.model_type == "olmo2");
  CHECK((c.qk_norm_full_width && !c.qk_norm && c.norm_placement == "post"));
  CHECK(hf::parse_config(
            replaced(replaced(olmo2, R"("rms_norm_eps": 1e-06,)", ""), R"("pad_token_id": 1,)", ""))
            .norm_eps == 1e-5);  // Olmo2Config's default
  // the model: no input norm, a norm after each sublayer, q_norm over the 4 query heads' 32 dims and k_norm
  // over the 2 key/value heads' 16
  nn::LlamaForCausalLM model(hf::llama_config(c));
  const auto& block = *model.model->layers[0];
  CHECK(block.input_layernorm == nullptr);
  CHECK(block.post_feedforward_layernorm != nullptr);
  CHECK(block.self_attn->q_norm->weight.shape() == Shape{32});
  CHECK(block.self_attn->k_norm->weight.shape() == Shape{16});
  check_written_as(model, "olmo2", "Olmo2ForCausalLM");
  nn::LlamaConfig both = model.config();
  both.qk_norm = true;
  CHECK_THROWS_WITH(nn::LlamaForCausalLM(both), Catch::Contains("exclude each other"));
  nn::LlamaConfig middle = model.config();
  middle.norm_placement = "middle";
  CHECK_THROWS_WITH(nn::LlamaForCausalLM(middle),
                    Catch::Contains("norm_placement must be 'pre', 'post' or 'sandwich'"));
  hf::Config windowed = c;
  windowed.sliding_window = 8;
  CHECK_THROWS_WITH(hf::config_json(windowed),
                    Catch::Contains("hf::config_json") && Catch::Contains("window"));
}

TEST_CASE(
    "hf OLMo 2: transformers' logits, greedy continuations (with and without the KV cache), ten AdamW steps, "
    "and an export that reads back",
    "[hf]") {
  // tests/data/hf_olmo2: written by transformers' Olmo2ForCausalLM (make_hf_families.py olmo2); with another
  // post_feedforward_layernorm weight the logits are not transformers'
  check_family_fixture("hf_olmo2", "olmo2", "Olmo2ForCausalLM", [](nn::LlamaForCausalLM& model) {
    Tensor w = std::dynamic_pointer_cast<nn::RMSNorm>(model.model->layers[1]->post_feedforward_layernorm)
                   ->weight.data();
    ops::fill_(w, 1.0);
  });
}

TEST_CASE(
    "hf Gemma 3: a row of the family table, four norms a block, q/k norms, sliding layers with their own "
    "rotary base",
    "[hf]") {
  // tests/data/hf_gemma3_text/config.json: written by transformers' Gemma3TextConfig (make_hf_families.py
  // gemma3_text)
  const std::string g3 = file_bytes(kData + "/hf_gemma3_text/config.json");
  const hf::Config c = hf::parse_config(g3);
  CHECK(c.model_type == "gemma3_text");
  CHECK((c.norm_placement == "sandwich" && c.qk_norm && c.norm_unit_offset && c.sliding_window == 4));
  CHECK(c.layer_types ==
        std::vector<std::string>{"sliding_attention", "sliding_attention", "full_attention"});
  CHECK((c.rope_theta == 1e6 && c.rope_local_base_freq == 10000.0));
  CHECK((c.rope_scaling.type == ops::RopeScaling::Type::Linear && c.rope_scaling.factor == 8.0));
  CHECK(c.attention_multiplier == 1.0 / std::sqrt(32.0));
  CHECK(c.hidden_act == "gelu_pytorch_tanh");
  // absent: every sliding_window_pattern-th layer (6) is full; the older flat rotary keys
  const hf::Config bare =
      hf::parse_config(replaced(replaced(g3, R"("layer_types": [
    "sliding_attention",
    "sliding_attention",
    "full_attention"
  ],)",
                                         ""),
                                R"("rope_parameters": {
    "full_attention": {
      "factor": 8.0,
      "rope_theta": 1000000.0,
      "rope_type": "linear"
    },
    "sliding_attention": {
      "rope_theta": 10000.0,
      "rope_type": "default"
    }
  },)",
                                R"("rope_theta": 500000.0, "rope_local_base_freq": 20000.0,)"));
  CHECK(bare.layer_types == std::vector<std::string>(3, "sliding_attention"));
  CHECK((bare.rope_theta == 500000.0 && bare.rope_local_base_freq == 20000.0));
  CHECK_THROWS_WITH(hf::parse_config(replaced(g3, "\"rope_parameters\": {", R"("rope_local_base_freq": 0.5,
    "rope_parameters": {)"),
                                     "x/config.json"),
                    Catch::Contains("x/config.json") && Catch::Contains("rope_local_base_freq") &&
                        Catch::Contains("is not a finite rotary base above 1"));
  CHECK(bare.rope_scaling.type == ops::RopeScaling::Type::Default);
  CHECK(hf::parse_config(
            replaced(g3, R"("final_logit_softcapping": null)", R"("final_logit_softcapping": 30.0)"))
            .final_logit_softcapping == 30.0);  // none by default, as the file says otherwise
  CHECK_THROWS_WITH(hf::parse_config(replaced(g3, R"("full_attention"
  ],)",
                                              R"("global"
  ],)")),
                    Catch::Contains("layer_types") && Catch::Contains("\"global\""));
  // the model: four norms a block; the sliding layers windowed at base 10000, the full one unwindowed
  nn::LlamaForCausalLM model(hf::llama_config(c));
  const auto& layers = model.model->layers;
  CHECK((layers[0]->input_layernorm && layers[0]->pre_feedforward_layernorm &&
         layers[0]->post_feedforward_layernorm));
  CHECK((layers[0]->self_attn->window == 4 && layers[2]->self_attn->window == 0));
  CHECK(layers[0]->self_attn->rotary_emb->theta() == 10000.0);
  CHECK(layers[2]->self_attn->rotary_emb->theta() == 1e6);
  check_written_as(model, "gemma3_text", "Gemma3ForCausalLM");
  hf::Config odd = c;
  odd.attention_multiplier = 0.3;
  CHECK_THROWS_WITH(hf::config_json(odd), Catch::Contains("query_pre_attn_scalar"));
}

TEST_CASE(
    "hf Gemma 3: transformers' logits, greedy continuations (with and without the KV cache), ten AdamW "
    "steps, and an export that reads back",
    "[hf]") {
  // tests/data/hf_gemma3_text: written by transformers' Gemma3ForCausalLM (make_hf_families.py gemma3_text);
  // the 22-token greedy run passes the sliding layers' window of 4; with the full layer's base in a sliding
  // one the logits are not transformers'
  check_family_fixture("hf_gemma3_text", "gemma3_text", "Gemma3ForCausalLM", [](nn::LlamaForCausalLM& model) {
    model.model->layers[0]->self_attn->rotary_emb = model.model->layers[2]->self_attn->rotary_emb;
  });
}

TEST_CASE(
    "hf Gemma 2: a row of the family table, four norms a block, alternating windows, logit soft-capping",
    "[hf]") {
  // tests/data/hf_gemma2/config.json: written by transformers' Gemma2Config (make_hf_families.py gemma2)
  const std::string g2 = file_bytes(kData + "/hf_gemma2/config.json");
  const hf::Config c = hf::parse_config(g2);
  CHECK(c.model_type == "gemma2");
  CHECK((c.norm_placement == "sandwich" && !c.qk_norm && c.norm_unit_offset && c.rope_local_base_freq == 0));
  CHECK(c.layer_types ==
        std::vector<std::string>{"sliding_attention", "full_attention", "sliding_attention"});
  CHECK((c.attn_logit_softcapping == 1.0 && c.final_logit_softcapping == 3.0));
  // Gemma2Config's caps when absent (50 and 30), none when null
  const hf::Config bare = hf::parse_config(replaced(replaced(g2, R"("attn_logit_softcapping": 1.0,)", ""),
                                                    R"("final_logit_softcapping": 3.0,)", ""));
  CHECK((bare.attn_logit_softcapping == 50.0 && bare.final_logit_softcapping == 30.0));
  CHECK(hf::parse_config(
            replaced(g2, R"("final_logit_softcapping": 3.0,)", R"("final_logit_softcapping": null,)"))
            .final_logit_softcapping == 0.0);
  nn::LlamaForCausalLM model(hf::llama_config(c));
  CHECK(
      (model.model->layers[0]->self_attn->softcap == 1.0 && model.model->layers[1]->self_attn->window == 0));
  CHECK(model.model->layers[0]->self_attn->q_norm == nullptr);
  check_written_as(model, "gemma2", "Gemma2ForCausalLM");
  hf::Config capped = hf::load_config(kData + "/hf_llama/config.json");
  capped.final_logit_softcapping = 30.0;
  CHECK_THROWS_WITH(hf::config_json(capped), Catch::Contains("soft-capping"));
}

TEST_CASE(
    "hf Gemma 2: transformers' logits, greedy continuations (with and without the KV cache), ten AdamW "
    "steps, and an export that reads back",
    "[hf]") {
  // tests/data/hf_gemma2: written by transformers' Gemma2ForCausalLM (make_hf_families.py gemma2); without
  // the attention's soft-capping in one layer the logits are not transformers'
  check_family_fixture("hf_gemma2", "gemma2", "Gemma2ForCausalLM",
                       [](nn::LlamaForCausalLM& model) { model.model->layers[1]->self_attn->softcap = 0.0; });
}

TEST_CASE(
    "hf YaRN rope scaling: transformers' logits, greedy continuations (with and without the KV cache), ten "
    "AdamW steps, and an export that keeps it",
    "[hf]") {
  // tests/data/hf_llama_yarn: rope_parameters {rope_type yarn, factor 4, original 16} written by transformers
  // (make_hf_families.py llama_yarn); the attention factor 0.1 ln 4 + 1 scales cos and sin
  const hf::Config c = hf::load_config(kData + "/hf_llama_yarn/config.json");
  using Type = ops::RopeScaling::Type;
  CHECK((c.rope_scaling.type == Type::Yarn && c.rope_scaling.factor == 4.0 &&
         c.rope_scaling.original_max_position_embeddings == 16 && c.rope_scaling.beta_fast == 32.0 &&
         c.rope_scaling.beta_slow == 1.0 && c.rope_scaling.truncate));
  CHECK(ops::rotary_attention_factor(c.rope_scaling) == Approx(0.1 * std::log(4.0) + 1.0));
  // without the attention factor (or with the default frequencies) the logits are not transformers'
  check_family_fixture("hf_llama_yarn", "llama", "LlamaForCausalLM", [](nn::LlamaForCausalLM& model) {
    model.model->layers[0]->self_attn->rotary_emb = std::make_shared<nn::RotaryEmbedding>(8, 10000.0);
  });
  // the optional keys read and written back; original_max_position_embeddings defaults to the context
  const std::string text = file_bytes(kData + "/hf_llama_yarn/config.json");
  const hf::Config deepseek =
      hf::parse_config(replaced(text, R"("rope_type": "yarn")",
                                R"("rope_type": "yarn", "mscale": 1.0, "mscale_all_dim": 0.5,
                                                           "beta_fast": 16, "truncate": false)"));
  CHECK((deepseek.rope_scaling.mscale == 1.0 && deepseek.rope_scaling.mscale_all_dim == 0.5 &&
         deepseek.rope_scaling.beta_fast == 16.0 && !deepseek.rope_scaling.truncate));
  CHECK(hf::parse_config(hf::config_json(deepseek)).rope_scaling == deepseek.rope_scaling);
  CHECK(hf::parse_config(replaced(text, R"("original_max_position_embeddings": 16,)", ""))
            .rope_scaling.original_max_position_embeddings == 64);
  CHECK_THROWS_WITH(hf::parse_config(replaced(text, R"("factor": 4.0,)", "")),
                    Catch::Contains("factor") && Catch::Contains("missing"));
}

TEST_CASE(
    "hf YaRN with DeepSeek's mscale and mscale_all_dim: transformers' logits, continuations, steps, export",
    "[hf]") {
  // tests/data/hf_llama_yarn_mscale (make_hf_families.py llama_yarn_mscale): the attention factor is the
  // ratio (0.1 · mscale · ln 4 + 1) / (0.1 · mscale_all_dim · ln 4 + 1), beta_fast 16, truncate false
  const hf::Config c = hf::load_config(kData + "/hf_llama_yarn_mscale/config.json");
  CHECK((c.rope_scaling.mscale == 1.0 && c.rope_scaling.mscale_all_dim == 0.5 &&
         c.rope_scaling.beta_fast == 16.0 && !c.rope_scaling.truncate));
  CHECK(ops::rotary_attention_factor(c.rope_scaling) ==
        Approx((0.1 * std::log(4.0) + 1.0) / (0.05 * std::log(4.0) + 1.0)));
  // with the plain YaRN factor instead of the ratio, the logits are not transformers'
  check_family_fixture("hf_llama_yarn_mscale", "llama", "LlamaForCausalLM", [&](nn::LlamaForCausalLM& model) {
    ops::RopeScaling plain = c.rope_scaling;
    plain.mscale = plain.mscale_all_dim = 0.0;
    model.model->layers[0]->self_attn->rotary_emb =
        std::make_shared<nn::RotaryEmbedding>(8, 10000.0, ops::RotaryStyle::Half, 1.0, plain);
  });
}

TEST_CASE(
    "hf dynamic NTK rope scaling: the base grown for each length past the context, as transformers (logits, "
    "greedy with the KV cache, export, AdamW)",
    "[hf]") {
  // tests/data/hf_llama_dynamic (make_hf_families.py llama_dynamic): rope_parameters {rope_type dynamic,
  // factor 4} over max_position_embeddings 8; logits of 12 tokens, a greedy run of 12 + 10 with the cache
  const std::string text = file_bytes(kData + "/hf_llama_dynamic/config.json");
  const hf::Config c = hf::parse_config(text);
  const ops::RopeScaling& s = c.rope_scaling;
  REQUIRE(s.type == ops::RopeScaling::Type::Dynamic);
  CHECK((s.factor == 4.0 && s.original_max_position_embeddings == 8));
  CHECK(hf::llama_config(c).context() == 32);
  // the default frequencies up to the context; past it those of the base theta ((f S / L) - (f - 1))^(R / (R
  // - 2)) for a forward reaching S
  CHECK(ops::rope_scaling_at(s, 8) == s);
  CHECK(ops::rope_tables_at(s, 8) == 0);
  CHECK(ops::rope_tables_at(s, 12) == 12);
  CHECK(ops::rotary_inv_freq(8, 10000.0, s) == ops::rotary_inv_freq(8, 10000.0));
  const std::vector<double> grown = ops::rotary_inv_freq(8, 10000.0, ops::rope_scaling_at(s, 12));
  const std::vector<double> by_hand = ops::rotary_inv_freq(8, 10000.0 * std::pow(4.0 * 12 / 8 - 3, 8.0 / 6));
  REQUIRE(grown.size() == by_hand.size());
  for (size_t i = 0; i < grown.size(); ++i) CHECK(grown[i] == Approx(by_hand[i]).epsilon(1e-12));
  CHECK_THROWS_WITH(hf::parse_config(replaced(text, R"("factor": 4.0,)", "")),
                    Catch::Contains("factor") && Catch::Contains("missing"));
  // one rotated pair has no R / (R - 2): refused by the config, naming the file, not by the model
  CHECK_THROWS_WITH(hf::parse_config(replaced(text, R"("head_dim": 8)", R"("head_dim": 2)"), "x/config.json"),
                    Catch::Contains("x/config.json") &&
                        Catch::Contains("rope_type 'dynamic' needs more than 2 rotated dims a head, got 2"));
  ops::RopeScaling no_context = s;
  no_context.original_max_position_embeddings = 0;
  CHECK_THROWS_WITH(ops::rotary_inv_freq(8, 10000.0, no_context),
                    Catch::Contains("dynamic rope scaling needs original_max_position_embeddings >= 1"));

  const nn::Safetensors want = nn::load_safetensors(kData + "/hf_llama_dynamic_expected.safetensors");
  const Tensor& ids = want.tensors.at("ids");
  auto model = hf::load_llama(kData + "/hf_llama_dynamic", /*strict=*/true);
  {
    NoGradGuard no_grad;
    CHECK(allclose(model->forward(ids).data(), want.tensors.at("logits"), 1e-5, 1e-5));
    REQUIRE_THROWS_WITH(model->forward(ops::zeros({1, 33}, DType::Int64)),
                        Catch::Contains("positions [0, 33)") && Catch::Contains("pass the context 32"));
  }
  // transformers' generate keeps its cache: each step's key is rotated by the base of its own length
  check_greedy(*model, want, {/*cache=*/true});
  TempDir dir("hf_llama_dynamic_export");
  hf::save_llama(*model, dir.path.string());
  CHECK(hf::load_config(dir.file("config.json")).rope_scaling == s);
  {
    NoGradGuard no_grad;
    CHECK(allclose(hf::load_llama(dir.path.string(), true)->forward(ids).data(), want.tensors.at("logits"),
                   1e-5, 1e-5));
    // with the default frequencies instead, the 12 positions' logits are not transformers'
    for (auto& layer : model->model->layers)
      layer->self_attn->rotary_emb = std::make_shared<nn::RotaryEmbedding>(8, 10000.0);
    CHECK_FALSE(allclose(model->forward(ids).data(), want.tensors.at("logits"), 1e-3, 1e-3));
  }
  auto fresh = hf::load_llama(kData + "/hf_llama_dynamic", /*strict=*/true);
  check_adamw_losses(*fresh, want, fresh->config().vocab_size);  // 12 tokens a row: the base grown for 12
}

TEST_CASE(
    "hf Llama 3 rope scaling: transformers' frequencies (llama3, linear), logits, greedy continuations "
    "and an export that keeps it",
    "[hf]") {
  // tests/data/hf_llama_rope: rope_parameters {rope_type llama3, factor 8, low 1, high 4, original 64}
  // written by transformers (tests/fixtures/make_hf_llama_rope.py)
  static const nn::Safetensors want = nn::load_safetensors(kData + "/hf_llama_rope_expected.safetensors");
  using Type = ops::RopeScaling::Type;
  const ops::RopeScaling llama3{.type = Type::Llama3,
                                .factor = 8,
                                .low_freq_factor = 1,
                                .high_freq_factor = 4,
                                .original_max_position_embeddings = 64};
  for (const auto& [name, scaling] :
       {std::pair{"inv_freq_llama3", llama3},
        std::pair{"inv_freq_linear", ops::RopeScaling{.type = Type::Linear, .factor = 8}}}) {
    CAPTURE(name);
    const std::vector<double> mine = ops::rotary_inv_freq(16, 10000.0, scaling);
    const Tensor& theirs = want.tensors.at(name);  // float32
    REQUIRE(static_cast<int64_t>(mine.size()) == theirs.numel());
    for (size_t i = 0; i < mine.size(); ++i)
      CHECK(static_cast<float>(mine[i]) == Approx(theirs.data<float>()[i]).epsilon(1e-6));
  }
  const hf::Config c = hf::load_config(kData + "/hf_llama_rope/config.json");
  CHECK(c.rope_scaling == llama3);
  const Tensor& ids = want.tensors.at("ids");
  auto model = hf::load_llama(kData + "/hf_llama_rope", /*strict=*/true);
  {
    NoGradGuard no_grad;
    CHECK(allclose(model->forward(ids).data(), want.tensors.at("logits"), 1e-5, 1e-5));
    // the same weights without the scaling give other logits
    hf::Config plain = c;
    plain.rope_scaling = {};
    TempDir d("hf_llama_rope_plain");
    copy_fixture("hf_llama_rope", d);
    std::ofstream(d.file("config.json"), std::ios::trunc) << hf::config_json(plain);
    CHECK_FALSE(allclose(hf::load_llama(d.path.string())->forward(ids).data(), want.tensors.at("logits"),
                         1e-3, 1e-3));
  }
  check_greedy(*model, want);
  // written back with its rope_scaling, read back the same
  TempDir dir("hf_llama_rope_export");
  hf::save_llama(*model, dir.path.string());
  CHECK(hf::load_config(dir.file("config.json")).rope_scaling == llama3);
  {
    NoGradGuard no_grad;
    CHECK(allclose(hf::load_llama(dir.path.string(), true)->forward(ids).data(), want.tensors.at("logits"),
                   1e-5, 1e-5));
  }
  // what is not implemented, or incomplete, is refused by name
  const std::string text = file_bytes(kData + "/hf_llama_rope/config.json");
  CHECK_THROWS_WITH(hf::parse_config(replaced(text, R"("rope_type": "llama3")", R"("rope_type": "mrope")")),
                    Catch::Contains("rope_parameters") && Catch::Contains("'mrope' is not supported"));
  CHECK_THROWS_WITH(hf::parse_config(replaced(text, R"("factor": 8.0,)", "")),
                    Catch::Contains("rope_parameters.factor") && Catch::Contains("missing"));
  CHECK_THROWS_WITH(
      hf::parse_config(replaced(text, R"("high_freq_factor": 4.0,)", R"("high_freq_factor": 0.5,)")),
      Catch::Contains("high_freq_factor") && Catch::Contains("not above"));
  CHECK_THROWS_WITH(hf::parse_config(replaced(text, R"("factor": 8.0,)", R"("factor": 0.5,)")),
                    Catch::Contains("rope_parameters.factor") && Catch::Contains("below 1"));
}

TEST_CASE("hf Llama: the rotary buffers older conversions saved are skipped, as transformers skips them",
          "[hf]") {
  NoGradGuard no_grad;
  const Tensor& ids = expected().tensors.at("ids");
  auto model = hf::load_llama(kData + "/hf_llama");
  TempDir d("hf_llama_inv_freq");
  hf::save_llama(*model, d.path.string());
  nn::Safetensors file = nn::load_safetensors(d.file("model.safetensors"));
  auto write = [&](const std::string& extra) {
    nn::StateDict t = file.tensors;
    t.insert(extra, ops::ones({4}));
    nn::save_safetensors(t, d.file("model.safetensors"), file.metadata);
  };
  for (const char* name :
       {"model.layers.0.self_attn.rotary_emb.inv_freq", "model.layers.1.self_attn.rotary_emb.inv_freq"}) {
    CAPTURE(name);
    write(name);
    hf::LoadReport report;
    auto loaded = hf::load_llama(d.path.string(), true, &report);  // strict
    CHECK(report.skipped.empty());
    CHECK(allclose(loaded->forward(ids).data(), expected().tensors.at("logits"), 1e-5, 1e-5));
  }
  // anything else the model has no place for is still refused
  for (const char* name :
       {"model.layers.0.self_attn.rotary_emb.inv_freq2", "model.layers.x.self_attn.rotary_emb.inv_freq",
        "model.layers.0.self_attn.bogus"}) {
    CAPTURE(name);
    write(name);
    CHECK_THROWS_WITH(hf::load_llama(d.path.string()),
                      Catch::Contains("has no place for") && Catch::Contains(name));
  }
}

TEST_CASE("hf: saving over a sharded folder removes its index and shards, and model.safetensors wins on load",
          "[hf]") {
  NoGradGuard no_grad;
  const Tensor& ids = expected().tensors.at("ids");
  TempDir d("hf_llama_resave");
  copy_fixture("hf_llama", d);  // two shards and their index
  std::ofstream(d.file("notes.txt")) << "mine";
  std::ofstream(d.file("model-1-of-2.safetensors")) << "not a shard name of transformers'";
  auto model = hf::load_llama(d.path.string());
  Tensor lm_head = model->state_dict().at("lm_head.weight");
  ops::copy_(lm_head, lm_head * 2.0);  // other weights than the shards hold
  const Tensor want = model->forward(ids).data();
  REQUIRE_FALSE(allclose(want, expected().tensors.at("logits"), 1e-3, 1e-3));
  hf::save_llama(*model, d.path.string());
  CHECK(fs::exists(d.file("model.safetensors")));
  CHECK_FALSE(fs::exists(d.file("model.safetensors.index.json")));
  CHECK_FALSE(fs::exists(d.file("model-00001-of-00002.safetensors")));
  CHECK_FALSE(fs::exists(d.file("model-00002-of-00002.safetensors")));
  CHECK(fs::exists(d.file("notes.txt")));  // nothing else goes
  CHECK(fs::exists(d.file("model-1-of-2.safetensors")));
  CHECK(fs::exists(d.file("tokenizer.json")));
  CHECK(allclose(hf::load_llama(d.path.string())->forward(ids).data(), want, 0, 0));

  // a folder that holds both (a save that stopped before its cleanup, or another tool's): model.safetensors
  // is what transformers loads, and so does saccade
  TempDir both("hf_llama_both");
  copy_fixture("hf_llama", both);
  fs::copy_file(d.file("model.safetensors"), both.file("model.safetensors"));
  CHECK(allclose(hf::load_llama(both.path.string())->forward(ids).data(), want, 0, 0));
}

#endif
