#include "examples/gpt/instruct.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace saccade::examples {

std::vector<InstructRecord> read_jsonl(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  SACCADE_CHECK(f.good(), "read_jsonl: cannot read '{}'", path);
  std::vector<InstructRecord> out;
  std::string line;
  for (int64_t n = 1; std::getline(f, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    SACCADE_CHECK(!j.is_discarded() && j.is_object(), "read_jsonl: '{}' line {}: not a JSON object", path, n);
    auto text_of = [&](const char* key) {
      SACCADE_CHECK(j[key].is_string(), "read_jsonl: '{}' line {}: \"{}\" is not a string", path, n, key);
      return j[key].get<std::string>();
    };
    InstructRecord r;
    r.line = n;
    if (j.contains("prompt") && j.contains("completion")) {
      r.prompt = text_of("prompt");
      r.completion = text_of("completion");
    } else if (j.contains("text")) {
      r.completion = text_of("text");
      r.is_text = true;
    } else {
      throw Error(
          fmt::format("read_jsonl: '{}' line {}: a record needs \"prompt\" and \"completion\", or "
                      "\"text\"",
                      path, n));
    }
    out.push_back(std::move(r));
  }
  SACCADE_CHECK(!out.empty(), "read_jsonl: '{}' holds no record", path);
  return out;
}

TokenizedExample tokenize_example(const InstructRecord& record, const Encode& encode, int64_t bos,
                                  int64_t eos, int64_t context, Truncate truncate) {
  const std::vector<int64_t> completion = encode(record.completion);
  SACCADE_CHECK(!completion.empty(), "tokenize_example: line {}: the {} encodes to no token", record.line,
                record.is_text ? "text" : "completion");
  TokenizedExample e;
  auto put = [&e](int64_t id, bool scored) {
    e.ids.push_back(id);
    e.scored.push_back(scored ? 1 : 0);
  };
  if (bos >= 0) put(bos, false);
  for (int64_t id : encode(record.prompt)) put(id, false);
  for (int64_t id : completion) put(id, true);
  if (eos >= 0) put(eos, true);  // the model learns to stop
  const size_t limit = static_cast<size_t>(context) + 1;
  if (e.ids.size() > limit) {
    SACCADE_CHECK(
        truncate == Truncate::Right,
        "tokenize_example: line {}: {} tokens, more than the context of {} (+1 for the last target); "
        "shorten it or let it be cut (--truncate right)",
        record.line, e.ids.size(), context);
    e.ids.resize(limit);
    e.scored.resize(limit);
  }
  SACCADE_CHECK(std::find(e.scored.begin() + 1, e.scored.end(), 1) != e.scored.end(),
                "tokenize_example: line {}: cut to the context of {}, nothing of the completion is left",
                record.line, context);
  return e;
}

Batch instruct_batch(const std::vector<TokenizedExample>& examples, const std::vector<int64_t>& rows,
                     int64_t pad) {
  SACCADE_CHECK(!rows.empty(), "instruct_batch: no rows");
  size_t longest = 0;
  for (int64_t r : rows) {
    SACCADE_CHECK(r >= 0 && r < static_cast<int64_t>(examples.size()),
                  "instruct_batch: row {} out of range for {} examples", r, examples.size());
    SACCADE_CHECK(examples[r].ids.size() >= 2, "instruct_batch: example {} has {} ids, fewer than 2", r,
                  examples[r].ids.size());
    longest = std::max(longest, examples[r].ids.size());
  }
  const int64_t B = static_cast<int64_t>(rows.size()), T = static_cast<int64_t>(longest) - 1;
  Batch batch{Tensor::empty({B, T}, DType::Int64), Tensor::empty({B, T}, DType::Int64)};
  int64_t* x = batch.x.data<int64_t>();
  int64_t* y = batch.y.data<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const TokenizedExample& e = examples[rows[b]];
    const int64_t n = static_cast<int64_t>(e.ids.size());
    for (int64_t t = 0; t < T; ++t) {
      x[b * T + t] = t < n - 1 ? e.ids[t] : pad;
      y[b * T + t] = t < n - 1 && e.scored[t + 1] ? e.ids[t + 1] : -100;
    }
  }
  return batch;
}

Batch packed_instruct_batch(const std::vector<TokenizedExample>& examples, const std::vector<int64_t>& rows,
                            int64_t pad, int64_t row_length) {
  const char* op = "packed_instruct_batch";
  SACCADE_CHECK(!rows.empty() && row_length >= 1, "{}: {} rows into rows of {} tokens", op, rows.size(),
                row_length);
  std::vector<std::vector<int64_t>> packed;  // each row's examples
  std::vector<int64_t> used;                 // each row's inputs
  for (int64_t r : rows) {
    SACCADE_CHECK(r >= 0 && r < static_cast<int64_t>(examples.size()),
                  "{}: row {} out of range for {} examples", op, r, examples.size());
    const int64_t n = static_cast<int64_t>(examples[r].ids.size()) - 1;  // inputs
    SACCADE_CHECK(n >= 1 && n <= row_length, "{}: example {} has {} ids, not 2 .. {} (row_length + 1)", op, r,
                  n + 1, row_length + 1);
    size_t at = 0;
    while (at < used.size() && used[at] + n > row_length) ++at;  // the first row with room
    if (at == used.size()) packed.emplace_back(), used.push_back(0);
    packed[at].push_back(r), used[at] += n;
  }
  const int64_t B = static_cast<int64_t>(packed.size()), T = *std::max_element(used.begin(), used.end());
  Batch batch{Tensor::empty({B, T}, DType::Int64), Tensor::empty({B, T}, DType::Int64),
              Tensor::empty({B, T}, DType::Int64)};
  int64_t *x = batch.x.data<int64_t>(), *y = batch.y.data<int64_t>(), *d = batch.document_ids.data<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    int64_t t = b * T, doc = 0;
    for (int64_t r : packed[b]) {
      const TokenizedExample& e = examples[r];
      const int64_t n = static_cast<int64_t>(e.ids.size()) - 1;
      for (int64_t i = 0; i < n; ++i, ++t) {
        x[t] = e.ids[i], y[t] = e.scored[i + 1] ? e.ids[i + 1] : -100, d[t] = doc;
      }
      ++doc;
    }
    for (; t < (b + 1) * T; ++t) x[t] = pad, y[t] = -100, d[t] = doc;  // the padding: a document of its own
  }
  return batch;
}

int64_t scored_targets(const std::vector<TokenizedExample>& examples) {
  int64_t n = 0;
  for (const TokenizedExample& e : examples) n += std::count(e.scored.begin() + 1, e.scored.end(), 1);
  return n;
}

}  // namespace saccade::examples
