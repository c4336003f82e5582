#pragma once
// The pieces of byte-level BPE's pre-tokenization (hf/bpe.h): regular-expression splitting on PCRE2 and
// GPT-2's byte <-> printable-character tables. Internal to hf/.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace saccade::hf {

/// GPT-2's pre-tokenization pattern (the ByteLevel pre-tokenizer's, with use_regex).
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// A compiled PCRE2 pattern (UTF and UCP: \p{L}, \s and \w are Unicode's) that splits text as tokenizers'
/// Split pre-tokenizer with behavior Isolated does: every match is a piece, and so is every stretch between
/// matches. Matching accepts any bytes (PCRE2_MATCH_INVALID_UTF: invalid UTF-8 never matches, so it lands
/// in the stretches between matches). Thread-safe: each split has its own match data.
class SplitRegex {
 public:
  /// Compiles `pattern`. Throws saccade::Error naming `who` with PCRE2's message and the offset when it does
  /// not compile.
  SplitRegex(const std::string& pattern, const std::string& who);
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;
  /// The pieces of `text`, in order; they cover it exactly. Empty matches make no piece. Throws
  /// saccade::Error naming `who` when PCRE2 gives up (its match or depth limit: a pathological pattern).
  std::vector<std::string_view> split(std::string_view text, const std::string& who) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A pattern given as a literal string (tokenizers' {"String": ...}), escaped for PCRE2.
std::string escape_pattern(const std::string& literal);

/// GPT-2's bytes_to_unicode: byte b -> the UTF-8 of a printable character (b itself for the printable
/// Latin-1 bytes, 256 + n for the others in byte order).
const std::array<std::string, 256>& byte_to_unicode();

/// The inverse of byte_to_unicode, keyed by code point.
const std::unordered_map<uint32_t, uint8_t>& unicode_to_byte();

/// The code points of valid UTF-8 `s` with their byte lengths; false when `s` is not valid UTF-8.
bool utf8_chars(std::string_view s, std::vector<std::pair<uint32_t, uint32_t>>& out);

}  // namespace saccade::hf
