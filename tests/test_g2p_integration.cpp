// examples/g2p: tokens and batches, incremental decoding against teacher forcing for both models, beam search
// of width 1 against a plain greedy loop, the diagonality measure by hand, and (tagged [slow]) a short
// training run on the real dictionary whose loss falls and whose attention becomes diagonal.
// Compiled only when examples/g2p/CMakeLists.txt built the saccade_g2p library.
#ifdef SACCADE_HAVE_G2P

#include <unistd.h>

#include <filesystem>

#include "autograd/grad_mode.h"
#include "examples/g2p/data.h"
#include "examples/g2p/decoding.h"
#include "examples/g2p/model.h"
#include "examples/g2p/training.h"
#include "helpers.h"
#include "ops/creation.h"
#include "ops/index.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/threads.h"

using namespace saccade;
using namespace saccade::examples;
using saccade::testing::allclose;
namespace fs = std::filesystem;

namespace {

const char* kPhones = "aa ae ah b d iy k n s t";

G2PConfig small_config(const std::string& model) {
  G2PConfig c = G2PConfig::defaults(model);
  c.embed = 8, c.hidden = 12, c.d_model = 16, c.heads = 2, c.layers = 2, c.ffn = 24, c.dropout = 0;
  c.phones = kPhones;
  return c;
}

}  // namespace

TEST_CASE("g2p: vocabulary, padded batches and bucketing", "[g2p]") {
  G2PVocab v = G2PVocab::from_string(kPhones);
  CHECK(v.num_phones() == 13);
  CHECK(v.encode_word("Ab-'z") == std::vector<int64_t>{1, 2, 28, 27, 26});
  CHECK(v.encode_phones({"aa", "t"}) == std::vector<int64_t>{3, 12});
  CHECK(v.decode({3, 12, G2PVocab::kEos, 4}) == Phones{"aa", "t"});
  CHECK(G2PVocab::from_string(v.to_string()).to_string() == kPhones);
  REQUIRE_THROWS_SACCADE(v.encode_word("a1"), "a1");
  REQUIRE_THROWS_SACCADE(v.encode_phones({"zz"}), "zz");

  std::vector<G2PExample> ex = {{{1, 2, 3}, {3, 4}}, {{5}, {6, 7, 8}}};
  G2PBatch b = make_batch(ex, {0, 1});
  CHECK(b.letters.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 5, 0, 0});
  CHECK(b.lens.to_vector<int64_t>() == std::vector<int64_t>{3, 1});
  CHECK(b.phones_in.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 4, 0, 1, 6, 7, 8});
  CHECK(b.phones_out.to_vector<int64_t>() == std::vector<int64_t>{3, 4, 2, 0, 6, 7, 8, 2});
  CHECK(b.target_tokens == 7);

  // Bucketing: every example once per epoch, batches of similar length, the same stream for the same seed.
  std::vector<G2PExample> many;
  for (int i = 0; i < 1000; ++i)
    many.push_back({std::vector<int64_t>(static_cast<size_t>(1 + (i * 7919) % 15), 1), {3}});
  BucketSampler s1(many, 10, 3), s2(many, 10, 3);
  std::vector<int> seen(1000, 0);
  int64_t spread = 0;
  for (int k = 0; k < 100; ++k) {
    auto rows = s1.next();
    CHECK(rows == s2.next());
    int64_t lo = 100, hi = 0;
    for (int64_t r : rows) {
      ++seen[static_cast<size_t>(r)];
      lo = std::min<int64_t>(lo, static_cast<int64_t>(many[static_cast<size_t>(r)].letters.size()));
      hi = std::max<int64_t>(hi, static_cast<int64_t>(many[static_cast<size_t>(r)].letters.size()));
    }
    spread += hi - lo;
  }
  CHECK(std::count(seen.begin(), seen.end(), 1) == 1000);
  CHECK(spread / 100.0 < 2.0);  // random batches of 10 lengths in 1..15 would span ~11
}

TEST_CASE("g2p: step-by-step decoding equals teacher forcing, reorder picks rows", "[g2p]") {
  for (const char* name : {"bahdanau", "transformer"}) {
    INFO(name);
    auto model = make_g2p_model(small_config(name), 7);
    model->eval();
    NoGradGuard ng;
    std::vector<G2PExample> ex = {{{1, 2, 3, 4, 5}, {3, 4, 5}}, {{6, 7}, {8, 9, 10, 11}}, {{9, 9, 9}, {3}}};
    G2PBatch b = make_batch(ex, {0, 1, 2});
    Tensor full = ops::log_softmax(model->forward(b.letters, b.lens, b.phones_in).data(), 2);  // (3, T, V)
    const int64_t T = b.phones_in.size(1);
    auto state = model->start(b.letters, b.lens);
    for (int64_t t = 0; t < T; ++t) {
      Tensor lp = model->step(*state, b.phones_in.select(1, t).contiguous());
      CHECK(allclose(lp, full.select(1, t), 1e-4, 1e-5));
    }
    // Rows 2, 0, 0, 1 of a fresh state, stepped through the same prefixes.
    Tensor rows = ops::tensor({2, 0, 0, 1}, DType::Int64);
    auto s2 = model->start(b.letters, b.lens);
    model->reorder(*s2, rows);
    Tensor in = ops::index_select(b.phones_in, 0, rows);
    for (int64_t t = 0; t < T; ++t) {
      Tensor lp = model->step(*s2, in.select(1, t).contiguous());
      CHECK(allclose(lp, ops::index_select(full.select(1, t), 0, rows), 1e-4, 1e-5));
    }
  }
}

TEST_CASE("g2p: beam search of width 1 is greedy decoding, wider beams score no worse", "[g2p]") {
  for (const char* name : {"bahdanau", "transformer"}) {
    INFO(name);
    auto model = make_g2p_model(small_config(name), 11);
    G2PVocab vocab = G2PVocab::from_string(kPhones);
    LetterBatch lb = encode_words(vocab, {"cat", "bead", "a"});
    const int64_t max_len = 6;
    auto beam1 = beam_search(*model, lb.letters, lb.lens, 1, max_len);
    model->eval();
    NoGradGuard ng;
    // The readable reference: re-run teacher forcing on the growing prefix, take the argmax of the last row.
    for (int64_t b = 0; b < 3; ++b) {
      std::vector<int64_t> prefix = {G2PVocab::kBos}, out;
      for (int64_t t = 0; t < max_len; ++t) {
        Tensor in = ops::from_vector(prefix, {1, static_cast<int64_t>(prefix.size())});
        Tensor logits = model->forward(lb.letters.narrow(0, b, 1), lb.lens.narrow(0, b, 1), in).data();
        // <pad> and <bos> are never emitted
        Tensor last = logits.select(1, t).select(0, 0).narrow(0, 2, vocab.num_phones() - 2);
        int64_t next = ops::argmax(last).item<int64_t>() + 2;
        if (next == G2PVocab::kEos) break;
        out.push_back(next);
        prefix.push_back(next);
      }
      CHECK(beam1[static_cast<size_t>(b)] == out);
    }
    // The length-normalised log-probability of what beam 4 returns is at least that of greedy's.
    auto beam4 = beam_search(*model, lb.letters, lb.lens, 4, max_len);
    auto normalised = [&](int64_t b, const std::vector<int64_t>& seq) {
      std::vector<int64_t> in = {G2PVocab::kBos};
      in.insert(in.end(), seq.begin(), seq.end());
      std::vector<int64_t> target(seq);
      target.push_back(G2PVocab::kEos);
      Tensor lp = ops::log_softmax(model
                                       ->forward(lb.letters.narrow(0, b, 1), lb.lens.narrow(0, b, 1),
                                                 ops::from_vector(in, {1, static_cast<int64_t>(in.size())}))
                                       .data(),
                                   2);
      double s = 0;
      for (size_t t = 0; t < target.size(); ++t)
        s += lp.select(0, 0).select(0, static_cast<int64_t>(t)).select(0, target[t]).item<double>();
      return s / static_cast<double>(target.size());
    };
    for (int64_t b = 0; b < 3; ++b)
      if (beam1[static_cast<size_t>(b)].size() < static_cast<size_t>(max_len))
        CHECK(normalised(b, beam4[static_cast<size_t>(b)]) >=
              normalised(b, beam1[static_cast<size_t>(b)]) - 1e-5);
  }
  REQUIRE_THROWS_SACCADE(beam_search(*make_g2p_model(small_config("bahdanau"), 1),
                                     ops::ones({1, 2}, DType::Int64), ops::tensor({2}, DType::Int64), 0),
                         "beam_search");
}

TEST_CASE("g2p: the config survives a checkpoint's metadata, --stress included", "[g2p]") {
  G2PConfig c = small_config("transformer");
  c.stress = true;
  c.phones = "aa1 ae0 b";
  G2PConfig back = G2PConfig::from_metadata(c.to_metadata());
  CHECK(back.model == "transformer");
  CHECK(back.stress);
  CHECK(back.d_model == 16);
  CHECK(back.label_smoothing == c.label_smoothing);
  CHECK(back.phones == "aa1 ae0 b");
  nn::Metadata old = small_config("bahdanau").to_metadata();
  old.erase("stress");  // a checkpoint written before --stress existed was trained without stress
  CHECK_FALSE(G2PConfig::from_metadata(old).stress);
  old.erase("hidden");
  REQUIRE_THROWS_SACCADE(G2PConfig::from_metadata(old), "'hidden'");
}

TEST_CASE("g2p: diagonality by hand", "[g2p]") {
  // 3 phones over 6 letters: the path puts phone i at letter 2 i + 0.5.
  std::vector<float> on(18, 0.0f);
  for (size_t i = 0; i < 3; ++i) on[i * 6 + 2 * i] = 1;
  Tensor diag = ops::from_vector(on, {3, 6});
  Diagonality d = diagonality(diag, 3);
  CHECK(d.mass == 1.0);
  // Window ±2 around 0.5, 2.5, 4.5: letters {0, 1, 2}, {1, 2, 3, 4}, {3, 4, 5}.
  CHECK(d.chance == Approx((3 + 4 + 3) / 18.0));
  Diagonality u = diagonality(ops::full({3, 6}, 1.0 / 6), 3);
  CHECK(u.mass == Approx(u.chance));
  std::vector<float> late(18, 0.0f);
  late[5] = 1;  // the first phone looks at the last letter
  Tensor anti = ops::from_vector(late, {3, 6});
  CHECK(diagonality(anti, 3).mass == 0);  // 4.5 letters off the path; rows without weight count 0
  REQUIRE_THROWS_SACCADE(diagonality(diag, 4), "diagonality");
}

TEST_CASE("g2p: bahdanau learns on the real dictionary, its attention becomes diagonal", "[slow][g2p]") {
  if (!fs::exists(kCmuDictPath)) {
    WARN(kCmuDictPath << " not found (Debian package festlex-cmu): skipped");
    SUCCEED();
    return;
  }
  // One thread: the test's timing should not depend on how loaded the machine is.
  int previous_threads = saccade::get_num_threads();
  saccade::set_num_threads(1);
  CmuDict dict = read_cmudict();
  std::vector<DictWord> train = split_words(dict, Split::Train), val = split_words(dict, Split::Validation);
  train.resize(4000);
  G2PConfig config = G2PConfig::defaults("bahdanau");
  config.embed = 32, config.hidden = 64, config.dropout = 0;
  config.phones = G2PVocab::from_words(dict.words).to_string();
  G2PVocab vocab = G2PVocab::from_string(config.phones);
  auto model = make_g2p_model(config, 0);
  G2PTrainOptions opts;
  opts.steps = 400;
  opts.batch_size = 32;
  opts.lr = 3e-3;
  opts.warmup = 20;
  opts.val_every = 0;
  opts.log = nullptr;
  G2PTrainResult r = train_g2p(*model, vocab, train, val, opts);
  INFO("loss " << r.first_loss << " -> " << r.final_loss << " in " << r.seconds << " s");
  CHECK(r.final_loss < 0.5 * r.first_loss);

  // Attention within ±2 letters of the monotonic path, over validation words, against uniform attention.
  std::vector<std::string> words;
  for (size_t i = 0; i < 40; ++i) words.push_back(val[i].word);
  std::vector<Phones> predicted = pronounce(*model, vocab, words, 1);
  double mass = 0, chance = 0;
  int n = 0;
  for (size_t i = 0; i < words.size(); ++i) {
    if (predicted[i].empty()) continue;
    Tensor w = alignment(*model, vocab, words[i], predicted[i]);  // (1, n + 1, S)
    Diagonality d = diagonality(w.select(0, 0), static_cast<int64_t>(predicted[i].size()));
    mass += d.mass, chance += d.chance, ++n;
  }
  REQUIRE(n > 30);
  INFO("diagonal mass " << mass / n << ", uniform " << chance / n);
  CHECK(mass / n > chance / n + 0.15);
  G2PEval e = evaluate_g2p(*model, vocab, std::vector<DictWord>(val.begin(), val.begin() + 200), 1);
  INFO("validation WER " << e.score.wer << " PER " << e.score.per);
  CHECK(e.score.per < 0.6);
  saccade::set_num_threads(previous_threads);
}

#endif  // SACCADE_HAVE_G2P
