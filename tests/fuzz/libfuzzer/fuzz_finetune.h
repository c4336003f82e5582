#pragma once
// The run that the finetune_run target reads into and the seed generator saves: fuzz::SmallModel with its
// embedding frozen (a base under adapters), AdamW over the rest, seed 3, batches of 2, 10 examples, a dropout
// generator of seed 7.
#include <vector>

#include "examples/gpt/finetune.h"
#include "nn/lora.h"
#include "tests/fuzz/libfuzzer/fuzz_common.h"

namespace saccade::fuzz {

/// The number of training examples the saved runs were made with.
inline constexpr size_t kFinetuneExamples = 10;

/// A fresh run: model, optimizer, log, generator and options as `gpt finetune` holds them.
struct FinetuneRun {
  SmallModel model;
  nn::AdamW opt;
  examples::FinetuneLog log;
  Generator gen{7};
  examples::FinetuneOptions opts;
  FinetuneRun() : opt(freeze(model)) {
    opts.seed = 3;
    opts.batch_size = 2;
    opts.generator = &gen;
  }
  static std::vector<Variable> freeze(SmallModel& m) {
    m.emb->weight.requires_grad_(false);
    return nn::trainable_parameters(m);
  }
  /// The trainable parameters and AdamW's state: what a run file holds, and what a rejected one must leave
  /// as it was.
  nn::StateDict state() const {
    nn::StateDict s;
    for (const auto& [name, p] : model.named_parameters())
      if (p.requires_grad()) s.insert(name, p.data());
    for (const auto& [k, t] : opt.state_dict()) s.insert("optimizer." + k, t);
    return s;
  }
};

}  // namespace saccade::fuzz
