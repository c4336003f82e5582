#include "hf/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "core/error.h"
#include "hf/tokenizer_json.h"

namespace saccade::hf {

struct Regex::Impl {
  pcre2_code* code = nullptr;
};

namespace {

// Oniguruma's \s, as tokenizers has it: U+0009..U+000D, U+0085 and General_Category Z. PCRE2's (with UCP)
// also matches U+180E MONGOLIAN VOWEL SEPARATOR, in its list of horizontal spaces though Unicode took it out
// of White_Space in 6.3. As items of a character class:
constexpr std::string_view kSpaceItems = R"(\x{9}-\x{D}\x{85}\p{Z})";
constexpr std::string_view kNonSpaceItems = R"(\S\x{180E})";  // PCRE2's \S lacks U+180E

// `pattern` with \s, \S, [:space:] and [:^space:] spelled as Oniguruma means them (the items above, in a
// class of their own outside a class). Escapes (\Q...\E, \c[) and a class's leading ^ and ] are read as PCRE2
// reads them, so nothing else changes.
std::string onig_spaces(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      size_t len = e == 'c' ? 3 : 2;  // \cX: X is the escape's own
      if (e == 'Q') {                 // literal up to \E
        const size_t end = p.find("\\E", i + 2);
        len = end == std::string_view::npos ? p.size() - i : end + 2 - i;
      }
      if (e == 's' || e == 'S') {
        const std::string_view items = e == 's' ? kSpaceItems : kNonSpaceItems;
        out += in_class ? std::string(items) : fmt::format("[{}]", items);
      } else {
        out += p.substr(i, len);
      }
      i += len - 1;
    } else if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a first ] is a member
    } else if (in_class && c == '[' && p.substr(i).starts_with("[:space:]")) {
      out += kSpaceItems;
      i += 8;
    } else if (in_class && c == '[' && p.substr(i).starts_with("[:^space:]")) {
      out += kNonSpaceItems;
      i += 9;
    } else if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // another POSIX class
      const size_t end = p.find(":]", i + 2);
      const size_t stop = end == std::string_view::npos ? i + 1 : end + 2;
      out += p.substr(i, stop - i);
      i = stop - 1;
    } else {
      if (c == ']') in_class = false;
      out += c;
    }
  }
  return out;
}

// A pcre2_match_context (the limits of one find_matches call) and a JIT stack, freed with their owner.
using MatchContext = std::unique_ptr<pcre2_match_context, void (*)(pcre2_match_context*)>;
using JitStack = std::unique_ptr<pcre2_jit_stack, void (*)(pcre2_jit_stack*)>;

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& who, bool literal)
    : impl_(std::make_unique<Impl>()) {
  if (literal && pattern.empty()) return;  // tokenizers: an empty literal matches nothing
  int error = 0;
  PCRE2_SIZE offset = 0;
  // The offset in an error is in `pattern` as written where onig_spaces changed nothing before it.
  const std::string compiled = literal ? pattern : onig_spaces(pattern);
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                              PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP),
                              &error, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw Error(fmt::format("{}: the regex '{}' does not compile: {} at offset {}", who, pattern,
                            reinterpret_cast<const char*>(message), offset));
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // NOTE: interpreted where PCRE2 has no JIT
}

Regex::~Regex() { pcre2_code_free(impl_->code); }

std::vector<Match> Regex::find_matches(std::string_view text, const std::string& who) const {
  if (text.empty()) return {{0, 0, false}};
  std::vector<Match> out;
  size_t prev = 0;  // text[0, prev) is in out
  if (impl_->code) {
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
        pcre2_match_data_create_from_pattern(impl_->code, nullptr), pcre2_match_data_free);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    // A pattern read from a file may backtrack without end on some text: bound the work of each match, by
    // a budget that grows with the text (a match of tokenizers' patterns counts about 1 per byte it scans:
    // Llama 3's \s+(?!\S) over a run of n spaces about n), so that no text is too long for a sound pattern.
    MatchContext context(pcre2_match_context_create(nullptr), pcre2_match_context_free);
    const uint32_t limit = static_cast<uint32_t>(
        std::min<uint64_t>(10'000'000 + 4 * static_cast<uint64_t>(text.size()), UINT32_MAX));
    pcre2_set_match_limit(context.get(), limit);
    pcre2_set_depth_limit(context.get(), limit);    // the interpreter's; JIT has its stack instead
    pcre2_set_heap_limit(context.get(), 4 << 20);   // KiB: the interpreter's backtracking, at most 4 GiB
    JitStack stack(nullptr, pcre2_jit_stack_free);  // made when PCRE2's 32 KiB default runs out
    uint32_t options = 0;                           // PCRE2_NO_JIT where even a large JIT stack ran out
    size_t start = 0;                               // searching from here
    size_t last_end = text.size() + 1;              // where the last match ended (none yet)
    // As the onig crate's find_iter, which tokenizers uses: an empty match where the last match ended is
    // skipped by one character, any other is a match.
    while (start <= text.size()) {
      int rc = pcre2_match(impl_->code, subject, text.size(), start, options, md.get(), context.get());
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !stack) {
        // A repeated group keeps ~32 bytes of JIT stack per repeat: room for the text, up to 1 GiB
        // (reserved address space, used as it fills).
        const size_t size = std::clamp<uint64_t>(64 * static_cast<uint64_t>(text.size()), 1 << 20, 1 << 30);
        stack.reset(pcre2_jit_stack_create(32 * 1024, size, nullptr));
        if (!stack) throw Error(fmt::format("{}: pre-tokenization: no memory for a JIT stack", who));
        pcre2_jit_stack_assign(context.get(), nullptr, stack.get());
        rc = pcre2_match(impl_->code, subject, text.size(), start, options, md.get(), context.get());
      }
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {  // the interpreter keeps its backtracking on the heap
        options = PCRE2_NO_JIT;
        rc = pcre2_match(impl_->code, subject, text.size(), start, options, md.get(), context.get());
      }
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof(message));
        throw Error(fmt::format("{}: pre-tokenization gave up at byte {}: {}", who, start,
                                reinterpret_cast<const char*>(message)));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      const size_t b = ov[0], e = ov[1];
      if (b == e && e == last_end) {
        start += start < text.size() ? utf8_char_len(text, start) : 1;
        continue;
      }
      if (b > prev) out.push_back({prev, b, false});
      out.push_back({b, e, true});
      prev = start = last_end = e;
    }
  }
  if (prev < text.size()) out.push_back({prev, text.size(), false});
  return out;
}

std::vector<std::string_view> Regex::split(std::string_view text, SplitBehavior behavior, bool invert,
                                           const std::string& who) const {
  std::vector<Match> matches = find_matches(text, who);
  if (invert)
    for (Match& m : matches) m.is_match = !m.is_match;
  // As tokenizers' NormalizedString::split: the kept stretches, merged by the behavior.
  std::vector<Match> kept;
  bool previous = false;  // whether the stretch before was a match
  auto merge_or_push = [&](const Match& m, bool merge) {
    if (merge && !kept.empty()) {
      kept.back().end = m.end;
    } else {
      kept.push_back(m);
    }
  };
  switch (behavior) {
    case SplitBehavior::Removed:
      for (const Match& m : matches)
        if (!m.is_match) kept.push_back(m);
      break;
    case SplitBehavior::Isolated:
      kept = matches;
      break;
    case SplitBehavior::Contiguous:
      for (const Match& m : matches) {
        merge_or_push(m, m.is_match == previous);
        previous = m.is_match;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const Match& m : matches) {
        merge_or_push(m, m.is_match && !previous);
        previous = m.is_match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (size_t i = matches.size(); i-- > 0;) {  // from the end: a match joins the stretch after it
        const Match& m = matches[i];
        if (m.is_match && !previous && !kept.empty())
          kept.back().begin = m.begin;
        else
          kept.push_back(m);
        previous = m.is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  std::vector<std::string_view> pieces;
  for (const Match& m : kept)
    if (m.end > m.begin) pieces.push_back(text.substr(m.begin, m.end - m.begin));
  return pieces;
}

std::string Regex::replace(std::string_view text, std::string_view content, const std::string& who) const {
  std::string out;
  for (const Match& m : find_matches(text, who)) {
    if (m.is_match)
      out += content;
    else
      out += text.substr(m.begin, m.end - m.begin);
  }
  return out;
}

struct PreTokenizer::Step {
  std::unique_ptr<Regex> regex;  // null: no split (ByteLevel without use_regex)
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  bool prefix_space = false;  // ByteLevel's add_prefix_space, before its split
  // Metaspace: spaces become `replacement` (then `regex` splits at it), prepended as prepend_scheme says
  std::string replacement;
  std::string prepend_scheme;
};

PreTokenizer::PreTokenizer(const std::string& who) : who_(who) {
  steps_.emplace_back().regex = std::make_unique<Regex>(kGpt2Pattern, who);
  byte_level_ = true;
}

PreTokenizer::PreTokenizer(const nlohmann::json* p, const std::string& file, const std::string& who)
    : who_(who) {
  using namespace tokjson;
  if (!p) return;
  const std::string type = type_of(*p, file, "pre_tokenizer");
  std::vector<const json*> steps{p};
  if (type == "Sequence") {
    const json& all = list(*p, "pretokenizers", file, "pre_tokenizer");
    steps.clear();
    for (const json& s : all) steps.push_back(&s);
  }
  static const std::pair<const char*, SplitBehavior> kBehaviors[] = {
      {"Removed", SplitBehavior::Removed},
      {"Isolated", SplitBehavior::Isolated},
      {"MergedWithPrevious", SplitBehavior::MergedWithPrevious},
      {"MergedWithNext", SplitBehavior::MergedWithNext},
      {"Contiguous", SplitBehavior::Contiguous}};
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = *steps[i];
    const std::string where =
        type == "Sequence" ? fmt::format("pre_tokenizer.pretokenizers[{}]", i) : "pre_tokenizer";
    const std::string t = type_of(s, file, where);
    if (byte_level_) throw fail(file, where, "a step after a ByteLevel pre-tokenizer is not supported");
    Step step;
    if (t == "ByteLevel") {
      step.prefix_space = flag(s, "add_prefix_space", file, where, false);
      if (flag(s, "use_regex", file, where, true)) step.regex = std::make_unique<Regex>(kGpt2Pattern, who);
      byte_level_ = true;
    } else if (t == "Split") {
      step.regex = pattern(s, "pattern", file, where);
      const std::string b = text(s, "behavior", file, where);
      const auto it = std::find_if(std::begin(kBehaviors), std::end(kBehaviors),
                                   [&](const auto& kb) { return b == kb.first; });
      if (it == std::end(kBehaviors))
        throw fail(file, where + ".behavior", fmt::format("the behavior '{}' is not supported", b));
      step.behavior = it->second;
      step.invert = flag(s, "invert", file, where, false);
    } else if (t == "Metaspace") {
      step.replacement = text(s, "replacement", file, where);
      std::vector<std::pair<uint32_t, uint32_t>> chars;
      if (!utf8_chars(step.replacement, chars) || chars.size() != 1)
        throw fail(file, where + ".replacement", "not one character");
      step.prepend_scheme = get(s, "prepend_scheme") ? text(s, "prepend_scheme", file, where)
                            : flag(s, "add_prefix_space", file, where, true) ? "always"
                                                                             : "never";
      if (step.prepend_scheme != "always" && step.prepend_scheme != "first" && step.prepend_scheme != "never")
        throw fail(file, where + ".prepend_scheme",
                   fmt::format("'{}' is not always, first or never", step.prepend_scheme));
      if (flag(s, "split", file, where, true)) {
        step.regex = std::make_unique<Regex>(step.replacement, who, true);
        step.behavior = SplitBehavior::MergedWithNext;
      }
    } else if (t == "Digits") {
      step.regex = std::make_unique<Regex>(R"(\p{N})", who);
      step.behavior = flag(s, "individual_digits", file, where, false) ? SplitBehavior::Isolated
                                                                       : SplitBehavior::Contiguous;
    } else {
      throw fail(file, where + ".type", fmt::format("the pre-tokenizer type '{}' is not supported", t));
    }
    steps_.push_back(std::move(step));
  }
}

PreTokenizer::~PreTokenizer() = default;

bool PreTokenizer::byte_level() const { return byte_level_; }

std::vector<std::string_view> PreTokenizer::split(std::string_view text, bool at_start,
                                                  std::deque<std::string>& owned) const {
  std::vector<std::string_view> pieces{text}, next;
  for (const Step& step : steps_) {
    if (!step.replacement.empty())  // as tokenizers' Metaspace, on each piece
      for (size_t k = 0; k < pieces.size(); ++k) {
        std::string& m = owned.emplace_back();
        for (const char c : pieces[k]) {
          if (c == ' ')
            m += step.replacement;
          else
            m += c;
        }
        const bool first = at_start && k == 0 && pieces[k].data() == text.data();
        if (!m.empty() && !m.starts_with(step.replacement) &&
            (step.prepend_scheme == "always" || (step.prepend_scheme == "first" && first)))
          m.insert(0, step.replacement);
        pieces[k] = m;
      }
    if (step.prefix_space)  // as tokenizers: on each piece that reaches ByteLevel
      for (auto& p : pieces)
        if (!p.empty() && p.front() != ' ') {
          std::string& prefixed = owned.emplace_back(1, ' ');
          prefixed += p;
          p = prefixed;
        }
    if (!step.regex) continue;
    next.clear();
    for (const auto p : pieces) {
      const auto parts = step.regex->split(p, step.behavior, step.invert, who_);
      next.insert(next.end(), parts.begin(), parts.end());
    }
    pieces.swap(next);
  }
  std::erase_if(pieces, [](std::string_view p) { return p.empty(); });
  return pieces;
}

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

namespace {

// The code point of the valid UTF-8 character at s[i] and its length, or length 0 where s[i] starts none.
std::pair<uint32_t, uint32_t> utf8_char(std::string_view s, size_t i) {
  const auto c0 = static_cast<unsigned char>(s[i]);
  const uint32_t len = c0 < 0x80           ? 1
                       : (c0 >> 5) == 0x6  ? 2
                       : (c0 >> 4) == 0xE  ? 3
                       : (c0 >> 3) == 0x1E ? 4
                                           : 0;
  if (len == 0 || i + len > s.size()) return {0, 0};
  uint32_t cp = len == 1 ? c0 : c0 & (0x7F >> len);
  for (uint32_t k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0) != 0x80) return {0, 0};
    cp = (cp << 6) | (c & 0x3F);
  }
  const uint32_t min = len == 1 ? 0 : len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {0, 0};
  return {cp, len};
}

}  // namespace

bool utf8_chars(std::string_view s, std::vector<std::pair<uint32_t, uint32_t>>& out) {
  out.clear();
  for (size_t i = 0; i < s.size();) {
    const auto c = utf8_char(s, i);
    if (c.second == 0) return false;
    out.push_back(c);
    i += c.second;
  }
  return true;
}

size_t utf8_char_len(std::string_view s, size_t i) { return std::max<size_t>(1, utf8_char(s, i).second); }

}  // namespace saccade::hf
