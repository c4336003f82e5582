#pragma once
// BPE (Sennrich et al. 2016) as Hugging Face tokenizers runs it: GPT-2's byte-level BPE (Radford et al.
// 2019) from vocab.json + merges.txt, and any tokenizer.json of model type BPE with the normalizers,
// pre-tokenizers and decoders that GPT-2, SmolLM, Llama 3, Qwen2 and Llama 2 / TinyLlama use. Encoding:
//   1. added tokens ("added_tokens"; "<|endoftext|>" of a GPT-2 vocab.json) are cut out of the text first,
//      leftmost, longest first at one position, in tokenizers' two passes: those with "normalized" false
//      in the whole text, then the normalized ones in the stretches between;
//   2. each stretch between them is normalized (hf/normalizer.h: NFC, NFKC, Prepend("▁"), Replace, ...);
//   3. and pre-tokenized (hf/pretokenizer.h) by regular expressions on PCRE2 (UTF + UCP): Split patterns
//      with their behavior, Digits, and ByteLevel's GPT-2 pattern
//      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ (with use_regex);
//   4. after a ByteLevel pre-tokenizer each piece's bytes become printable characters (GPT-2's
//      bytes_to_unicode); without one, its characters are looked up as they are, and one missing from the
//      vocabulary becomes its bytes' "<0xNN>" tokens (byte_fallback, Llama 2) or the unknown token. BPE
//      merges them in rank order (a priority queue over adjacent pairs), with a cache of the pieces seen;
//   5. with add_special_tokens, a TemplateProcessing post-processor's special tokens go around the ids.
// Decoding maps ids to tokens and runs the decoder (hf/decoder.h: ByteLevel, or Llama 2's Replace,
// ByteFallback, Fuse, Strip).
#include <memory>
#include <string>

#include "hf/tokenizer.h"

namespace saccade::hf {

/// A BPE tokenizer (GPT-2's pair; tokenizer.json files of GPT-2, SmolLM, Llama 3, Qwen2, Llama 2 /
/// TinyLlama). encode is thread-safe (the piece cache is behind a mutex). With a ByteLevel pre-tokenizer
/// (and no normalizer or lossy split), bytes that are not valid UTF-8 encode as their own pieces, so
/// decode(encode(s)) == s for any bytes s; with byte_fallback, they become their "<0xNN>" tokens.
class BPETokenizer : public Tokenizer {
 public:
  /// Reads GPT-2's pair: `vocab_path` (vocab.json, an object of token -> id) and `merges_path`
  /// (merges.txt: an optional "#version" line, then one merge "a b" per line, in rank order). A vocabulary
  /// holding "<|endoftext|>" gets it as a special token (matched in the text, and the BOS and EOS), as
  /// transformers' GPT2Tokenizer has it. Throws saccade::Error naming "hf::BPE" and the file with
  /// the key or the line for: a file that cannot be read, a vocab that is not an object of string -> int
  /// (ids in [0, 2^31), each used once), a merges line that is not two tokens separated by one space, a
  /// merge whose tokens or result are not in the vocabulary, and a vocabulary without the 256 byte tokens.
  static std::unique_ptr<BPETokenizer> from_vocab_merges(const std::string& vocab_path,
                                                         const std::string& merges_path);
  /// As from_vocab_merges, on the files' text (the paths only name the files in errors).
  static std::unique_ptr<BPETokenizer> parse_vocab_merges(const std::string& vocab_text,
                                                          const std::string& merges_text,
                                                          const std::string& vocab_path = "vocab.json",
                                                          const std::string& merges_path = "merges.txt");
  /// Reads a tokenizer.json: "model" of type BPE (vocab, merges as "a b" strings or [a, b] pairs,
  /// ignore_merges, unk_token, fuse_unk, byte_fallback); "normalizer" null or a Normalizer
  /// (hf/normalizer.h); "pre_tokenizer" null or a PreTokenizer (hf/pretokenizer.h; ByteLevel only last);
  /// "decoder" null (tokens joined by spaces, as tokenizers) or a Decoder (hf/decoder.h); "added_tokens"
  /// without lstrip/rstrip/single_word, and not normalized where there is a normalizer; "post_processor"
  /// null, ByteLevel, TemplateProcessing or a Sequence of those ("single" template: its special tokens
  /// before $A are the BOS, after it the EOS). A vocabulary that lacks one of the 256 byte characters of a
  /// ByteLevel pre-tokenizer needs an unk_token.
  /// Throws saccade::Error naming "hf::BPE", the file and the key for: JSON that does not parse (or nests
  /// deeper than 64), a value of the wrong type, the vocab and merges errors of from_vocab_merges, an
  /// unsupported model, normalizer, pre-tokenizer, decoder or post-processor type or option (named), a
  /// regex PCRE2 does not compile, and an added or template token id that clashes with the vocabulary.
  static std::unique_ptr<BPETokenizer> from_tokenizer_json(const std::string& path);
  /// As from_tokenizer_json, on the file's text (`path` only names the file in errors).
  static std::unique_ptr<BPETokenizer> parse_tokenizer_json(const std::string& text,
                                                            const std::string& path = "tokenizer.json");
  /// Takes the BOS and EOS of a tokenizer_config.json (transformers' `tokenizer.bos_token` and `eos_token`):
  /// "bos_token" and "eos_token", each a token string, an AddedToken object with a string "content", or null
  /// (absent or null: kept as the reader found them). They replace what the post-processor template or
  /// "<|endoftext|>" gave: a Llama 2 or TinyLlama tokenizer.json has a BOS template and no EOS, which only
  /// this file names. Nothing changes unless both parse. Throws saccade::Error naming "hf::BPE", the file
  /// and the key for JSON that does not parse, a value of another type, and a token not in the vocabulary
  /// or the added tokens.
  void read_tokenizer_config(const std::string& path);
  /// As read_tokenizer_config, on the file's text (`path` only names the file in errors).
  void parse_tokenizer_config(const std::string& text, const std::string& path = "tokenizer_config.json");
  ~BPETokenizer() override;

  /// The ids of `text` (steps 1-5 above). Throws saccade::Error naming the tokenizer when a Split or Replace
  /// pattern exceeds PCRE2's match limit on `text` (a pathological regex in the file).
  std::vector<int64_t> encode(const std::string& text, bool add_special_tokens) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override;
  std::optional<int64_t> bos_id() const override;
  std::optional<int64_t> eos_id() const override;
  std::string name() const override;

  struct Impl;

 private:
  explicit BPETokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace saccade::hf
