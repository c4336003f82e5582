// The Unicode of the tokenizer's pieces against Hugging Face tokenizers', code point by code point: the
// pre-tokenizer's regex classes (PCRE2) and the normalizer's tables (libutf8proc) agree with tokenizers
// everywhere except exactly where the libraries' Unicode version differs from tokenizers'
// (tests/data/hf_unicode.txt, written by tests/fixtures/make_hf_unicode.py from tokenizers itself and the
// Unicode data of each version); and Llama 3's and Qwen2's patterns on runs of a million spaces.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hf/normalizer.h"
#include "hf/pretokenizer.h"
#include "hf_fixture.h"

namespace {

using saccade::hf::Match;
using saccade::hf::Normalizer;
using saccade::hf::Regex;
using saccade::hf::SplitBehavior;

constexpr uint32_t kCodePoints = 0x110000;

bool is_surrogate(uint32_t cp) { return cp >= 0xD800 && cp <= 0xDFFF; }

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// "1234+5678": those code points' UTF-8.
std::string utf8_of(const std::string& joined) {
  std::string s;
  std::istringstream in(joined);
  for (std::string hex; std::getline(in, hex, '+');)
    s += utf8(static_cast<uint32_t>(std::stoul(hex, nullptr, 16)));
  return s;
}

struct Tally {
  uint64_t count = 0, hash = 0xCBF29CE484222325;  // FNV-1a 64
  void add(uint32_t cp, const std::string& form) {
    std::string bytes{static_cast<char>(cp & 0xFF), static_cast<char>((cp >> 8) & 0xFF),
                      static_cast<char>((cp >> 16) & 0xFF), static_cast<char>(cp >> 24)};
    bytes += form;
    bytes += '\xFF';
    for (const char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001B3;
    ++count;
  }
  bool operator==(const Tally&) const = default;
};

// tests/data/hf_unicode.txt (its format: make_hf_unicode.py's docstring).
struct UnicodeTables {
  std::map<std::string, std::vector<bool>> sets;            // L, N, S and their -delta
  std::map<std::string, std::map<uint32_t, Tally>> hashes;  // form -> block -> tally
  std::map<std::string, std::map<uint32_t, std::pair<std::string, std::string>>> deltas;  // tokenizers, ours
};

const UnicodeTables& tables() {
  static const UnicodeTables t = [] {
    UnicodeTables t;
    std::ifstream f(saccade::testing::hf_data("hf_unicode.txt"));
    REQUIRE(f);
    for (std::string line; std::getline(f, line);) {
      std::istringstream in(line);
      std::string kind, name;
      in >> kind >> name;
      if (kind == "set") {
        auto& set = t.sets[name];
        set.resize(kCodePoints);
        for (std::string range; in >> range;) {
          const size_t dash = range.find('-');
          const auto lo = std::stoul(range.substr(0, dash), nullptr, 16);
          const auto hi = std::stoul(range.substr(dash + 1), nullptr, 16);
          for (auto cp = lo; cp <= hi; ++cp) set[cp] = true;
        }
      } else if (kind == "hash") {
        std::string block, count, hash;
        in >> block >> count >> hash;
        t.hashes[name][static_cast<uint32_t>(std::stoul(block, nullptr, 16))] = {
            std::stoull(count), std::stoull(hash, nullptr, 16)};
      } else if (kind == "delta") {
        std::string cp, tokenizers, ours;
        in >> cp >> tokenizers >> ours;
        t.deltas[name][static_cast<uint32_t>(std::stoul(cp, nullptr, 16))] = {utf8_of(tokenizers),
                                                                              utf8_of(ours)};
      }
    }
    return t;
  }();
  return t;
}

// Which code points `pattern` (one character a match) matches, walking every code point through
// Regex::find_matches at once.
std::vector<bool> regex_class(const std::string& pattern) {
  std::string all;
  std::vector<size_t> at;  // the byte where each code point of `all` starts
  std::vector<uint32_t> cps;
  for (uint32_t cp = 0; cp < kCodePoints; ++cp) {
    if (is_surrogate(cp)) continue;
    at.push_back(all.size());
    cps.push_back(cp);
    all += utf8(cp);
  }
  std::vector<bool> matched(kCodePoints);
  for (const Match& m : Regex(pattern, "test").find_matches(all, "test")) {
    if (!m.is_match) continue;
    for (auto i = std::lower_bound(at.begin(), at.end(), m.begin) - at.begin();
         i < static_cast<long>(at.size()) && at[i] < m.end; ++i)
      matched[cps[i]] = true;
  }
  return matched;
}

}  // namespace

TEST_CASE(
    "hf unicode: the regex classes are tokenizers' but for the letters and numbers of Unicode 15 and 16",
    "[hf][unicode]") {
  const UnicodeTables& t = tables();
  // What PCRE2 (Unicode 14.0) should match: tokenizers' (Unicode 16.0) class with the 14 -> 16 delta flipped.
  auto expected = [&](const std::string& name) {
    std::vector<bool> e = t.sets.at(name);
    const std::vector<bool>& delta = t.sets.at(name + "-delta");
    for (uint32_t cp = 0; cp < kCodePoints; ++cp) e[cp] = e[cp] != delta[cp];
    return e;
  };
  const std::vector<bool> L = expected("L"), N = expected("N"), S = expected("S");
  std::vector<bool> not_S(kCodePoints), other(kCodePoints);  // \S; [^\s\p{L}\p{N}] (GPT-2's)
  for (uint32_t cp = 0; cp < kCodePoints; ++cp) {
    not_S[cp] = !S[cp] && !is_surrogate(cp);
    other[cp] = !S[cp] && !L[cp] && !N[cp] && !is_surrogate(cp);
  }
  // The deltas are Unicode 15.0's and 16.0's new letters and numbers, and \s has none.
  CHECK(std::count(t.sets.at("L-delta").begin(), t.sets.at("L-delta").end(), true) == 9272);
  CHECK(std::count(t.sets.at("N-delta").begin(), t.sets.at("N-delta").end(), true) == 120);
  CHECK(std::count(t.sets.at("S-delta").begin(), t.sets.at("S-delta").end(), true) == 0);
  const std::pair<const char*, const std::vector<bool>*> cases[] = {{R"(\p{L})", &L},
                                                                    {R"(\p{N})", &N},
                                                                    {R"(\s)", &S},
                                                                    {R"([\s])", &S},
                                                                    {R"([[:space:]])", &S},
                                                                    {R"(\S)", &not_S},
                                                                    {R"([^\s])", &not_S},
                                                                    {R"([[:^space:]])", &not_S},
                                                                    {R"([^\s\p{L}\p{N}])", &other}};
  for (const auto& [pattern, want] : cases) {
    INFO("pattern " << pattern);
    const std::vector<bool> got = regex_class(pattern);
    std::vector<uint32_t> wrong;
    for (uint32_t cp = 0; cp < kCodePoints; ++cp)
      if (got[cp] != (*want)[cp]) wrong.push_back(cp);
    INFO(wrong.size() << " code points differ, the first U+" << std::hex << std::uppercase
                      << (wrong.empty() ? 0 : wrong[0]));
    CHECK(wrong.empty());
  }
}

TEST_CASE("hf unicode: the normal forms and Lowercase are tokenizers' but for the Unicode version delta",
          "[hf][unicode]") {
  const UnicodeTables& t = tables();
  // Each code point alone, between newlines: a newline is a starter that composes with nothing, so the form
  // of the whole is the forms of the pieces.
  std::string all;
  std::vector<uint32_t> cps;
  for (uint32_t cp = 0; cp < kCodePoints; ++cp) {
    if (is_surrogate(cp) || cp == '\n') continue;
    cps.push_back(cp);
    all += utf8(cp);
    all += '\n';
  }
  const std::pair<const char*, size_t> forms[] = {
      {"NFC", 0}, {"NFD", 1}, {"NFKC", 134}, {"NFKD", 135}, {"Lowercase", 55}};
  for (const auto& [form, n_delta] : forms) {
    INFO("normalizer " << form);
    const Normalizer normalizer(nlohmann::json{{"type", form}}, "test.json");
    CHECK(normalizer.apply("\n", "test") == "\n");
    const std::string out = normalizer.apply(all, "test");
    const auto& delta = t.deltas.count(form) ? t.deltas.at(form) : decltype(t.deltas)::mapped_type{};
    CHECK(delta.size() == n_delta);
    std::map<uint32_t, Tally> got;
    size_t begin = 0, k = 0, delta_seen = 0;
    for (; k < cps.size() && begin <= out.size(); ++k) {
      const size_t end = std::min(out.find('\n', begin), out.size());
      const std::string piece = out.substr(begin, end - begin);
      begin = end + 1;
      const uint32_t cp = cps[k];
      if (const auto d = delta.find(cp); d != delta.end()) {
        INFO("U+" << std::hex << std::uppercase << cp);
        CHECK(piece == d->second.second);  // the library's version's
        CHECK(piece != d->second.first);   // not tokenizers'
        ++delta_seen;
      } else if (piece != utf8(cp)) {
        got[cp >> 12].add(cp, piece);
      }
    }
    REQUIRE(k == cps.size());
    CHECK(begin == out.size());
    CHECK(delta_seen == delta.size());
    const auto& want = t.hashes.at(form);
    for (uint32_t block = 0; block < kCodePoints >> 12; ++block) {
      const Tally none;
      const Tally& w = want.count(block) ? want.at(block) : none;
      const Tally& g = got.count(block) ? got.at(block) : none;
      INFO("code points U+" << std::hex << std::uppercase << (block << 12) << " to U+"
                            << ((block << 12) + 0xFFF) << std::dec << ": tokenizers changes " << w.count
                            << ", we change " << g.count);
      CHECK(g == w);
    }
  }
}

TEST_CASE(
    "hf unicode: Llama 3's and Qwen2's patterns split a million spaces before a word as they split a few",
    "[hf][unicode]") {
  for (const char* name : {"llama3", "qwen2"}) {
    const auto j = nlohmann::json::parse(saccade::testing::file_bytes(
        saccade::testing::hf_data("hf_tok/" + std::string(name) + "/tokenizer.json")));
    const Regex regex(
        j.at("pre_tokenizer").at("pretokenizers").at(0).at("pattern").at("Regex").get<std::string>(), name);
    // n blanks before a word: all but the last blank (\s+(?!\S)), then the last with the word
    // ([^\r\n\p{L}\p{N}]?\p{L}+); n newlines: all of them (\s*[\r\n]+), then the word.
    std::vector<size_t> lengths(50);
    for (size_t n = 1; n <= 50; ++n) lengths[n - 1] = n;
    lengths.push_back(1'000'000);
    for (const char blank : {' ', '\t', '\n'})
      for (const size_t n : lengths) {
        INFO(name << ": " << n << " times byte " << int(blank) << " before a word");
        const std::string text = std::string(n, blank) + "word";
        std::vector<std::string> want;
        if (blank == '\n') {
          want = {std::string(n, '\n'), "word"};
        } else {
          if (n > 1) want.push_back(std::string(n - 1, blank));
          want.push_back(std::string(1, blank) + "word");
        }
        std::vector<std::string> got;
        for (const auto piece : regex.split(text, SplitBehavior::Isolated, false, name))
          got.emplace_back(piece);
        CHECK(got == want);
      }
  }
  // A repeated group keeps JIT stack for each repeat: a million take more than PCRE2's default 32 KiB.
  const std::string spaces = std::string(1'000'000, ' ') + "word";
  const auto pieces = Regex(R"((?:\s)+(?!\S))", "test").split(spaces, SplitBehavior::Isolated, false, "test");
  CHECK(pieces == std::vector<std::string_view>{std::string_view(spaces).substr(0, 999'999), " word"});
  // A pattern that backtracks without end is still refused, naming the tokenizer.
  CHECK_THROWS_WITH(
      Regex("(a+)+$", "test").find_matches(std::string(40, 'a') + "b", "tok.json"),
      Catch::Contains("tok.json: pre-tokenization gave up at byte 0") && Catch::Contains("limit"));
}
