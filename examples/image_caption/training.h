#pragma once
// Training and evaluation of a Captioner on Fashion-MNIST scenes: teacher forcing with a cross-entropy that
// ignores <pad>, Adam with linear warmup and cosine decay, gradient clipping, atomic resumable checkpoints;
// greedy evaluation with the four caption metrics; attention pictures.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "examples/common/idx.h"
#include "examples/common/scenes.h"
#include "examples/image_caption/captioner.h"
#include "ops/device.h"
#include "ops/dtype.h"

namespace saccade::examples {

/// Training settings.
struct TrainOptions {
  int64_t steps = 1000;  ///< total optimizer steps (a resumed run continues up to this number)
  int64_t batch_size = 64;
  double lr = 3e-3;      ///< Adam's peak learning rate
  int64_t warmup = 100;  ///< linear warmup steps (from lr / 10), then cosine decay to lr / 20
  double clip = 1.0;     ///< max global gradient norm
  uint64_t seed = 0;     ///< the training scenes are SceneGenerator(train, seed)
  Device device = Device::cpu();
  /// The forward's precision: Float32, or BFloat16 / Float16 under saccade::AutocastGuard (parameters,
  /// gradients and Adam stay float32); Float16 scales the loss with an nn::GradScaler (saved in the
  /// checkpoint).
  DType dtype = DType::Float32;
  std::string checkpoint;  ///< file written every `checkpoint_every` steps and at the end ("" = none)
  int64_t checkpoint_every = 500;
  bool resume = false;        ///< continue from `checkpoint` when it exists
  int64_t print_every = 100;  ///< progress line interval when not on a terminal
  bool profile = false;  ///< time encode / decode / backward / optimizer and print the split (--phase-times)
  /// --profile FILE: a Chrome trace of a few steps (examples/common/step_profiler.h)
  std::string profile_trace = {};
  /// Data-parallel over distributed::world() (started by mpirun; distributed::init() called): batch_size is
  /// the global batch, each rank trains on its shard_range of every batch of the one scene stream, the
  /// gradients are averaged (DistributedDataParallel), rank 0 writes the checkpoints.
  bool distributed = false;
  std::FILE* log = stdout;  ///< progress output (nullptr: silent)
};

/// What a training run did.
struct TrainResult {
  int64_t start_step = 0;        ///< the step it resumed from (0 for a fresh run)
  int64_t steps_done = 0;        ///< steps run by this call
  double seconds = 0;            ///< wall time of those steps
  double final_loss = 0;         ///< mean loss of the last min(100, steps_done) steps (over all ranks)
  double comm_wait_seconds = 0;  ///< distributed: time spent waiting for the gradients' all-reduce
};

/// Trains `model` (already on opts.device) on scenes drawn from `train_set`. Resuming (opts.resume with an
/// existing checkpoint) restores the model, the optimizer, the step and the position in the scene stream,
/// so a resumed run continues exactly as the uninterrupted one. Throws saccade::Error for a checkpoint that
/// does not fit the model.
TrainResult train_captioner(Captioner& model, const ImageSet& train_set, const TrainOptions& opts);

/// The metrics on a test set (examples/common/metrics.h), and what was generated.
struct EvalResult {
  double exact_match = 0, bleu4 = 0, item_accuracy = 0, localization = 0;
  int64_t localization_tokens = 0;
  double seconds = 0;
  std::vector<std::vector<int64_t>> generated;  ///< per scene: the emitted tokens up to and including <eos>
  std::vector<Tensor> attention;                ///< per scene: float32 (len(generated), G * G), CPU
};

/// Greedy-decodes every scene of `test` (batches of `batch_size`, at most kMaxCaptionTokens - 1 tokens) and
/// computes exact match, corpus BLEU-4, item accuracy and attention localization.
EvalResult evaluate_captioner(Captioner& model, const SceneBatch& test, Device device,
                              int64_t batch_size = 500);

/// Prints the metrics, one a line: "exact_match 0.4870" ...
void print_metrics(std::FILE* out, const EvalResult& result);

/// Writes, for the first `count` scenes of `test`, `<dir>/scene_<i>.png` (the scene) and
/// `<dir>/attention_<i>.png` (write_attention_overlay: one panel per generated word with its attention map;
/// not in a build without PLplot). Returns the paths written.
std::vector<std::string> write_caption_pictures(const std::string& dir, const SceneBatch& test,
                                                const EvalResult& result, int64_t count);

}  // namespace saccade::examples
