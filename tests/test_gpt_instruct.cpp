// Instruction data (examples/gpt/instruct.h): JSONL records, completion-only targets, padded batches.
#include <catch2/catch.hpp>

#ifdef SACCADE_HAVE_GPT
#include <fstream>
#include <set>

#include "examples/gpt/finetune.h"
#include "examples/gpt/instruct.h"
#include "examples/gpt/tokenizer.h"
#include "helpers.h"
#include "nn/llama.h"
#include "nn/lora.h"
#include "nn/loss.h"
#include "temp_dir.h"

using namespace saccade;
using namespace saccade::examples;
using saccade::testing::allclose;

namespace {

std::string write(const testing::TempDir& tmp, const std::string& name, const std::string& text) {
  const std::string path = (tmp.path / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<int64_t> row(const Tensor& t, int64_t b) {
  const int64_t T = t.size(1);
  return std::vector<int64_t>(t.data<int64_t>() + b * T, t.data<int64_t>() + (b + 1) * T);
}

}  // namespace

TEST_CASE("instruct: JSONL records, prompt ids unscored, completion and eos scored", "[gpt][instruct]") {
  testing::TempDir tmp;
  const std::string path = write(tmp, "train.jsonl",
                                 "{\"prompt\": \"Q: 2+2?\\n\", \"completion\": \"4\", \"id\": 7}\n"
                                 "\n"
                                 "{\"text\": \"hello\"}\n");
  const auto records = read_jsonl(path);
  REQUIRE(records.size() == 2);
  CHECK(records[0].prompt == "Q: 2+2?\n");
  CHECK(records[0].completion == "4");
  CHECK(records[1].line == 3);
  CHECK(records[1].is_text);

  ByteTokenizer bytes;
  const Encode tok = [&](const std::string& s) { return bytes.encode(s); };
  const int64_t bos = 1, eos = 2;
  const TokenizedExample a = tokenize_example(records[0], tok, bos, eos, 64);
  REQUIRE(a.ids.size() == 1 + 8 + 1 + 1);
  CHECK(a.ids.front() == bos);
  CHECK(a.ids[9] == '4');
  CHECK(a.ids.back() == eos);
  CHECK(a.scored == std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1});
  const TokenizedExample b = tokenize_example(records[1], tok, -1, eos, 64);  // no bos
  CHECK(b.ids == std::vector<int64_t>{'h', 'e', 'l', 'l', 'o', eos});
  CHECK(scored_targets({a, b}) == 2 + 5);

  const Batch batch = instruct_batch({a, b}, {0, 1}, /*pad=*/0);
  REQUIRE(batch.x.shape() == Shape{2, 10});
  CHECK(row(batch.x, 0) == std::vector<int64_t>(a.ids.begin(), a.ids.end() - 1));
  CHECK(row(batch.y, 0) == std::vector<int64_t>{-100, -100, -100, -100, -100, -100, -100, -100, '4', eos});
  CHECK(row(batch.x, 1) == std::vector<int64_t>{'h', 'e', 'l', 'l', 'o', 0, 0, 0, 0, 0});
  CHECK(row(batch.y, 1) == std::vector<int64_t>{'e', 'l', 'l', 'o', eos, -100, -100, -100, -100, -100});

  // The loss skips the -100 targets and averages over the 7 others: logits that put 1 on the right answer
  // at the scored positions give the mean of their own losses.
  nn::CrossEntropyLoss loss;  // over (B·T, vocab) and (B·T), as finetune_lora takes it
  Tensor z = ops::zeros({2, 10, 256});
  z.data<float>()[(0 * 10 + 8) * 256 + '4'] = 1;  // row 0, t = 8 predicts '4'
  const double right = std::log(255 + std::exp(1.0)) - 1;
  const double want = (right + 6 * std::log(256.0)) / 7;
  CHECK(loss.forward(Variable(z.reshape({20, 256})), batch.y.reshape({20})).item<float>() ==
        Approx(want).epsilon(1e-5));
}

TEST_CASE("instruct: an example past the context is refused or cut", "[gpt][instruct][robust]") {
  ByteTokenizer bytes;
  const Encode tok = [&](const std::string& s) { return bytes.encode(s); };
  InstructRecord r{"abcdef", "xyz", false, 4};
  CHECK_THROWS_WITH(tokenize_example(r, tok, 1, 2, 8),
                    Catch::Contains("line 4: 11 tokens, more than the context of 8"));
  const TokenizedExample cut = tokenize_example(r, tok, 1, 2, 8, Truncate::Right);
  CHECK(cut.ids.size() == 9);
  CHECK(cut.ids.back() == 'y');
  CHECK_THROWS_WITH(tokenize_example(r, tok, 1, 2, 5, Truncate::Right),
                    Catch::Contains("nothing of the completion is left"));
  r.completion = "";
  CHECK_THROWS_WITH(tokenize_example(r, tok, 1, 2, 64),
                    Catch::Contains("line 4: the completion encodes to no token"));
}

TEST_CASE("instruct: bad JSONL names the file and the line", "[gpt][instruct][robust]") {
  testing::TempDir tmp;
  auto fails = [&](const std::string& text, const std::string& says) {
    INFO(text);
    CHECK_THROWS_WITH(read_jsonl(write(tmp, "bad.jsonl", text)),
                      Catch::Contains("bad.jsonl") && Catch::Contains(says));
  };
  fails("{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"prompt\": \"a\", \"completion\": }\n",
        "line 2: not a JSON object");
  fails("[1, 2]\n", "line 1: not a JSON object");
  fails("{\"prompt\": \"a\"}\n", "line 1: a record needs \"prompt\" and \"completion\", or \"text\"");
  fails("{\"text\": 5}\n", "line 1: \"text\" is not a string");
  fails("\n\n", "holds no record");
  CHECK_THROWS_WITH(read_jsonl((tmp.path / "none.jsonl").string()), Catch::Contains("cannot read"));
  const TokenizedExample one{{5}, {1}};
  CHECK_THROWS_WITH(instruct_batch({one}, {0}, 0), Catch::Contains("fewer than 2"));
  CHECK_THROWS_WITH(instruct_batch({one}, {3}, 0), Catch::Contains("row 3 out of range"));
}

TEST_CASE("instruct: LoRA fine-tuning learns the completions and leaves the base as it was",
          "[gpt][instruct][lora]") {
  // answers a model cannot guess: "<name>=" -> a fixed word per name
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"ab=", "cat"}, {"cd=", "dog"}, {"ef=", "owl"}, {"gh=", "bee"}, {"ij=", "ant"}, {"kl=", "elk"}};
  ByteTokenizer bytes;
  const Encode tok = [&](const std::string& s) { return bytes.encode(s); };
  std::vector<TokenizedExample> train;
  for (const auto& [p, c] : pairs) train.push_back(tokenize_example({p, c, false, 1}, tok, -1, '\n', 16));
  nn::LlamaConfig c;
  c.hidden_size = 32, c.intermediate_size = 48, c.num_attention_heads = 4, c.num_key_value_heads = 2;
  c.vocab_size = 256, c.num_hidden_layers = 2, c.max_position_embeddings = 16;
  nn::LlamaForCausalLM model(c, 3);
  // A random output layer (std 0.02) behind the final RMSNorm moves a logit by at most ~0.6, whatever the
  // adapters do; a trained model's is larger. Scaled as one, so that the frozen head lets the answers be
  // learnt.
  Tensor head = model.lm_head->weight.data();
  ops::mul_(head, 25.0);
  const nn::StateDict base = model.state_dict();
  std::vector<Tensor> before;
  for (const auto& [name, t] : base) before.push_back(t.clone());
  nn::LoraConfig cfg;
  cfg.r = 8, cfg.lora_alpha = 16, cfg.target_modules = {"all-linear"};
  Generator gen(4);
  nn::apply_lora(model, cfg, &gen);
  const LogitsFn logits = [&](const Tensor& idx) { return model.forward(idx); };

  // padding changes nothing: one example at a time or all in one padded batch
  const double start = completion_loss(model, logits, train, 6, /*pad=*/0);
  CHECK(completion_loss(model, logits, train, 1, 0) == Approx(start).epsilon(1e-5));

  FinetuneOptions o;
  o.steps = 60, o.batch_size = 3, o.lr = 1e-2, o.eval_every = 30;
  std::vector<std::string> lines;
  const FinetuneLog log =
      finetune_lora(model, logits, train, train, o, 0, [&](const std::string& l) { lines.push_back(l); });
  CHECK(log.train_loss.size() == 60);
  REQUIRE(log.val_loss.size() == 2);
  CHECK(log.val_loss[1].first == 60);
  CHECK(log.val_loss[1].second < 0.1 * start);  // the six answers learnt
  CHECK(lines.back().find("validation loss") != std::string::npos);
  // log.csv: a header and one row a step, the validation losses on steps 30 and 60 only
  const std::string csv = finetune_log_csv(log);
  std::vector<std::string> rows;
  for (size_t a = 0, b; (b = csv.find('\n', a)) != std::string::npos; a = b + 1)
    rows.push_back(csv.substr(a, b - a));
  REQUIRE(rows.size() == 61);
  CHECK(rows[0] == "step,train_loss,val_loss");
  CHECK(rows[1] == fmt::format("1,{:.6f},", log.train_loss[0]));
  CHECK(rows[30] == fmt::format("30,{:.6f},{:.6f}", log.train_loss[29], log.val_loss[0].second));
  CHECK(rows[60].ends_with(fmt::format(",{:.6f}", log.val_loss[1].second)));
  size_t i = 0;
  for (const auto& [name, t] : base)
    CHECK(allclose(t, before[i++], 0, 0));  // the frozen weights, bit for bit

  FinetuneOptions bad = o;
  bad.steps = 0;
  CHECK_THROWS_WITH(finetune_lora(model, logits, train, {}, bad, 0, [](const std::string&) {}),
                    Catch::Contains("finetune_lora: steps 0"));
  nn::LlamaForCausalLM plain(c, 3);
  for (auto& p : plain.parameters()) p.requires_grad_(false);
  CHECK_THROWS_WITH(finetune_lora(plain, logits, train, {}, o, 0, [](const std::string&) {}),
                    Catch::Contains("no trainable parameters"));
}

TEST_CASE(
    "instruct: a fine-tuning run stopped and resumed continues exactly, and a wrong resume changes nothing",
    "[gpt][instruct][lora]") {
  ByteTokenizer bytes;
  const Encode tok = [&](const std::string& s) { return bytes.encode(s); };
  std::vector<TokenizedExample> train;
  for (const auto& [p, c] : std::vector<std::pair<std::string, std::string>>{
           {"ab=", "cat"}, {"cd=", "dog"}, {"ef=", "owl"}, {"gh=", "bee"}, {"ij=", "ant"}})
    train.push_back(tokenize_example({p, c, false, 1}, tok, -1, '\n', 16));
  nn::LlamaConfig c;
  c.hidden_size = 16, c.intermediate_size = 24, c.num_attention_heads = 2, c.num_key_value_heads = 1;
  c.vocab_size = 256, c.num_hidden_layers = 1, c.max_position_embeddings = 16;
  testing::TempDir tmp;
  // one run: a fresh model with dropout on the adapters, its generator, and the options
  struct Run {
    std::unique_ptr<nn::LlamaForCausalLM> model;
    std::unique_ptr<Generator> gen;
    FinetuneLog log;
  };
  auto run = [&](int64_t stop_at, bool resume, const std::string& checkpoint) {
    Run r;
    r.model = std::make_unique<nn::LlamaForCausalLM>(c, 5);
    r.gen = std::make_unique<Generator>(6);
    nn::LoraConfig cfg;
    cfg.r = 4, cfg.lora_alpha = 8, cfg.lora_dropout = 0.2, cfg.target_modules = {"all-linear"};
    nn::apply_lora(*r.model, cfg, r.gen.get());
    FinetuneOptions o;
    o.steps = 9, o.batch_size = 2, o.lr = 5e-3, o.warmup = 2, o.eval_every = 3, o.seed = 7;
    o.checkpoint = checkpoint, o.resume = resume, o.stop_at = stop_at, o.generator = r.gen.get();
    const LogitsFn logits = [&m = *r.model](const Tensor& idx) { return m.forward(idx); };
    r.log = finetune_lora(*r.model, logits, train, train, o, 0, [](const std::string&) {});
    return r;
  };
  const Run whole = run(0, false, (tmp.path / "whole.safetensors").string());
  const std::string ckpt = (tmp.path / "stopped.safetensors").string();
  const Run first = run(5, false, ckpt);  // ends after step 5, mid-epoch (5 examples, 2 a step)
  CHECK(first.log.train_loss.size() == 5);
  const Run rest = run(0, true, ckpt);
  CHECK(rest.log.resumed_at == 5);
  REQUIRE(rest.log.train_loss.size() == 9);
  for (size_t i = 0; i < 9; ++i) CHECK(rest.log.train_loss[i] == whole.log.train_loss[i]);  // bit for bit
  REQUIRE(rest.log.val_loss.size() == whole.log.val_loss.size());
  CHECK(rest.log.val_loss.back().second == whole.log.val_loss.back().second);
  const auto a = whole.model->named_parameters(), b = rest.model->named_parameters();
  for (size_t i = 0; i < a.size(); ++i) CHECK(allclose(a[i].second.data(), b[i].second.data(), 0, 0));
  CHECK(rest.gen->offset() == whole.gen->offset());
  // resumed again at the end: nothing to train, the log as it was
  CHECK(run(0, true, ckpt).log.train_loss == whole.log.train_loss);

  // a resume with other settings is refused, naming the file and the setting, before anything changes
  nn::LlamaForCausalLM model(c, 5);
  nn::LoraConfig cfg;
  cfg.r = 2, cfg.target_modules = {"q_proj"};
  nn::apply_lora(model, cfg);
  const nn::StateDict before = model.state_dict();
  std::vector<Tensor> saved;
  for (const auto& [name, t] : before) saved.push_back(t.clone());
  FinetuneOptions o;
  o.steps = 9, o.batch_size = 2, o.seed = 7, o.checkpoint = ckpt, o.resume = true;
  const LogitsFn logits = [&](const Tensor& idx) { return model.forward(idx); };
  auto quiet = [](const std::string&) {};
  CHECK_THROWS_WITH(
      finetune_lora(model, logits, train, {}, o, 0, quiet),
      Catch::Contains("stopped.safetensors' holds 'model.layers.0.self_attn.q_proj.lora_A.weight' "
                      "of shape [4, 16], the model's is [2, 16]"));
  FinetuneOptions other_seed = o;
  other_seed.seed = 8;
  CHECK_THROWS_WITH(finetune_lora(model, logits, train, {}, other_seed, 0, quiet),
                    Catch::Contains("was made with --seed 7, not 8"));
  size_t i = 0;
  for (const auto& [name, t] : before) CHECK(allclose(t, saved[i++], 0, 0));
  FinetuneOptions not_ours = o;
  not_ours.checkpoint = write(tmp, "x.safetensors", "not a checkpoint");
  CHECK_THROWS_WITH(finetune_lora(model, logits, train, {}, not_ours, 0, quiet),
                    Catch::Contains("x.safetensors"));
}

TEST_CASE("instruct: packed rows hold instruct_batch's targets, and packed LoRA steps give its losses",
          "[gpt][instruct][packing]") {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"a=", "cat"}, {"abcdef=", "dog"}, {"x=", "o"}, {"gh=", "bee"}, {"ijklmnopq=", "ant"}, {"k=", "elk"}};
  ByteTokenizer bytes;
  const Encode tok = [&](const std::string& s) { return bytes.encode(s); };
  std::vector<TokenizedExample> train;
  for (const auto& [p, c] : pairs) train.push_back(tokenize_example({p, c, false, 1}, tok, -1, '\n', 16));
  // the layout: in order, each example in the first row with room, its own document id, the padding last
  const std::vector<int64_t> rows{0, 1, 2, 3, 4, 5};
  const Batch plain = instruct_batch(train, rows, 0), packed = packed_instruct_batch(train, rows, 0, 16);
  // inputs 5, 10, 3, 6, 13, 5: row 0 takes 5 + 10, row 1 3 + 6 (+ 5 later), row 2 13; T = 15
  REQUIRE(packed.x.shape() == Shape({3, 15}));
  CHECK(packed.document_ids.to_vector<int64_t>() ==
        std::vector<int64_t>{0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  //
                             0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3,  //
                             0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1});
  CHECK(packed.x.to_vector<int64_t>()[29] == 0);  // padding
  CHECK(packed.y.to_vector<int64_t>()[29] == -100);
  auto scored = [](const Tensor& y) {
    std::multiset<int64_t> s;
    for (int64_t v : y.to_vector<int64_t>())
      if (v != -100) s.insert(v);
    return s;
  };
  CHECK(scored(packed.y) == scored(plain.y));
  CHECK(packed.y.to_vector<int64_t>()[14] == plain.y.to_vector<int64_t>()[plain.y.size(1) + 9]);  // 1's last
  REQUIRE_THROWS_SACCADE(packed_instruct_batch(train, rows, 0, 12),
                         "packed_instruct_batch: example 4 has 14 ids");

  // the same LoRA steps, padded or packed: the same losses and validation losses
  nn::LlamaConfig c;
  c.hidden_size = 32, c.intermediate_size = 48, c.num_attention_heads = 4, c.num_key_value_heads = 2;
  c.vocab_size = 256, c.num_hidden_layers = 2, c.max_position_embeddings = 16;
  auto run = [&](int64_t pack) {
    nn::LlamaForCausalLM model(c, 3);
    Tensor head = model.lm_head->weight.data();
    ops::mul_(head, 25.0);
    nn::LoraConfig cfg;
    cfg.r = 8, cfg.lora_alpha = 16, cfg.target_modules = {"all-linear"};
    Generator gen(4);
    nn::apply_lora(model, cfg, &gen);
    FinetuneOptions o;
    o.steps = 6, o.batch_size = 4, o.lr = 1e-2, o.eval_every = 3, o.pack = pack;
    o.packed_logits = [&](const Tensor& idx, const Tensor& docs) { return model.forward(idx, docs); };
    return finetune_lora(
        model, [&](const Tensor& idx) { return model.forward(idx); }, train, train, o, 0,
        [](const std::string&) {});
  };
  const FinetuneLog a = run(0), b = run(16);
  REQUIRE(b.train_loss.size() == a.train_loss.size());
  for (size_t i = 0; i < a.train_loss.size(); ++i)
    CHECK(b.train_loss[i] == Approx(a.train_loss[i]).epsilon(1e-4));
  REQUIRE(b.val_loss.size() == 2);
  for (size_t i = 0; i < 2; ++i) CHECK(b.val_loss[i].second == Approx(a.val_loss[i].second).epsilon(1e-4));
  CHECK(a.train_loss.back() < 0.8 * a.train_loss.front());  // it trains
}

#endif  // SACCADE_HAVE_GPT
