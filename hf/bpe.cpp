#include "hf/bpe.h"

#include <algorithm>
#include <array>
#include <deque>
#include <fstream>
#include <mutex>
#include <queue>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "hf/decoder.h"
#include "hf/normalizer.h"
#include "hf/pretokenizer.h"
#include "hf/tokenizer_json.h"

namespace saccade::hf {

using nlohmann::json;
using namespace tokjson;

namespace {

constexpr int64_t kMaxId = int64_t{1} << 31;
constexpr size_t kCacheEntries = 10000;  // as tokenizers' BPE cache; pieces are not cached beyond it
constexpr size_t kCacheMaxBytes = 256;   // nor longer pieces (a text without pre-tokenizer is one piece)

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("hf::BPE: cannot read '{}'", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// One added token (tokenizer.json's "added_tokens", or GPT-2's "<|endoftext|>"): cut out of the text before
// pre-tokenization, decoded as its content. `normalized` ones are matched in a second pass, in the stretches
// the others leave (tokenizers' AddedVocabulary::extract_and_normalize).
struct AddedToken {
  std::string content;
  int64_t id;
  bool normalized = false;
};

}  // namespace

struct BPETokenizer::Impl {
  std::string source;  // the file(s), for messages
  std::unordered_map<std::string, int64_t> vocab;
  std::unordered_map<int64_t, std::string> id_to_token;
  std::unordered_map<uint64_t, std::pair<int32_t, int64_t>> merges;  // (left << 32 | right) -> (rank, merged)
  std::optional<int64_t> unk;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  std::unique_ptr<Normalizer> normalizer;  // null: none
  std::unique_ptr<PreTokenizer> pre;
  std::unique_ptr<Decoder> decoder;
  std::vector<AddedToken> added;           // longest first
  std::array<bool, 256> added_first[2]{};  // the first bytes of the added tokens [normalized]
  std::unordered_map<int64_t, std::string> added_content;
  std::vector<int64_t> prefix, suffix;  // the post-processor's template around the ids
  std::optional<int64_t> bos, eos;
  int64_t vocab_size = 0;
  std::array<int64_t, 256> byte_ids{};      // byte-level: the id of each byte's character, or -1
  std::array<int64_t, 256> fallback_ids{};  // the id of each byte's "<0xNN>" token, or -1

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache;

  std::string who() const { return fmt::format("hf::BPE '{}'", source); }

  // BPE of one piece: `ids` are its initial symbols (symbols()), merged by rank (lowest first, leftmost
  // among equals) with a heap of candidate pairs, as tokenizers' Word::merge_all.
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

  // The initial symbols of a piece, as tokenizers' BPE::merge_word: each character's id; else, with
  // byte_fallback, the ids of its bytes' "<0xNN>" tokens; else the unknown token (one for a run of them
  // with fuse_unk; NOTE: as there, a pending unknown token is placed only by the next known character).
  void symbols(std::string_view piece, std::vector<int64_t>& ids) const {
    bool pending = false;
    auto unknown = [&](std::string_view c) {
      if (byte_fallback) {
        bool all = true;
        for (const char b : c) all = all && fallback_ids[static_cast<unsigned char>(b)] >= 0;
        if (all) {
          for (const char b : c) ids.push_back(fallback_ids[static_cast<unsigned char>(b)]);
          return;
        }
      }
      if (!unk) return;  // NOTE: without an unk token, tokenizers drops the character
      if (pending && !fuse_unk) ids.push_back(*unk);
      pending = true;
    };
    auto known = [&](int64_t id) {
      if (pending) ids.push_back(*unk);
      pending = false;
      ids.push_back(id);
    };
    if (pre->byte_level()) {
      for (const char b : piece) {
        const int64_t id = byte_ids[static_cast<unsigned char>(b)];
        if (id >= 0)
          known(id);
        else
          unknown(byte_to_unicode()[static_cast<unsigned char>(b)]);
      }
    } else {
      for (size_t i = 0; i < piece.size();) {
        const size_t len = utf8_char_len(piece, i);
        const std::string_view c = piece.substr(i, len);
        const auto it = vocab.find(std::string(c));
        if (it != vocab.end())
          known(it->second);
        else
          unknown(c);
        i += len;
      }
    }
    if (pending) ids.push_back(*unk);
  }

  // The ids of one pre-tokenized piece (raw bytes), through the cache.
  void encode_piece(std::string_view piece, std::vector<int64_t>& out) const {
    const bool cacheable = piece.size() <= kCacheMaxBytes;
    if (cacheable) {
      std::lock_guard<std::mutex> lock(cache_mutex);
      const auto it = cache.find(std::string(piece));
      if (it != cache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int64_t> ids;
    auto whole = vocab.end();
    if (ignore_merges) {
      std::string word;
      if (pre->byte_level())
        for (const char b : piece) word += byte_to_unicode()[static_cast<unsigned char>(b)];
      whole = vocab.find(pre->byte_level() ? word : std::string(piece));
    }
    if (whole != vocab.end()) {
      ids.push_back(whole->second);
    } else {
      symbols(piece, ids);
      merge(ids);
    }
    out.insert(out.end(), ids.begin(), ids.end());
    if (!cacheable) return;
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache.size() < kCacheEntries) cache.emplace(std::string(piece), std::move(ids));
  }

  // Cuts the added tokens of one kind (`normalized` or not) out of text[from, to): gap(begin, end) for each
  // stretch around them (empty ones too), hit(token) for each, in order. At each position the longest token
  // that starts there, as tokenizers' leftmost-longest Aho-Corasick matches.
  template <class Gap, class Hit>
  void cut_added(std::string_view text, size_t from, size_t to, bool normalized, const Gap& gap,
                 const Hit& hit) const {
    size_t done = from;
    for (size_t i = from; i < to;) {
      const AddedToken* found = nullptr;
      if (added_first[normalized][static_cast<unsigned char>(text[i])])
        for (const AddedToken& t : added)  // longest first
          if (t.normalized == normalized && text.substr(i, to - i).starts_with(t.content)) {
            found = &t;
            break;
          }
      if (!found) {
        ++i;
        continue;
      }
      gap(done, i);
      hit(*found);
      done = i += found->content.size();
    }
    gap(done, to);
  }

  // Normalization, pre-tokenization and BPE of text that holds no added token.
  void encode_text(std::string_view text, bool at_start, std::vector<int64_t>& out) const {
    std::string normalized;
    if (normalizer) text = normalized = normalizer->apply(text, who());
    std::deque<std::string> owned;
    for (const auto p : pre->split(text, at_start, owned)) encode_piece(p, out);
  }

  // Shared by both readers: the vocabulary's checks, and each byte's id.
  void check_vocab(const std::string& file) {
    for (const auto& [token, id] : vocab) vocab_size = std::max(vocab_size, id + 1);
    for (int b = 0; b < 256; ++b) {
      const auto fallback = vocab.find(fmt::format("<0x{:02X}>", b));
      fallback_ids[b] = fallback == vocab.end() ? -1 : fallback->second;
      const auto it = vocab.find(byte_to_unicode()[b]);
      byte_ids[b] = it == vocab.end() ? -1 : it->second;
      if (it == vocab.end() && !unk && pre->byte_level())
        throw Error(fmt::format("hf::BPE: '{}': the vocabulary has no token for byte {:#04x} ('{}')", file, b,
                                byte_to_unicode()[b]));
    }
  }

  void add_merge(const std::string& a, const std::string& b, int32_t rank, const std::string& file,
                 const std::string& where) {
    const auto ia = vocab.find(a), ib = vocab.find(b), im = vocab.find(a + b);
    for (const auto& [tok, it] : {std::pair{a, ia}, std::pair{b, ib}, std::pair{a + b, im}})
      if (it == vocab.end())
        throw Error(fmt::format("hf::BPE: '{}': {}: merge '{} {}': '{}' is not in the vocabulary", file,
                                where, a, b, tok));
    merges.insert_or_assign(static_cast<uint64_t>(ia->second) << 32 | static_cast<uint64_t>(ib->second),
                            std::pair{rank, im->second});
  }

  void add_token(const std::string& content, int64_t id, bool normalized, const std::string& file,
                 const std::string& where) {
    if (content.empty()) throw Error(fmt::format("hf::BPE: '{}': {}: an empty added token", file, where));
    if (id < 0 || id >= kMaxId)
      throw Error(fmt::format("hf::BPE: '{}': {}: id {} is out of range", file, where, id));
    const auto it = id_to_token.find(id);
    if (it != id_to_token.end() && it->second != content)
      throw Error(fmt::format("hf::BPE: '{}': {}: id {} of '{}' is the vocabulary's '{}'", file, where, id,
                              content, it->second));
    if (added_content.count(id)) return;
    added.push_back({content, id, normalized});
    added_content[id] = content;
    vocab_size = std::max(vocab_size, id + 1);
  }

  void finish() {
    for (const AddedToken& t : added)
      added_first[t.normalized][static_cast<unsigned char>(t.content[0])] = true;
    std::stable_sort(added.begin(), added.end(), [](const AddedToken& x, const AddedToken& y) {
      return x.content.size() > y.content.size();
    });
  }
};

namespace {

using Impl = BPETokenizer::Impl;

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

BPETokenizer::BPETokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BPETokenizer::~BPETokenizer() = default;

std::unique_ptr<BPETokenizer> BPETokenizer::from_vocab_merges(const std::string& vocab_path,
                                                              const std::string& merges_path) {
  return parse_vocab_merges(read_file(vocab_path), read_file(merges_path), vocab_path, merges_path);
}

std::unique_ptr<BPETokenizer> BPETokenizer::parse_vocab_merges(const std::string& vocab_text,
                                                               const std::string& merges_text,
                                                               const std::string& vocab_path,
                                                               const std::string& merges_path) {
  auto m = std::make_unique<Impl>();
  m->source = vocab_path;
  m->pre = std::make_unique<PreTokenizer>(m->who());
  m->decoder = std::make_unique<Decoder>();
  read_vocab(*m, parse(vocab_text, vocab_path), vocab_path, "");
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
      throw Error(fmt::format("hf::BPE: '{}': line {}: '{}' is not a merge \"a b\"", merges_path, number,
                              line.substr(0, 80)));
    m->add_merge(a, b, rank++, merges_path, fmt::format("line {}", number));
  }
  if (const auto it = m->vocab.find("<|endoftext|>"); it != m->vocab.end()) {
    m->add_token(it->first, it->second, /*normalized=*/false, vocab_path, "<|endoftext|>");
    m->bos = m->eos = it->second;
  }
  m->finish();
  return std::unique_ptr<BPETokenizer>(new BPETokenizer(std::move(m)));
}

std::unique_ptr<BPETokenizer> BPETokenizer::from_tokenizer_json(const std::string& path) {
  return parse_tokenizer_json(read_file(path), path);
}

std::unique_ptr<BPETokenizer> BPETokenizer::parse_tokenizer_json(const std::string& text,
                                                                 const std::string& path) {
  const json j = parse(text, path);
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
  m->byte_fallback = flag(*model, "byte_fallback", path, "model", false);
  m->fuse_unk = flag(*model, "fuse_unk", path, "model", false);
  m->ignore_merges = flag(*model, "ignore_merges", path, "model", false);
  if (const json* n = get(j, "normalizer")) m->normalizer = std::make_unique<Normalizer>(*n, path);
  m->pre = std::make_unique<PreTokenizer>(get(j, "pre_tokenizer"), path, m->who());
  m->decoder = std::make_unique<Decoder>(get(j, "decoder"), path);
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
      // tokenizers matches a normalized added token in the normalized text; here in the text as it is
      const bool normalized = flag(t, "normalized", path, where, !flag(t, "special", path, where, false));
      if (m->normalizer && normalized)
        throw fail(path, where + ".normalized", "true is not supported with a normalizer");
      m->add_token(content->get<std::string>(), id->get<int64_t>(), normalized, path, where);
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
  return std::unique_ptr<BPETokenizer>(new BPETokenizer(std::move(m)));
}

std::vector<int64_t> BPETokenizer::encode(const std::string& text, bool add_special_tokens) const {
  const Impl& m = *impl_;
  std::vector<int64_t> ids;
  if (add_special_tokens) ids = m.prefix;
  // Cut out the added tokens as tokenizers does, in two passes: first those that are not normalized, in the
  // whole text; then the normalized ones, in each stretch between (so "<a><b>" with a normalized "<a><b>"
  // and a non-normalized "<b>" is "<a>" then "<b>"). Each stretch left is normalized and pre-tokenized.
  const std::string_view t(text);
  auto push = [&](const AddedToken& a) { ids.push_back(a.id); };
  m.cut_added(
      t, 0, t.size(), /*normalized=*/false,
      [&](size_t a, size_t b) {
        m.cut_added(
            t, a, b, /*normalized=*/true,
            [&](size_t c, size_t d) { m.encode_text(t.substr(c, d - c), c == 0, ids); }, push);
      },
      push);
  if (add_special_tokens) ids.insert(ids.end(), m.suffix.begin(), m.suffix.end());
  return ids;
}

std::string BPETokenizer::decode(const std::vector<int64_t>& ids) const {
  const Impl& m = *impl_;
  // As tokenizers: the tokens of the ids (an added token's content first), through the decoder.
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (const auto a = m.added_content.find(ids[i]); a != m.added_content.end()) {
      tokens.push_back(a->second);
      continue;
    }
    const auto t = m.id_to_token.find(ids[i]);
    SACCADE_CHECK(t != m.id_to_token.end(), "{}: decode: id {} at {} is not in the vocabulary of {}", name(),
                  ids[i], i, m.vocab_size);
    tokens.push_back(t->second);
  }
  return m.decoder->decode(std::move(tokens), name());
}

void BPETokenizer::read_tokenizer_config(const std::string& path) {
  parse_tokenizer_config(read_file(path), path);
}

void BPETokenizer::parse_tokenizer_config(const std::string& text, const std::string& path) {
  const json j = parse(text, path);
  if (!j.is_object()) throw fail(path, "", "the file is not a JSON object");
  std::optional<int64_t> found[2] = {impl_->bos, impl_->eos};
  const char* keys[2] = {"bos_token", "eos_token"};
  for (int i = 0; i < 2; ++i) {
    const json* t = get(j, keys[i]);
    if (!t) continue;
    const json* content = t->is_object() ? get(*t, "content") : t;
    if (!content || !content->is_string())
      throw fail(path, keys[i], "not a token string, an object with a string \"content\", or null");
    const std::string token = content->get<std::string>();
    const auto added = std::find_if(impl_->added.begin(), impl_->added.end(),
                                    [&](const AddedToken& a) { return a.content == token; });
    if (added != impl_->added.end()) {
      found[i] = added->id;
    } else if (const auto it = impl_->vocab.find(token); it != impl_->vocab.end()) {
      found[i] = it->second;
    } else {
      throw fail(path, keys[i], fmt::format("'{}' is not a token of {}", token, impl_->source));
    }
  }
  impl_->bos = found[0], impl_->eos = found[1];
}

int64_t BPETokenizer::vocab_size() const { return impl_->vocab_size; }
std::optional<int64_t> BPETokenizer::bos_id() const { return impl_->bos; }
std::optional<int64_t> BPETokenizer::eos_id() const { return impl_->eos; }
std::string BPETokenizer::name() const { return impl_->who(); }

}  // namespace saccade::hf
