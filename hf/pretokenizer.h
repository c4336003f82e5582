#pragma once
// The text-level pieces of a tokenizer.json (hf/bpe.h): patterns on PCRE2 with tokenizers' match semantics,
// the pre-tokenizers (Sequence, Split, Digits, ByteLevel) and GPT-2's byte <-> printable-character tables.
// Internal to hf/.
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace saccade::hf {

/// GPT-2's pre-tokenization pattern (the ByteLevel pre-tokenizer's, with use_regex).
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// One stretch of a text as tokenizers' Pattern::find_matches gives it: bytes [begin, end), and whether
/// the pattern matched it (the stretches between matches are not matches).
struct Match {
  size_t begin, end;
  bool is_match;
};

/// What Split does with the matches (tokenizers' SplitDelimiterBehavior): drop them (Removed), keep each as
/// a piece (Isolated), append each to the piece before it (MergedWithPrevious) or prepend it to the piece
/// after it (MergedWithNext), or keep runs of adjacent matches as one piece (Contiguous).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

/// A compiled PCRE2 pattern (UTF and UCP: \p{L}, \s and \w are Unicode's), matched as tokenizers matches its
/// (Oniguruma) patterns. Matching accepts any bytes (PCRE2_MATCH_INVALID_UTF: invalid UTF-8 never matches,
/// so it lands in the stretches between matches). Thread-safe: each call has its own match data.
/// Unicode version: PCRE2's tables, Unicode 14.0 in Debian 12's PCRE2 10.42 (the newest Debian 12 has), where
/// tokenizers' Oniguruma has Unicode 16.0: the 9,272 letters and 120 numbers that Unicode 15.0 to 16.0 added
/// (CJK extensions H and I, new scripts) are not \p{L} / \p{N} here; tests/data/hf_unicode.txt lists them
/// and tests/test_hf_unicode.cpp checks that no other code point differs. \s, \S and [[:space:]] are
/// Oniguruma's (U+0009..U+000D, U+0085, \p{Z}): the pattern is rewritten so, as PCRE2's own \s also matches
/// U+180E MONGOLIAN VOWEL SEPARATOR.
/// Long text: JIT-compiled (a JIT stack sized to the text where a pattern needs more than the 32 KiB default,
/// PCRE2's interpreter past 1 GiB of it), with a match limit that grows with the text, so a sound pattern
/// matches any text in time linear in its length (1,000,000 spaces before a word in Llama 3's pattern: two
/// matches).
class Regex {
 public:
  /// Compiles `pattern`, or matches `pattern` literally (tokenizers' {"String": ...}; an empty literal
  /// matches nothing). Throws saccade::Error naming `who` with PCRE2's message and the offset when it does
  /// not compile.
  Regex(const std::string& pattern, const std::string& who, bool literal = false);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  /// The matches and the stretches between them, covering `text` in order, as tokenizers' find_matches:
  /// empty text gives one empty non-match; an empty match is kept unless it sits where the previous match
  /// ended. Throws saccade::Error naming `who` when PCRE2 gives up (its match limit, 10,000,000 + 4 per byte
  /// of `text`, or its depth or heap limit: a pathological pattern that backtracks without end).
  std::vector<Match> find_matches(std::string_view text, const std::string& who) const;
  /// The pieces of `text` that tokenizers' NormalizedString::split gives (matches negated when `invert`),
  /// empty pieces dropped. Throws as find_matches.
  std::vector<std::string_view> split(std::string_view text, SplitBehavior behavior, bool invert,
                                      const std::string& who) const;
  /// `text` with every match replaced by `content` (tokenizers' Replace normalizer and decoder).
  std::string replace(std::string_view text, std::string_view content, const std::string& who) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A tokenizer.json "pre_tokenizer": a Sequence of Split (Regex or String pattern, any behavior, invert),
/// Digits (individual_digits true: each digit alone; false: runs of digits), Metaspace (spaces become
/// `replacement`, which goes first as prepend_scheme says: "always", "first" (only on the text's first
/// stretch) or "never"; with split, pieces start at each replacement) and a last ByteLevel
/// (add_prefix_space, use_regex: GPT-2's pattern), or one of them, or none (null). Digits means Unicode's
/// \p{N}, as Rust's char::is_numeric.
class PreTokenizer {
 public:
  /// Reads `j` (null: no pre-tokenizer). `who` names the tokenizer in errors raised while encoding.
  /// Throws saccade::Error naming "hf::BPE", `file` and the key for an unknown type or behavior, a value of
  /// the wrong type, a ByteLevel before the last step, and a regex PCRE2 does not compile.
  PreTokenizer(const nlohmann::json* j, const std::string& file, const std::string& who);
  /// GPT-2's: ByteLevel with use_regex and no prefix space.
  explicit PreTokenizer(const std::string& who);
  ~PreTokenizer();
  /// Whether the last step is ByteLevel: pieces then map bytes to GPT-2's characters before BPE.
  bool byte_level() const;
  /// The pieces of `text` (non-empty, in order); `at_start`: `text` begins the encoded text (no added token
  /// before it). ByteLevel's prefix space and Metaspace make new strings, kept in `owned`. Throws as
  /// Regex::find_matches.
  std::vector<std::string_view> split(std::string_view text, bool at_start,
                                      std::deque<std::string>& owned) const;

 private:
  struct Step;
  std::vector<Step> steps_;
  bool byte_level_ = false;
  std::string who_;
};

/// GPT-2's bytes_to_unicode: byte b -> the UTF-8 of a printable character (b itself for the printable
/// Latin-1 bytes, 256 + n for the others in byte order).
const std::array<std::string, 256>& byte_to_unicode();

/// The inverse of byte_to_unicode, keyed by code point.
const std::unordered_map<uint32_t, uint8_t>& unicode_to_byte();

/// The code points of valid UTF-8 `s` with their byte lengths; false when `s` is not valid UTF-8.
bool utf8_chars(std::string_view s, std::vector<std::pair<uint32_t, uint32_t>>& out);

/// The byte length of the UTF-8 character at s[i] (i < s.size()), or 1 where the bytes there are not valid
/// UTF-8 (such a byte is a character of its own).
size_t utf8_char_len(std::string_view s, size_t i);

}  // namespace saccade::hf
