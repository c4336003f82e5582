#include "hf/tokenizer.h"

#include <filesystem>

#include <fmt/format.h>

#include "hf/bpe.h"
#include "ops/error.h"

namespace saccade::hf {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path d(dir);
  if (fs::is_regular_file(d / "tokenizer.json"))
    return BPETokenizer::from_tokenizer_json((d / "tokenizer.json").string());
  if (fs::is_regular_file(d / "vocab.json") && fs::is_regular_file(d / "merges.txt"))
    return BPETokenizer::from_vocab_merges((d / "vocab.json").string(), (d / "merges.txt").string());
  if (fs::is_regular_file(d / "tokenizer.model"))
    return std::make_unique<SentencePieceTokenizer>((d / "tokenizer.model").string());
  throw Error(
      fmt::format("hf::load_tokenizer: '{}' holds no tokenizer.json, vocab.json + merges.txt or "
                  "tokenizer.model",
                  dir));
}

}  // namespace saccade::hf
