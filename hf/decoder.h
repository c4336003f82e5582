#pragma once
// A tokenizer.json's "decoder" (Hugging Face tokenizers): how the tokens of ids become text. Internal to
// hf/ (hf/bpe.h).
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace saccade::hf {

/// A Sequence of, or one of, tokenizers' decoders, each on the list of tokens: ByteLevel (GPT-2's
/// characters back to bytes, all tokens joined), Replace (a Regex or String `pattern` -> `content` in each
/// token), ByteFallback (runs of "<0xNN>" tokens back to their bytes), Fuse (all tokens joined) and Strip
/// (up to `start` leading and `stop` trailing `content` characters off each token) and Metaspace (its
/// `replacement` back to a space, dropped in the first token unless prepend_scheme is "never"). No decoder
/// joins the tokens with spaces, as tokenizers does.
class Decoder {
 public:
  /// Reads `j` (null: no decoder). Throws saccade::Error naming "hf::BPE", `file` and the key for an
  /// unknown type, a value of the wrong type and a regex PCRE2 does not compile.
  Decoder(const nlohmann::json* j, const std::string& file);
  /// GPT-2's: ByteLevel.
  Decoder();
  ~Decoder();
  /// The text of `tokens`. NOTE: where tokenizers puts U+FFFD for bytes that are not valid UTF-8 (ByteLevel,
  /// ByteFallback), this keeps the bytes, so that any bytes decode back. Throws saccade::Error naming `who`
  /// when a Replace pattern exceeds PCRE2's limits.
  std::string decode(std::vector<std::string> tokens, const std::string& who) const;

 private:
  struct Step;
  std::vector<Step> steps_;
  bool present_ = true;
};

}  // namespace saccade::hf
