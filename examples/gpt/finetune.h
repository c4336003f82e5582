#pragma once
// LoRA fine-tuning on instruction data (`gpt finetune`): the adapters that nn::apply_lora added to a frozen
// model, trained with AdamW on batches of examples (instruct.h), the loss on completion tokens only; the
// validation loss measured the same way.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "examples/gpt/instruct.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "ops/random.h"

namespace saccade::examples {

/// The model's logits (B, T, vocab) for ids int64 (B, T).
using LogitsFn = std::function<Variable(const Tensor& idx)>;
/// The model's logits (B, T, vocab) for packed rows: ids and document ids int64 (B, T), each document
/// attending only to itself with its positions restarting at 0 (LlamaForCausalLM::forward(idx,
/// document_ids)).
using PackedLogitsFn = std::function<Variable(const Tensor& idx, const Tensor& document_ids)>;

/// The mean cross-entropy (nats) over every scored target of `examples` (the tokens a completion-only loss
/// counts), batched `batch_size` examples at a time in order, in eval mode without gradients (the module's
/// mode restored after); with pack > 0 and packed_logits, each batch packed into rows of `pack` tokens
/// (packed_instruct_batch). Throws saccade::Error naming "completion_loss" for no examples or a batch_size
/// < 1.
double completion_loss(nn::Module& model, const LogitsFn& logits,
                       const std::vector<TokenizedExample>& examples, int64_t batch_size, int64_t pad,
                       int64_t pack = 0, const PackedLogitsFn& packed_logits = nullptr);

struct FinetuneOptions {
  int64_t steps = 100;      ///< optimizer steps
  int64_t batch_size = 4;   ///< examples per step
  double lr = 2e-4;         ///< AdamW's peak learning rate (PEFT's LoRA examples use 1e-4 .. 3e-4)
  int64_t warmup = 0;       ///< linear warmup steps (from lr / 10), then cosine decay to 0
  double weight_decay = 0;  ///< AdamW's, on the adapters
  double clip = 1.0;        ///< max global gradient norm (0: none)
  int64_t eval_every = 50;  ///< steps between validation losses (0: at the end only)
  uint64_t seed = 0;        ///< of the order of the examples
  /// When not empty: the run's state (the trainable parameters, AdamW's moments, the step, the position in
  /// the order of the examples, the dropout generator and the log so far) is saved to this safetensors file,
  /// atomically, after every evaluation and at the end, so that `resume` continues the run exactly.
  std::string checkpoint;
  /// Continue from `checkpoint` when that file exists (a fresh run when it does not).
  bool resume = false;
  /// > 0: end after this step as an interrupted run would (the checkpoint saved there, no final evaluation),
  /// to be continued with `resume`; the schedule stays that of `steps`.
  int64_t stop_at = 0;
  /// The adapters' dropout generator (the one apply_lora was given), saved and restored with the checkpoint;
  /// null: none to keep.
  Generator* generator = nullptr;
  /// > 0: each step's examples (and the validation batches) packed into rows of at most this many tokens
  /// (packed_instruct_batch), run through packed_logits: the same scored targets, so the same loss as
  /// unpacked up to float rounding, in fewer rows and without padding. 0: one example a row, padded.
  int64_t pack = 0;
  /// The logits of packed rows (needed with pack > 0).
  PackedLogitsFn packed_logits;
};

/// What a run measured: each step's training loss, and (step, validation loss) at each evaluation.
struct FinetuneLog {
  std::vector<double> train_loss;
  std::vector<std::pair<int64_t, double>> val_loss;
  int64_t resumed_at = 0;  ///< the step the run continued from (0: a fresh run)
};

/// Where a saved run stopped: its last step, how many epochs' orders of the examples it has drawn, and the
/// position in the current order.
struct RunPosition {
  int64_t step = 0;
  uint64_t shuffles = 0;
  size_t next = 0;
};

/// Writes a run's state to `path` (safetensors, atomically: nn::save_safetensors): "param.<name>" for each
/// trainable parameter of `model` (requires_grad), "optimizer.<key>" for AdamW's state, "log.train_loss"
/// (step) and "log.val" (n, 2) float64 rows of (step, loss); metadata format "saccade-finetune-1", step,
/// shuffles, next, seed, batch_size, examples (`examples`: the number of training examples), pack (the packed
/// rows' length, 0 unpacked), and the
/// dropout generator's seed and offset when opts.generator is set. Throws what nn::save_safetensors throws.
void save_run(const std::string& path, const nn::Module& model, const nn::AdamW& opt, const FinetuneLog& log,
              const RunPosition& at, const FinetuneOptions& opts, size_t examples);

/// Reads a run that save_run wrote into `model`'s trainable parameters, `opt`, `log` and opts.generator, and
/// returns where it stopped. Everything is checked before anything changes: throws saccade::Error naming
/// "finetune_lora: --resume" and `path` for a file that is not safetensors or not of this format, metadata
/// that is missing or not a count, another seed, batch size, number of examples or packed row length (where
/// the file records one), an impossible position
/// in the data, a missing, extra or misshapen trainable parameter, another optimizer state, no log of its
/// steps or a validation logged at a step outside 1 .. step or out of order; `model`, `opt`, `log` and the
/// generator are then unchanged.
RunPosition load_run(const std::string& path, nn::Module& model, nn::AdamW& opt, FinetuneLog& log,
                     const FinetuneOptions& opts, size_t examples);

/// The run's log as CSV, one row per step: "step,train_loss,val_loss" (nats per scored token; val_loss empty
/// at a step without a validation), what `gpt finetune` writes to OUT/log.csv.
std::string finetune_log_csv(const FinetuneLog& log);

/// Trains nn::trainable_parameters(model) (the adapters after apply_lora) for opts.steps AdamW steps
/// (betas 0.9, 0.999), each on opts.batch_size examples of `train` taken in a fresh random order each epoch
/// (std::mt19937_64(seed)), the loss the mean cross-entropy of the batch's scored targets. Scores `val`
/// (when not empty) with completion_loss every eval_every steps and at the end. `report` gets one line per
/// step and per evaluation. With opts.checkpoint the state is saved after each evaluation and at the end;
/// with opts.resume a saved state is read first (its steps already in the log) and the run continues at the
/// next step, exactly as if it had not stopped. Throws saccade::Error naming "finetune_lora" for no train
/// examples, a model without trainable parameters, or steps / batch_size < 1; and, naming the checkpoint, for
/// one that is not a fine-tuning checkpoint or was made with another seed, batch size or number of training
/// examples, or whose tensors do not fit the model's trainable parameters (nothing is changed then).
FinetuneLog finetune_lora(nn::Module& model, const LogitsFn& logits,
                          const std::vector<TokenizedExample>& train,
                          const std::vector<TokenizedExample>& val, const FinetuneOptions& opts, int64_t pad,
                          const std::function<void(const std::string&)>& report);

}  // namespace saccade::examples
