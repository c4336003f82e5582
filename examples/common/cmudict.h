#pragma once
// The CMU Pronouncing Dictionary 0.4 as Debian's festlex-cmu ships it (Festival lexicon format), its fixed
// split by word, and the grapheme-to-phoneme metrics, all as docs/data.md fixes them (see
// examples/g2p/README.md):
//   ("abandon" nil (((ax) 0) ((b ae n) 1) ((d ax n) 0)))   word, part of speech, syllables (phones, stress)
#include <cstdint>
#include <string>
#include <vector>

namespace saccade::examples {

/// Debian's festlex-cmu file.
inline constexpr const char* kCmuDictPath = "/usr/share/festival/dicts/cmu/cmudict-0.4.out";

using Phones = std::vector<std::string>;

/// One word and its distinct pronunciations, in the order the file lists them.
struct DictWord {
  std::string word;                    ///< lowercased, letters a-z, apostrophe and hyphen only
  std::vector<Phones> pronunciations;  ///< at least one
};

/// The dictionary: words in order of first appearance in the file.
struct CmuDict {
  std::vector<DictWord> words;
  int64_t entries = 0;  ///< entry lines read (a word listed for two parts of speech counts twice)
  int64_t dropped = 0;  ///< entries dropped: their word has a character outside a-z, ' and -
  /// Σ over words of their distinct pronunciations.
  int64_t pairs() const;
};

/// Reads a Festival lexicon file (Latin-1). Skips blank lines, ';' comments and lines not starting with '('.
/// Each entry's phones are its syllables' phones in order; syllable boundaries are dropped, and the stress
/// digits too unless `stress`, which appends each syllable's digit to its vowel phones ("ae" -> "ae1").
/// Words are lowercased and kept when they match ^[a-z'-]+$ (the others are counted in `dropped`); a word
/// listed several times keeps each distinct pronunciation. Throws saccade::Error naming the file and line for
/// a file that cannot be opened or an entry that does not parse.
CmuDict read_cmudict(const std::string& path = kCmuDictPath, bool stress = false);

/// The split bucket of a word, 0..99 (docs/data.md): h = FNV-1a 64 over the bytes of "<seed>:<word>", then
/// the splitmix64 finaliser; bucket = h % 100.
int split_bucket(const std::string& word, uint64_t seed = 0);

enum class Split { Train, Validation, Test };
/// Buckets < 90 train, 90..94 validation, >= 95 test.
Split split_of(const std::string& word, uint64_t seed = 0);

/// The words of `dict` in one split, in dictionary order.
std::vector<DictWord> split_words(const CmuDict& dict, Split split, uint64_t seed = 0);

/// Levenshtein distance between two phone sequences (insertions, deletions and substitutions cost 1).
int64_t edit_distance(const Phones& a, const Phones& b);

/// Word and phone error rates (docs/data.md): a word is wrong when its prediction equals none of its
/// references; PER = Σ edit distance to the closest reference / Σ that reference's length (ties: the shorter
/// reference).
struct G2PScore {
  double wer = 0, per = 0;
  int64_t words = 0, wrong_words = 0, edits = 0, ref_phones = 0;
};

/// Scores predictions[i] against words[i]'s pronunciations. Throws saccade::Error when the lists differ in
/// length or are empty.
G2PScore score_g2p(const std::vector<DictWord>& words, const std::vector<Phones>& predictions);

}  // namespace saccade::examples
