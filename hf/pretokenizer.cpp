#include "hf/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/format.h>

#include "ops/error.h"

namespace saccade::hf {

struct SplitRegex::Impl {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
};

SplitRegex::SplitRegex(const std::string& pattern, const std::string& who) : impl_(std::make_unique<Impl>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw Error(fmt::format("{}: the regex '{}' does not compile: {} at offset {}", who, pattern,
                            reinterpret_cast<const char*>(message), offset));
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // NOTE: interpreted where PCRE2 has no JIT
  // A pattern read from a file may backtrack without end on some text: bound the work per match.
  impl_->context = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(impl_->context, 1000000);
  pcre2_set_depth_limit(impl_->context, 10000);
}

SplitRegex::~SplitRegex() {
  pcre2_match_context_free(impl_->context);
  pcre2_code_free(impl_->code);
}

std::vector<std::string_view> SplitRegex::split(std::string_view text, const std::string& who) const {
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
      pcre2_match_data_create_from_pattern(impl_->code, nullptr), pcre2_match_data_free);
  std::vector<std::string_view> pieces;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0, done = 0;  // searching from start; text[0, done) is in pieces
  while (start < text.size()) {
    const int rc = pcre2_match(impl_->code, subject, text.size(), start, 0, md.get(), impl_->context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      throw Error(fmt::format("{}: pre-tokenization gave up at byte {}: {}", who, start,
                              reinterpret_cast<const char*>(message)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t b = ov[0], e = ov[1];
    if (e == b) {  // an empty match splits nothing: search again one character further
      start = b + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
      continue;
    }
    if (b > done) pieces.push_back(text.substr(done, b - done));
    pieces.push_back(text.substr(b, e - b));
    done = start = e;
  }
  if (done < text.size()) pieces.push_back(text.substr(done));
  return pieces;
}

std::string escape_pattern(const std::string& literal) { return "\\Q" + literal + "\\E"; }

const std::array<std::string, 256>& byte_to_unicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t c = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
      // code points < 0x800: one or two UTF-8 bytes
      t[b] = c < 0x80 ? std::string(1, static_cast<char>(c))
                      : std::string{static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
    }
    return t;
  }();
  return table;
}

const std::unordered_map<uint32_t, uint8_t>& unicode_to_byte() {
  static const std::unordered_map<uint32_t, uint8_t> table = [] {
    std::unordered_map<uint32_t, uint8_t> t;
    std::vector<std::pair<uint32_t, uint32_t>> chars;
    for (int b = 0; b < 256; ++b) {
      utf8_chars(byte_to_unicode()[b], chars);
      t[chars.at(0).first] = static_cast<uint8_t>(b);
    }
    return t;
  }();
  return table;
}

bool utf8_chars(std::string_view s, std::vector<std::pair<uint32_t, uint32_t>>& out) {
  out.clear();
  for (size_t i = 0; i < s.size();) {
    const auto c0 = static_cast<unsigned char>(s[i]);
    const uint32_t len = c0 < 0x80           ? 1
                         : (c0 >> 5) == 0x6  ? 2
                         : (c0 >> 4) == 0xE  ? 3
                         : (c0 >> 3) == 0x1E ? 4
                                             : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c0 : c0 & (0x7F >> len);
    for (uint32_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    const uint32_t min = len == 1 ? 0 : len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    out.emplace_back(cp, len);
    i += len;
  }
  return true;
}

}  // namespace saccade::hf
