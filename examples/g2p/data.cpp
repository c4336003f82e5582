#include "examples/g2p/data.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "ops/creation.h"
#include "core/error.h"

namespace saccade::examples {

G2PVocab G2PVocab::from_words(const std::vector<DictWord>& words) {
  std::set<std::string> all;
  for (const auto& w : words)
    for (const auto& p : w.pronunciations) all.insert(p.begin(), p.end());
  G2PVocab v;
  v.phones_.assign(all.begin(), all.end());
  return v;
}

std::string G2PVocab::to_string() const {
  std::string s;
  for (const auto& p : phones_) s += (s.empty() ? "" : " ") + p;
  return s;
}

G2PVocab G2PVocab::from_string(const std::string& phones) {
  G2PVocab v;
  std::istringstream in(phones);
  for (std::string p; in >> p;) v.phones_.push_back(p);
  SACCADE_CHECK(!v.phones_.empty(), "G2PVocab: no phones in '{}'", phones);
  return v;
}

std::vector<int64_t> G2PVocab::encode_word(const std::string& word) const {
  const std::string letters = kLetters;
  std::vector<int64_t> ids;
  for (char c : word) {
    size_t i = letters.find(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    SACCADE_CHECK(i != std::string::npos && c != '\0',
                  "G2PVocab: the word '{}' has a character outside a-z, ' and -", word);
    ids.push_back(static_cast<int64_t>(i) + 1);
  }
  SACCADE_CHECK(!ids.empty(), "G2PVocab: got an empty word");
  return ids;
}

std::vector<int64_t> G2PVocab::encode_phones(const Phones& phones) const {
  std::vector<int64_t> ids;
  for (const auto& p : phones) {
    auto it = std::lower_bound(phones_.begin(), phones_.end(), p);
    SACCADE_CHECK(it != phones_.end() && *it == p, "G2PVocab: unknown phone '{}'", p);
    ids.push_back(3 + (it - phones_.begin()));
  }
  return ids;
}

Phones G2PVocab::decode(const std::vector<int64_t>& ids) const {
  Phones out;
  for (int64_t id : ids) {
    if (id == kEos) break;
    if (id >= 3 && id < num_phones()) out.push_back(phone(id));
  }
  return out;
}

std::vector<G2PExample> make_examples(const std::vector<DictWord>& words, const G2PVocab& vocab) {
  std::vector<G2PExample> out;
  for (const auto& w : words)
    for (const auto& p : w.pronunciations) out.push_back({vocab.encode_word(w.word), vocab.encode_phones(p)});
  return out;
}

G2PBatch make_batch(const std::vector<G2PExample>& examples, const std::vector<int64_t>& rows) {
  SACCADE_CHECK(!rows.empty(), "make_batch: no rows");
  const auto B = static_cast<int64_t>(rows.size());
  size_t S = 0, T = 0;
  for (int64_t r : rows) {
    const G2PExample& e = examples.at(static_cast<size_t>(r));
    S = std::max(S, e.letters.size());
    T = std::max(T, e.phones.size() + 1);
  }
  std::vector<int64_t> letters(static_cast<size_t>(B) * S, G2PVocab::kPad), lens;
  std::vector<int64_t> in(static_cast<size_t>(B) * T, G2PVocab::kPad), out(in);
  G2PBatch batch;
  for (size_t b = 0; b < rows.size(); ++b) {
    const G2PExample& e = examples[static_cast<size_t>(rows[b])];
    std::copy(e.letters.begin(), e.letters.end(), letters.begin() + static_cast<int64_t>(b * S));
    lens.push_back(static_cast<int64_t>(e.letters.size()));
    in[b * T] = G2PVocab::kBos;
    for (size_t t = 0; t < e.phones.size(); ++t) in[b * T + t + 1] = out[b * T + t] = e.phones[t];
    out[b * T + e.phones.size()] = G2PVocab::kEos;
    batch.target_tokens += static_cast<int64_t>(e.phones.size()) + 1;
  }
  const auto s = static_cast<int64_t>(S), t = static_cast<int64_t>(T);
  batch.letters = ops::from_vector(letters, {B, s});
  batch.lens = ops::from_vector(lens, {B});
  batch.phones_in = ops::from_vector(in, {B, t});
  batch.phones_out = ops::from_vector(out, {B, t});
  return batch;
}

LetterBatch encode_words(const G2PVocab& vocab, const std::vector<std::string>& words) {
  std::vector<G2PExample> examples;
  std::vector<int64_t> rows;
  for (const auto& w : words) {
    rows.push_back(static_cast<int64_t>(examples.size()));
    examples.push_back({vocab.encode_word(w), {}});
  }
  G2PBatch b = make_batch(examples, rows);
  return {b.letters, b.lens};
}

BucketSampler::BucketSampler(const std::vector<G2PExample>& examples, int64_t batch_size, uint64_t seed)
    : batch_size_(batch_size), seed_(seed) {
  SACCADE_CHECK(!examples.empty() && batch_size >= 1,
                "BucketSampler: need examples and batch_size >= 1, got {} and {}", examples.size(),
                batch_size);
  for (const auto& e : examples) lengths_.push_back(static_cast<int64_t>(e.letters.size()));
}

void BucketSampler::refill() {
  std::mt19937_64 rng(seed_ * 1000003 + static_cast<uint64_t>(epoch_++));
  std::vector<int64_t> order(lengths_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::shuffle(order.begin(), order.end(), rng);
  batches_.clear();
  const auto pool = static_cast<size_t>(64 * batch_size_);
  for (size_t p = 0; p < order.size(); p += pool) {
    auto first = order.begin() + static_cast<int64_t>(p);
    auto last = order.begin() + static_cast<int64_t>(std::min(order.size(), p + pool));
    std::stable_sort(first, last, [&](int64_t a, int64_t b) { return lengths_[a] < lengths_[b]; });
    for (auto it = first; it < last; it += std::min<int64_t>(batch_size_, last - it))
      batches_.emplace_back(it, it + std::min<int64_t>(batch_size_, last - it));
  }
  std::shuffle(batches_.begin(), batches_.end(), rng);
  cursor_ = 0;
}

std::vector<int64_t> BucketSampler::next() {
  if (cursor_ >= batches_.size()) refill();
  ++drawn_;
  return batches_[cursor_++];
}

}  // namespace saccade::examples
