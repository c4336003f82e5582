#include "examples/common/cmudict.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <unordered_map>

#include "core/error.h"

namespace saccade::examples {
namespace {

bool valid_word(const std::string& w) {
  if (w.empty()) return false;
  for (char c : w)
    if (!((c >= 'a' && c <= 'z') || c == '\'' || c == '-')) return false;
  return true;
}

bool is_vowel(const std::string& phone) { return std::string("aeiou").find(phone[0]) != std::string::npos; }

// Parses `("word" POS (((p h) 1) ((o) 0)))`; returns false for a malformed line.
bool parse_entry(const std::string& line, std::string& word, Phones& phones, bool stress) {
  size_t q1 = line.find('"'), q2 = q1 == std::string::npos ? q1 : line.find('"', q1 + 1);
  if (q1 != 1 || q2 == std::string::npos) return false;
  word = line.substr(q1 + 1, q2 - q1 - 1);
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  phones.clear();
  // Each syllable is "((phones) digit)": find the "((" openings after the word.
  size_t pos = line.find("((", q2);
  if (pos == std::string::npos) return false;
  while ((pos = line.find('(', pos)) != std::string::npos) {
    if (line.compare(pos, 2, "((") == 0) {
      ++pos;
      continue;
    }
    size_t close = line.find(')', pos);
    if (close == std::string::npos) return false;
    size_t d = line.find_first_not_of(' ', close + 1);
    if (d == std::string::npos || !std::isdigit(static_cast<unsigned char>(line[d]))) return false;
    std::string syllable = line.substr(pos + 1, close - pos - 1);
    size_t s = 0;
    while ((s = syllable.find_first_not_of(' ', s)) != std::string::npos) {
      size_t e = std::min(syllable.find(' ', s), syllable.size());
      std::string p = syllable.substr(s, e - s);
      if (stress && is_vowel(p)) p += line[d];
      phones.push_back(p);
      s = e;
    }
    pos = close + 1;
  }
  return !phones.empty();
}

}  // namespace

int64_t CmuDict::pairs() const {
  int64_t n = 0;
  for (const auto& w : words) n += static_cast<int64_t>(w.pronunciations.size());
  return n;
}

CmuDict read_cmudict(const std::string& path, bool stress) {
  std::ifstream in(path, std::ios::binary);
  SACCADE_CHECK(in.good(), "read_cmudict: cannot open {} (Debian package festlex-cmu; run scripts/setup)",
                path);
  CmuDict dict;
  std::unordered_map<std::string, size_t> index;
  std::string line, word;
  Phones phones;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] != '(') continue;  // blank lines, ';' comments, the header line
    SACCADE_CHECK(parse_entry(line, word, phones, stress),
                  "read_cmudict: {} line {}: cannot parse entry '{}'", path, line_no, line);
    ++dict.entries;
    if (!valid_word(word)) {
      ++dict.dropped;
      continue;
    }
    auto [it, fresh] = index.emplace(word, dict.words.size());
    if (fresh) dict.words.push_back({word, {}});
    auto& prons = dict.words[it->second].pronunciations;
    if (std::find(prons.begin(), prons.end(), phones) == prons.end()) prons.push_back(phones);
  }
  return dict;
}

int split_bucket(const std::string& word, uint64_t seed) {
  std::string key = std::to_string(seed) + ":" + word;
  uint64_t z = 0xcbf29ce484222325ULL;
  for (unsigned char c : key) z = (z ^ c) * 0x100000001b3ULL;
  z ^= z >> 30;
  z *= 0xbf58476d1ce4e5b9ULL;
  z ^= z >> 27;
  z *= 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<int>(z % 100);
}

Split split_of(const std::string& word, uint64_t seed) {
  int b = split_bucket(word, seed);
  return b < 90 ? Split::Train : b < 95 ? Split::Validation : Split::Test;
}

std::vector<DictWord> split_words(const CmuDict& dict, Split split, uint64_t seed) {
  std::vector<DictWord> out;
  for (const auto& w : dict.words)
    if (split_of(w.word, seed) == split) out.push_back(w);
  return out;
}

int64_t edit_distance(const Phones& a, const Phones& b) {
  // One row of the dynamic programme: row[j] = distance(a[:i], b[:j]).
  std::vector<int64_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int64_t diag = row[0];
    row[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int64_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

G2PScore score_g2p(const std::vector<DictWord>& words, const std::vector<Phones>& predictions) {
  SACCADE_CHECK(!words.empty() && words.size() == predictions.size(),
                "score_g2p: expected as many predictions as words (at least one), got {} and {}",
                predictions.size(), words.size());
  G2PScore s;
  for (size_t i = 0; i < words.size(); ++i) {
    int64_t best = -1, best_len = 0;
    for (const Phones& ref : words[i].pronunciations) {
      int64_t d = edit_distance(predictions[i], ref), len = static_cast<int64_t>(ref.size());
      if (best < 0 || d < best || (d == best && len < best_len)) best = d, best_len = len;
    }
    s.wrong_words += best != 0;
    s.edits += best;
    s.ref_phones += best_len;
  }
  s.words = static_cast<int64_t>(words.size());
  s.wer = static_cast<double>(s.wrong_words) / static_cast<double>(s.words);
  s.per = static_cast<double>(s.edits) / static_cast<double>(s.ref_phones);
  return s;
}

}  // namespace saccade::examples
