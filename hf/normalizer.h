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
