#pragma once
// Tokenizers of the GPT example: text <-> token ids. The default is bytes (vocabulary 256, docs/data.md:
// every byte value, so the validation stream's 4 unseen byte values still have ids).
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace saccade::examples {

/// Text to token ids and back.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// The token ids of `text` (each in [0, vocab_size())).
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  /// The text of `ids`. Throws saccade::Error naming the tokenizer for an id outside [0, vocab_size()).
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  /// "byte", "bpe" or "hf" (the checkpoint's metadata "tokenizer").
  virtual std::string name() const = 0;
};

/// One token per byte: id = the byte's value (0..255); decode(encode(s)) == s for any bytes.
class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return 256; }
  std::string name() const override { return "byte"; }
};

/// A SentencePiece BPE model (Kudo & Richardson 2018; Sennrich et al. 2016) through Debian's
/// libsentencepiece: identity normalisation (no NFKC, spaces kept as they are) and byte fallback, so any
/// bytes encode and decode(encode(s)) == s for valid UTF-8 s (newlines become byte tokens <0x0A>: the trainer
/// reads its input line by line).
class SentencePieceTokenizer : public Tokenizer {
 public:
  /// Loads the model file `path` (as written by train). Throws saccade::Error naming
  /// "SentencePieceTokenizer" and the file when it cannot be read.
  explicit SentencePieceTokenizer(const std::string& path);
  ~SentencePieceTokenizer() override;
  /// Trains a BPE model of `vocab_size` pieces (>= 260: 256 byte pieces, <unk>, <s>, </s> and merges) on the
  /// lines of `text` and writes it to `path` (atomically: `path`.tmp renamed). Throws saccade::Error naming
  /// "SentencePieceTokenizer::train" with SentencePiece's message when training fails.
  static void train(const std::string& text, int64_t vocab_size, const std::string& path);
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override;
  std::string name() const override { return "bpe"; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

#ifdef SACCADE_HAVE_HF
/// The tokenizer of a Hugging Face model folder (hf::load_tokenizer: tokenizer.json, vocab.json + merges.txt
/// or tokenizer.model) as this example's Tokenizer, for fine-tuning (`gpt train --init-from-hf`): encode
/// adds no special tokens (training and scoring streams, as transformers scores text). name() "hf"; its
/// files are copied beside the run's checkpoints (copy_hf_tokenizer) so that they load alone. Throws what
/// hf::load_tokenizer throws.
class HFTokenizer : public Tokenizer {
 public:
  explicit HFTokenizer(const std::string& dir);
  ~HFTokenizer() override;
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override;
  std::string name() const override { return "hf"; }
  /// The end-of-text id, or -1.
  int64_t eos_id() const;
  /// The beginning-of-text id (tokenizer_config.json's bos_token, or the template's), or -1.
  int64_t bos_id() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The files of a Hugging Face folder's tokenizer (those a folder holds of them).
inline constexpr std::array<const char*, 6> kHFTokenizerFiles = {
    "tokenizer.json",         "vocab.json", "merges.txt", "tokenizer.model", "tokenizer_config.json",
    "special_tokens_map.json"};

/// Copies the tokenizer files of model folder `from` (kHFTokenizerFiles: those present) into folder `to`,
/// each atomically (a .tmp file renamed). Returns how many it copied. Throws saccade::Error naming
/// "copy_hf_tokenizer" and the file for an I/O failure.
int copy_hf_tokenizer(const std::string& from, const std::string& to);
#endif

/// The file a "bpe" tokenizer lives in beside its checkpoints: `dir`/tokenizer.model.
std::string tokenizer_path(const std::string& dir);

/// Whether make_tokenizer knows `name` ("byte", "bpe", and "hf" where hf/ is built): load_gpt refuses a
/// checkpoint naming another, so that the error names the file.
bool is_known_tokenizer(const std::string& name);

/// The tokenizer called `name`: "byte", "bpe" loaded from tokenizer_path(dir), or "hf" (HFTokenizer of
/// `dir`). Throws saccade::Error naming "make_tokenizer" and `dir` for an unknown name, and
/// SentencePieceTokenizer's errors.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& dir = ".");

}  // namespace saccade::examples
