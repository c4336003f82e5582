#pragma once
// The GPT of the checkpoint and gpt targets and of their seeds: the smallest config that has every part.
#include "examples/gpt/model.h"

namespace saccade::fuzz {

/// vocab 8, context 4, 1 layer, 2 heads, d_model 4, dropout 0.1, byte tokens: 334 parameters.
inline examples::GPTConfig tiny_gpt_config() {
  examples::GPTConfig c;
  c.vocab_size = 8, c.context = 4, c.n_layer = 1, c.n_head = 2, c.d_model = 4, c.dropout = 0.1;
  return c;
}

/// The batch size the checkpoint target resumes with (a checkpoint's "windows" must be step x this).
inline constexpr int64_t kTinyBatch = 4;

}  // namespace saccade::fuzz
