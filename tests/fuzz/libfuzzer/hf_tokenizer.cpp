// libFuzzer target: the BPE readers of hf/ (hf::BPETokenizer: vocab.json + merges.txt, and tokenizer.json
// with its normalizers, pre-tokenizers, decoders, byte fallback) and encode / decode on arbitrary bytes with
// what they accept.
// Input: one byte (even: vocab.json + merges.txt, odd: tokenizer.json), then the files and the text to
// encode, separated by two NUL bytes: vocab \0\0 merges \0\0 text, or tokenizer.json \0\0 text.
// Properties: a rejected file raises saccade::Error naming it; an accepted one encodes any bytes into ids in
// [0, vocab_size()), with and without special tokens, and decodes them without error; the vocab.json +
// merges.txt tokenizer (no unknown token, no prefix space) gives decode(encode(text)) == text. The text is
// then read as a tokenizer_config.json: refused with an Error naming it and no change, or its BOS and EOS are
// ids of the tokenizer.
#include <string_view>
#include <vector>

#include "hf/bpe.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"

using namespace saccade;

namespace {

// `s` cut at each "\0\0" into at most `n` parts (the last one keeps the rest).
std::vector<std::string> parts(std::string_view s, size_t n) {
  std::vector<std::string> out;
  while (out.size() + 1 < n) {
    const size_t at = s.find(std::string_view("\0\0", 2));
    if (at == std::string_view::npos) break;
    out.emplace_back(s.substr(0, at));
    s.remove_prefix(at + 2);
  }
  out.emplace_back(s);
  out.resize(n);
  return out;
}

void check_ids(const hf::Tokenizer& tok, const std::vector<int64_t>& ids) {
  for (const int64_t id : ids)
    FUZZ_CHECK(id >= 0 && id < tok.vocab_size(), "id {} outside [0, {})", id, tok.vocab_size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool json = data[0] & 1;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto p = parts(rest, json ? 2 : 3);
  const std::string& text = p.back();
  std::unique_ptr<hf::BPETokenizer> tok;
  try {
    tok = json ? hf::BPETokenizer::parse_tokenizer_json(p[0], "fuzz_tokenizer.json")
               : hf::BPETokenizer::parse_vocab_merges(p[0], p[1], "fuzz_vocab.json", "fuzz_merges.txt");
  } catch (const Error& e) {
    const std::string msg = e.what();
    fuzz::check_rejection(e, msg.find("fuzz_merges.txt") != std::string::npos ? "fuzz_merges.txt"
                             : json                                           ? "fuzz_tokenizer.json"
                                                                              : "fuzz_vocab.json");
    return 0;
  }
  FUZZ_CHECK(tok->vocab_size() > 0, "an accepted tokenizer with no vocabulary");
  std::vector<int64_t> ids;
  try {
    ids = tok->encode(text, false);
  } catch (const Error& e) {  // only a Split pattern past PCRE2's limits may refuse text
    FUZZ_CHECK(json && std::string(e.what()).find("pre-tokenization gave up") != std::string::npos,
               "encode refused: {}", e.what());
    return 0;
  }
  check_ids(*tok, ids);
  const std::string back = tok->decode(ids);
  if (!json)
    FUZZ_CHECK(back == text, "decode(encode(text)) != text ({} bytes, {} ids)", text.size(), ids.size());
  const auto special = tok->encode(text, true);
  check_ids(*tok, special);
  FUZZ_CHECK(special.size() >= ids.size(), "fewer ids with special tokens");
  tok->decode(special);
  // the text read as a tokenizer_config.json: its BOS and EOS are tokens of this tokenizer, or nothing
  // changes
  const auto bos = tok->bos_id(), eos = tok->eos_id();
  try {
    tok->parse_tokenizer_config(text, "fuzz_tokenizer_config.json");
  } catch (const Error& e) {
    fuzz::check_rejection(e, "fuzz_tokenizer_config.json");
    FUZZ_CHECK(tok->bos_id() == bos && tok->eos_id() == eos,
               "a refused tokenizer_config.json changed the BOS or EOS");
    return 0;
  }
  for (const auto& id : {tok->bos_id(), tok->eos_id()})
    if (id) check_ids(*tok, {*id});
  return 0;
}
