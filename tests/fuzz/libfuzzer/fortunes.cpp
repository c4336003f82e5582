// libFuzzer target: the fortunes document splitter (examples::split_documents) and the corpus built from
// its documents (examples::make_fortunes_corpus), the GPT example's data reader.
// Properties: every document is non-empty, not only whitespace, without leading or trailing '\n', without a
// line that is exactly "%", and a substring of the input; the corpus' counts add up and its streams are the
// distinct documents each followed by "\n%\n".
#include <cctype>
#include <string_view>

#include "examples/gpt/data.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"

using namespace saccade;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> docs = examples::split_documents(text);
  size_t bytes = 0;
  for (const std::string& d : docs) {
    FUZZ_CHECK(!d.empty() && d.front() != '\n' && d.back() != '\n', "document '{}' not stripped", d);
    FUZZ_CHECK(
        std::any_of(d.begin(), d.end(), [](char c) { return !std::isspace(static_cast<unsigned char>(c)); }),
        "a document of whitespace only");
    FUZZ_CHECK(d != "%" && d.rfind("%\n", 0) != 0 && d.find("\n%\n") == std::string::npos &&
                   (d.size() < 2 || d.compare(d.size() - 2, 2, "\n%") != 0),
               "document '{}' holds a separator line", d);
    FUZZ_CHECK(text.find(d) != std::string::npos, "document '{}' is not in the input", d);
    bytes += d.size();
  }
  FUZZ_CHECK(bytes <= size, "{} bytes of documents from {} bytes", bytes, size);
  const examples::FortunesCorpus c = examples::make_fortunes_corpus({text});
  FUZZ_CHECK(c.documents == static_cast<int64_t>(docs.size()) && c.distinct <= c.documents &&
                 c.train_documents + c.valid_documents == c.distinct,
             "counts {} documents, {} distinct, {} + {}", c.documents, c.distinct, c.train_documents,
             c.valid_documents);
  size_t distinct_bytes = c.train.size() + c.valid.size();
  FUZZ_CHECK(distinct_bytes <= bytes + 3 * docs.size(), "streams of {} bytes from {} documents of {} bytes",
             distinct_bytes, docs.size(), bytes);
  return 0;
}
