// The LayerNorm rows of the family table (issue 51): GPT-NeoX (Pythia), StableLM and Falcon.
// tests/data/hf_gpt_neox, hf_stablelm, hf_stablelm_parallel, hf_falcon and hf_falcon_new were written by
// transformers (tests/fixtures/make_hf_families.py), with what it computes with them.
#ifdef SACCADE_HAVE_HF
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "helpers.h"
#include "hf/llama.h"
#include "hf_family.h"
#include "hf_fixture.h"
#include "nn/serialization.h"
#include "ops/creation.h"
#include "temp_dir.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::check_family_fixture;
using saccade::testing::check_written_as;
using saccade::testing::file_bytes;
using saccade::testing::hf_data;
using saccade::testing::replaced;
using saccade::testing::TempDir;

namespace {

// The row of `table` that reads the checkpoint tensor `hf`.
hf::NameRule row_of(const std::vector<hf::NameRule>& table, const std::string& hf) {
  for (const hf::NameRule& r : table)
    if (r.hf == hf) return r;
  FAIL("no row " << hf);
  return hf::NameRule{};
}

// The model of tests/data/`name` read with `config` (the fixture's, changed) and `table` (its name table,
// changed), strictly.
std::shared_ptr<nn::LlamaForCausalLM> load_as(const std::string& name, const hf::Config& config,
                                              const std::function<void(std::vector<hf::NameRule>&)>& edit) {
  auto model = std::make_shared<nn::LlamaForCausalLM>(hf::llama_config(config));
  std::vector<hf::NameRule> table = hf::llama_name_table(*model);
  edit(table);
  const hf::Weights weights(hf_data(name));
  hf::load_weights(*model, weights, table, true, hf::llama_ignored_tensors(config, weights));
  model->eval();
  return model;
}

}  // namespace

TEST_CASE("hf GPT-NeoX: a row of the family table, parallel LayerNorm blocks, q/k/v interleaved by head",
          "[hf]") {
  const std::string text = file_bytes(hf_data("hf_gpt_neox/config.json"));
  const hf::Config c = hf::parse_config(text);
  CHECK(c.model_type == "gpt_neox");
  CHECK((c.norm_type == "layer_norm" && c.parallel_residual && !c.gated_mlp));
  CHECK((c.attention_bias && c.mlp_bias && !c.qkv_bias));
  CHECK((c.partial_rotary_factor == 0.25 && c.norm_eps == 1e-5 && c.hidden_act == "gelu"));
  CHECK(c.num_key_value_heads == c.num_attention_heads);
  // Pythia's published spellings: rotary_pct and rotary_emb_base at the top level, no rope_parameters
  const std::string pythia_rope = R"("rotary_pct": 0.5, "rotary_emb_base": 5000,)";
  const std::string no_rope = replaced(text, R"("rope_parameters": {
    "partial_rotary_factor": 0.25,
    "rope_theta": 10000.0,
    "rope_type": "default"
  },)",
                                       "");
  const hf::Config pythia = hf::parse_config(replaced(no_rope, "{", "{" + pythia_rope));
  CHECK((pythia.partial_rotary_factor == 0.5 && pythia.rope_theta == 5000.0));
  CHECK(hf::parse_config(no_rope).partial_rotary_factor == 0.25);  // GPTNeoXConfig's default
  CHECK_THROWS_WITH(hf::parse_config(replaced(no_rope, "{", R"({"rotary_emb_base": 1,)"), "x/config.json"),
                    Catch::Contains("x/config.json") && Catch::Contains("rotary_emb_base") &&
                        Catch::Contains("is not a finite rotary base above 1"));
  CHECK_FALSE(hf::parse_config(
                  replaced(text, R"("use_parallel_residual": true)", R"("use_parallel_residual": false)"))
                  .parallel_residual);
  CHECK_THROWS_WITH(hf::parse_config(replaced(text, "{", R"({"num_key_value_heads": 2,)")),
                    Catch::Contains("num_key_value_heads") && Catch::Contains("no grouped-query"));

  // the model: LayerNorms with biases, an ungated MLP; the name table reads q, k and v from one tensor whose
  // rows go head by head (4 groups of 16 q, 16 k and 16 v rows)
  nn::LlamaForCausalLM model(hf::llama_config(c));
  CHECK(std::dynamic_pointer_cast<nn::LayerNorm>(model.model->layers[0]->input_layernorm));
  CHECK(std::dynamic_pointer_cast<nn::LayerNorm>(model.model->norm));
  CHECK((model.model->layers[0]->plain_mlp && !model.model->layers[0]->mlp));
  CHECK(model.model->layers[0]->self_attn->rotary_emb->rotary_dim() == 4);
  const std::vector<hf::NameRule> table = hf::llama_name_table(model);
  const hf::NameRule qkv = row_of(table, "gpt_neox.layers.1.attention.query_key_value.bias");
  CHECK(qkv.ours == std::vector<std::string>{"model.layers.1.self_attn.q_proj.bias",
                                             "model.layers.1.self_attn.k_proj.bias",
                                             "model.layers.1.self_attn.v_proj.bias"});
  CHECK(qkv.groups == 4);
  CHECK(row_of(table, "gpt_neox.layers.0.mlp.dense_4h_to_h.weight").ours ==
        std::vector<std::string>{"model.layers.0.mlp.down_proj.weight"});
  CHECK(row_of(table, "embed_out.weight").ours == std::vector<std::string>{"lm_head.weight"});
  // embed_in, the final norm's weight and bias, embed_out; per layer 2 norms, query_key_value and dense
  // (weight and bias each), the MLP's two Linears (weight and bias each)
  CHECK(table.size() == 1 + 2 + 1 + 2 * 12);
  check_written_as(model, "gpt_neox", "GPTNeoXForCausalLM");
  // a Llama-architecture config with the switches but another row's name is still written as GPT-NeoX
  nn::LlamaConfig unnamed = model.config();
  unnamed.model_type.clear();
  CHECK(hf::llama_hf_config(unnamed).model_type == "gpt_neox");
  unnamed.sliding_window = 8;  // no GPT-NeoX config says a window
  CHECK_THROWS_WITH(hf::config_json(hf::llama_hf_config(unnamed)),
                    Catch::Contains("hf::config_json") && Catch::Contains("sliding window"));

  // each switch shows in the logits: a sequential block, or q, k, v read one after another
  const nn::Safetensors want = nn::load_safetensors(hf_data("hf_gpt_neox_expected.safetensors"));
  const Tensor& ids = want.tensors.at("ids");
  NoGradGuard no_grad;
  auto same = [&](nn::LlamaForCausalLM& m) {
    return allclose(m.forward(ids).data(), want.tensors.at("logits"), 1e-3, 1e-3);
  };
  CHECK(same(*load_as("hf_gpt_neox", c, [](std::vector<hf::NameRule>&) {})));
  hf::Config sequential = c;
  sequential.parallel_residual = false;
  CHECK_FALSE(same(*load_as("hf_gpt_neox", sequential, [](std::vector<hf::NameRule>&) {})));
  CHECK_FALSE(same(*load_as("hf_gpt_neox", c, [](std::vector<hf::NameRule>& t) {
    for (hf::NameRule& r : t) r.groups = 1;
  })));
  // a part that does not divide into the groups is refused, naming the tensor
  CHECK_THROWS_WITH(load_as("hf_gpt_neox", c,
                            [](std::vector<hf::NameRule>& t) {
                              for (hf::NameRule& r : t)
                                if (r.groups > 1) r.groups = 5;
                            }),
                    Catch::Contains("query_key_value") && Catch::Contains("5 groups"));
}

TEST_CASE(
    "hf GPT-NeoX: transformers' logits, greedy continuations (with and without the KV cache), ten AdamW "
    "steps, and an export that reads back",
    "[hf]") {
  // with every dim of the heads rotating, the logits are not transformers'
  check_family_fixture("hf_gpt_neox", "gpt_neox", "GPTNeoXForCausalLM", [](nn::LlamaForCausalLM& model) {
    model.model->layers[0]->self_attn->rotary_emb = std::make_shared<nn::RotaryEmbedding>(16, 10000.0);
  });
}

TEST_CASE("hf GPT-NeoX: the buffers Pythia's files hold are skipped, as transformers skips them", "[hf]") {
  NoGradGuard no_grad;
  const nn::Safetensors want = nn::load_safetensors(hf_data("hf_gpt_neox_expected.safetensors"));
  auto model = hf::load_llama(hf_data("hf_gpt_neox"));
  TempDir d("hf_gpt_neox_buffers");
  hf::save_llama(*model, d.path.string());
  const nn::Safetensors file = nn::load_safetensors(d.file("model.safetensors"));
  auto write = [&](const std::string& extra) {
    nn::StateDict t = file.tensors;
    t.insert(extra, ops::ones({4}));
    nn::save_safetensors(t, d.file("model.safetensors"), file.metadata);
  };
  for (const char* name : {"gpt_neox.layers.0.attention.bias", "gpt_neox.layers.1.attention.masked_bias",
                           "gpt_neox.layers.0.attention.rotary_emb.inv_freq"}) {
    CAPTURE(name);
    write(name);
    hf::LoadReport report;
    auto loaded = hf::load_llama(d.path.string(), true, &report);  // strict
    CHECK(report.skipped.empty());
    CHECK(allclose(loaded->forward(want.tensors.at("ids")).data(), want.tensors.at("logits"), 1e-5, 1e-5));
  }
  write("gpt_neox.layers.0.attention.bogus");
  CHECK_THROWS_WITH(hf::load_llama(d.path.string()),
                    Catch::Contains("has no place for") && Catch::Contains("attention.bogus"));
}

TEST_CASE("hf StableLM: a row of the family table, Llama's blocks with LayerNorms and partial rotation",
          "[hf]") {
  const std::string text = file_bytes(hf_data("hf_stablelm/config.json"));
  const hf::Config c = hf::parse_config(text);
  CHECK(c.model_type == "stablelm");
  CHECK((c.norm_type == "layer_norm" && !c.parallel_residual && c.gated_mlp));
  CHECK((c.qkv_bias && !c.attention_bias && !c.mlp_bias));
  CHECK((c.partial_rotary_factor == 0.25 && c.num_key_value_heads == 2 && c.hidden_act == "silu"));
  CHECK_FALSE(
      hf::parse_config(replaced(text, R"("use_qkv_bias": true)", R"("use_qkv_bias": false)")).qkv_bias);
  // StableLM 2 12B's per-head q/k LayerNorms are refused by name rather than run without them; its parallel
  // layer reads one norm (hf_stablelm_parallel below)
  CHECK_THROWS_WITH(hf::parse_config(replaced(text, R"("qk_layernorm": false)", R"("qk_layernorm": true)")),
                    Catch::Contains("qk_layernorm") && Catch::Contains("not supported"));
  const hf::Config parallel = hf::parse_config(
      replaced(text, R"("use_parallel_residual": false)", R"("use_parallel_residual": true)"));
  CHECK((parallel.parallel_residual && parallel.parallel_norms == 1));
  nn::LlamaForCausalLM model(hf::llama_config(c));
  CHECK(std::dynamic_pointer_cast<nn::LayerNorm>(model.model->layers[1]->post_attention_layernorm));
  CHECK(model.model->layers[0]->mlp);
  check_written_as(model, "stablelm", "StableLmForCausalLM");
  nn::LlamaConfig biased = model.config();
  biased.mlp_bias = true;  // no StableLM config says MLP biases
  CHECK_THROWS_WITH(hf::config_json(hf::llama_hf_config(biased)), Catch::Contains("MLP biases"));
}

TEST_CASE(
    "hf StableLM: transformers' logits, greedy continuations (with and without the KV cache), ten AdamW "
    "steps, and an export that reads back",
    "[hf]") {
  // with an RMSNorm in place of the final LayerNorm, the logits are not transformers'
  check_family_fixture("hf_stablelm", "stablelm", "StableLmForCausalLM", [](nn::LlamaForCausalLM& model) {
    model.model->norm = std::make_shared<nn::RMSNorm>(64, 1e-5);
  });
}

TEST_CASE(
    "hf StableLM parallel: one norm a block, transformers' logits, greedy continuations, ten AdamW steps, "
    "export",
    "[hf]") {
  const hf::Config c = hf::load_config(hf_data("hf_stablelm_parallel/config.json"));
  CHECK((c.parallel_residual && c.parallel_norms == 1));
  nn::LlamaForCausalLM model(hf::llama_config(c));
  CHECK_FALSE(model.model->layers[0]->post_attention_layernorm);  // the MLP reads input_layernorm's output
  check_family_fixture(
      "hf_stablelm_parallel", "stablelm", "StableLmForCausalLM", [](nn::LlamaForCausalLM& m) {
        m.model->layers[0]->self_attn->rotary_emb = std::make_shared<nn::RotaryEmbedding>(16, 10000.0);
      });
}

TEST_CASE(
    "hf Falcon: a row of the family table, Falcon 7B's and 40B's layers, q/k/v grouped by key/value head",
    "[hf]") {
  const std::string text = file_bytes(hf_data("hf_falcon/config.json"));
  const hf::Config c = hf::parse_config(text);  // Falcon 7B's: multi-query, parallel through one norm
  CHECK(c.model_type == "falcon");
  CHECK((c.num_key_value_heads == 1 && c.parallel_residual && c.parallel_norms == 1 && !c.gated_mlp));
  CHECK((c.norm_type == "layer_norm" && !c.attention_bias && !c.mlp_bias && c.tie_word_embeddings));
  CHECK((c.intermediate_size == 96 && c.head_dim == 16 && c.hidden_act == "gelu"));
  const hf::Config n = hf::load_config(hf_data("hf_falcon_new/config.json"));  // 40B's: 2 key/value heads
  CHECK((n.num_key_value_heads == 2 && n.parallel_residual && n.parallel_norms == 2 && n.attention_bias &&
         n.mlp_bias && !n.tie_word_embeddings));
  // the older layer without parallel_attn is sequential; one key/value head a head without multi_query
  const hf::Config seq =
      hf::parse_config(replaced(replaced(text, R"("parallel_attn": true)", R"("parallel_attn": false)"),
                                R"("multi_query": true)", R"("multi_query": false)"));
  CHECK((!seq.parallel_residual && seq.num_key_value_heads == 4));
  CHECK_THROWS_WITH(hf::parse_config(replaced(text, R"("alibi": false)", R"("alibi": true)")),
                    Catch::Contains("alibi") && Catch::Contains("not supported"));
  CHECK_THROWS_WITH(hf::parse_config(replaced(replaced(text, R"("new_decoder_architecture": false)",
                                                       R"("new_decoder_architecture": true)"),
                                              R"("num_kv_heads": 4)", R"("num_kv_heads": 3)")),
                    Catch::Contains("num_kv_heads") && Catch::Contains("does not divide"));

  // the name tables: 7B's query_key_value is [q; k; v], 40B's grouped by its 2 key/value heads; 40B's two
  // norms are ln_attn and ln_mlp
  nn::LlamaForCausalLM small(hf::llama_config(c)), large(hf::llama_config(n));
  CHECK(row_of(hf::llama_name_table(small), "transformer.h.0.self_attention.query_key_value.weight").groups ==
        1);
  const std::vector<hf::NameRule> t = hf::llama_name_table(large);
  CHECK(row_of(t, "transformer.h.1.self_attention.query_key_value.bias").groups == 2);
  CHECK(row_of(t, "transformer.h.1.ln_mlp.weight").ours ==
        std::vector<std::string>{"model.layers.1.post_attention_layernorm.weight"});
  CHECK(row_of(t, "transformer.word_embeddings.weight").ours ==
        std::vector<std::string>{"model.embed_tokens.weight"});
  check_written_as(small, "falcon", "FalconForCausalLM");
  check_written_as(large, "falcon", "FalconForCausalLM");
  nn::LlamaConfig sequential_gqa = large.config();  // no Falcon layer is sequential with grouped heads
  sequential_gqa.parallel_residual = false;
  CHECK_THROWS_WITH(hf::config_json(hf::llama_hf_config(sequential_gqa)), Catch::Contains("hf::config_json"));
}

TEST_CASE(
    "hf Falcon: transformers' logits, greedy continuations (with and without the KV cache), ten AdamW steps, "
    "and an export that reads back, for Falcon 7B's and 40B's layers",
    "[hf]") {
  // 7B's: with an RMSNorm in place of the final LayerNorm the logits are not transformers'
  check_family_fixture("hf_falcon", "falcon", "FalconForCausalLM", [](nn::LlamaForCausalLM& model) {
    model.model->norm = std::make_shared<nn::RMSNorm>(64, 1e-5);
  });
  // 40B's: with the MLP reading the attention's norm (ln_attn) instead of its own (ln_mlp), neither are they
  check_family_fixture("hf_falcon_new", "falcon", "FalconForCausalLM", [](nn::LlamaForCausalLM& model) {
    model.model->layers[1]->post_attention_layernorm = nullptr;
  });
}

#endif  // SACCADE_HAVE_HF
