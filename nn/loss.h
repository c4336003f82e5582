#pragma once
// Losses as modules: MSELoss, CrossEntropyLoss (torch.nn.MSELoss / CrossEntropyLoss), and the sequence losses
// of d2l's machine translation chapters, which ignore padded target positions: SequenceLoss (mean over the
// real tokens, d2l section 10.7) and MaskedSoftmaxCELoss (d2l 0.17 section 9.7, per-sequence means).
// None of them has parameters.
#include <cstdint>
#include <optional>

#include "autograd/functions/nn.h"
#include "nn/module.h"

namespace saccade::nn {

/// Mean squared error reduce((input - target)²) (torch.nn.MSELoss). input and target: one shape, float;
/// both differentiable. Result: 0-d for Mean/Sum, input's shape for None.
/// Throws saccade::Error naming "MSELoss" for undefined inputs or different shapes.
class MSELoss : public Module {
 public:
  explicit MSELoss(Reduction reduction = Reduction::Mean) : Module("MSELoss"), reduction_(reduction) {}
  Variable forward(const Variable& input, const Variable& target);

 private:
  Reduction reduction_;
};

/// Cross-entropy of logits against class indices (torch.nn.CrossEntropyLoss without class weights):
///   loss_i = (1 - ε)(-log p_i[t_i]) + ε/C Σ_c (-log p_ic),  p_i = softmax(logits_i), ε = label_smoothing;
/// targets equal to ignore_index contribute nothing, and Mean divides by the number of the others (NaN when
/// there are none, as torch). Wraps saccade::cross_entropy.
/// forward: logits (N, C) with target (N); (N, C, d1, ...) with target (N, d1, ...); or (C) with a 0-d
/// target. target is int64. Result: 0-d for Mean/Sum; target's shape for None. Throws saccade::Error naming
/// "CrossEntropyLoss" for label_smoothing outside [0, 1], undefined or non-int64 targets, shapes that do not
/// match as above, or a target outside [0, C) that is not ignore_index.
class CrossEntropyLoss : public Module {
 public:
  explicit CrossEntropyLoss(int64_t ignore_index = -100, double label_smoothing = 0.0,
                            Reduction reduction = Reduction::Mean);
  Variable forward(const Variable& logits, const Tensor& target);

 private:
  int64_t ignore_index_;
  double label_smoothing_;
  Reduction reduction_;
};

/// Cross-entropy over a batch of sequences that ignores padding (d2l section 10.7, Seq2Seq.loss): logits
/// (B, T, V), targets (B, T) int64. A position (b, t) is padding when t >= valid_lens[b] (valid_lens given to
/// forward, as d2l's valid_len) or when targets[b, t] == pad_id (pad_id given to the constructor, as d2l's
/// tgt_pad); either or both may be used. Padded positions contribute no loss and receive zero gradient.
///   Mean (default): Σ_{unpadded} loss_bt / #unpadded (NaN when every position is padding);
///   Sum: Σ_{unpadded} loss_bt;  None: (B, T) per-token losses, 0 at padding.
/// label_smoothing as CrossEntropyLoss.
/// Throws saccade::Error naming "SequenceLoss" for logits that are not 3-d, targets that are not (B, T)
/// int64, valid_lens that are not (B) int64 and non-negative, or an unpadded target outside [0, V).
class SequenceLoss : public Module {
 public:
  explicit SequenceLoss(std::optional<int64_t> pad_id = std::nullopt, double label_smoothing = 0.0,
                        Reduction reduction = Reduction::Mean);
  Variable forward(const Variable& logits, const Tensor& targets, const Tensor& valid_lens = Tensor());

 private:
  std::optional<int64_t> pad_id_;
  double label_smoothing_;
  Reduction reduction_;
};

/// d2l 0.17 section 9.7's MaskedSoftmaxCELoss: per-token cross-entropy of pred (B, T, V) against label (B, T)
/// (int64), zeroed at t >= valid_len[b], then averaged over T (all T steps, padded ones included, as d2l).
/// Result: (B), one loss per sequence. Padded positions receive zero gradient.
/// Throws saccade::Error naming "MaskedSoftmaxCELoss" for the shape and dtype errors of SequenceLoss.
class MaskedSoftmaxCELoss : public Module {
 public:
  MaskedSoftmaxCELoss() : Module("MaskedSoftmaxCELoss") {}
  Variable forward(const Variable& pred, const Tensor& label, const Tensor& valid_len);
};

}  // namespace saccade::nn
