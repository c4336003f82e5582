#include "hf/tokenizer.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "hf/bpe.h"

namespace saccade::hf {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path d(dir);
  std::unique_ptr<BPETokenizer> bpe;
  if (fs::is_regular_file(d / "tokenizer.json"))
    bpe = BPETokenizer::from_tokenizer_json((d / "tokenizer.json").string());
  else if (fs::is_regular_file(d / "vocab.json") && fs::is_regular_file(d / "merges.txt"))
    bpe = BPETokenizer::from_vocab_merges((d / "vocab.json").string(), (d / "merges.txt").string());
  if (bpe) {  // the BOS and EOS that transformers' tokenizer takes from tokenizer_config.json
    if (fs::is_regular_file(d / "tokenizer_config.json"))
      bpe->read_tokenizer_config((d / "tokenizer_config.json").string());
    return bpe;
  }
  if (fs::is_regular_file(d / "tokenizer.model"))
    return std::make_unique<SentencePieceTokenizer>((d / "tokenizer.model").string());
  throw Error(
      fmt::format("hf::load_tokenizer: '{}' holds no tokenizer.json, vocab.json + merges.txt or "
                  "tokenizer.model",
                  dir));
}

}  // namespace saccade::hf
