// libFuzzer target: examples::read_jsonl (the prompt/completion records of `gpt finetune --data`) and
// tokenize_example over them.
// Input: the JSONL text.
// Properties: a rejected file raises saccade::Error naming it; the records of an accepted one come in
// increasing line order, each line within the file and its fields those of the JSON object on that line (a
// text record has no prompt); tokenized with a byte encoder, an example is [bos] prompt completion [eos]
// with exactly the completion's ids and eos scored, and a cut at the right (Truncate::Right) keeps at most
// context + 1 ids and at least one scored id, or is refused with an error naming tokenize_example; the
// examples packed into rows of the context (packed_instruct_batch) score exactly instruct_batch's targets,
// each row's document ids non-decreasing.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "examples/gpt/instruct.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"

using namespace saccade;

namespace {

std::vector<int64_t> bytes(const std::string& s) {
  std::vector<int64_t> out;
  for (unsigned char ch : s) out.push_back(ch);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string path = fuzz::write_input(data, size, "train.jsonl");
  std::vector<examples::InstructRecord> records;
  try {
    records = examples::read_jsonl(path);
  } catch (const Error& e) {
    fuzz::check_rejection(e, path);
    return 0;
  }
  FUZZ_CHECK(!records.empty(), "no record accepted");
  std::vector<std::string> lines;
  {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  int64_t last = 0;
  std::vector<examples::TokenizedExample> packable;  // at context 64
  for (const examples::InstructRecord& r : records) {
    FUZZ_CHECK(r.line > last && r.line <= static_cast<int64_t>(lines.size()), "line {} after {} of {}",
               r.line, last, lines.size());
    last = r.line;
    const nlohmann::json j = nlohmann::json::parse(lines[r.line - 1]);
    if (r.is_text) {
      FUZZ_CHECK(r.prompt.empty() && j.at("text") == r.completion, "line {}: text record", r.line);
    } else {
      FUZZ_CHECK(j.at("prompt") == r.prompt && j.at("completion") == r.completion, "line {}: the fields",
                 r.line);
    }
    for (const int64_t context : {int64_t{4}, int64_t{64}}) {
      examples::TokenizedExample e;
      try {
        e = examples::tokenize_example(r, bytes, 256, 257, context, examples::Truncate::Right);
      } catch (const Error& err) {
        const std::string msg = err.what();
        FUZZ_CHECK(msg.find("tokenize_example") != std::string::npos, "line {}: {}", r.line, msg);
        continue;
      }
      const size_t full = 1 + r.prompt.size() + r.completion.size() + 1;
      FUZZ_CHECK(
          e.ids.size() == std::min(full, static_cast<size_t>(context) + 1) && e.scored.size() == e.ids.size(),
          "line {}: {} ids of {} at context {}", r.line, e.ids.size(), full, context);
      FUZZ_CHECK(e.ids[0] == 256 && e.scored[0] == 0, "line {}: bos", r.line);
      int64_t scored = 0;
      for (size_t i = 0; i < e.ids.size(); ++i) {
        const bool completion = i > r.prompt.size();  // after bos and the prompt's bytes
        FUZZ_CHECK(e.scored[i] == (completion ? 1 : 0), "line {}: id {} scored {}", r.line, i, e.scored[i]);
        scored += e.scored[i];
      }
      FUZZ_CHECK(scored >= 1, "line {}: nothing scored", r.line);
      if (e.ids.size() == full) FUZZ_CHECK(e.ids.back() == 257, "line {}: no eos", r.line);
      if (context == 64 && e.ids.size() >= 2) packable.push_back(e);
    }
  }
  if (packable.empty()) return 0;
  std::vector<int64_t> rows(packable.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  const examples::Batch plain = examples::instruct_batch(packable, rows, 0),
                        packed = examples::packed_instruct_batch(packable, rows, 0, 64);
  auto targets = [](const Tensor& y) {
    std::vector<int64_t> v;
    for (int64_t t : y.to_vector<int64_t>())
      if (t != -100) v.push_back(t);
    std::sort(v.begin(), v.end());
    return v;
  };
  FUZZ_CHECK(targets(packed.y) == targets(plain.y), "packing changed the scored targets");
  FUZZ_CHECK(packed.x.size(0) <= plain.x.size(0) && packed.x.size(1) <= 64, "packed {} from {}",
             packed.x.shape(), plain.x.shape());
  const std::vector<int64_t> docs = packed.document_ids.to_vector<int64_t>();
  const int64_t T = packed.x.size(1);
  for (size_t i = 0; i < docs.size(); ++i)
    FUZZ_CHECK(i % T == 0 || docs[i] >= docs[i - 1], "document ids decrease at {}", i);
  return 0;
}
