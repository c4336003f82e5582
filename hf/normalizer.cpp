#include "hf/normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "hf/tokenizer_json.h"

namespace saccade::hf {

namespace {

enum class Kind { Form, Lowercase, Prepend, Replace };

// `text` with each stretch of valid UTF-8 passed through `f` and every other byte kept.
template <typename F>
std::string on_valid_utf8(std::string_view text, F f) {
  std::string out;
  size_t done = 0;  // text[0, done) is in out
  auto flush = [&](size_t end) {
    if (end > done) out += f(text.substr(done, end - done));
  };
  for (size_t i = 0; i < text.size();) {
    utf8proc_int32_t cp = 0;
    const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                                    static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
    if (n > 0) {
      i += static_cast<size_t>(n);
      continue;
    }
    flush(i);
    out += text[i];
    done = ++i;
  }
  flush(text.size());
  return out;
}

// Valid UTF-8 `s` in the normal form that `options` (UTF8PROC_COMPOSE / DECOMPOSE, COMPAT) names.
std::string normal_form(std::string_view s, utf8proc_option_t options) {
  utf8proc_uint8_t* dst = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                              static_cast<utf8proc_ssize_t>(s.size()), &dst,
                              static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
  std::string out = n >= 0 ? std::string(reinterpret_cast<const char*>(dst), static_cast<size_t>(n))
                           : std::string(s);  // NOTE: only on allocation failure, as s is valid
  std::free(dst);
  return out;
}

std::string lowercase(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    utf8proc_int32_t cp = 0;
    i += static_cast<size_t>(utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                              static_cast<utf8proc_ssize_t>(s.size() - i), &cp));
    // utf8proc has the simple mapping; the one unconditional full mapping of SpecialCasing.txt that
    // differs (and that Rust's to_lowercase applies) is U+0130 -> i + U+0307.
    if (cp == 0x130) {
      out += "i\xcc\x87";
      continue;
    }
    utf8proc_uint8_t buf[4];
    const auto n = utf8proc_encode_char(utf8proc_tolower(cp), buf);
    out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

struct Normalizer::Step {
  Kind kind = Kind::Form;
  utf8proc_option_t form{};
  std::string text;              // Prepend's prefix, Replace's content
  std::unique_ptr<Regex> regex;  // Replace's pattern
};

Normalizer::Normalizer(const nlohmann::json& j, const std::string& file) {
  using namespace tokjson;
  const std::string type = type_of(j, file, "normalizer");
  std::vector<const json*> steps{&j};
  if (type == "Sequence") {
    steps.clear();
    for (const json& s : list(j, "normalizers", file, "normalizer")) steps.push_back(&s);
  }
  static const std::pair<const char*, int> kForms[] = {{"NFC", UTF8PROC_COMPOSE},
                                                       {"NFD", UTF8PROC_DECOMPOSE},
                                                       {"NFKC", UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
                                                       {"NFKD", UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT}};
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = *steps[i];
    const std::string where =
        type == "Sequence" ? fmt::format("normalizer.normalizers[{}]", i) : "normalizer";
    const std::string t = type_of(s, file, where);
    Step step;
    const auto form =
        std::find_if(std::begin(kForms), std::end(kForms), [&](const auto& f) { return t == f.first; });
    if (form != std::end(kForms)) {
      step.form = static_cast<utf8proc_option_t>(form->second);
    } else if (t == "Lowercase") {
      step.kind = Kind::Lowercase;
    } else if (t == "Prepend") {
      step.kind = Kind::Prepend;
      step.text = text(s, "prepend", file, where);
    } else if (t == "Replace") {
      step.kind = Kind::Replace;
      step.regex = pattern(s, "pattern", file, where);
      step.text = text(s, "content", file, where);
    } else {
      throw fail(file, where + ".type", fmt::format("the normalizer type '{}' is not supported", t));
    }
    steps_.push_back(std::move(step));
  }
}

Normalizer::~Normalizer() = default;

std::string Normalizer::apply(std::string_view text, const std::string& who) const {
  std::string s(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::Form:
        s = on_valid_utf8(s, [&](std::string_view v) { return normal_form(v, step.form); });
        break;
      case Kind::Lowercase:
        s = on_valid_utf8(s, lowercase);
        break;
      case Kind::Prepend:
        if (!s.empty()) s.insert(0, step.text);
        break;
      case Kind::Replace:
        s = step.regex->replace(s, step.text, who);
        break;
    }
  }
  return s;
}

}  // namespace saccade::hf
