#include "hf/bpe.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <mutex>
#include <queue>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hf/pretokenizer.h"
#include "ops/error.h"

namespace saccade::hf {

using nlohmann::json;

namespace {

constexpr int64_t kMaxId = int64_t{1} << 31;
constexpr size_t kCacheEntries = 10000;  // as tokenizers' BPE cache; pieces are not cached beyond it

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("hf::ByteLevelBPE: cannot read '{}'", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// One added token (tokenizer.json's "added_tokens", or GPT-2's "<|endoftext|>"): cut out of the text before
// pre-tokenization, decoded as its content.
struct AddedToken {
  std::string content;
  int64_t id;
};

}  // namespace

struct ByteLevelBPETokenizer::Impl {
  std::string source;  // the file(s), for messages
  std::unordered_map<std::string, int64_t> vocab;
  std::unordered_map<int64_t, std::string> id_to_token;
  std::unordered_map<uint64_t, std::pair<int32_t, int64_t>> merges;  // (left << 32 | right) -> (rank, merged)
  std::optional<int64_t> unk;
  bool ignore_merges = false;
  std::vector<std::unique_ptr<SplitRegex>> splits;  // Split pre-tokenizers, then ByteLevel's own regex
  size_t byte_level_step = 0;  // splits[0, byte_level_step) are Split pre-tokenizers, the rest ByteLevel's
  bool add_prefix_space = false;
  std::vector<AddedToken> added;        // longest first
  std::array<bool, 256> added_first{};  // the first bytes of the added tokens
  std::unordered_map<int64_t, std::string> added_content;
  std::vector<int64_t> prefix, suffix;  // the post-processor's template around the ids
  std::optional<int64_t> bos, eos;
  int64_t vocab_size = 0;
  std::array<int64_t, 256> byte_ids{};  // the id of each byte's character

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache;

  std::string who() const { return fmt::format("hf::ByteLevelBPE '{}'", source); }

  // BPE of one piece, already mapped to byte characters: `chars` are its characters' ids, merged by rank
  // (lowest first, leftmost among equals) with a heap of candidate pairs, as tokenizers' Word::merge_all.
  void merge(std::vector<int64_t>& ids) const {
    struct Symbol {
      int64_t id;
      int prev, next;
      bool alive;
    };
    struct Candidate {
      int32_t rank;
      int pos;
      int64_t merged;
      bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    const int n = static_cast<int>(ids.size());
    std::vector<Symbol> sym(n);
    for (int i = 0; i < n; ++i) sym[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1, true};
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
    auto push = [&](int pos) {
      if (pos < 0 || sym[pos].next < 0) return;
      const auto it = merges.find(static_cast<uint64_t>(sym[pos].id) << 32 |
                                  static_cast<uint64_t>(sym[sym[pos].next].id));
      if (it != merges.end()) heap.push({it->second.first, pos, it->second.second});
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      const Candidate c = heap.top();
      heap.pop();
      Symbol& left = sym[c.pos];
      if (!left.alive || left.next < 0) continue;
      const auto it =
          merges.find(static_cast<uint64_t>(left.id) << 32 | static_cast<uint64_t>(sym[left.next].id));
      if (it == merges.end() || it->second.second != c.merged || it->second.first != c.rank)
        continue;  // stale
      Symbol& right = sym[left.next];
      right.alive = false;
      left.id = c.merged;
      left.next = right.next;
      if (right.next >= 0) sym[right.next].prev = c.pos;
      push(left.prev);
      push(c.pos);
    }
    ids.clear();
    for (int i = 0; i >= 0 && i < n; i = sym[i].next) ids.push_back(sym[i].id);
  }

  // The ids of one pre-tokenized piece (raw bytes), through the cache.
  void encode_piece(std::string_view piece, std::vector<int64_t>& out) const {
    std::string mapped;
    for (const char b : piece) mapped += byte_to_unicode()[static_cast<unsigned char>(b)];
    {
      std::lock_guard<std::mutex> lock(cache_mutex);
      const auto it = cache.find(mapped);
      if (it != cache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int64_t> ids;
    const auto whole = ignore_merges ? vocab.find(mapped) : vocab.end();
    if (whole != vocab.end()) {
      ids.push_back(whole->second);
    } else {
      for (const char b : piece) {
        const int64_t id = byte_ids[static_cast<unsigned char>(b)];
        if (id >= 0)
          ids.push_back(id);
        else if (unk)
          ids.push_back(*unk);  // NOTE: without an unk token, tokenizers drops the character
      }
      merge(ids);
    }
    out.insert(out.end(), ids.begin(), ids.end());
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache.size() < kCacheEntries) cache.emplace(std::move(mapped), std::move(ids));
  }

  // Pre-tokenization and BPE of text that holds no added token.
  void encode_text(std::string_view text, std::vector<int64_t>& out) const {
    std::vector<std::string_view> pieces{text};
    std::vector<std::string> prefixed;  // owns the pieces that ByteLevel's add_prefix_space made
    for (size_t k = 0; k <= splits.size(); ++k) {
      if (k == byte_level_step && add_prefix_space) {  // as tokenizers: on each piece that reaches ByteLevel
        prefixed.reserve(pieces.size());
        for (auto& p : pieces)
          if (!p.empty() && p.front() != ' ') p = prefixed.emplace_back(" " + std::string(p));
      }
      if (k == splits.size()) break;
      std::vector<std::string_view> next;
      for (const auto p : pieces) {
        const auto parts = splits[k]->split(p, who());
        next.insert(next.end(), parts.begin(), parts.end());
      }
      pieces = std::move(next);
    }
    for (const auto p : pieces)
      if (!p.empty()) encode_piece(p, out);
  }

  // Shared by both readers: the vocabulary's checks, and each byte's id.
  void check_vocab(const std::string& file) {
    for (const auto& [token, id] : vocab) vocab_size = std::max(vocab_size, id + 1);
    for (int b = 0; b < 256; ++b) {
      const auto it = vocab.find(byte_to_unicode()[b]);
      byte_ids[b] = it == vocab.end() ? -1 : it->second;
      if (it == vocab.end() && !unk)
        throw Error(fmt::format("hf::ByteLevelBPE: '{}': the vocabulary has no token for byte {:#04x} ('{}')",
                                file, b, byte_to_unicode()[b]));
    }
  }

  void add_merge(const std::string& a, const std::string& b, int32_t rank, const std::string& file,
                 const std::string& where) {
    const auto ia = vocab.find(a), ib = vocab.find(b), im = vocab.find(a + b);
    for (const auto& [tok, it] : {std::pair{a, ia}, std::pair{b, ib}, std::pair{a + b, im}})
      if (it == vocab.end())
        throw Error(fmt::format("hf::ByteLevelBPE: '{}': {}: merge '{} {}': '{}' is not in the vocabulary",
                                file, where, a, b, tok));
    merges.insert_or_assign(static_cast<uint64_t>(ia->second) << 32 | static_cast<uint64_t>(ib->second),
                            std::pair{rank, im->second});
  }

  void add_token(const std::string& content, int64_t id, const std::string& file, const std::string& where) {
    if (content.empty())
      throw Error(fmt::format("hf::ByteLevelBPE: '{}': {}: an empty added token", file, where));
    if (id < 0 || id >= kMaxId)
      throw Error(fmt::format("hf::ByteLevelBPE: '{}': {}: id {} is out of range", file, where, id));
    const auto it = id_to_token.find(id);
    if (it != id_to_token.end() && it->second != content)
      throw Error(fmt::format("hf::ByteLevelBPE: '{}': {}: id {} of '{}' is the vocabulary's '{}'", file,
                              where, id, content, it->second));
    if (added_content.count(id)) return;
    added.push_back({content, id});
    added_content[id] = content;
    vocab_size = std::max(vocab_size, id + 1);
  }

  void finish() {
    for (const AddedToken& t : added) added_first[static_cast<unsigned char>(t.content[0])] = true;
    std::stable_sort(added.begin(), added.end(), [](const AddedToken& x, const AddedToken& y) {
      return x.content.size() > y.content.size();
    });
  }
};

namespace {

using Impl = ByteLevelBPETokenizer::Impl;

// nlohmann's parse, with the file named in errors and nesting bounded (its values are freed recursively).
json parse_json(const std::string& text, const std::string& file) {
  try {
    return json::parse(text, [&](int depth, json::parse_event_t, json&) {
      if (depth > 64) throw Error(fmt::format("hf::ByteLevelBPE: '{}': JSON nested deeper than 64", file));
      return true;
    });
  } catch (const json::exception& e) {
    throw Error(fmt::format("hf::ByteLevelBPE: '{}': not JSON: {}", file, e.what()));
  }
}

Error fail(const std::string& file, const std::string& key, const std::string& what) {
  if (key.empty()) return Error(fmt::format("hf::ByteLevelBPE: '{}': {}", file, what));
  return Error(fmt::format("hf::ByteLevelBPE: '{}': \"{}\": {}", file, key, what));
}

void read_vocab(Impl& m, const json& v, const std::string& file, const std::string& key) {
  if (!v.is_object())
    throw fail(file, key, fmt::format("not an object of token -> id but {}", v.type_name()));
  for (const auto& [token, id] : v.items()) {
    const std::string at = key.empty() ? token : key + "." + token;
    if (!id.is_number_integer()) throw fail(file, at, fmt::format("the id {} is not an integer", id.dump()));
    const int64_t i = id.get<int64_t>();
    if (i < 0 || i >= kMaxId) throw fail(file, at, fmt::format("the id {} is out of range", i));
    const auto [it, fresh] = m.id_to_token.emplace(i, token);
    if (!fresh) throw fail(file, at, fmt::format("id {} is also '{}'", i, it->second));
    m.vocab.emplace(token, i);
  }
}

// "a b" -> (a, b); false unless exactly one space with text on both sides
bool split_merge(std::string_view line, std::string& a, std::string& b) {
  const size_t sp = line.find(' ');
  if (sp == std::string_view::npos || sp == 0 || sp + 1 == line.size() ||
      line.find(' ', sp + 1) != std::string_view::npos)
    return false;
  a = line.substr(0, sp);
  b = line.substr(sp + 1);
  return true;
}

const json* get(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

bool flag(const json& j, const char* key, const std::string& file, const std::string& where, bool fallback) {
  const json* v = get(j, key);
  if (!v) return fallback;
  if (!v->is_boolean())
    throw fail(file, where + "." + key, fmt::format("{} is not true or false", v->dump()));
  return v->get<bool>();
}

std::string type_of(const json& j, const std::string& file, const std::string& where) {
  if (!j.is_object()) throw fail(file, where, fmt::format("not an object but {}", j.type_name()));
  const json* t = get(j, "type");
  if (!t || !t->is_string()) throw fail(file, where + ".type", "missing or not a string");
  return t->get<std::string>();
}

void read_pre_tokenizer(Impl& m, const json& p, const std::string& file) {
  const std::string type = type_of(p, file, "pre_tokenizer");
  std::vector<const json*> steps{&p};
  if (type == "Sequence") {
    const json* list = get(p, "pretokenizers");
    if (!list || !list->is_array() || list->empty())
      throw fail(file, "pre_tokenizer.pretokenizers", "missing, empty or not a list");
    steps.clear();
    for (const json& s : *list) steps.push_back(&s);
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string where =
        type == "Sequence" ? fmt::format("pre_tokenizer.pretokenizers[{}]", i) : "pre_tokenizer";
    const std::string t = type_of(*steps[i], file, where);
    const bool last = i + 1 == steps.size();
    if (t == "ByteLevel") {
      if (!last) throw fail(file, where, "a ByteLevel pre-tokenizer before the last step is not supported");
      m.add_prefix_space = flag(*steps[i], "add_prefix_space", file, where, false);
      m.byte_level_step = m.splits.size();
      if (flag(*steps[i], "use_regex", file, where, true))
        m.splits.push_back(std::make_unique<SplitRegex>(kGpt2Pattern, m.who()));
    } else if (t == "Split") {
      if (last) throw fail(file, where, "the pre-tokenizer must end in a ByteLevel step");
      const json* pattern = get(*steps[i], "pattern");
      const json* behavior = get(*steps[i], "behavior");
      if (!pattern || !pattern->is_object() || pattern->size() != 1 || !pattern->begin()->is_string() ||
          (pattern->begin().key() != "Regex" && pattern->begin().key() != "String"))
        throw fail(file, where + ".pattern", "not {\"Regex\": ...} or {\"String\": ...}");
      if (!behavior || *behavior != "Isolated")
        throw fail(file, where + ".behavior", "only \"Isolated\" is supported");
      if (flag(*steps[i], "invert", file, where, false))
        throw fail(file, where + ".invert", "true is not supported");
      const std::string text = pattern->begin()->get<std::string>();
      m.splits.push_back(
          std::make_unique<SplitRegex>(pattern->begin().key() == "Regex" ? text : escape_pattern(text),
                                       fmt::format("{} {}", m.who(), where)));
    } else {
      throw fail(file, where + ".type", fmt::format("the pre-tokenizer type '{}' is not supported", t));
    }
  }
}

void read_post_processor(Impl& m, const json& p, const std::string& file, const std::string& where) {
  const std::string type = type_of(p, file, where);
  if (type == "ByteLevel") return;  // offsets only
  if (type == "Sequence") {
    const json* list = get(p, "processors");
    if (!list || !list->is_array()) throw fail(file, where + ".processors", "missing or not a list");
    for (size_t i = 0; i < list->size(); ++i)
      read_post_processor(m, (*list)[i], file, fmt::format("{}.processors[{}]", where, i));
    return;
  }
  if (type != "TemplateProcessing")
    throw fail(file, where + ".type", fmt::format("the post-processor type '{}' is not supported", type));
  const json* single = get(p, "single");
  const json* special = get(p, "special_tokens");
  if (!single || !single->is_array()) throw fail(file, where + ".single", "missing or not a list");
  if (special && !special->is_object()) throw fail(file, where + ".special_tokens", "not an object");
  bool seen_a = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const json& piece = (*single)[i];
    const std::string at = fmt::format("{}.single[{}]", where, i);
    if (!piece.is_object() || piece.size() != 1 || !piece.begin()->is_object())
      throw fail(file, at, "not {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    const json* id = get(*piece.begin(), "id");
    if (!id || !id->is_string()) throw fail(file, at + ".id", "missing or not a string");
    if (piece.begin().key() == "Sequence") {
      if (*id != "A" || seen_a) throw fail(file, at, "the single template must hold $A once");
      seen_a = true;
    } else if (piece.begin().key() == "SpecialToken") {
      const json* tok = special ? get(*special, id->get<std::string>().c_str()) : nullptr;
      const json* ids = tok && tok->is_object() ? get(*tok, "ids") : nullptr;
      if (!ids || !ids->is_array())
        throw fail(file, where + ".special_tokens", fmt::format("no ids for '{}'", id->get<std::string>()));
      for (const json& x : *ids) {
        // an id of the vocabulary or of an added token (read before the post-processor): a hole below
        // vocab_size is not one, and decode would refuse what encode(text, true) gave
        if (!x.is_number_integer() ||
            !(m.id_to_token.count(x.get<int64_t>()) || m.added_content.count(x.get<int64_t>())))
          throw fail(file, where + ".special_tokens." + id->get<std::string>(),
                     fmt::format("the id {} is not in the vocabulary", x.dump()));
        (seen_a ? m.suffix : m.prefix).push_back(x.get<int64_t>());
      }
    } else {
      throw fail(file, at, fmt::format("'{}' is not SpecialToken or Sequence", piece.begin().key()));
    }
  }
  if (!seen_a) throw fail(file, where + ".single", "no $A in the template");
}

}  // namespace

ByteLevelBPETokenizer::ByteLevelBPETokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ByteLevelBPETokenizer::~ByteLevelBPETokenizer() = default;

std::unique_ptr<ByteLevelBPETokenizer> ByteLevelBPETokenizer::from_vocab_merges(
    const std::string& vocab_path, const std::string& merges_path) {
  return parse_vocab_merges(read_file(vocab_path), read_file(merges_path), vocab_path, merges_path);
}

std::unique_ptr<ByteLevelBPETokenizer> ByteLevelBPETokenizer::parse_vocab_merges(
    const std::string& vocab_text, const std::string& merges_text, const std::string& vocab_path,
    const std::string& merges_path) {
  auto m = std::make_unique<Impl>();
  m->source = vocab_path;
  read_vocab(*m, parse_json(vocab_text, vocab_path), vocab_path, "");
  m->check_vocab(vocab_path);
  std::string_view rest = merges_text, line;
  std::string a, b;
  int32_t rank = 0;
  for (size_t number = 1; !rest.empty(); ++number) {
    const size_t eol = rest.find('\n');
    line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with("#version")) continue;
    if (!split_merge(line, a, b))
      throw Error(fmt::format("hf::ByteLevelBPE: '{}': line {}: '{}' is not a merge \"a b\"", merges_path,
                              number, line.substr(0, 80)));
    m->add_merge(a, b, rank++, merges_path, fmt::format("line {}", number));
  }
  m->splits.push_back(std::make_unique<SplitRegex>(kGpt2Pattern, m->who()));
  if (const auto it = m->vocab.find("<|endoftext|>"); it != m->vocab.end()) {
    m->add_token(it->first, it->second, vocab_path, "<|endoftext|>");
    m->bos = m->eos = it->second;
  }
  m->finish();
  return std::unique_ptr<ByteLevelBPETokenizer>(new ByteLevelBPETokenizer(std::move(m)));
}

std::unique_ptr<ByteLevelBPETokenizer> ByteLevelBPETokenizer::from_tokenizer_json(const std::string& path) {
  return parse_tokenizer_json(read_file(path), path);
}

std::unique_ptr<ByteLevelBPETokenizer> ByteLevelBPETokenizer::parse_tokenizer_json(const std::string& text,
                                                                                   const std::string& path) {
  const json j = parse_json(text, path);
  if (!j.is_object()) throw fail(path, "", "the file is not a JSON object");
  auto m = std::make_unique<Impl>();
  m->source = path;
  const json* model = get(j, "model");
  if (!model) throw fail(path, "model", "missing");
  if (const std::string t = type_of(*model, path, "model"); t != "BPE")
    throw fail(path, "model.type", fmt::format("the model type '{}' is not supported (only BPE)", t));
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix", "dropout"})
    if (const json* v = get(*model, key); v && *v != "")
      throw fail(path, std::string("model.") + key, fmt::format("{} is not supported", v->dump()));
  if (flag(*model, "byte_fallback", path, "model", false))
    throw fail(path, "model.byte_fallback", "not supported");
  m->ignore_merges = flag(*model, "ignore_merges", path, "model", false);
  const json* vocab = get(*model, "vocab");
  if (!vocab) throw fail(path, "model.vocab", "missing");
  read_vocab(*m, *vocab, path, "model.vocab");
  if (const json* unk = get(*model, "unk_token")) {
    const auto it = unk->is_string() ? m->vocab.find(unk->get<std::string>()) : m->vocab.end();
    if (it == m->vocab.end())
      throw fail(path, "model.unk_token", fmt::format("{} is not in the vocabulary", unk->dump()));
    m->unk = it->second;
  }
  m->check_vocab(path);
  const json* merges = get(*model, "merges");
  if (!merges || !merges->is_array()) throw fail(path, "model.merges", "missing or not a list");
  std::string a, b;
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& x = (*merges)[i];
    const std::string where = fmt::format("model.merges[{}]", i);
    if (x.is_string()) {
      if (!split_merge(x.get<std::string>(), a, b))
        throw fail(path, where, fmt::format("{} is not \"a b\"", x.dump()));
    } else if (x.is_array() && x.size() == 2 && x[0].is_string() && x[1].is_string()) {
      a = x[0].get<std::string>();
      b = x[1].get<std::string>();
    } else {
      throw fail(path, where, fmt::format("{} is not \"a b\" or [a, b]", x.dump()));
    }
    m->add_merge(a, b, static_cast<int32_t>(i), path, where);
  }
  if (const json* n = get(j, "normalizer"))
    throw fail(path, "normalizer",
               fmt::format("the normalizer '{}' is not supported (only null)", n->dump().substr(0, 80)));
  const json* pre = get(j, "pre_tokenizer");
  if (!pre) throw fail(path, "pre_tokenizer", "missing (byte-level BPE needs a ByteLevel pre-tokenizer)");
  read_pre_tokenizer(*m, *pre, path);
  if (const json* added = get(j, "added_tokens")) {
    if (!added->is_array()) throw fail(path, "added_tokens", "not a list");
    for (size_t i = 0; i < added->size(); ++i) {
      const json& t = (*added)[i];
      const std::string where = fmt::format("added_tokens[{}]", i);
      const json* id = t.is_object() ? get(t, "id") : nullptr;
      const json* content = t.is_object() ? get(t, "content") : nullptr;
      if (!id || !id->is_number_integer() || !content || !content->is_string())
        throw fail(path, where, "not an object with an integer id and a string content");
      for (const char* key : {"lstrip", "rstrip", "single_word"})
        if (flag(t, key, path, where, false)) throw fail(path, where + "." + key, "true is not supported");
      m->add_token(content->get<std::string>(), id->get<int64_t>(), path, where);
    }
  }
  if (const json* post = get(j, "post_processor")) read_post_processor(*m, *post, path, "post_processor");
  if (!m->prefix.empty()) m->bos = m->prefix.front();
  if (!m->suffix.empty()) m->eos = m->suffix.back();
  if (!m->bos || !m->eos)
    if (const auto it = m->vocab.find("<|endoftext|>"); it != m->vocab.end()) {
      if (!m->bos) m->bos = it->second;
      if (!m->eos) m->eos = it->second;
    }
  m->finish();
  return std::unique_ptr<ByteLevelBPETokenizer>(new ByteLevelBPETokenizer(std::move(m)));
}

std::vector<int64_t> ByteLevelBPETokenizer::encode(const std::string& text, bool add_special_tokens) const {
  const Impl& m = *impl_;
  std::vector<int64_t> ids;
  if (add_special_tokens) ids = m.prefix;
  // Cut out the added tokens: at each position the longest one that starts there (m.added is longest first).
  size_t done = 0;
  for (size_t i = 0; i < text.size() && !m.added.empty();) {
    if (!m.added_first[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    const AddedToken* hit = nullptr;
    for (const AddedToken& t : m.added)
      if (text.compare(i, t.content.size(), t.content) == 0) {
        hit = &t;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    m.encode_text(std::string_view(text).substr(done, i - done), ids);
    ids.push_back(hit->id);
    done = i += hit->content.size();
  }
  m.encode_text(std::string_view(text).substr(done), ids);
  if (add_special_tokens) ids.insert(ids.end(), m.suffix.begin(), m.suffix.end());
  return ids;
}

std::string ByteLevelBPETokenizer::decode(const std::vector<int64_t>& ids) const {
  const Impl& m = *impl_;
  std::string out;
  std::vector<std::pair<uint32_t, uint32_t>> chars;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (const auto a = m.added_content.find(ids[i]); a != m.added_content.end()) {
      out += a->second;
      continue;
    }
    const auto t = m.id_to_token.find(ids[i]);
    SACCADE_CHECK(t != m.id_to_token.end(), "{}: decode: id {} at {} is not in the vocabulary of {}", name(),
                  ids[i], i, m.vocab_size);
    // As tokenizers' ByteLevel decoder: a token whose characters are not all byte characters is kept as is.
    std::string bytes;
    bool all = utf8_chars(t->second, chars);
    for (const auto& [c, len] : chars) {
      const auto b = unicode_to_byte().find(c);
      if (b == unicode_to_byte().end()) {
        all = false;
        break;
      }
      bytes += static_cast<char>(b->second);
    }
    out += all ? bytes : t->second;
  }
  return out;
}

int64_t ByteLevelBPETokenizer::vocab_size() const { return impl_->vocab_size; }
std::optional<int64_t> ByteLevelBPETokenizer::bos_id() const { return impl_->bos; }
std::optional<int64_t> ByteLevelBPETokenizer::eos_id() const { return impl_->eos; }
std::string ByteLevelBPETokenizer::name() const { return impl_->who(); }

}  // namespace saccade::hf
