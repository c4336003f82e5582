#include "examples/gpt/data.h"

#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "examples/common/cmudict.h"
#include "ops/creation.h"
#include "core/error.h"

namespace saccade::examples {

std::vector<std::string> fortune_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  SACCADE_CHECK(!ec, "fortune_files: cannot list {}: {} (install Debian's `fortunes`: scripts/setup)", dir,
                ec.message());
  std::vector<std::string> names;
  for (const fs::directory_entry& e : it) {
    const std::string name = e.path().filename().string();
    if (e.is_symlink() || !e.is_regular_file() || name.find('.') != std::string::npos) continue;
    names.push_back(name);
  }
  SACCADE_CHECK(!names.empty(), "fortune_files: no fortune files in {}", dir);
  std::sort(names.begin(), names.end());  // std::string compares bytes (as unsigned char via char_traits)
  for (std::string& n : names) n = dir + "/" + n;
  return names;
}

std::vector<std::string> split_documents(const std::string& text) {
  std::vector<std::string> docs;
  auto close = [&](size_t begin, size_t end) {  // the piece text[begin, end)
    while (begin < end && text[begin] == '\n') ++begin;
    while (end > begin && text[end - 1] == '\n') --end;
    std::string piece = text.substr(begin, end - begin);
    bool blank = std::all_of(piece.begin(), piece.end(), [](unsigned char c) { return std::isspace(c); });
    if (!blank) docs.push_back(std::move(piece));
  };
  size_t piece = 0, line = 0;
  while (line < text.size()) {
    size_t nl = text.find('\n', line);
    size_t end = nl == std::string::npos ? text.size() : nl;
    if (end - line == 1 && text[line] == '%') {
      close(piece, line);
      piece = end == text.size() ? end : end + 1;
    }
    line = end == text.size() ? end : end + 1;
  }
  close(piece, text.size());
  return docs;
}

FortunesCorpus make_fortunes_corpus(const std::vector<std::string>& file_contents) {
  FortunesCorpus c;
  std::set<std::string> seen;
  for (const std::string& text : file_contents)
    for (std::string& doc : split_documents(text)) {
      ++c.documents;
      if (!seen.insert(doc).second) continue;
      ++c.distinct;
      const bool train = split_bucket(doc, 0) < 90;
      (train ? c.train : c.valid) += doc + "\n%\n";
      ++(train ? c.train_documents : c.valid_documents);
    }
  return c;
}

FortunesCorpus load_fortunes(const std::string& dir) {
  std::vector<std::string> contents;
  for (const std::string& path : fortune_files(dir)) {
    std::ifstream in(path, std::ios::binary);
    SACCADE_CHECK(in.good(), "load_fortunes: cannot read {}", path);
    contents.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return make_fortunes_corpus(contents);
}

std::string sha256_hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  SACCADE_CHECK(EVP_Digest(bytes.data(), bytes.size(), digest, &n, EVP_sha256(), nullptr) == 1 && n == 32,
                "sha256_hex: OpenSSL's EVP_Digest failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) out += {hex[digest[i] >> 4], hex[digest[i] & 15]};
  return out;
}

Batch random_windows(const std::vector<int64_t>& tokens, int64_t batch, int64_t context,
                     std::mt19937_64& rng) {
  const int64_t N = static_cast<int64_t>(tokens.size());
  SACCADE_CHECK(batch >= 1 && context >= 1 && N >= context + 1,
                "random_windows: need batch, context >= 1 and a stream of at least context + 1 = {} tokens, "
                "got batch {}, {} tokens",
                context + 1, batch, N);
  const uint64_t range = static_cast<uint64_t>(N - context);  // starts 0 .. N - context - 1
  Tensor x = ops::empty({batch, context}, DType::Int64), y = ops::empty({batch, context}, DType::Int64);
  int64_t *px = x.data<int64_t>(), *py = y.data<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t s = static_cast<int64_t>(rng() % range);
    std::copy_n(tokens.begin() + s, context, px + b * context);
    std::copy_n(tokens.begin() + s + 1, context, py + b * context);
  }
  return {x, y};
}

std::vector<int64_t> eval_window_starts(int64_t num_tokens, int64_t context) {
  SACCADE_CHECK(context >= 1, "eval_window_starts: context must be at least 1, got {}", context);
  std::vector<int64_t> starts;
  for (int64_t s = 0; s + 1 < num_tokens; s += context) starts.push_back(s);
  return starts;
}

}  // namespace saccade::examples
