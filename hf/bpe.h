#pragma once
// GPT-2's byte-level BPE (Radford et al. 2019; Sennrich et al. 2016), read from vocab.json + merges.txt or
// from a tokenizer.json of model type BPE (Hugging Face tokenizers' format). Encoding, as tokenizers does it:
//   1. added tokens ("added_tokens"; "<|endoftext|>" of a GPT-2 vocab.json) are cut out of the text first,
//      leftmost, longest first at one position;
//   2. the rest is pre-tokenized by regular expressions on PCRE2 (UTF + UCP): GPT-2's
//      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ (a ByteLevel
//      pre-tokenizer with use_regex), or a Split pre-tokenizer's own pattern (Llama 3's);
//   3. each piece's bytes become printable characters (GPT-2's bytes_to_unicode), and BPE merges them in
//      rank order (a priority queue over adjacent pairs), with a cache of the pieces already seen;
//   4. with add_special_tokens, a TemplateProcessing post-processor's special tokens go around the ids.
#include <memory>
#include <string>

#include "hf/tokenizer.h"

namespace saccade::hf {

/// A byte-level BPE tokenizer (GPT-2, and tokenizer.json files of Llama 3, SmolLM-style BPE with a
/// ByteLevel pre-tokenizer). encode is thread-safe (the piece cache is behind a mutex). Bytes that are not
/// valid UTF-8 encode as their own pieces, so decode(encode(s)) == s for any bytes s.
class ByteLevelBPETokenizer : public Tokenizer {
 public:
  /// Reads GPT-2's pair: `vocab_path` (vocab.json, an object of token -> id) and `merges_path`
  /// (merges.txt: an optional "#version" line, then one merge "a b" per line, in rank order). A vocabulary
  /// holding "<|endoftext|>" gets it as a special token (matched in the text, and the BOS and EOS), as
  /// transformers' GPT2Tokenizer has it. Throws saccade::Error naming "hf::ByteLevelBPE" and the file with
  /// the key or the line for: a file that cannot be read, a vocab that is not an object of string -> int
  /// (ids in [0, 2^31), each used once), a merges line that is not two tokens separated by one space, a
  /// merge whose tokens or result are not in the vocabulary, and a vocabulary without the 256 byte tokens.
  static std::unique_ptr<ByteLevelBPETokenizer> from_vocab_merges(const std::string& vocab_path,
                                                                  const std::string& merges_path);
  /// As from_vocab_merges, on the files' text (the paths only name the files in errors).
  static std::unique_ptr<ByteLevelBPETokenizer> parse_vocab_merges(
      const std::string& vocab_text, const std::string& merges_text,
      const std::string& vocab_path = "vocab.json", const std::string& merges_path = "merges.txt");
  /// Reads a tokenizer.json: "model" of type BPE (vocab, merges as "a b" strings or [a, b] pairs,
  /// ignore_merges, unk_token); "normalizer" null; "pre_tokenizer" a ByteLevel, or a Sequence of Split
  /// (a Regex or String pattern, behavior Isolated, not inverted) ending in one ByteLevel; "added_tokens"
  /// without lstrip/rstrip/single_word; "post_processor" null, ByteLevel, TemplateProcessing or a Sequence
  /// of those ("single" template: its special tokens before $A are the BOS, after it the EOS).
  /// Throws saccade::Error naming "hf::ByteLevelBPE", the file and the key for: JSON that does not parse
  /// (or nests deeper than 64), a value of the wrong type, the vocab and merges errors of from_vocab_merges,
  /// an unsupported model, normalizer, pre-tokenizer or post-processor type or option (named), a regex
  /// PCRE2 does not compile, and an added or template token id that clashes with the vocabulary.
  static std::unique_ptr<ByteLevelBPETokenizer> from_tokenizer_json(const std::string& path);
  /// As from_tokenizer_json, on the file's text (`path` only names the file in errors).
  static std::unique_ptr<ByteLevelBPETokenizer> parse_tokenizer_json(
      const std::string& text, const std::string& path = "tokenizer.json");
  ~ByteLevelBPETokenizer() override;

  /// The ids of `text` (steps 1-4 above). Throws saccade::Error naming the tokenizer when a Split pattern
  /// exceeds PCRE2's match limit on `text` (a pathological regex in the file).
  std::vector<int64_t> encode(const std::string& text, bool add_special_tokens) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override;
  std::optional<int64_t> bos_id() const override;
  std::optional<int64_t> eos_id() const override;
  std::string name() const override;

  struct Impl;

 private:
  explicit ByteLevelBPETokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace saccade::hf
