#pragma once
// The fortunes corpus (docs/data.md, "Fortunes"): Debian's `fortunes` quotations cut into documents,
// deduplicated, split 90/10 by a hash of each document, and joined into a training and a validation byte
// stream; the windows a language model trains and is scored on; SHA-256 check values of the streams.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ops/tensor.h"

namespace saccade::examples {

/// Where Debian's `fortunes` package puts the quotations.
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

/// The files docs/data.md reads from `dir`: the regular files (not symbolic links) directly in it whose names
/// hold no '.', as full paths, in byte order of their names. Throws saccade::Error naming "fortune_files" and
/// the folder when it cannot be listed or holds no such file.
std::vector<std::string> fortune_files(const std::string& dir = kFortunesDir);

/// The documents of one file's bytes: pieces between lines that are exactly "%", each stripped of leading
/// and trailing '\n'; pieces that are empty or only whitespace are dropped. In file order.
std::vector<std::string> split_documents(const std::string& text);

/// The two streams and the counts docs/data.md states (15,217 documents, 15,134 distinct, 13,654 / 1,480 in
/// train / validation, 2,300,639 / 265,064 bytes).
struct FortunesCorpus {
  std::string train, valid;  ///< each document followed by "\n%\n", in file order
  int64_t documents = 0, distinct = 0, train_documents = 0, valid_documents = 0;
};

/// Builds the corpus from the contents of the files (name order): documents by split_documents, the first
/// of identical documents kept, split by split_bucket(document) (examples/common/cmudict.h: FNV-1a 64 of
/// "0:" + document, splitmix64, % 100) < 90 train, otherwise validation.
FortunesCorpus make_fortunes_corpus(const std::vector<std::string>& file_contents);
/// make_fortunes_corpus of the files fortune_files(dir) lists, read as bytes. Throws saccade::Error naming
/// "load_fortunes" and the file when one cannot be read.
FortunesCorpus load_fortunes(const std::string& dir = kFortunesDir);

/// SHA-256 (FIPS 180-4) of `bytes` as 64 lowercase hex digits, through OpenSSL's libcrypto (EVP_Digest).
/// Throws saccade::Error naming "sha256_hex" if libcrypto fails.
std::string sha256_hex(const std::string& bytes);

/// A batch of training windows: x, y int64 (B, T) with y[b, t] = stream[start_b + t + 1] (next token).
struct Batch {
  Tensor x, y;
  /// Packed rows only (instruct's packed_instruct_batch): int64 (B, T), each token's example; undefined: one
  /// sequence a row.
  Tensor document_ids{};
};

/// Draws `batch` windows of `context` + 1 tokens from `tokens` at starts uniform in [0, N - context - 1]
/// from `rng` (one rng() per window, reduced by `% range`: the stream stays reproducible and resumable by
/// counting draws). Throws saccade::Error naming "random_windows" when the stream is shorter than
/// context + 1 tokens or batch / context < 1.
Batch random_windows(const std::vector<int64_t>& tokens, int64_t batch, int64_t context,
                     std::mt19937_64& rng);

/// The windows covering a whole stream for scoring (docs/data.md's metric): window i has inputs
/// tokens[i T, i T + T) and targets tokens[i T + 1, i T + T + 1), the last one shorter; every token but the
/// first is predicted exactly once. Returns the start offsets; each window's length is
/// min(T, N - 1 - start).
std::vector<int64_t> eval_window_starts(int64_t num_tokens, int64_t context);

}  // namespace saccade::examples
