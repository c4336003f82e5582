// examples/gpt: the fortunes rules of docs/data.md on files the test writes (and, when installed, the real
// streams' counts and SHA-256), the byte tokenizer, the GPT model (tied output layer, GPT-2 init, decay
// groups), KV-cache generation against full recomputation, sampling, learning a short text, exact resumes,
// checkpoints and bad input. Compiled only when examples/gpt/CMakeLists.txt defined the macro below.
#ifdef SACCADE_HAVE_GPT

#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>

#include "attention_checks.h"
#include "examples/common/cmudict.h"
#include "examples/gpt/data.h"
#include "examples/gpt/generate.h"
#include "examples/gpt/run_control.h"
#include "examples/gpt/tokenizer.h"
#include "examples/gpt/training.h"
#include "helpers.h"
#include "nn/linear.h"
#include "temp_dir.h"

using namespace saccade;
using namespace saccade::examples;
using namespace saccade::testing;
namespace fs = std::filesystem;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

GPTConfig tiny(double dropout = 0.0) {
  GPTConfig c;
  c.context = 16, c.n_layer = 2, c.n_head = 2, c.d_model = 32, c.dropout = dropout;
  return c;
}

std::vector<int64_t> ids_of(const std::string& s) { return ByteTokenizer().encode(s); }

// The byte ids of a period-24 text, "the cat sat on the mat. " `repeats` times: a tiny model learns it fast.
std::vector<int64_t> cat_text_ids(int repeats) {
  std::string text;
  for (int i = 0; i < repeats; ++i) text += "the cat sat on the mat. ";
  return ids_of(text);
}

}  // namespace

TEST_CASE("fortunes: files, documents, dedup and the hash split of docs/data.md", "[examples][gpt]") {
  TempDir dir("saccade_fortunes");
  // read: regular files without '.', in byte order ("B" < "a"); skipped: "a.dat", "a.u8" and a symlink
  write(dir.file("a"), "one\n%\n\n\ntwo\n\n%\n   \n%\nthree\n%\n%\none\n%\nquote 7\n%\n");
  write(dir.file("B"), "%\nfour\nfive\n%\nsix");
  write(dir.file("a.dat"), "skipped\n%\n");
  write(dir.file("a.u8"), "skipped\n%\n");
  fs::create_symlink(dir.file("a"), dir.file("link"));
  std::vector<std::string> files = fortune_files(dir.path.string());
  REQUIRE(files == std::vector<std::string>{dir.file("B"), dir.file("a")});
  // documents: pieces between lines that are exactly "%", stripped of '\n', blank ones dropped
  REQUIRE(split_documents("one\n%\n\n\ntwo\n\n%\n   \n%\nthree\n%\n%\n") ==
          std::vector<std::string>{"one", "two", "three"});
  REQUIRE(split_documents("a\n%%\nb\n% \nc") == std::vector<std::string>{"a\n%%\nb\n% \nc"});
  REQUIRE(split_documents("\n x \n") == std::vector<std::string>{" x "});
  FortunesCorpus c = load_fortunes(dir.path.string());
  REQUIRE(c.documents == 7);  // "four\nfive", "six" (B), then one, two, three, one, quote 7 (a)
  REQUIRE(c.distinct == 6);
  // buckets (FNV-1a 64 of "0:" + document, splitmix64, % 100), computed independently: "quote 7" is 91
  REQUIRE(split_bucket("quote 7") == 91);
  REQUIRE(split_bucket("one") == 12);
  REQUIRE(c.train == "four\nfive\n%\nsix\n%\none\n%\ntwo\n%\nthree\n%\n");
  REQUIRE(c.valid == "quote 7\n%\n");
  REQUIRE(c.train_documents == 5);
  REQUIRE(c.valid_documents == 1);
  REQUIRE_THROWS_AS(fortune_files(dir.file("missing")), saccade::Error);
}

TEST_CASE("sha256_hex gives FIPS 180-4's test vectors", "[examples][gpt]") {
  REQUIRE(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  REQUIRE(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("fortunes: the real streams give docs/data.md's counts and check values", "[examples][gpt][slow]") {
  if (!fs::exists(kFortunesDir)) {
    WARN(kFortunesDir << " not found (Debian package fortunes): skipped");
    return;
  }
  REQUIRE(fortune_files().size() == 43);
  FortunesCorpus c = load_fortunes();
  REQUIRE(c.documents == 15217);
  REQUIRE(c.distinct == 15134);
  REQUIRE(c.train_documents == 13654);
  REQUIRE(c.valid_documents == 1480);
  REQUIRE(c.train.size() == 2300639);
  REQUIRE(c.valid.size() == 265064);
  REQUIRE(sha256_hex(c.train).substr(0, 16) == "e93876d4ad62d6b0");
  REQUIRE(sha256_hex(c.valid).substr(0, 16) == "f1a4752f6edcb6a3");
}

TEST_CASE("GPT: a small model trained briefly on the real fortunes beats the byte unigram",
          "[examples][gpt][slow]") {
  if (!fs::exists(kFortunesDir)) {
    WARN(kFortunesDir << " not found (Debian package fortunes): skipped");
    return;
  }
  FortunesCorpus c = load_fortunes();
  ByteTokenizer tok;
  GPTConfig cfg;
  cfg.context = 64, cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 64, cfg.dropout = 0.0;
  GPT m(cfg, 0);
  GPTTrainOptions o;
  o.steps = 300, o.batch_size = 16, o.lr = 3e-3, o.min_lr = 3e-4, o.warmup = 30, o.eval_every = 0;
  o.eval_tokens = 16384, o.log = nullptr;
  GPTTrainResult r = train_gpt(m, tok.encode(c.train), tok.encode(c.valid), o);
  // the unigram entropy of the bytes is 4.8 bits; uniform guessing is 8
  INFO("validation " << r.best.bits_per_byte << " bits/byte on 16384 tokens");
  REQUIRE(r.best.bits_per_byte < 4.2);
}

TEST_CASE("the byte tokenizer round-trips any bytes", "[examples][gpt]") {
  ByteTokenizer tok;
  std::string s = "Caf\xc3\xa9 \x00\xff%\n";
  s += std::string(1, '\0');
  REQUIRE(tok.decode(tok.encode(s)) == s);
  REQUIRE(tok.encode("A\xff") == std::vector<int64_t>{65, 255});
  REQUIRE_THROWS_AS(tok.decode({256}), saccade::Error);
  REQUIRE_THROWS_WITH(make_tokenizer("bpe-unknown", "some/dir"),
                      Catch::Contains("bpe-unknown") && Catch::Contains("some/dir"));
}

TEST_CASE("the SentencePiece BPE tokenizer trains, saves, reloads and round-trips", "[examples][gpt]") {
  TempDir dir("saccade_bpe");
  std::string text;
  const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "home"};
  for (int i = 0; i < 3000; ++i) text += std::string(words[(i * 7 + i / 5) % 12]) + (i % 9 == 8 ? "\n" : " ");
  SentencePieceTokenizer::train(text, 280, tokenizer_path(dir.path.string()));
  std::unique_ptr<Tokenizer> tok = make_tokenizer("bpe", dir.path.string());
  REQUIRE(tok->vocab_size() == 280);
  REQUIRE(tok->name() == "bpe");
  const std::string s = "the cat ran home\n%\n  two  spaces, Caf\xc3\xa9 \xe2\x82\xac and unseen {}|\n";
  std::vector<int64_t> ids = tok->encode(s);
  REQUIRE(tok->decode(ids) == s);  // byte fallback: nothing is lost
  REQUIRE(ids.size() < s.size());  // merges learnt from the text
  REQUIRE_THROWS_AS(tok->decode({280}), saccade::Error);
  REQUIRE_THROWS_AS(make_tokenizer("bpe", dir.file("missing")), saccade::Error);
}

TEST_CASE("windows: random ones are next-token pairs, scoring ones cover the stream once",
          "[examples][gpt]") {
  std::vector<int64_t> t(50);
  for (int64_t i = 0; i < 50; ++i) t[i] = i;
  std::mt19937_64 rng(3);
  Batch b = random_windows(t, 4, 8, rng);
  REQUIRE(b.x.shape() == Shape({4, 8}));
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t j = 0; j < 8; ++j)
      REQUIRE(b.y.data<int64_t>()[r * 8 + j] == b.x.data<int64_t>()[r * 8 + j] + 1);
  REQUIRE(eval_window_starts(50, 16) == std::vector<int64_t>{0, 16, 32, 48});  // 49 predictions: 16+16+16+1
  REQUIRE_THROWS_AS(random_windows(t, 1, 50, rng), saccade::Error);
}

TEST_CASE("GPT: tied output layer, GPT-2 init, decay groups, names", "[examples][gpt]") {
  GPTConfig c = tiny();
  c.d_model = 48, c.n_head = 4, c.n_layer = 3;
  GPT m(c, 1);
  nn::StateDict sd = m.state_dict();
  // the output matrix is stored once, as wte.weight (V, d): no lm_head, no other (V, d) tensor
  int vd = 0;
  for (const auto& [name, t] : sd) vd += t.shape() == Shape({256, 48});
  REQUIRE(vd == 1);
  REQUIRE(sd.contains("wte.weight"));
  REQUIRE(sd.at("wpe.weight").shape() == Shape({16, 48}));
  REQUIRE(sd.at("h.2.mlp.c_fc.weight").shape() == Shape({192, 48}));  // torch's Linear layout (out, in)
  REQUIRE(sd.at("h.0.attn.W_o.weight").shape() == Shape({48, 48}));
  // the output layer's gradient reaches wte.weight rows of tokens that are not in the input
  Tensor idx = ops::full({1, 4}, 7, DType::Int64);
  Variable loss = cross_entropy(reshape(m.forward(idx), {4, 256}), ops::full({4}, 9, DType::Int64));
  loss.backward();
  Tensor g = m.wte->weight.grad();
  REQUIRE(ops::sum(ops::abs(g.select(0, 9))).item<double>() > 0);
  // GPT-2 init: N(0, 0.02²), residual projections N(0, (0.02 / √(2 · 3))²), biases 0
  auto std_of = [](const Tensor& t) { return std::sqrt(ops::mean(t * t).item<double>()); };
  REQUIRE(std_of(m.h[0]->attn->W_q->weight.data()) == Approx(0.02).epsilon(0.05));
  REQUIRE(std_of(m.h[0]->attn->W_o->weight.data()) == Approx(0.02 / std::sqrt(6.0)).epsilon(0.05));
  REQUIRE(std_of(m.h[1]->mlp->c_proj->weight.data()) == Approx(0.02 / std::sqrt(6.0)).epsilon(0.05));
  REQUIRE(ops::sum(ops::abs(m.h[0]->mlp->c_fc->bias.data())).item<double>() == 0);
  // decay: the 6 matrices of each block; not biases, LayerNorms or embeddings
  REQUIRE(m.decayed_parameters().size() == 18);
  REQUIRE(m.decayed_parameters().size() + m.undecayed_parameters().size() == m.parameters().size());
  for (const Variable& p : m.undecayed_parameters())
    REQUIRE((p.dim() == 1 || p.impl() == m.wte->weight.impl() || p.impl() == m.wpe->weight.impl()));
}

TEST_CASE("GPT: tied weights survive save and load as one tensor", "[examples][gpt]") {
  TempDir dir("saccade_gpt");
  GPT a(tiny(), 1), b(tiny(), 2);
  nn::save(a, dir.file("m.safetensors"), a.config().to_metadata());
  nn::Safetensors file = nn::load_safetensors(dir.file("m.safetensors"));
  REQUIRE_FALSE(file.tensors.contains("lm_head.weight"));
  REQUIRE(file.tensors.size() == a.state_dict().size());
  std::shared_ptr<GPT> c = load_gpt(dir.file("m.safetensors"));
  Tensor idx = ops::full({2, 5}, 3, DType::Int64);
  a.eval(), c->eval();
  REQUIRE(allclose(c->forward(idx).data(), a.forward(idx).data(), 0, 0));
  // still tied after loading: changing the embedding changes the output layer
  Tensor before = c->forward(idx).data().clone();
  Tensor row = c->wte->weight.data().select(0, 100);
  ops::mul_(row, 2.0);
  REQUIRE_FALSE(allclose(c->forward(idx).data().select(2, 100), before.select(2, 100), 1e-3, 1e-6));
  // a training checkpoint of a float16 run (optimizer and GradScaler state beside the model) loads too: the
  // scaler's scalars are not parameters (gpt train --dtype f16 once failed to score its best model here)
  nn::AdamW opt(a.parameters());
  nn::GradScaler scaler;
  nn::save_checkpoint(dir.file("ckpt.safetensors"), a, opt, 3, a.config().to_metadata(), &scaler);
  std::shared_ptr<GPT> d = load_gpt(dir.file("ckpt.safetensors"));
  d->eval();
  REQUIRE(allclose(d->forward(idx).data(), a.forward(idx).data(), 0, 0));
  // a checkpoint of another model or of another size is refused
  nn::Linear lin(3, 4);
  nn::save(lin, dir.file("lin.safetensors"));
  REQUIRE_THROWS_WITH(load_gpt(dir.file("lin.safetensors")), Catch::Contains("not a gpt checkpoint"));
  GPTConfig wide = tiny();
  wide.d_model = 48;
  GPT w(wide, 0);
  nn::save(w, dir.file("w.safetensors"), wide.to_metadata());
  REQUIRE_THROWS_AS(nn::load(b, dir.file("w.safetensors")), saccade::Error);
  // a checkpoint naming a tokenizer make_tokenizer does not know: refused by load_gpt, naming the file
  nn::Metadata unknown = a.config().to_metadata();
  unknown["tokenizer"] = "bpe-unknown";
  nn::save(a, dir.file("tok.safetensors"), unknown);
  REQUIRE_THROWS_WITH(load_gpt(dir.file("tok.safetensors")),
                      Catch::Contains(dir.file("tok.safetensors")) && Catch::Contains("bpe-unknown"));
}

TEST_CASE("GPT: KV-cache generation equals recomputing the whole context", "[examples][gpt]") {
  GPT m(tiny(), 5);
  const std::vector<std::vector<int64_t>> prompts{ids_of("The "), ids_of("A fo")};
  SamplingOptions greedy{.max_new_tokens = 12, .temperature = 0};
  Generation cached = generate(m, prompts, greedy, true, true);
  Generation full = generate(m, prompts, greedy, false, true);
  REQUIRE(cached.tokens == full.tokens);  // bit for bit
  REQUIRE(cached.logits.size() == 12);
  for (size_t i = 0; i < cached.logits.size(); ++i)
    REQUIRE(allclose(cached.logits[i], full.logits[i], 1e-4, 1e-5));
  // sampling: one seed, one sample; the cache changes nothing there either
  SamplingOptions s{.max_new_tokens = 12, .temperature = 1.0, .top_k = 50, .top_p = 0.95, .seed = 7};
  REQUIRE(generate(m, prompts, s).tokens == generate(m, prompts, s).tokens);
  REQUIRE(generate(m, prompts, s).tokens == generate(m, prompts, s, false).tokens);
  s.seed = 8;
  REQUIRE(generate(m, prompts, s).tokens != generate(m, prompts, greedy).tokens);
  // a prompt longer than half the context is prefilled whole (the refill keeps only context / 2 tokens)
  const std::vector<std::vector<int64_t>> long_prompt{ids_of("%\nThe cat sat o")};
  REQUIRE(long_prompt[0].size() == 15);  // of a context of 16
  // (two new tokens fill the context; after that the cache refills and the two paths see different windows)
  const SamplingOptions two{.max_new_tokens = 2, .temperature = 0};
  Generation cached_long = generate(m, long_prompt, two, true, true);
  Generation full_long = generate(m, long_prompt, two, false, true);
  REQUIRE(cached_long.tokens == full_long.tokens);
  for (size_t i = 0; i < 2; ++i) REQUIRE(allclose(cached_long.logits[i], full_long.logits[i], 1e-4, 1e-5));
  // past the context the cache refills itself and generation goes on
  REQUIRE(
      generate(m, {ids_of("x")}, SamplingOptions{.max_new_tokens = 40, .temperature = 0}).tokens[0].size() ==
      40);
}

TEST_CASE(
    "GPT: packed documents, each document's logits and gradients those of its own forward (gpt2's learned "
    "positions restarting, and llama), checkpointed or not",
    "[examples][gpt][packing]") {
  const std::vector<std::vector<int64_t>> lengths{{5, 9, 1, 5}, {20}, {12, 8}};
  const int64_t B = 3, T = 20;
  const Tensor ids = document_ids_of(lengths);
  Generator g(11);
  for (const char* arch : {"gpt2", "llama"}) {
    INFO(arch);
    GPTConfig c = tiny();
    c.arch = arch, c.context = 32, c.vocab_size = 40;
    const Tensor idx = ops::randint(0, c.vocab_size, {B, T}, Device::cpu(), &g);
    GPT m(c, 3);
    m.to(DType::Float64);
    const Tensor R = ops::randn({B, T, c.vocab_size}, DType::Float64, Device::cpu(), &g);
    auto packed_grads = [&](Variable& logits) {
      logits = m.forward(idx, ids);
      sum(mul(logits, Variable(R))).backward();
      std::vector<Tensor> grads;
      for (Variable p : m.parameters()) grads.push_back(p.grad().clone()), p.zero_grad();
      return grads;
    };
    Variable packed;
    const std::vector<Tensor> want = packed_grads(packed);
    // each document alone, its gradients summed over the documents
    check_documents_alone([&](const Tensor& x) { return m.forward(x); }, idx, lengths, packed.data(), R);
    size_t i = 0;
    for (Variable p : m.parameters()) {
      CHECK(allclose(p.grad(), want[i++], 1e-9, 1e-9));
      p.zero_grad();
    }
    // the row read as one document is another computation
    CHECK_FALSE(allclose(packed.data(), m.forward(idx).data(), 1e-3, 1e-3));
    // checkpointed blocks recompute with the same documents after the forward returned
    for (auto& b : m.h) b->checkpoint_activations = true;
    for (auto& l : m.layers) l->checkpoint_activations = true;
    Variable again;
    const std::vector<Tensor> checkpointed = packed_grads(again);
    CHECK(allclose(again.data(), packed.data(), 0, 0));
    for (size_t k = 0; k < want.size(); ++k) CHECK(allclose(checkpointed[k], want[k], 1e-12, 1e-12));
    REQUIRE_THROWS_SACCADE(m.forward(idx, ids.slice(1, 0, 19)),
                           "GPT: document_ids [3, 19] must have the shape of the ids [3, 20]");
    REQUIRE_THROWS_SACCADE(m.forward(idx, ops::neg(ids)), "document_ids must not decrease along T");
  }
}

TEST_CASE("GPT: prompts of unequal lengths share a batch and continue as they do alone", "[examples][gpt]") {
  GPT m(tiny(), 6);
  // lengths 1, 4, 9 and 13 of a context of 16: the longest feeds into a full cache and its refill
  const std::vector<std::vector<int64_t>> prompts{ids_of("The cat sat o"), ids_of("x"), ids_of("A fo"),
                                                  ids_of("%\nQuotes ")};
  SamplingOptions greedy{.max_new_tokens = 20, .temperature = 0};
  for (bool cache : {true, false}) {
    std::vector<std::vector<int64_t>> seen(prompts.size());
    Generation mixed = generate(m, prompts, greedy, cache, false, [&](const std::vector<int64_t>& next) {
      for (size_t b = 0; b < next.size(); ++b)
        if (next[b] >= 0) seen[b].push_back(next[b]);
    });
    REQUIRE(mixed.tokens == seen);  // on_tokens saw every row's tokens once, -1 elsewhere
    for (size_t b = 0; b < prompts.size(); ++b) {
      INFO("prompt " << b << (cache ? " with" : " without") << " the cache");
      REQUIRE(mixed.tokens[b].size() == 20);
      REQUIRE(mixed.tokens[b] == generate(m, {prompts[b]}, greedy, cache).tokens[0]);
    }
  }
  // a seed gives one sample for the mixed batch too
  SamplingOptions s{.max_new_tokens = 10, .temperature = 1.0, .seed = 3};
  REQUIRE(generate(m, prompts, s).tokens == generate(m, prompts, s).tokens);
}

TEST_CASE("sample_token: greedy, top-k and top-p", "[examples][gpt]") {
  const float logits[4] = {1.0f, 3.0f, 2.0f, 3.0f};
  std::mt19937_64 rng(0);
  REQUIRE(sample_token(logits, 4, {.temperature = 0}, rng) == 1);  // the first maximum
  for (int i = 0; i < 50; ++i) {
    int64_t k = sample_token(logits, 4, {.temperature = 1, .top_k = 2}, rng);
    REQUIRE((k == 1 || k == 3));
    REQUIRE(sample_token(logits, 4, {.temperature = 1, .top_p = 0.3}, rng) == 1);  // one token holds 0.42
  }
  REQUIRE_THROWS_AS(sample_token(logits, 4, {.top_p = 0}, rng), saccade::Error);
  REQUIRE_THROWS_AS(sample_token(logits, 4, {.temperature = -1}, rng), saccade::Error);
}

TEST_CASE("GPT: bad input gets a clear error", "[examples][gpt]") {
  GPT m(tiny(), 0);
  REQUIRE_THROWS_WITH(generate(m, {{}}, {}), Catch::Contains("empty"));
  REQUIRE_THROWS_WITH(fit_prompt({}, 16), Catch::Contains("empty"));
  int64_t dropped = 0;
  std::vector<int64_t> long_prompt(20, 65);
  REQUIRE(fit_prompt(long_prompt, 16, &dropped).size() == 16);
  REQUIRE(dropped == 4);
  REQUIRE_THROWS_WITH(generate(m, {long_prompt}, {}), Catch::Contains("longer than the context"));
  REQUIRE_THROWS_WITH(m.forward(ops::zeros({1, 17}, DType::Int64)), Catch::Contains("context of 16"));
  REQUIRE_THROWS_AS(m.forward(ops::full({1, 2}, 256, DType::Int64)), saccade::Error);
  GPTConfig bad = tiny();
  bad.n_head = 3;
  REQUIRE_THROWS_AS(GPT(bad), saccade::Error);
  // issue 49 item 21: a Hugging Face weights file (metadata {"format": "pt"} only) is named as one
  REQUIRE_THROWS_WITH(GPTConfig::from_metadata({{"format", "pt"}}),
                      Catch::Contains("a weights file as transformers saves it") &&
                          Catch::Contains("give its folder with --hf"));
  REQUIRE_THROWS_WITH(GPTConfig::from_metadata({{"model", "g2p"}}), Catch::Contains("not a gpt checkpoint"));
}

TEST_CASE("scheduled_lr: warmup then cosine over the steps, or over the time limit", "[examples][gpt]") {
  GPTTrainOptions o;
  o.steps = 110, o.warmup = 10, o.lr = 1e-2, o.min_lr = 1e-3;
  REQUIRE(scheduled_lr(o, 1) == Approx(1e-3));               // lr / 10
  REQUIRE(scheduled_lr(o, 6) == Approx(1e-3 + 0.5 * 9e-3));  // halfway up
  REQUIRE(scheduled_lr(o, 11) == Approx(1e-2));              // the first cosine step
  REQUIRE(scheduled_lr(o, 61) == Approx(5.5e-3));            // halfway down: (lr + min_lr) / 2
  REQUIRE(scheduled_lr(o, 111) == Approx(1e-3));             // the end
  o.time_limit = 100;  // the warmup stays in steps; the decay follows the clock from warmup_end = 20 s
  REQUIRE(scheduled_lr(o, 6, 3.0, 0) == Approx(1e-3 + 0.5 * 9e-3));
  REQUIRE(scheduled_lr(o, 11, 20.0, 20.0) == Approx(1e-2));
  REQUIRE(scheduled_lr(o, 12, 60.0, 20.0) == Approx(5.5e-3));
  REQUIRE(scheduled_lr(o, 500, 100.0, 20.0) == Approx(1e-3));
  REQUIRE(scheduled_lr(o, 501, 130.0, 20.0) == Approx(1e-3));  // past the limit: min_lr
}

TEST_CASE("the training log round-trips as CSV and refuses malformed files", "[examples][gpt]") {
  TempDir dir("saccade_gpt_log");
  std::vector<TrainLogRow> rows{{1, 0.25, 1e-3, 5.5, NAN}, {2, 0.5, 2e-3, 5.25, 7.125}};
  write_train_log(dir.file("log.csv"), rows);
  REQUIRE_FALSE(fs::exists(dir.file("log.csv.tmp")));
  std::vector<TrainLogRow> back = read_train_log(dir.file("log.csv"));
  REQUIRE(back.size() == 2);
  REQUIRE(back[0].step == 1);
  REQUIRE(back[0].seconds == 0.25);
  REQUIRE(back[0].lr == 1e-3);
  REQUIRE(back[0].train_loss == 5.5);
  REQUIRE(std::isnan(back[0].val_bits_per_byte));
  REQUIRE(back[1].val_bits_per_byte == 7.125);
  write(dir.file("bad.csv"), "step,seconds,lr,train_loss,val_bits_per_byte\n1,0.5,0.001,x,\n");
  REQUIRE_THROWS_WITH(read_train_log(dir.file("bad.csv")), Catch::Contains("line 2"));
  write(dir.file("other.csv"), "a,b\n");
  REQUIRE_THROWS_WITH(read_train_log(dir.file("other.csv")), Catch::Contains("header"));
  REQUIRE_THROWS_AS(read_train_log(dir.file("missing.csv")), saccade::Error);
}

TEST_CASE("GPT: a time limit stops the run after the step that reaches it", "[examples][gpt]") {
  const std::vector<int64_t> ids = cat_text_ids(10);
  TempDir dir("saccade_gpt_time");
  GPTTrainOptions o;
  o.steps = 1000, o.batch_size = 2, o.eval_every = 0, o.log = nullptr, o.out_dir = dir.path.string();
  o.time_limit = 1e-9;  // any step takes longer
  GPT m(tiny(), 1);
  GPTTrainResult r = train_gpt(m, ids, ids, o);
  REQUIRE(r.steps_done == 1);
  REQUIRE(r.log.size() == 1);
  REQUIRE(r.log[0].seconds >= 1e-9);
  REQUIRE(std::isfinite(r.log[0].val_bits_per_byte));  // scored at the stop
  REQUIRE(read_train_log(dir.file("log.csv")).size() == 1);
  REQUIRE(fs::exists(dir.file("init.safetensors")));  // the weights before the first step
  // the saved clock: a resumed run is already out of time and takes no step
  o.resume = true;
  GPT m2(tiny(), 1);
  REQUIRE(train_gpt(m2, ids, ids, o).steps_done == 0);
}

TEST_CASE("GPT: a tiny model learns a short text, and a resumed run continues exactly", "[examples][gpt]") {
  const std::vector<int64_t> ids = cat_text_ids(40);
  GPTTrainOptions o;
  o.steps = 150, o.batch_size = 8, o.lr = 1e-2, o.min_lr = 1e-3, o.warmup = 5, o.eval_every = 0;
  o.log = nullptr;
  GPT m(tiny(), 3);
  GPTTrainResult r = train_gpt(m, ids, ids, o);
  // a period-24 text: after 60 steps the next byte is nearly certain (uniform would be ln 256 = 5.5 nats)
  INFO("validation loss " << r.best.nats_per_token);
  REQUIRE(r.best.nats_per_token < 0.3);

  TempDir dir("saccade_gpt_resume");
  o.steps = 6, o.eval_every = 3, o.grad_accum = 2, o.out_dir = dir.file("straight");
  GPT a(tiny(0.1), 4);
  train_gpt(a, ids, ids, o);
  o.out_dir = dir.file("resumed");
  GPT b(tiny(0.1), 4);
  o.stop_at = 2;  // interrupted after step 2 (between two eval points: the checkpoint of step 2 is its own)
  train_gpt(b, ids, ids, o);
  GPT b2(tiny(0.1), 99);  // a fresh process: another init, restored from the checkpoint
  o.stop_at = -1, o.resume = true;
  GPTTrainResult rb = train_gpt(b2, ids, ids, o);
  REQUIRE(rb.start_step == 2);
  for (const auto& [name, t] : a.state_dict()) REQUIRE(allclose(b2.state_dict().at(name), t, 0, 0));
  // the log keeps the whole run: steps 1-2 from the first session, 3-6 from the second, the same losses
  std::vector<TrainLogRow> straight = read_train_log(dir.file("straight/log.csv"));
  std::vector<TrainLogRow> resumed = read_train_log(dir.file("resumed/log.csv"));
  REQUIRE(rb.log.size() == 6);
  REQUIRE(resumed.size() == 6);
  REQUIRE(straight.size() == 6);
  for (size_t i = 0; i < 6; ++i) {
    REQUIRE(resumed[i].step == static_cast<int64_t>(i) + 1);
    REQUIRE(resumed[i].train_loss == straight[i].train_loss);
    REQUIRE(resumed[i].lr == straight[i].lr);
  }
  REQUIRE_FALSE(std::isnan(resumed[1].val_bits_per_byte));  // the interrupted session's last score
  REQUIRE(std::isnan(straight[1].val_bits_per_byte));
  REQUIRE(resumed[5].val_bits_per_byte == straight[5].val_bits_per_byte);
  REQUIRE(resumed[5].seconds > resumed[1].seconds);  // the clock goes on from the checkpoint's
  REQUIRE(fs::exists(dir.file("resumed/best.safetensors")));
  // resuming into a model of another size is refused
  GPTConfig wide = tiny(0.1);
  wide.d_model = 48;
  GPT w(wide, 0);
  REQUIRE_THROWS_AS(train_gpt(w, ids, ids, o), saccade::Error);
}

TEST_CASE("GPT: a run asked to stop (Ctrl-C) ends after its step, saved, and a resume continues it exactly",
          "[examples][gpt]") {
  const std::vector<int64_t> ids = cat_text_ids(40);
  GPTTrainOptions o;
  o.steps = 6, o.batch_size = 8, o.lr = 1e-2, o.min_lr = 1e-3, o.warmup = 2, o.eval_every = 3;
  o.log = nullptr;
  TempDir dir("saccade_gpt_interrupt");
  o.out_dir = dir.file("straight");
  GPT a(tiny(0.1), 4);
  train_gpt(a, ids, ids, o);

  o.out_dir = dir.file("stopped");
  int asked = 0;  // once before the first step, then after every step: "yes" after step 2
  o.stop_requested = [&] { return ++asked >= 3; };
  GPT b(tiny(0.1), 4);
  GPTTrainResult rb = train_gpt(b, ids, ids, o);
  REQUIRE(rb.interrupted);
  REQUIRE(rb.steps_done == 2);
  REQUIRE(fs::exists(dir.file("stopped/last.safetensors")));
  REQUIRE_FALSE(fs::exists(dir.file("stopped/best.safetensors")));  // saved, not scored
  for (const auto& e : fs::directory_iterator(dir.file("stopped"))) REQUIRE(e.path().extension() != ".tmp");
  std::vector<TrainLogRow> log = read_train_log(dir.file("stopped/log.csv"));
  REQUIRE(log.size() == 2);
  REQUIRE(std::isnan(log[1].val_bits_per_byte));

  o.stop_requested = {};
  o.resume = true;
  GPT b2(tiny(0.1), 99);
  GPTTrainResult rc = train_gpt(b2, ids, ids, o);
  REQUIRE_FALSE(rc.interrupted);
  REQUIRE(rc.start_step == 2);
  for (const auto& [name, t] : a.state_dict()) REQUIRE(allclose(b2.state_dict().at(name), t, 0, 0));

  // asked before the first step: nothing trained
  o.resume = false, o.out_dir = dir.file("at_once");
  o.stop_requested = [] { return true; };
  GPT c(tiny(0.1), 4);
  GPTTrainResult r0 = train_gpt(c, ids, ids, o);
  REQUIRE(r0.interrupted);
  REQUIRE(r0.steps_done == 0);
  REQUIRE_FALSE(fs::exists(dir.file("at_once/last.safetensors")));
}

TEST_CASE("RunLock: one run holds a folder, another is refused with the holder's process id",
          "[examples][gpt]") {
  TempDir dir("saccade_gpt_lock");
  long holder = 0;
  std::unique_ptr<RunLock> lock = RunLock::acquire(dir.path.string(), &holder);
  REQUIRE(lock);
  REQUIRE(fs::exists(dir.file(RunLock::kFileName)));
  // flock(2) locks an open file description: a second open in this process is refused as another's is
  REQUIRE(RunLock::acquire(dir.path.string(), &holder) == nullptr);
  REQUIRE(holder == static_cast<long>(::getpid()));
  lock.reset();
  REQUIRE_FALSE(fs::exists(dir.file(RunLock::kFileName)));
  REQUIRE(RunLock::acquire(dir.path.string()) != nullptr);
  // a lock file a killed run left (it holds no lock) is taken over
  std::ofstream(dir.file(RunLock::kFileName)) << "999999\n";
  REQUIRE(RunLock::acquire(dir.path.string()) != nullptr);
  REQUIRE_THROWS_SACCADE(RunLock::acquire(dir.file("missing")), "RunLock");
}

TEST_CASE("InterruptGuard: the first signal only asks to stop, and one guard at a time", "[examples][gpt]") {
  TempDir dir("saccade_gpt_interrupt_guard");
  write(dir.file("x.tmp"), "partial");
  {
    InterruptGuard guard("", {dir.file("x.tmp")});
    REQUIRE_FALSE(InterruptGuard::requested());
    std::raise(SIGINT);  // handled: the test goes on
    REQUIRE(InterruptGuard::requested());
    REQUIRE(fs::exists(dir.file("x.tmp")));  // only a second signal removes the partial files and quits
    REQUIRE_THROWS_SACCADE(InterruptGuard("", {}), "InterruptGuard");
  }
  InterruptGuard again("", {});  // the first one is gone: a new one starts unasked
  REQUIRE_FALSE(InterruptGuard::requested());
}

TEST_CASE("checkpoint: a tiny GPT trains bit-identically with --checkpoint-activations, dropout 0.1",
          "[autograd][checkpoint][gpt]") {
  // float32, and bfloat16 under autocast as `gpt train --dtype bf16` runs it (issue 37: the recomputation
  // ran without autocast, and the bf16 weights drifted apart)
  const DType dtype = GENERATE(DType::Float32, DType::BFloat16);
  INFO("dtype " << dtype);
  examples::GPTConfig config;
  config.vocab_size = 11, config.context = 8, config.n_layer = 2, config.n_head = 2, config.d_model = 16;
  config.dropout = 0.1;
  auto train = [&](bool ckpt) {
    examples::GPT model(config, 5);
    for (auto& b : model.h) b->checkpoint_activations = ckpt;
    nn::AdamW opt(model.parameters(), {1e-2, 0.9, 0.95, 1e-8, 0.1});
    Generator data(9);
    for (int step = 0; step < 20; ++step) {
      Tensor idx = ops::randint(0, config.vocab_size, {3, 9}, Device::cpu(), &data);
      Variable loss;
      {
        std::optional<AutocastGuard> autocast;
        if (dtype != DType::Float32) autocast.emplace(dtype);
        Variable logits = model.forward(idx.narrow(1, 0, 8).contiguous());
        loss = cross_entropy(reshape(logits, {24, config.vocab_size}),
                             idx.narrow(1, 1, 8).contiguous().reshape({24}));
      }
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    std::vector<Tensor> out;
    for (const Variable& p : model.parameters()) out.push_back(p.data().clone());
    return out;
  };
  std::vector<Tensor> plain = train(false), ckpt = train(true);
  REQUIRE(plain.size() == ckpt.size());
  for (size_t i = 0; i < plain.size(); ++i) REQUIRE(saccade::testing::allclose(ckpt[i], plain[i], 0, 0));
}

#endif  // SACCADE_HAVE_GPT
