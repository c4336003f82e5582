#include "examples/gpt/tokenizer.h"

#include <filesystem>

#ifdef SACCADE_HAVE_HF
#include "hf/tokenizer.h"
#endif

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "core/error.h"

namespace saccade::examples {

std::vector<int64_t> ByteTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string s(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    SACCADE_CHECK(ids[i] >= 0 && ids[i] < 256, "ByteTokenizer::decode: id {} at {} is not a byte", ids[i], i);
    s[i] = static_cast<char>(ids[i]);
  }
  return s;
}

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path) : impl_(std::make_unique<Impl>()) {
  const auto status = impl_->sp.Load(path);
  SACCADE_CHECK(status.ok(), "SentencePieceTokenizer: cannot load {}: {}", path, status.ToString());
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

void SentencePieceTokenizer::train(const std::string& text, int64_t vocab_size, const std::string& path) {
  SACCADE_CHECK(vocab_size >= 260, "SentencePieceTokenizer::train: vocab_size must be at least 260, got {}",
                vocab_size);
  const std::string input = path + ".input.txt", prefix = path + ".tmp";
  std::ofstream(input, std::ios::binary) << text;
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      std::unordered_map<std::string, std::string>{{"input", input},
                                                   {"model_prefix", prefix},
                                                   {"model_type", "bpe"},
                                                   {"vocab_size", std::to_string(vocab_size)},
                                                   {"byte_fallback", "true"},
                                                   {"character_coverage", "1.0"},
                                                   {"normalization_rule_name", "identity"},
                                                   {"remove_extra_whitespaces", "false"},
                                                   {"add_dummy_prefix", "false"},
                                                   {"allow_whitespace_only_pieces", "true"},
                                                   {"max_sentence_length", "16384"},
                                                   {"num_threads", "2"},
                                                   {"minloglevel", "2"}});
  std::filesystem::remove(input);
  std::filesystem::remove(prefix + ".vocab");
  SACCADE_CHECK(status.ok(), "SentencePieceTokenizer::train: {}", status.ToString());
  std::filesystem::rename(prefix + ".model", path);
}

std::vector<int64_t> SentencePieceTokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = impl_->sp.Encode(text, &ids);
  SACCADE_CHECK(status.ok(), "SentencePieceTokenizer::encode: {}", status.ToString());
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> v;
  for (size_t i = 0; i < ids.size(); ++i) {
    SACCADE_CHECK(ids[i] >= 0 && ids[i] < vocab_size(),
                  "SentencePieceTokenizer::decode: id {} at {} is not in "
                  "the vocabulary of {}",
                  ids[i], i, vocab_size());
    v.push_back(static_cast<int>(ids[i]));
  }
  std::string text;
  const auto status = impl_->sp.Decode(v, &text);
  SACCADE_CHECK(status.ok(), "SentencePieceTokenizer::decode: {}", status.ToString());
  return text;
}

int64_t SentencePieceTokenizer::vocab_size() const { return impl_->sp.GetPieceSize(); }

std::string tokenizer_path(const std::string& dir) { return dir + "/tokenizer.model"; }

#ifdef SACCADE_HAVE_HF
struct HFTokenizer::Impl {
  std::unique_ptr<hf::Tokenizer> tok;
};

HFTokenizer::HFTokenizer(const std::string& dir) : impl_(std::make_unique<Impl>()) {
  impl_->tok = hf::load_tokenizer(dir);
}
HFTokenizer::~HFTokenizer() = default;
std::vector<int64_t> HFTokenizer::encode(const std::string& text) const {
  return impl_->tok->encode(text, false);
}
std::string HFTokenizer::decode(const std::vector<int64_t>& ids) const { return impl_->tok->decode(ids); }
int64_t HFTokenizer::vocab_size() const { return impl_->tok->vocab_size(); }
int64_t HFTokenizer::eos_id() const { return impl_->tok->eos_id().value_or(-1); }
int64_t HFTokenizer::bos_id() const { return impl_->tok->bos_id().value_or(-1); }

int copy_hf_tokenizer(const std::string& from, const std::string& to) {
  namespace fs = std::filesystem;
  int n = 0;
  for (const char* name : kHFTokenizerFiles) {
    const fs::path src = fs::path(from) / name, dst = fs::path(to) / name, tmp = dst.string() + ".tmp";
    std::error_code ec;
    if (!fs::exists(src, ec)) continue;
    if (fs::exists(dst, ec) && fs::equivalent(src, dst, ec)) {
      ++n;
      continue;
    }
    fs::copy_file(src, tmp, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(tmp, dst, ec);
    SACCADE_CHECK(!ec, "copy_hf_tokenizer: cannot copy '{}' to '{}': {}", src.string(), dst.string(),
                  ec.message());
    ++n;
  }
  return n;
}
#endif

bool is_known_tokenizer(const std::string& name) {
#ifdef SACCADE_HAVE_HF
  if (name == "hf") return true;
#endif
  return name == "byte" || name == "bpe";
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& dir) {
  SACCADE_CHECK(is_known_tokenizer(name),
                "make_tokenizer: unknown tokenizer '{}' for '{}' (known: byte, bpe{})", name, dir,
#ifdef SACCADE_HAVE_HF
                ", hf"
#else
                ""
#endif
  );
  if (name == "bpe") return std::make_unique<SentencePieceTokenizer>(tokenizer_path(dir));
#ifdef SACCADE_HAVE_HF
  if (name == "hf") return std::make_unique<HFTokenizer>(dir);
#endif
  return std::make_unique<ByteTokenizer>();
}

}  // namespace saccade::examples
