// hf/ tokenizers against Hugging Face's own: the ids that transformers / tokenizers / sentencepiece give for
// the edge cases and the fortunes (tests/data/hf_tok/expected.json, made by
// tests/fixtures/make_hf_tokenizers.py), decode(encode(x)) == x, and the readers' errors.
#ifdef SACCADE_HAVE_HF
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include <nlohmann/json.hpp>

#include "helpers.h"
#include "hf/bpe.h"
#include "hf/pretokenizer.h"
#include "hf/tokenizer.h"
#include "temp_dir.h"

using namespace saccade;
using saccade::testing::error_of;
using hf::BPETokenizer;

namespace {

const std::string kDir = std::string(SACCADE_TEST_DATA_DIR) + "/hf_tok/";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

const nlohmann::json& expected() {
  static const nlohmann::json j = nlohmann::json::parse(read_text(kDir + "expected.json"));
  return j;
}

// A vocab.json holding the 256 byte characters (ids 0..255) and `extra` tokens after them.
std::string byte_vocab(const std::vector<std::string>& extra) {
  nlohmann::json v = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) v[hf::byte_to_unicode()[b]] = b;
  for (size_t i = 0; i < extra.size(); ++i) v[extra[i]] = 256 + static_cast<int>(i);
  return v.dump();
}

}  // namespace

TEST_CASE("hf tokenizers: the ids of Hugging Face on the edge cases and the fortunes, and back", "[hf]") {
  const auto& e = expected();
  const auto& texts = e["texts"];
  REQUIRE(texts.size() >= 300);
  REQUIRE(texts[0] == read_text(kDir + "edge_cases.txt"));
  struct Case {
    std::string key, dir, kind;
  };
  for (const Case& c :
       {Case{"byte_level", "gpt2", "vocab.json"}, Case{"byte_level", "bpe_json", "tokenizer.json"},
        Case{"llama3", "llama3", "tokenizer.json"}, Case{"smollm", "smollm", "tokenizer.json"},
        Case{"qwen2", "qwen2", "tokenizer.json"}, Case{"llama2", "llama2", "tokenizer.json"},
        Case{"sp", "sp", "tokenizer.model"}}) {
    const auto tok = hf::load_tokenizer(kDir + c.dir);
    INFO(tok->name());
    CHECK(tok->name().find(c.kind) != std::string::npos);
    const auto prefix = e[c.key]["prefix"].get<std::vector<int64_t>>();
    size_t identical = 0, decoded = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string text = texts[i];
      const auto want = e[c.key]["ids"][i].get<std::vector<int64_t>>();
      auto want_special = prefix;
      want_special.insert(want_special.end(), want.begin(), want.end());
      // HF's decode gives the text back, except where "decoded" says otherwise (NFC changes the text)
      const auto& other = e[c.key]["decoded"];
      const std::string want_text = other.value(std::to_string(i), text);
      const auto ids = tok->encode(text, false);
      INFO("text " << i << ": " << text);
      CHECK(ids == want);
      CHECK(tok->encode(text, true) == want_special);
      CHECK(tok->decode(ids) == want_text);
      identical += ids == want;
      decoded += tok->decode(ids) == want_text;
    }
    CHECK(identical == texts.size());
    CHECK(decoded == texts.size());
  }
  CHECK(e["qwen2"]["decoded"].size() == 2);  // the texts that NFC changes: the checks above saw both sides
}

// Each variant edits the tokenizer.json of the smollm or llama2 fixture (another normalizer, pre-tokenizer,
// decoder or model option) as the fixture script did, and must give tokenizers' ids and decoded text.
TEST_CASE("hf tokenizers: normalizers, Split behaviors, Digits, decoders and unknown tokens as tokenizers",
          "[hf]") {
  const auto& e = expected();
  const auto& texts = e["variant_texts"];
  REQUIRE(e["variants"].size() >= 15);
  for (const auto& v : e["variants"]) {
    const std::string name = v["name"], base = v["base"];
    INFO("variant " << name);
    nlohmann::json j = nlohmann::json::parse(read_text(kDir + base + "/tokenizer.json"));
    for (const auto& [key, value] : v["edit"].items()) {
      if (key == "model")
        j["model"].update(value);
      else
        j[key] = value;
    }
    const auto tok = BPETokenizer::parse_tokenizer_json(j.dump(), name);
    size_t identical = 0, round_trips = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string text = texts[i];
      INFO("text " << i << ": " << text);
      const auto ids = tok->encode(text, false);
      CHECK(ids == v["ids"][i].get<std::vector<int64_t>>());
      identical += ids == v["ids"][i].get<std::vector<int64_t>>();
      if (!v["decoded"][i].is_null()) CHECK(tok->decode(ids) == v["decoded"][i].get<std::string>());
      round_trips += tok->decode(ids) == text;
    }
    CHECK(identical == texts.size());
    if (name == "NFKC")  // NFKC changes some edge cases but not plain text
      CHECK((round_trips > texts.size() / 2 && round_trips < texts.size()));
  }
}

TEST_CASE("hf tokenizers: special tokens, BOS and EOS, vocabulary sizes", "[hf]") {
  const auto gpt2 = hf::load_tokenizer(kDir + "gpt2");
  const auto eot = gpt2->encode("<|endoftext|>", false);
  REQUIRE(eot.size() == 1);
  CHECK(gpt2->bos_id() == eot[0]);
  CHECK(gpt2->eos_id() == eot[0]);
  CHECK(gpt2->encode("a<|endoftext|>b", false) ==
        std::vector<int64_t>{gpt2->encode("a", false)[0], eot[0], gpt2->encode("b", false)[0]});
  CHECK(gpt2->vocab_size() == 991);

  const auto llama3 = hf::load_tokenizer(kDir + "llama3");
  CHECK(llama3->vocab_size() == 993);
  CHECK(llama3->bos_id() == 991);
  CHECK_FALSE(llama3->eos_id() == 991);
  CHECK(llama3->encode("", true) == std::vector<int64_t>{991});
  CHECK(llama3->encode("<|end_of_text|>", false) == std::vector<int64_t>{992});
  CHECK(llama3->decode({991, 992}) == "<|begin_of_text|><|end_of_text|>");

  const auto sp = hf::load_tokenizer(kDir + "sp");
  CHECK(sp->bos_id() == 1);
  CHECK(sp->eos_id() == 2);
  CHECK(sp->encode("", true) == std::vector<int64_t>{1});
}

TEST_CASE("hf tokenizers: added tokens in tokenizers' two passes, the non-normalized ones first", "[hf]") {
  // tests/data/hf_tok/added_tokens (tests/fixtures/make_hf_added_tokens.py): normalized and non-normalized
  // added tokens that overlap ("<a><b>" and "<b>", "hello world" and "world", "<c>d" and "<c"), with the ids
  // tokenizers gives
  const auto e = nlohmann::json::parse(read_text(kDir + "added_tokens/expected.json"));
  const auto tok = hf::load_tokenizer(kDir + "added_tokens");
  REQUIRE(e["texts"].size() == e["ids"].size());
  REQUIRE(e["texts"].size() >= 10);
  for (size_t i = 0; i < e["texts"].size(); ++i) {
    const std::string text = e["texts"][i].get<std::string>();
    CAPTURE(text);
    CHECK(tok->encode(text, false) == e["ids"][i].get<std::vector<int64_t>>());
    CHECK(tok->decode(tok->encode(text, false)) == text);
  }
  // the issue's case: a normalized "<a><b>" never spans a non-normalized "<b>"
  const auto ab = tok->encode("<a><b>", false);
  CHECK(ab.size() > 1);
  CHECK(ab.back() == tok->encode("<b>", false).at(0));
}

TEST_CASE("hf tokenizers: tokenizer_config.json names the BOS and EOS (Llama 2's tokenizer.json has no EOS)",
          "[hf]") {
  using Catch::Matchers::Contains;
  // the llama3 fixture's template gives the BOS (991) and no EOS, so the reader guesses its vocabulary's
  // "<|endoftext|>" (id 0); tokenizer_config.json beside it names the real one
  saccade::testing::TempDir dir("saccade_tokconfig");
  std::filesystem::copy_file(kDir + "llama3/tokenizer.json", dir.file("tokenizer.json"));
  CHECK(hf::load_tokenizer(dir.path.string())->eos_id() == 0);
  auto write_config = [&](const std::string& text) {
    std::ofstream(dir.file("tokenizer_config.json")) << text;
  };
  write_config(R"({"eos_token": "<|end_of_text|>", "bos_token": null, "model_max_length": 8192})");
  auto tok = hf::load_tokenizer(dir.path.string());
  CHECK(tok->eos_id() == 992);
  CHECK(tok->bos_id() == 991);  // null keeps the template's
  // the AddedToken form, as older transformers write it, and a plain vocabulary token
  write_config(R"({"bos_token": {"__type": "AddedToken", "content": "<|end_of_text|>", "lstrip": false},
                   "eos_token": "a"})");
  tok = hf::load_tokenizer(dir.path.string());
  CHECK(tok->bos_id() == 992);
  CHECK(tok->eos_id() == tok->encode("a", false).at(0));
  // the real layout's folder (tests/data/hf_llama, written by transformers) names its EOS only there
  const auto llama = hf::load_tokenizer(std::string(SACCADE_TEST_DATA_DIR) + "/hf_llama");
  REQUIRE(llama->eos_id().has_value());
  CHECK(llama->decode({*llama->eos_id()}) == "<|end_of_text|>");
  // bad files name the file and the key, and change nothing
  const auto bpe = BPETokenizer::from_tokenizer_json(kDir + "llama3/tokenizer.json");
  auto config_error = [&](const std::string& text) {
    return error_of([&] { bpe->parse_tokenizer_config(text, "tc.json"); });
  };
  CHECK_THAT(config_error(R"({"bos_token": "<|end_of_text|>", "eos_token": "<nope>"})"),
             Contains("'tc.json'") && Contains("eos_token") && Contains("'<nope>' is not a token"));
  CHECK(bpe->bos_id() == 991);  // the bos_token before the bad eos_token was not taken
  CHECK_THAT(config_error(R"({"eos_token": 5})"), Contains("'tc.json'") && Contains("eos_token"));
  CHECK_THAT(config_error(R"({"eos_token": {"content": 5}})"), Contains("eos_token"));
  CHECK_THAT(config_error("[1]"), Contains("not a JSON object"));
  CHECK_THAT(config_error("{"), Contains("'tc.json': not JSON"));
}

TEST_CASE(
    "hf tokenizers: any bytes round-trip through byte-level and byte-fallback BPE, the whole fortunes file "
    "too",
    "[hf]") {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);
  bytes +=
      "\xff\xfe ok \xc3 \xe2\x82 caf\xc3\xa9 \xf0\x9f\x98";   // invalid and cut-off UTF-8 among valid text
  for (const char* dir : {"bpe_json", "smollm", "llama2"}) {  // byte-level, and byte fallback
    const auto tok = hf::load_tokenizer(kDir + dir);
    CHECK(tok->decode(tok->encode(bytes, false)) == bytes);
  }
  // byte fallback: a character outside the vocabulary is its bytes' <0xNN> tokens (ids 3 + byte)
  const auto llama2 = hf::load_tokenizer(kDir + "llama2");
  const auto day = llama2->encode("\xe6\x97\xa5", false);  // "▁" (the normalizer's), then the bytes
  CHECK(day == std::vector<int64_t>{day.at(0), 3 + 0xe6, 3 + 0x97, 3 + 0xa5});
  CHECK(llama2->decode({day.at(0)}) == "");  // the decoder strips the first space
  const std::string fortunes = read_text("/usr/share/games/fortunes/fortunes");
  if (fortunes.empty()) {
    WARN("no /usr/share/games/fortunes/fortunes (scripts/setup installs it): skipped");
    return;
  }
  for (const char* dir : {"gpt2", "llama3", "smollm", "qwen2", "llama2", "sp"}) {
    const auto t = hf::load_tokenizer(kDir + dir);
    const auto ids = t->encode(fortunes, false);
    CHECK(ids.size() < fortunes.size());  // merges happened (one id per byte would mean none)
    CHECK(t->decode(ids) == fortunes);
  }
}

TEST_CASE("hf tokenizers: merges apply in rank order, leftmost first among equals", "[hf]") {
  // "abc": with "b c" ranked before "a b", b and c merge first and "a" stays alone
  auto t = BPETokenizer::parse_vocab_merges(byte_vocab({"bc", "ab", "abc"}), "#version: 0.2\nb c\na b\n");
  CHECK(t->encode("abc", false) == std::vector<int64_t>{'a', 256});
  t = BPETokenizer::parse_vocab_merges(byte_vocab({"bc", "ab", "abc"}), "a b\nb c\nab c\n");
  CHECK(t->encode("abc", false) == std::vector<int64_t>{258});
  // "aaa": the leftmost pair merges first, then nothing is left to merge with
  t = BPETokenizer::parse_vocab_merges(byte_vocab({"aa"}), "a a\n");
  CHECK(t->encode("aaa", false) == std::vector<int64_t>{256, 'a'});
  CHECK(t->encode("aaaa", false) == std::vector<int64_t>{256, 256});
  CHECK(t->bos_id() == std::nullopt);
}

TEST_CASE("hf tokenizers: encode is thread-safe (one shared cache)", "[hf]") {
  const auto tok = hf::load_tokenizer(kDir + "gpt2");
  const auto& texts = expected()["texts"];
  std::vector<std::vector<int64_t>> want;
  for (const auto& t : texts) want.push_back(tok->encode(t.get<std::string>(), false));
  std::vector<int> ok(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (size_t i = 0; i < texts.size(); ++i)
        ok[k] += tok->encode(texts[i].get<std::string>(), false) == want[i];
    });
  for (auto& th : threads) th.join();
  for (int k = 0; k < 4; ++k) CHECK(ok[k] == static_cast<int>(texts.size()));
}

TEST_CASE("hf tokenizers: bad files and bad ids name the file and the key or line", "[hf]") {
  using Catch::Matchers::Contains;
  const std::string vocab = byte_vocab({"ab"});
  auto merges_error = [&](const std::string& merges) {
    return error_of([&] { BPETokenizer::parse_vocab_merges(vocab, merges, "v.json", "m.txt"); });
  };
  CHECK_THAT(merges_error("a b\nab\n"), Contains("'m.txt': line 2") && Contains("'ab'"));
  CHECK_THAT(merges_error("a  b\n"), Contains("line 1"));
  CHECK_THAT(merges_error("#version: 0.2\na c\n"),
             Contains("'m.txt': line 2") && Contains("'ac' is not in the vocabulary"));
  CHECK_THAT(merges_error("a x y\n"), Contains("line 1"));
  auto vocab_error = [&](const std::string& v) {
    return error_of([&] { BPETokenizer::parse_vocab_merges(v, "", "v.json", "m.txt"); });
  };
  CHECK_THAT(vocab_error("[1, 2]"), Contains("'v.json'") && Contains("not an object"));
  CHECK_THAT(vocab_error("{\"a\": \"1\"}"), Contains("'v.json'") && Contains("\"a\""));
  CHECK_THAT(vocab_error("{\"a\": -1}"), Contains("out of range"));
  CHECK_THAT(vocab_error("{\"a\": 1, \"b\": 1}"), Contains("id 1 is also"));
  CHECK_THAT(vocab_error("{\"a\": 0}"), Contains("no token for byte"));
  CHECK_THAT(vocab_error("{\"a\": "), Contains("'v.json': not JSON"));
  CHECK_THAT(vocab_error(std::string(100, '[') + std::string(100, ']')), Contains("deeper than 64"));

  const nlohmann::json good = nlohmann::json::parse(read_text(kDir + "llama3/tokenizer.json"));
  auto json_error = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    return error_of([&] { BPETokenizer::parse_tokenizer_json(j.dump(), "t.json"); });
  };
  CHECK(json_error([](nlohmann::json&) {}) == "(no error)");
  CHECK_THAT(json_error([](nlohmann::json& j) { j["model"]["type"] = "WordPiece"; }),
             Contains("'t.json'") && Contains("model.type") && Contains("WordPiece"));
  CHECK_THAT(json_error([](nlohmann::json& j) {
               j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
             }),
             Contains("pre_tokenizer.type") && Contains("BertPreTokenizer"));
  CHECK_THAT(json_error([](nlohmann::json& j) {
               j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "([";
             }),
             Contains("does not compile"));
  CHECK(json_error([](nlohmann::json& j) { j["normalizer"] = {{"type", "NFC"}}; }) == "(no error)");
  CHECK_THAT(json_error([](nlohmann::json& j) {
               j["normalizer"] = {{"type", "BertNormalizer"}};
             }),
             Contains("'t.json'") && Contains("\"normalizer.type\"") && Contains("BertNormalizer"));
  CHECK_THAT(
      json_error([](nlohmann::json& j) {
        j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Strip"}}}}};
      }),
      Contains("\"normalizer.normalizers[1].type\"") && Contains("Strip"));
  CHECK_THAT(json_error([](nlohmann::json& j) {
               j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "("}}}, {"content", ""}};
             }),
             Contains("normalizer.pattern") && Contains("does not compile"));
  CHECK_THAT(json_error([](nlohmann::json& j) {
               j["normalizer"] = {{"type", "Prepend"}};
             }),
             Contains("\"normalizer.prepend\""));
  CHECK_THAT(json_error([](nlohmann::json& j) {
               j["normalizer"] = {{"type", "NFC"}};
               j["added_tokens"][1]["normalized"] = true;
             }),
             Contains("added_tokens[1].normalized"));
  CHECK_THAT(json_error([](nlohmann::json& j) {
               j["decoder"] = {{"type", "WordPiece"}};
             }),
             Contains("'t.json'") && Contains("\"decoder.type\"") && Contains("WordPiece"));
  CHECK_THAT(json_error([](nlohmann::json& j) {
               j["decoder"] = {{"type", "Sequence"}, {"decoders", {{{"type", "Strip"}, {"content", "ab"}}}}};
             }),
             Contains("decoder.decoders[0].content"));
  CHECK_THAT(json_error([](nlohmann::json& j) {
               j["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", -1}, {"stop", 0}};
             }),
             Contains("decoder.start"));
  CHECK_THAT(
      json_error([](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways"; }),
      Contains("pre_tokenizer.pretokenizers[0].behavior") && Contains("Sideways"));
  CHECK_THAT(json_error([](nlohmann::json& j) {
               std::swap(j["pre_tokenizer"]["pretokenizers"][0], j["pre_tokenizer"]["pretokenizers"][1]);
             }),
             Contains("pre_tokenizer.pretokenizers[1]") && Contains("after a ByteLevel"));
  // no pre-tokenizer (Llama 2's): the vocabulary is read as characters, not GPT-2's byte characters
  CHECK(json_error([](nlohmann::json& j) { j["pre_tokenizer"] = nullptr; }) == "(no error)");
  CHECK_THAT(json_error([](nlohmann::json& j) {
               j["post_processor"] = {{"type", "BertProcessing"}};
             }),
             Contains("post_processor.type"));
  CHECK_THAT(json_error([](nlohmann::json& j) { j["model"]["merges"][3] = "Ġ"; }),
             Contains("model.merges[3]"));
  CHECK_THAT(json_error([](nlohmann::json& j) { j["model"]["merges"][5] = "Ġ zzzz"; }),
             Contains("model.merges[5]") && Contains("'zzzz' is not in the vocabulary"));
  CHECK_THAT(json_error([](nlohmann::json& j) { j["model"]["vocab"]["Ġt"] = 3.5; }),
             Contains("model.vocab.Ġt"));
  CHECK_THAT(json_error([](nlohmann::json& j) { j["added_tokens"][1]["id"] = 5; }),
             Contains("added_tokens[1]") && Contains("id 5"));
  CHECK_THAT(json_error([](nlohmann::json& j) { j["added_tokens"][1]["lstrip"] = true; }),
             Contains("added_tokens[1].lstrip"));

  const auto tok = hf::load_tokenizer(kDir + "gpt2");
  CHECK_THAT(error_of([&] {
               tok->decode({1, 991});
             }),
             Contains("hf::BPE") && Contains("vocab.json") && Contains("991"));
  CHECK_THAT(error_of([&] { tok->decode({-1}); }), Contains("id -1"));
  const auto sp = hf::load_tokenizer(kDir + "sp");
  CHECK_THAT(error_of([&] { sp->decode({400}); }),
             Contains("hf::SentencePieceTokenizer") && Contains("tokenizer.model"));
  testing::TempDir empty("saccade_hf_tok");
  CHECK_THAT(error_of([&] { hf::load_tokenizer(empty.path.string()); }),
             Contains("hf::load_tokenizer") && Contains(empty.path.string()));
  std::ofstream(empty.file("tokenizer.model")) << "not a model";
  CHECK_THAT(error_of([&] { hf::load_tokenizer(empty.path.string()); }), Contains("tokenizer.model"));
  nlohmann::json unknown = good;
  unknown["pre_tokenizer"]["pretokenizers"][1] = {{"type", "UnicodeScripts"}};
  std::ofstream(empty.file("tokenizer.json")) << unknown.dump();
  CHECK_THAT(error_of([&] { hf::load_tokenizer(empty.path.string()); }),
             Contains(empty.file("tokenizer.json")) && Contains("\"pre_tokenizer.pretokenizers[1].type\"") &&
                 Contains("UnicodeScripts"));
}

// Issue 41 (bad input): a tokenizer.json of a kind we do not implement is refused by hf::load_tokenizer with
// an Error that names the file, the key and the type, whatever else the folder holds. The files are small
// hand-written ones of the shapes Hugging Face's tokenizers writes (BERT: WordPiece and BertNormalizer; T5 /
// ALBERT: Unigram with a Precompiled normalizer), each beside a control that loads: the same file with only
// the refused part replaced.
TEST_CASE("hf tokenizers: WordPiece, Unigram and unimplemented normalizers are refused by name", "[hf]") {
  using Catch::Matchers::Contains;
  // a valid character-level BPE (no pre-tokenizer): "a", "b", "ab"
  const nlohmann::json bpe = nlohmann::json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
    "pre_tokenizer": null, "post_processor": null, "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
              "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})");
  const nlohmann::json wordpiece = nlohmann::json::parse(R"({
    "type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
    "max_input_chars_per_word": 100, "vocab": {"[UNK]": 0, "a": 1, "##b": 2}})");
  const nlohmann::json unigram = nlohmann::json::parse(R"({
    "type": "Unigram", "unk_id": 0, "byte_fallback": false,
    "vocab": [["<unk>", 0.0], ["a", -1.5], ["b", -2.0], ["ab", -2.5]]})");
  const nlohmann::json bert_normalizer = nlohmann::json::parse(R"({
    "type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null,
    "lowercase": true})");
  const nlohmann::json precompiled = nlohmann::json::parse(R"({
    "type": "Sequence", "normalizers": [{"type": "Precompiled", "precompiled_charsmap": ""},
                                        {"type": "NFKC"}]})");

  testing::TempDir dir("saccade_hf_refused");
  const std::string path = dir.file("tokenizer.json");
  auto load = [&](const nlohmann::json& j) {
    std::ofstream(path) << j.dump(2);
    return error_of([&] { hf::load_tokenizer(dir.path.string()); });
  };
  REQUIRE(load(bpe) == "(no error)");  // the control
  CHECK(hf::load_tokenizer(dir.path.string())->encode("ab", false) == std::vector<int64_t>{2});

  struct Refused {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* key;
    const char* type;
  };
  const Refused cases[] = {
      {"BERT's WordPiece model", [&](nlohmann::json& j) { j["model"] = wordpiece; }, "\"model.type\"",
       "'WordPiece'"},
      {"a Unigram model", [&](nlohmann::json& j) { j["model"] = unigram; }, "\"model.type\"", "'Unigram'"},
      {"BERT's whole file",
       [&](nlohmann::json& j) {
         j["model"] = wordpiece;  // the model is refused first
         j["normalizer"] = bert_normalizer;
         j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
       },
       "\"model.type\"", "'WordPiece'"},
      {"T5's whole file",
       [&](nlohmann::json& j) {
         j["model"] = unigram;
         j["normalizer"] = precompiled;
       },
       "\"model.type\"", "'Unigram'"},
      {"BertNormalizer before a BPE", [&](nlohmann::json& j) { j["normalizer"] = bert_normalizer; },
       "\"normalizer.type\"", "'BertNormalizer'"},
      {"Precompiled in a Sequence", [&](nlohmann::json& j) { j["normalizer"] = precompiled; },
       "\"normalizer.normalizers[0].type\"", "'Precompiled'"},
      {"StripAccents",
       [&](nlohmann::json& j) {
         j["normalizer"] = {{"type", "StripAccents"}};
       },
       "\"normalizer.type\"", "'StripAccents'"},
  };
  for (const Refused& c : cases) {
    INFO(c.what);
    nlohmann::json j = bpe;
    c.edit(j);
    CHECK_THAT(load(j), Contains(path) && Contains(c.key) && Contains(c.type) && Contains("not supported"));
  }
  // a folder with tokenizer.json beside a SentencePiece tokenizer.model still reads (and refuses) the former
  std::filesystem::copy_file(kDir + "sp/tokenizer.model", dir.file("tokenizer.model"));
  nlohmann::json j = bpe;
  j["model"] = unigram;
  CHECK_THAT(load(j), Contains(path) && Contains("'Unigram'"));
}

#endif  // SACCADE_HAVE_HF
