#pragma once
// Training and scoring a GPT on a token stream: random windows, AdamW with weight decay on the block matrices
// only, linear warmup then cosine decay (over the steps, or over a wall-time budget), gradient clipping,
// gradient accumulation, data parallelism (distributed/), best and last checkpoints (safetensors, atomic),
// exact resumes and a CSV log of the whole run; validation loss in nats per token and bits per byte
// (docs/data.md's metric).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "examples/gpt/model.h"
#include "nn/optim.h"
#include "ops/device.h"
#include "ops/dtype.h"

namespace saccade::examples {

/// The validation figures.
struct LMScore {
  double nats_per_token = 0;  ///< mean cross-entropy of the predicted tokens
  double bits_per_byte = 0;   ///< total loss in bits / bytes of text the predicted tokens hold
  int64_t tokens = 0;         ///< tokens predicted
};

/// Scores `model` (eval mode, no gradients; its mode is restored) on `tokens` in the windows of
/// eval_window_starts (every token but the first predicted once, with the context since its window began),
/// `batch` windows at a time (fewer where their logits would pass 2^26 values: one window at a time for
/// GPT-2's vocabulary and context), over the first `max_tokens` predicted tokens (-1: the whole stream).
/// bits_per_byte = total nats / ln 2 / (tokens · bytes_per_token) (1 for bytes; stream bytes / tokens for a
/// subword tokenizer). Throws saccade::Error naming "evaluate_lm" for a stream of fewer than 2 tokens.
LMScore evaluate_lm(GPT& model, const std::vector<int64_t>& tokens, double bytes_per_token = 1.0,
                    int64_t max_tokens = -1, int64_t batch = 16);

/// Training settings (defaults: the README's run).
struct GPTTrainOptions {
  int64_t steps = 1500;     ///< optimizer steps (with time_limit: the most steps; the schedule is over time)
  double time_limit = 0;    ///< seconds of training (0: none; see scheduled_lr), scoring time excluded
  int64_t batch_size = 32;  ///< windows per optimizer step (global, over ranks and accumulation)
  int64_t grad_accum = 1;   ///< micro-batches per step (batch_size must be a multiple)
  double lr = 4e-3;         ///< AdamW's peak learning rate
  double min_lr = 4e-4;     ///< the end of the cosine decay
  int64_t warmup = 100;     ///< linear warmup steps (from lr / 10)
  double weight_decay = 0.1;
  double beta2 = 0.99;
  double clip = 1.0;  ///< max global gradient norm
  uint64_t seed = 0;  ///< of the window stream (the init and dropout use the model's own generator)
  Device device = Device::cpu();
  /// The forward's precision: Float32, or BFloat16 / Float16 under saccade::AutocastGuard (parameters,
  /// gradients and AdamW's state stay float32); Float16 also scales the loss with an nn::GradScaler, whose
  /// state goes into the checkpoints. Validation scores run in float32.
  DType dtype = DType::Float32;
  std::string out_dir;           ///< last.safetensors and best.safetensors go here ("" = no checkpoints)
  int64_t eval_every = 250;      ///< steps between validation scores (and checkpoints); 0 = at the end only
  int64_t eval_tokens = 65536;   ///< validation tokens scored during training (-1 = all)
  double bytes_per_token = 1.0;  ///< of the validation stream (see evaluate_lm)
  bool resume = false;           ///< continue from out_dir/last.safetensors when it exists
  int64_t stop_at = -1;      ///< stop after this step (scored and saved), as an interrupted run (-1: none)
  bool distributed = false;  ///< data parallel over distributed::world() (each rank: its share of a batch)
  int64_t print_every = 50;  ///< progress line interval when not on a terminal
  /// --profile FILE: a Chrome trace of a few steps (examples/common/step_profiler.h)
  std::string profile_trace = {};
  std::FILE* log = stdout;  ///< progress output (nullptr: silent)
  /// Asked after every step (Ctrl-C: InterruptGuard::requested): when it returns true (on any rank), the
  /// run stops after that step as an interrupted run, saved (last.safetensors, log.csv) but not scored, and
  /// GPTTrainResult::interrupted is set. Empty: never.
  std::function<bool()> stop_requested = {};
};

/// The learning rate of optimizer step `step` (1-based): linear warmup from lr / 10 over the first
/// W = min(warmup, steps - 1) steps, base (0.1 + 0.9 (step - 1) / W) · lr, then cosine decay to min_lr,
/// min_lr + (lr - min_lr) (1 + cos(π q)) / 2, where the progress q is
///   - without a time limit: (step - 1 - W) / max(steps - W, 1) (torch's LinearLR then CosineAnnealingLR);
///   - with time_limit > 0: (seconds - warmup_end) / (time_limit - warmup_end), clamped to [0, 1]: `seconds`
///     is the training time before the step begins and `warmup_end` that time at the first cosine step, so
///     a faster implementation takes more steps along the same curve and both end at min_lr.
/// bench/gpt_twin.py's `scheduled_lr` is the same function. Units: seconds.
double scheduled_lr(const GPTTrainOptions& opts, int64_t step, double seconds = 0, double warmup_end = 0);

/// One row of a run's log (OUT/log.csv; bench/gpt_twin.py writes the same format): one per optimizer step.
struct TrainLogRow {
  int64_t step = 0;
  double seconds = 0;              ///< training time at the end of the step, scoring and saving excluded
  double lr = 0;                   ///< the step's learning rate
  double train_loss = 0;           ///< the step's mean training loss, nats / token
  double val_bits_per_byte = NAN;  ///< validation after the step (NaN: not scored at this step)
};

/// Writes `rows` as CSV, header "step,seconds,lr,train_loss,val_bits_per_byte" (an unscored step leaves the
/// last field empty), atomically (`path`.tmp renamed). Throws saccade::Error naming "write_train_log" and the
/// file when it cannot be written.
void write_train_log(const std::string& path, const std::vector<TrainLogRow>& rows);
/// Reads what write_train_log wrote. Throws saccade::Error naming "read_train_log", the file and the line for
/// a missing file, another header or a malformed row.
std::vector<TrainLogRow> read_train_log(const std::string& path);

/// What a training run did.
struct GPTTrainResult {
  int64_t start_step = 0, steps_done = 0;  ///< this call's first step - 1 and the steps it took
  double seconds = 0;                      ///< this call's training time (scoring and saving excluded)
  double wall_seconds = 0;                 ///< this call's time, scoring and saving included
  double tokens_per_second = 0;            ///< of this call's training time
  double final_loss = 0;         ///< mean training loss (nats / token) of the last min(50, steps_done) steps
  LMScore best;                  ///< the best validation score seen (at eval points)
  std::vector<TrainLogRow> log;  ///< the whole run's rows (a resumed run's earlier ones from OUT/log.csv)
  bool interrupted = false;      ///< opts.stop_requested ended the run (steps_done may be 0)
};

/// Trains `model` (already on opts.device, its Generator drawing the dropout masks) on windows of `train`,
/// scoring on `valid` every opts.eval_every steps and at the end; writes out_dir/init.safetensors (the model
/// before its first step, for a twin to start from the same weights) on a fresh run, out_dir/last.safetensors
/// (model, optimizer, the GradScaler's state under float16, step, config, window count, dropout generator
/// offset, training seconds) and
/// out_dir/log.csv (write_train_log, the whole run) at every eval point and at the end, and
/// out_dir/best.safetensors when the validation improves. With opts.time_limit the run stops after the step
/// that reaches it (or at opts.steps). A resumed run (opts.resume, the file present) continues exactly as the
/// uninterrupted one (without a time limit: with one, where it stops depends on the clock) and keeps the
/// earlier rows of log.csv. When opts.stop_requested says so (Ctrl-C), the run stops after the step under way
/// with last.safetensors and log.csv written (not scored), so that a resume continues it, and
/// GPTTrainResult::interrupted is set. Throws saccade::Error naming "train_gpt" for bad options and what
/// load_checkpoint throws for a checkpoint of another model.
GPTTrainResult train_gpt(GPT& model, const std::vector<int64_t>& train, const std::vector<int64_t>& valid,
                         const GPTTrainOptions& opts);

/// What a checkpoint of train_gpt holds beside the model and the optimizer (in its metadata).
struct GPTResumeState {
  int64_t step = 0;                                  ///< optimizer steps taken
  uint64_t windows = 0;                              ///< training windows drawn (= step x batch_size)
  uint64_t dropout_seed = 0, dropout_offset = 0;     ///< the model's dropout Generator
  double best_bits_per_byte = INFINITY;              ///< the best validation score so far
  double train_seconds = 0, warmup_end_seconds = 0;  ///< the training clock (0 in older checkpoints)
};

/// Resumes a training run from `path` (a last.safetensors of train_gpt): checks that it holds this model's
/// config, that every metadata number parses whole and that its window count is step x `batch_size`, then
/// loads the model and `optimizer` (nn::load_checkpoint) and sets the model's dropout Generator. Throws
/// saccade::Error naming "resume_gpt" (or load_safetensors / load_checkpoint), the file and the key; on
/// error the model, optimizer and generator are unchanged. With a `scaler` (float16 training), its state is
/// restored too (load_checkpoint's rule: the file must hold one).
GPTResumeState resume_gpt(const std::string& path, GPT& model, nn::Optimizer& optimizer, int64_t batch_size,
                          nn::GradScaler* scaler = nullptr);

/// Loads a checkpoint's model into a new GPT built from its metadata (device `device`). Throws
/// saccade::Error naming "load_gpt" and the file for a file that is not a gpt checkpoint, names a tokenizer
/// make_tokenizer does not know, whose tensors do not hold GPTConfig::num_parameters() elements (checked
/// before the model is built) or do not fit its config.
std::shared_ptr<GPT> load_gpt(const std::string& path, Device device = Device::cpu());

/// Writes the model of checkpoint `from` (its state_dict and config metadata, no optimizer or scaler) to `to`
/// with every float tensor rounded to `dtype` (round to nearest even), metadata "dtype" naming it: what "a
/// checkpoint saved in bfloat16" means here. Training checkpoints stay float32 (the master weights and
/// AdamW's moments: rounding them would drop every update below a weight's last bit, which master weights
/// exist to keep), so a run resumes from last.safetensors, and an export is for load_gpt / `gpt sample`
/// (which widen it exactly to float32) and for PyTorch (load_state_dict(strict=True) copies bf16 into
/// float32 parameters). Atomic, as nn::save. Throws saccade::Error for a file that is not a gpt checkpoint.
void export_gpt(const std::string& from, const std::string& to, DType dtype);

}  // namespace saccade::examples
