#include <sentencepiece_processor.h>

#include <fmt/format.h>

#include "core/error.h"
#include "hf/tokenizer.h"

namespace saccade::hf {

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
  std::string path;
};

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  const auto status = impl_->sp.Load(path);
  SACCADE_CHECK(status.ok(), "hf::SentencePieceTokenizer: cannot load '{}': {}", path, status.ToString());
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int64_t> SentencePieceTokenizer::encode(const std::string& text, bool add_special_tokens) const {
  std::vector<int> ids;
  const auto status = impl_->sp.Encode(text, &ids);
  SACCADE_CHECK(status.ok(), "{}: encode: {}", name(), status.ToString());
  std::vector<int64_t> out;
  out.reserve(ids.size() + 1);
  if (add_special_tokens && bos_id()) out.push_back(*bos_id());
  out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> v;
  v.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    SACCADE_CHECK(ids[i] >= 0 && ids[i] < vocab_size(),
                  "{}: decode: id {} at {} is not in the vocabulary of {}", name(), ids[i], i, vocab_size());
    v.push_back(static_cast<int>(ids[i]));
  }
  std::string text;
  const auto status = impl_->sp.Decode(v, &text);
  SACCADE_CHECK(status.ok(), "{}: decode: {}", name(), status.ToString());
  return text;
}

int64_t SentencePieceTokenizer::vocab_size() const { return impl_->sp.GetPieceSize(); }

std::optional<int64_t> SentencePieceTokenizer::bos_id() const {
  const int id = impl_->sp.bos_id();
  return id >= 0 ? std::optional<int64_t>(id) : std::nullopt;
}

std::optional<int64_t> SentencePieceTokenizer::eos_id() const {
  const int id = impl_->sp.eos_id();
  return id >= 0 ? std::optional<int64_t>(id) : std::nullopt;
}

std::string SentencePieceTokenizer::name() const {
  return fmt::format("hf::SentencePieceTokenizer '{}'", impl_->path);
}

}  // namespace saccade::hf
