#pragma once
// Instruction data for fine-tuning: a JSONL file of {"prompt": ..., "completion": ...} records (or plain
// {"text": ...}), tokenized with the loss on the completion only, as transformers scores it: every position
// whose target is a prompt token (or padding) gets the ignore index -100 (nn::CrossEntropyLoss's default,
// torch's and transformers' too), so it adds nothing to the loss nor to the count the mean divides by.
//
//   ids     [bos] prompt…  completion…  [eos]
//   scored    0   0 … 0    1 …      1     1        (a plain text: every id but bos scored)
//   x = ids[0 .. n-2],  y[t] = ids[t+1] if scored[t+1] else -100
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "examples/gpt/data.h"

namespace saccade::examples {

/// One record of an instruction file: a prompt and its completion, or a plain text (is_text: the text in
/// `completion`, the prompt empty). `line` is its 1-based line in the file, for messages.
struct InstructRecord {
  std::string prompt, completion;
  bool is_text = false;
  int64_t line = 0;
};

/// Reads a JSONL file: one JSON object per line (blank lines skipped), each with string fields "prompt" and
/// "completion", or a string field "text" (other fields are ignored). Throws saccade::Error naming
/// "read_jsonl", the file and the line number for: a file that cannot be read or holds no record, a line
/// that is not a JSON object, or a record with neither both of prompt and completion nor text, or whose
/// fields are not strings.
std::vector<InstructRecord> read_jsonl(const std::string& path);

/// An example's token ids and, per id, whether the loss scores it as a target (1) or not (0).
struct TokenizedExample {
  std::vector<int64_t> ids;
  std::vector<uint8_t> scored;
};

/// What to do with an example longer than the context (context + 1 ids: context inputs and their targets).
enum class Truncate { Refuse, Right };

/// A tokenizer's encoding of a text, without special tokens.
using Encode = std::function<std::vector<int64_t>(const std::string&)>;

/// ids = [bos] + encode(prompt) + encode(completion) + [eos], bos and eos left out where they are -1 (the
/// checkpoint's tokenizer has none); the completion's ids and eos scored, the others not. Prompt and
/// completion are encoded apart, so the boundary between them is exact. An example of more than
/// `context` + 1 ids is refused (Truncate::Refuse) or cut at the right (Truncate::Right). Throws
/// saccade::Error naming "tokenize_example" and the record's line for a completion (or text) that encodes to
/// no id, an example too long under Refuse, or one whose cut leaves no scored target.
TokenizedExample tokenize_example(const InstructRecord& record, const Encode& encode, int64_t bos,
                                  int64_t eos, int64_t context, Truncate truncate = Truncate::Refuse);

/// The batch of examples `rows` (indices into `examples`): x int64 (B, T) with each example's ids but the
/// last, padded with `pad`; y int64 (B, T) with y[b, t] = ids[t + 1] where scored[t + 1], else -100 (and
/// -100 on padding). T is the longest example's length - 1. Throws saccade::Error naming "instruct_batch" for
/// no rows, a row out of range, or an example of fewer than 2 ids.
Batch instruct_batch(const std::vector<TokenizedExample>& examples, const std::vector<int64_t>& rows,
                     int64_t pad);

/// The examples `rows` packed into rows of at most `row_length` inputs (transformers' packing without
/// padding; FlashAttention-2's variable-length batches): each example adds its ids but the last to the first
/// row with room, in order (a new row when none has), with targets as instruct_batch's and its own document
/// id; the rows are padded with `pad` (targets -100, a document of their own) to the longest, T. So the
/// scored targets are instruct_batch's, in fewer rows and without the padding of the short examples, and a
/// model that attends within documents (LlamaForCausalLM::forward(idx, document_ids)) gives each example the
/// logits it would get alone. Throws saccade::Error naming "packed_instruct_batch" as instruct_batch does,
/// and for an example of more than row_length + 1 ids.
Batch packed_instruct_batch(const std::vector<TokenizedExample>& examples, const std::vector<int64_t>& rows,
                            int64_t pad, int64_t row_length);

/// How many targets of `examples` are scored (the tokens the loss averages over).
int64_t scored_targets(const std::vector<TokenizedExample>& examples);

}  // namespace saccade::examples
