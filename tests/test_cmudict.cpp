// examples/common/cmudict: the Festival-format reader on a file the test writes, the docs/data.md split and
// its check values, the G2P metrics by hand, and the docs/data.md counts on the real dictionary when
// installed. Compiled only when examples/common/CMakeLists.txt defined the macro below.
#ifdef SACCADE_HAVE_EXAMPLES_COMMON

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "examples/common/cmudict.h"
#include "helpers.h"

using namespace saccade;
using namespace saccade::examples;
namespace fs = std::filesystem;

namespace {

std::string write_file(const std::string& name, const std::string& text) {
  fs::path p = fs::temp_directory_path() / (name + "_" + std::to_string(getpid()));
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

}  // namespace

TEST_CASE("cmudict: reads Festival entries, drops odd words, keeps distinct pronunciations",
          "[examples][cmudict]") {
  std::string path = write_file("cmudict_small.out",
                                "MNCL\n"
                                "; a comment\n"
                                "\n"
                                "(\"a\" dt (((ax) 0)))\n"
                                "(\"a\" n (((ey) 1)))\n"
                                "(\"a\" j (((ax) 0)))\n"  // the same pronunciation again: kept once
                                "(\"Abandon\" nil (((ax) 0) ((b ae n) 1) ((d ax n) 0)))\r\n"
                                "(\"x-ray\" n (((eh k s) 1) ((r ey) 2)))\n"
                                "(\"o'clock\" nil (((ax) 0) ((k l aa k) 1)))\n"
                                "(\"3d\" nil (((th r iy) 1) ((d iy) 1)))\n"
                                "(\"a.b.\" nil (((ey) 1) ((b iy) 1)))\n");
  CmuDict d = read_cmudict(path);
  CHECK(d.entries == 8);
  CHECK(d.dropped == 2);
  REQUIRE(d.words.size() == 4);
  CHECK(d.pairs() == 5);
  CHECK(d.words[0].word == "a");
  CHECK(d.words[0].pronunciations == std::vector<Phones>{{"ax"}, {"ey"}});
  CHECK(d.words[1].word == "abandon");
  CHECK(d.words[1].pronunciations[0] == Phones{"ax", "b", "ae", "n", "d", "ax", "n"});
  CHECK(d.words[2].word == "x-ray");
  CHECK(d.words[3].word == "o'clock");

  CmuDict s = read_cmudict(path, /*stress=*/true);
  CHECK(s.words[1].pronunciations[0] == Phones{"ax0", "b", "ae1", "n", "d", "ax0", "n"});
  CHECK(s.words[2].pronunciations[0] == Phones{"eh1", "k", "s", "r", "ey2"});

  std::string bad = write_file("cmudict_bad.out", "(\"a\" dt (((ax) 0)))\n(\"b\" nil ((b iy\n");
  REQUIRE_THROWS_SACCADE(read_cmudict(bad), "line 2");
  REQUIRE_THROWS_SACCADE(read_cmudict(path + ".missing"), "cannot open");
  fs::remove(path);
  fs::remove(bad);
}

TEST_CASE("cmudict: the split reproduces docs/data.md's check buckets", "[examples][cmudict]") {
  CHECK(split_bucket("abandon") == 26);
  CHECK(split_bucket("saccade") == 84);
  CHECK(split_bucket("attention") == 57);
  CHECK(split_bucket("zebra") == 34);
  CHECK(split_bucket("a") == 45);
  CHECK(split_bucket("x-ray") == 76);
  CHECK(split_bucket("o'clock") == 51);
  CHECK(split_of("saccade") == Split::Train);
  CHECK(split_bucket("saccade", 1) != split_bucket("saccade", 0));  // the seed is part of the key
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 20000; ++i) {
    std::string word = std::to_string(i);
    word.insert(word.begin(), 'w');  // (not "w" + ...: GCC 12's -Wstringop-overflow false positive)
    ++counts[static_cast<int>(split_of(word))];
  }
  CHECK(std::abs(counts[0] - 18000) < 400);  // 90 / 5 / 5 %
  CHECK(std::abs(counts[2] - 1000) < 150);
}

TEST_CASE("cmudict: edit distance, WER and PER by hand", "[examples][cmudict]") {
  CHECK(edit_distance({"k", "ae", "t"}, {"k", "ae", "t"}) == 0);
  CHECK(edit_distance({"k", "ae", "t"}, {"b", "ae", "t", "s"}) == 2);  // substitute, insert
  CHECK(edit_distance({}, {"a", "b"}) == 2);
  CHECK(edit_distance({"a", "b", "c"}, {"c", "a", "b"}) == 2);
  std::vector<DictWord> words = {{"read", {{"r", "iy", "d"}, {"r", "eh", "d"}}}, {"cat", {{"k", "ae", "t"}}}};
  // "read" matches its second reference: right; "cat" has one substitution out of 3 phones.
  G2PScore s = score_g2p(words, {{"r", "eh", "d"}, {"k", "ah", "t"}});
  CHECK(s.wrong_words == 1);
  CHECK(s.wer == 0.5);
  CHECK(s.per == Approx(1.0 / 6.0));
  // PER uses the closest reference: 1 edit against "r eh d" (not 2 against "r iy d").
  G2PScore t = score_g2p({words[0]}, {{"r", "eh"}});
  CHECK(t.edits == 1);
  CHECK(t.ref_phones == 3);
  REQUIRE_THROWS_SACCADE(score_g2p(words, {{"a"}}), "score_g2p");
}

TEST_CASE("cmudict: the real dictionary gives docs/data.md's counts", "[examples][cmudict][slow]") {
  if (!fs::exists(kCmuDictPath)) {
    WARN(kCmuDictPath << " not found (Debian package festlex-cmu): skipped");
    SUCCEED();
    return;
  }
  CmuDict d = read_cmudict();
  CHECK(d.entries == 105901);
  CHECK(d.words.size() == 105664);
  CHECK(d.dropped == 0);
  CHECK(d.pairs() == 105832);
  CHECK(split_words(d, Split::Train).size() == 95054);
  CHECK(split_words(d, Split::Validation).size() == 5409);
  CHECK(split_words(d, Split::Test).size() == 5201);
  std::set<char> letters;
  std::set<std::string> phones;
  for (const auto& w : d.words) {
    letters.insert(w.word.begin(), w.word.end());
    for (const auto& p : w.pronunciations) phones.insert(p.begin(), p.end());
  }
  CHECK(letters.size() == 26);
  CHECK(phones == std::set<std::string>{"aa", "ae", "ah", "ao", "aw", "ax", "ay", "b",  "ch", "d",
                                        "dh", "eh", "er", "ey", "f",  "g",  "hh", "ih", "iy", "jh",
                                        "k",  "l",  "m",  "n",  "ng", "ow", "oy", "p",  "r",  "s",
                                        "sh", "t",  "th", "uh", "uw", "v",  "w",  "y",  "z",  "zh"});
}

#endif  // SACCADE_HAVE_EXAMPLES_COMMON
