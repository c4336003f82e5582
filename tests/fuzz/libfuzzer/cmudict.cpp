// libFuzzer target: lines of the CMU Pronouncing Dictionary in Festival's lexicon format
// (examples::read_cmudict, the g2p example's reader), read with and without stress digits (the first byte
// of the input picks).
// Properties: a rejected file gets a saccade::Error naming it; every word kept is non-empty and made of a-z,
// ' and -, has at least one pronunciation, each of non-empty phones, none listed twice.
#include <algorithm>

#include "examples/common/cmudict.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"

using namespace saccade;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bool stress = size > 0 && (data[0] & 1);
  const std::string path = fuzz::write_input(data, size, "cmudict.out");
  examples::CmuDict dict;
  try {
    dict = examples::read_cmudict(path, stress);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    return 0;
  }
  FUZZ_CHECK(dict.entries >= dict.dropped && dict.dropped >= 0, "{} entries, {} dropped", dict.entries,
             dict.dropped);
  FUZZ_CHECK(static_cast<int64_t>(dict.words.size()) <= dict.entries - dict.dropped,
             "more words than entries");
  for (const auto& w : dict.words) {
    FUZZ_CHECK(
        !w.word.empty() && w.word.find_first_not_of("abcdefghijklmnopqrstuvwxyz'-") == std::string::npos,
        "word '{}' kept", w.word);
    FUZZ_CHECK(!w.pronunciations.empty(), "word '{}' has no pronunciation", w.word);
    for (size_t i = 0; i < w.pronunciations.size(); ++i) {
      const auto& p = w.pronunciations[i];
      FUZZ_CHECK(
          !p.empty() && std::none_of(p.begin(), p.end(), [](const std::string& s) { return s.empty(); }),
          "word '{}' has an empty pronunciation or phone", w.word);
      FUZZ_CHECK(std::count(w.pronunciations.begin(), w.pronunciations.end(), p) == 1,
                 "word '{}' lists a pronunciation twice", w.word);
    }
  }
  return 0;
}
