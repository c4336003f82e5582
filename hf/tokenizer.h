#pragma once
// The tokenizers of model folders in the Hugging Face layout: BPE (GPT-2's vocab.json +
// merges.txt, or a tokenizer.json of model type BPE; hf/bpe.h) and SentencePiece's tokenizer.model (Llama 2,
// TinyLlama; through libsentencepiece). load_tokenizer picks the one a folder holds. Same shape as the GPT
// example's examples/gpt/tokenizer.h, plus special tokens: encode(text, true) encodes as transformers'
// `tokenizer(text)` does (a prompt), encode(text, false) as scored text is encoded.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace saccade::hf {

/// Text to token ids and back, as a checkpoint folder's tokenizer defines them.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// The ids of `text` (each in [0, vocab_size())). With `add_special_tokens`, the tokenizer's own special
  /// tokens are added as Hugging Face adds them (a tokenizer.json's post-processor template, SentencePiece's
  /// BOS as Llama's tokenizer adds it); without, none are. Any bytes encode (not only valid UTF-8).
  virtual std::vector<int64_t> encode(const std::string& text, bool add_special_tokens) const = 0;
  /// The text of `ids`; special tokens come out as their text. Throws saccade::Error naming the tokenizer
  /// (name()) for an id outside [0, vocab_size()) or one that no token has.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  /// One more than the largest id (added tokens included).
  virtual int64_t vocab_size() const = 0;
  /// The id of the beginning-of-text token, if the tokenizer has one.
  virtual std::optional<int64_t> bos_id() const = 0;
  /// The id of the end-of-text token, if the tokenizer has one.
  virtual std::optional<int64_t> eos_id() const = 0;
  /// What it is and where it came from, for messages: "hf::BPE 'dir/tokenizer.json'".
  virtual std::string name() const = 0;
};

/// A SentencePiece model file (tokenizer.model of Llama 2, TinyLlama) through libsentencepiece, the library
/// Hugging Face's slow LlamaTokenizer wraps: encode(text, true) puts the model's BOS first, as Llama's
/// tokenizer does (add_bos_token), and no EOS.
class SentencePieceTokenizer : public Tokenizer {
 public:
  /// Loads `path`. Throws saccade::Error naming "hf::SentencePieceTokenizer" and the file when it cannot be
  /// read or parsed.
  explicit SentencePieceTokenizer(const std::string& path);
  ~SentencePieceTokenizer() override;
  std::vector<int64_t> encode(const std::string& text, bool add_special_tokens) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override;
  std::optional<int64_t> bos_id() const override;
  std::optional<int64_t> eos_id() const override;
  std::string name() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The tokenizer of the model folder `dir`: its tokenizer.json if there is one, else vocab.json +
/// merges.txt (GPT-2's pair), else tokenizer.model (SentencePiece). A BPE tokenizer takes its BOS and EOS
/// from the folder's tokenizer_config.json where there is one (BPETokenizer::read_tokenizer_config). Throws
/// saccade::Error naming "hf::load_tokenizer" and `dir` when it holds none of them, and the readers' errors
/// (which name the file and the key or line) for a file that does not parse or that describes an unsupported
/// tokenizer.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir);

}  // namespace saccade::hf
