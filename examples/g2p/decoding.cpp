#include "examples/g2p/decoding.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "autograd/grad_mode.h"
#include "ops/creation.h"
#include "core/error.h"
#include "ops/join.h"
#include "ops/reduce.h"

namespace saccade::examples {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Restores the model's training flag on scope exit.
struct EvalMode {
  G2PModel& m;
  bool was;
  explicit EvalMode(G2PModel& model) : m(model), was(model.is_training()) { m.eval(); }
  ~EvalMode() { m.train(was); }
};

struct Hypothesis {
  double score = kNegInf;  // Σ log p
  std::vector<int64_t> tokens;
};

}  // namespace

std::vector<std::vector<int64_t>> beam_search(G2PModel& model, const Tensor& letters, const Tensor& lens,
                                              int64_t beam, int64_t max_len) {
  SACCADE_CHECK(beam >= 1 && max_len >= 1, "beam_search: need beam >= 1 and max_len >= 1, got {} and {}",
                beam, max_len);
  EvalMode mode(model);
  NoGradGuard no_grad;
  const int64_t B = letters.size(0), K = beam;
  const Device device = letters.device();
  std::unique_ptr<DecodeState> state = model.start(letters, lens);
  // Row b K + k of the state is hypothesis k of word b.
  model.reorder(*state, ops::repeat_interleave(ops::arange(B, DType::Int64, device), K, 0));
  std::vector<Hypothesis> alive(static_cast<size_t>(B * K));
  for (int64_t b = 0; b < B; ++b) alive[static_cast<size_t>(b * K)].score = 0;  // one live start per word
  std::vector<std::vector<std::pair<double, std::vector<int64_t>>>> finished(static_cast<size_t>(B));
  std::vector<char> done(static_cast<size_t>(B), 0);
  std::vector<int64_t> tokens(static_cast<size_t>(B * K), G2PVocab::kBos);

  struct Candidate {
    double score;
    int64_t row, token;
  };
  for (int64_t t = 0; t < max_len; ++t) {
    Tensor logp = model.step(*state, ops::from_vector(tokens, {B * K}, device));  // (B K, V)
    const int64_t V = logp.size(1);
    const float* lp = logp.data<float>();
    std::vector<int64_t> rows(static_cast<size_t>(B * K));
    std::vector<Hypothesis> next(static_cast<size_t>(B * K));
    std::vector<Candidate> cands;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t k = 0; k < K; ++k) rows[static_cast<size_t>(b * K + k)] = b * K;  // placeholders
      if (done[static_cast<size_t>(b)]) continue;
      cands.clear();
      for (int64_t k = 0; k < K; ++k) {
        const Hypothesis& h = alive[static_cast<size_t>(b * K + k)];
        if (h.score == kNegInf) continue;
        const float* row = lp + (b * K + k) * V;
        for (int64_t v = G2PVocab::kEos; v < V; ++v) cands.push_back({h.score + row[v], b * K + k, v});
      }
      const size_t keep = std::min(cands.size(), static_cast<size_t>(2 * K));
      std::partial_sort(cands.begin(), cands.begin() + static_cast<int64_t>(keep), cands.end(),
                        [](const Candidate& x, const Candidate& y) { return x.score > y.score; });
      int64_t filled = 0;
      auto& fin = finished[static_cast<size_t>(b)];
      for (size_t i = 0; i < keep && filled < K; ++i) {
        const Candidate& c = cands[i];
        const Hypothesis& parent = alive[static_cast<size_t>(c.row)];
        if (c.token == G2PVocab::kEos || t == max_len - 1) {
          // Only an <eos> among the best K ends a hypothesis; at the last step every candidate ends.
          if (i < static_cast<size_t>(K) || t == max_len - 1) {
            auto seq = parent.tokens;
            if (c.token != G2PVocab::kEos) seq.push_back(c.token);
            fin.emplace_back(c.score / static_cast<double>(parent.tokens.size() + 1), std::move(seq));
          }
          continue;
        }
        Hypothesis& h = next[static_cast<size_t>(b * K + filled)];
        h.score = c.score;
        h.tokens = parent.tokens;
        h.tokens.push_back(c.token);
        rows[static_cast<size_t>(b * K + filled)] = c.row;
        tokens[static_cast<size_t>(b * K + filled)] = c.token;
        ++filled;
      }
      if (static_cast<int64_t>(fin.size()) >= K || filled == 0) done[static_cast<size_t>(b)] = 1;
    }
    alive = std::move(next);
    if (std::all_of(done.begin(), done.end(), [](char d) { return d != 0; })) break;
    model.reorder(*state, ops::from_vector(rows, {B * K}, device));
  }
  std::vector<std::vector<int64_t>> best(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const auto& fin = finished[static_cast<size_t>(b)];
    auto top = std::max_element(fin.begin(), fin.end(),
                                [](const auto& x, const auto& y) { return x.first < y.first; });
    if (top != fin.end()) best[static_cast<size_t>(b)] = top->second;
  }
  return best;
}

std::vector<Phones> pronounce(G2PModel& model, const G2PVocab& vocab, const std::vector<std::string>& words,
                              int64_t beam, int64_t batch_size) {
  SACCADE_CHECK(batch_size >= 1, "pronounce: batch_size must be positive, got {}", batch_size);
  // Similar lengths together: less padding.
  std::vector<size_t> order(words.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return words[a].size() < words[b].size(); });
  std::vector<Phones> out(words.size());
  const Device device = model.parameters().front().device();
  for (size_t s = 0; s < order.size(); s += static_cast<size_t>(batch_size)) {
    std::vector<std::string> chunk;
    size_t e = std::min(order.size(), s + static_cast<size_t>(batch_size));
    for (size_t i = s; i < e; ++i) chunk.push_back(words[order[i]]);
    LetterBatch lb = encode_words(vocab, chunk);
    auto ids = beam_search(model, lb.letters.to(device), lb.lens.to(device), beam);
    for (size_t i = s; i < e; ++i) out[order[i]] = vocab.decode(ids[i - s]);
  }
  return out;
}

G2PEval evaluate_g2p(G2PModel& model, const G2PVocab& vocab, const std::vector<DictWord>& words, int64_t beam,
                     int64_t batch_size) {
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> text;
  for (const auto& w : words) text.push_back(w.word);
  G2PEval r;
  r.predictions = pronounce(model, vocab, text, beam, batch_size);
  r.score = score_g2p(words, r.predictions);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

Tensor alignment(G2PModel& model, const G2PVocab& vocab, const std::string& word, const Phones& phones) {
  EvalMode mode(model);
  NoGradGuard no_grad;
  G2PBatch b = make_batch({{vocab.encode_word(word), vocab.encode_phones(phones)}}, {0});
  const Device device = model.parameters().front().device();
  model.forward(b.letters.to(device), b.lens.to(device), b.phones_in.to(device));
  Tensor w = model.last_alignment().to(Device::cpu()).to(DType::Float32);
  return (w.dim() == 3 ? w : w.select(0, 0)).contiguous();  // (1, T, S) or (H, T, S)
}

Diagonality diagonality(const Tensor& weights, int64_t n, double window) {
  SACCADE_CHECK(weights.dim() == 2 && n >= 1 && weights.size(0) >= n,
                "diagonality: expected weights (>= {}, S), got {}", n, weights.shape());
  const int64_t S = weights.size(1);
  std::vector<double> w = weights.contiguous().to_vector<double>();
  Diagonality d;
  for (int64_t i = 0; i < n; ++i) {
    double centre = (static_cast<double>(i) + 0.5) * static_cast<double>(S) / static_cast<double>(n) - 0.5;
    double mass = 0, total = 0, inside = 0;
    for (int64_t j = 0; j < S; ++j) {
      bool near = std::abs(static_cast<double>(j) - centre) <= window;
      mass += near ? w[static_cast<size_t>(i * S + j)] : 0;
      total += w[static_cast<size_t>(i * S + j)];
      inside += near;
    }
    d.mass += total > 0 ? mass / total : 0;
    d.chance += inside / static_cast<double>(S);
  }
  d.mass /= static_cast<double>(n);
  d.chance /= static_cast<double>(n);
  return d;
}

}  // namespace saccade::examples
