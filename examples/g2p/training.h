#pragma once
// Training a G2PModel on the dictionary's train split: bucketed batches, teacher forcing with a
// cross-entropy that ignores <pad> (label smoothing as configured), Adam with linear warmup and cosine decay,
// gradient clipping, dropout, validation (greedy WER / PER) every N steps keeping the best checkpoint, and
// exact resume from the last checkpoint.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "examples/common/cmudict.h"
#include "examples/g2p/data.h"
#include "examples/g2p/model.h"
#include "ops/device.h"

namespace saccade::examples {

/// Training settings.
struct G2PTrainOptions {
  int64_t steps = 2500;  ///< total optimizer steps (a resumed run continues up to this number)
  int64_t batch_size = 128;
  double lr = 2e-3;      ///< Adam's peak learning rate
  int64_t warmup = 200;  ///< linear warmup steps (from lr / 10), then cosine decay to lr / 20
  double clip = 1.0;     ///< max global gradient norm
  uint64_t seed = 0;     ///< the batch order (BucketSampler)
  Device device = Device::cpu();
  std::string checkpoint;     ///< the last state, written every `val_every` steps and at the end ("" = none)
  std::string best;           ///< the state with the best validation WER so far ("" = none)
  bool resume = false;        ///< continue from `checkpoint` when it exists
  int64_t val_every = 500;    ///< validation interval (0: never)
  int64_t val_words = 1000;   ///< validation words decoded (the first ones of the split)
  int64_t print_every = 100;  ///< progress line interval when not on a terminal
  /// --profile FILE: a Chrome trace of a few steps (examples/common/step_profiler.h)
  std::string profile_trace = {};
  std::FILE* log = stdout;  ///< progress output (nullptr: silent)
};

/// What a training run did.
struct G2PTrainResult {
  int64_t start_step = 0, steps_done = 0;
  double seconds = 0;
  double first_loss = 0;              ///< mean loss of the first first_steps steps of this call
  double final_loss = 0;              ///< mean loss of the last final_steps steps
  int64_t first_steps = 0;            ///< min(20, steps_done / 2), at least 1: apart from the last ones
  int64_t final_steps = 0;            ///< min(100, steps_done - first_steps), at least 1
  double best_wer = 1, best_per = 1;  ///< best validation figures (greedy), when validated
  int64_t best_step = 0;              ///< the step of best_wer (0: no validation yet)
};

/// Trains `model` (on opts.device) on `train` and validates on `validation`. Throws saccade::Error for bad
/// options or a checkpoint that does not fit the model.
G2PTrainResult train_g2p(G2PModel& model, const G2PVocab& vocab, const std::vector<DictWord>& train,
                         const std::vector<DictWord>& validation, const G2PTrainOptions& opts);

}  // namespace saccade::examples
