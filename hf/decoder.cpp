#include "hf/decoder.h"

#include <algorithm>

#include <fmt/format.h>

#include "hf/tokenizer_json.h"

namespace saccade::hf {

namespace {

enum class Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace };

std::string joined(const std::vector<std::string>& tokens, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i) out += sep;
    out += tokens[i];
  }
  return out;
}

// As tokenizers' ByteLevel decoder: a token whose characters are all byte characters becomes those bytes,
// any other stays as it is; then all are one.
std::vector<std::string> byte_level(const std::vector<std::string>& tokens) {
  std::string out;
  std::vector<std::pair<uint32_t, uint32_t>> chars;
  for (const std::string& t : tokens) {
    std::string bytes;
    bool all = utf8_chars(t, chars);
    for (const auto& [c, len] : chars) {
      const auto b = unicode_to_byte().find(c);
      if (b == unicode_to_byte().end()) {
        all = false;
        break;
      }
      bytes += static_cast<char>(b->second);
    }
    out += all ? bytes : t;
  }
  return {out};
}

// As tokenizers' ByteFallback decoder: each run of "<0xNN>" tokens becomes one token of those bytes.
std::vector<std::string> byte_fallback(const std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  std::string bytes;
  bool in_run = false;
  for (const std::string& t : tokens) {
    auto hex = [](char c) {
      return c >= '0' && c <= '9'   ? c - '0'
             : c >= 'A' && c <= 'F' ? c - 'A' + 10
             : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                    : -1;
    };
    if (t.size() == 6 && t.starts_with("<0x") && t[5] == '>' && hex(t[3]) >= 0 && hex(t[4]) >= 0) {
      bytes += static_cast<char>(hex(t[3]) * 16 + hex(t[4]));
      in_run = true;
      continue;
    }
    if (in_run) out.push_back(std::move(bytes));
    bytes.clear();
    in_run = false;
    out.push_back(t);
  }
  if (in_run) out.push_back(std::move(bytes));
  return out;
}

// As tokenizers' Strip decoder, on code points (invalid UTF-8 bytes count as one each).
std::string strip(const std::string& t, const std::string& content, size_t start, size_t stop) {
  std::vector<size_t> at;  // the byte offset of each character
  for (size_t i = 0; i < t.size(); i += utf8_char_len(t, i)) at.push_back(i);
  auto is_content = [&](size_t k) {
    const size_t end = k + 1 < at.size() ? at[k + 1] : t.size();
    return t.compare(at[k], end - at[k], content) == 0;
  };
  size_t first = 0, last = at.size();  // characters [first, last) stay
  while (first < std::min(start, at.size()) && is_content(first)) ++first;
  for (size_t i = 0; i < stop && last > first && is_content(last - 1); ++i) --last;
  const size_t b = first < at.size() ? at[first] : t.size(), e = last < at.size() ? at[last] : t.size();
  return t.substr(b, e - b);
}

}  // namespace

struct Decoder::Step {
  Kind kind = Kind::ByteLevel;
  std::unique_ptr<Regex> regex;  // Replace's pattern
  std::string content;           // Replace's content, Strip's character, Metaspace's replacement
  bool drop_first = false;       // Metaspace: the replacement is dropped from the first token
  size_t start = 0, stop = 0;    // Strip's counts
};

Decoder::Decoder() { steps_.emplace_back(); }

Decoder::Decoder(const nlohmann::json* j, const std::string& file) {
  using namespace tokjson;
  present_ = j != nullptr;
  if (!j) return;
  const std::string type = type_of(*j, file, "decoder");
  std::vector<const json*> steps{j};
  if (type == "Sequence") {
    steps.clear();
    for (const json& s : list(*j, "decoders", file, "decoder")) steps.push_back(&s);
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = *steps[i];
    const std::string where = type == "Sequence" ? fmt::format("decoder.decoders[{}]", i) : "decoder";
    const std::string t = type_of(s, file, where);
    Step step;
    if (t == "ByteLevel") {
    } else if (t == "ByteFallback") {
      step.kind = Kind::ByteFallback;
    } else if (t == "Fuse") {
      step.kind = Kind::Fuse;
    } else if (t == "Replace") {
      step.kind = Kind::Replace;
      step.regex = pattern(s, "pattern", file, where);
      step.content = text(s, "content", file, where);
    } else if (t == "Metaspace") {
      step.kind = Kind::Metaspace;
      step.content = text(s, "replacement", file, where);
      const json* scheme = get(s, "prepend_scheme");
      step.drop_first = scheme ? *scheme != "never" : flag(s, "add_prefix_space", file, where, true);
    } else if (t == "Strip") {
      step.kind = Kind::Strip;
      step.content = text(s, "content", file, where);
      std::vector<std::pair<uint32_t, uint32_t>> chars;
      if (!utf8_chars(step.content, chars) || chars.size() != 1)
        throw fail(file, where + ".content", "not one character");
      step.start = static_cast<size_t>(count(s, "start", int64_t{1} << 30, file, where));
      step.stop = static_cast<size_t>(count(s, "stop", int64_t{1} << 30, file, where));
    } else {
      throw fail(file, where + ".type", fmt::format("the decoder type '{}' is not supported", t));
    }
    steps_.push_back(std::move(step));
  }
}

Decoder::~Decoder() = default;

std::string Decoder::decode(std::vector<std::string> tokens, const std::string& who) const {
  if (!present_) return joined(tokens, " ");
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::ByteLevel:
        tokens = byte_level(tokens);
        break;
      case Kind::ByteFallback:
        tokens = byte_fallback(tokens);
        break;
      case Kind::Fuse:
        tokens = {joined(tokens, "")};
        break;
      case Kind::Replace:
        for (std::string& t : tokens) t = step.regex->replace(t, step.content, who);
        break;
      case Kind::Metaspace:  // as tokenizers: the replacement is a space, or nothing in the first token
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string out;
          for (size_t at = 0; at < tokens[i].size();) {
            if (!step.content.empty() && tokens[i].compare(at, step.content.size(), step.content) == 0) {
              if (!(i == 0 && step.drop_first)) out += ' ';
              at += step.content.size();
            } else {
              out += tokens[i][at++];
            }
          }
          tokens[i] = std::move(out);
        }
        break;
      case Kind::Strip:
        for (std::string& t : tokens) t = strip(t, step.content, step.start, step.stop);
        break;
    }
  }
  return joined(tokens, "");
}

}  // namespace saccade::hf
