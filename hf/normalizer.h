#pragma once
// A tokenizer.json's "normalizer" (Hugging Face tokenizers): what the text becomes before pre-tokenization.
// Internal to hf/ (hf/bpe.h).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace saccade::hf {

/// A Sequence of, or one of: NFC, NFD, NFKC, NFKD (Unicode normal forms, UAX #15, through libutf8proc),
/// Lowercase (each character's Unicode lowercase, as Rust's char::to_lowercase), Prepend (`prepend` before
/// non-empty text) and Replace (a Regex or String `pattern` -> `content`), applied in order.
/// Unicode versions: libutf8proc 2.8.0 (Debian 12's newest) has Unicode 15.0. tokenizers' normal forms are
/// Unicode 9.0's (its crate unicode-normalization-alignments 0.1.12), so the characters that Unicode 10.0 to
/// 15.0 gave a decomposition, which tokenizers keeps whole, are decomposed here: 1 code point in NFD, 134 in
/// NFKC, 135 in NFKD, none in NFC. Its Lowercase is the Rust toolchain's, Unicode 17.0 in tokenizers 0.23.3:
/// the 55 capitals of Unicode 16.0 and 17.0 stay capitals here. tests/data/hf_unicode.txt lists these code
/// points and tests/test_hf_unicode.cpp checks that every other code point is normalized as tokenizers does.
class Normalizer {
 public:
  /// Reads `j`. Throws saccade::Error naming "hf::BPE", `file` and the key for an unknown type, a value
  /// of the wrong type and a regex PCRE2 does not compile.
  Normalizer(const nlohmann::json& j, const std::string& file);
  ~Normalizer();
  /// `text` normalised. Bytes that are not valid UTF-8 pass through the normal forms and Lowercase
  /// unchanged (tokenizers only sees valid text). Throws saccade::Error naming `who` when a Replace
  /// pattern exceeds PCRE2's limits.
  std::string apply(std::string_view text, const std::string& who) const;

 private:
  struct Step;
  std::vector<Step> steps_;
};

}  // namespace saccade::hf
