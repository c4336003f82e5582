#pragma once
// Tokens and batches for grapheme-to-phoneme training: the letter and phone vocabularies, padded batches
// with their valid lengths, and a bucketing sampler that groups words of similar length.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "examples/common/cmudict.h"
#include "ops/tensor.h"

namespace saccade::examples {

/// Source tokens: 0 <pad>, then a-z, apostrophe, hyphen (1..28). Target tokens: 0 <pad>, 1 <bos>, 2 <eos>,
/// then the phones (3..). The phone list is kept in checkpoints (to_string / from_string).
class G2PVocab {
 public:
  static constexpr int64_t kPad = 0, kBos = 1, kEos = 2;
  static constexpr const char* kLetters = "abcdefghijklmnopqrstuvwxyz'-";
  static int64_t num_letters() { return 29; }

  G2PVocab() = default;
  /// The sorted set of phones of `words`.
  static G2PVocab from_words(const std::vector<DictWord>& words);
  /// Phones separated by spaces, and back.
  std::string to_string() const;
  static G2PVocab from_string(const std::string& phones);

  int64_t num_phones() const { return 3 + static_cast<int64_t>(phones_.size()); }
  /// Letter ids of a word (lowercased first). Throws saccade::Error naming the word for another character.
  std::vector<int64_t> encode_word(const std::string& word) const;
  /// Phone ids; throws saccade::Error for a phone not in the vocabulary.
  std::vector<int64_t> encode_phones(const Phones& phones) const;
  /// The phones of ids up to the first <eos> (specials skipped).
  Phones decode(const std::vector<int64_t>& ids) const;
  const std::string& phone(int64_t id) const { return phones_.at(static_cast<size_t>(id - 3)); }

 private:
  std::vector<std::string> phones_;
};

/// One training pair.
struct G2PExample {
  std::vector<int64_t> letters, phones;  ///< ids, no specials
};

/// Every (word, pronunciation) pair of `words`.
std::vector<G2PExample> make_examples(const std::vector<DictWord>& words, const G2PVocab& vocab);

/// A padded batch.
struct G2PBatch {
  Tensor letters;     ///< int64 (B, S), <pad> after each word
  Tensor lens;        ///< int64 (B): letters per word (the encoder's valid_lens)
  Tensor phones_in;   ///< int64 (B, T): <bos> p1 .. pn <pad>...   (teacher forcing input)
  Tensor phones_out;  ///< int64 (B, T): p1 .. pn <eos> <pad>...   (targets; <pad> ignored by the loss)
  int64_t target_tokens = 0;  ///< Σ (n + 1): the tokens the loss counts
};

/// The batch of examples[rows[i]]. Throws saccade::Error for no rows.
G2PBatch make_batch(const std::vector<G2PExample>& examples, const std::vector<int64_t>& rows);

/// Letters of `words` as (B, S) int64 and their lengths (B), for decoding.
struct LetterBatch {
  Tensor letters, lens;
};
LetterBatch encode_words(const G2PVocab& vocab, const std::vector<std::string>& words);

/// Bucketing: each epoch shuffles the examples (seeded by seed and epoch), cuts the order into pools of 64
/// batches, sorts each pool by length, cuts it into batches and shuffles the batches. Words in a batch then
/// have similar lengths (little padding) while batches still come in random order. Deterministic, so a
/// resumed run skips the batches already drawn.
class BucketSampler {
 public:
  /// Throws saccade::Error for no examples or batch_size < 1.
  BucketSampler(const std::vector<G2PExample>& examples, int64_t batch_size, uint64_t seed);
  std::vector<int64_t> next();
  int64_t drawn() const { return drawn_; }

 private:
  void refill();
  std::vector<int64_t> lengths_;
  int64_t batch_size_;
  uint64_t seed_;
  int64_t epoch_ = 0, drawn_ = 0;
  std::vector<std::vector<int64_t>> batches_;
  size_t cursor_ = 0;
};

}  // namespace saccade::examples
