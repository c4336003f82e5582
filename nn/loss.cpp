#include "nn/loss.h"

#include <functional>

#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace saccade::nn {

namespace {

// Runs f, prefixing any error it throws with the module's name (the op's own message follows).
Variable named(const char* module, const std::function<Variable()>& f) {
  ErrorScope scope(module);  // "SequenceLoss > cross_entropy: ..."
  return f();
}

// The sentinel that marks padded targets for cross_entropy's ignore_index.
constexpr int64_t kIgnore = -100;

// Per-token losses (B*T), or reduced, of logits (B, T, V) and targets (B, T) with padded positions ignored:
// t >= valid_lens[b] (when valid_lens is defined) or targets == pad_id (when given).
Variable masked_sequence_ce(const char* module, const Variable& logits, const Tensor& targets,
                            const Tensor& valid_lens, std::optional<int64_t> pad_id, double label_smoothing,
                            Reduction reduction) {
  SACCADE_CHECK(logits.defined() && targets.defined(), "{}: got an undefined input", module);
  SACCADE_CHECK(logits.dim() == 3, "{}: expected logits of shape (B, T, V), got {}", module, logits.shape());
  const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
  SACCADE_CHECK(targets.dtype() == DType::Int64 && targets.shape() == Shape({B, T}),
                "{}: expected int64 targets of shape [{}, {}] (B, T) for logits {}, got {} of shape {}",
                module, B, T, logits.shape(), targets.dtype(), targets.shape());
  Tensor keep = ops::ones({B, T}, DType::Bool, targets.device());
  if (valid_lens.defined()) {
    SACCADE_CHECK(valid_lens.dtype() == DType::Int64 && valid_lens.shape() == Shape({B}),
                  "{}: expected int64 valid_lens of shape [{}] (B), got {} of shape {}", module, B,
                  valid_lens.dtype(), valid_lens.shape());
    SACCADE_CHECK(B == 0 || ops::min(valid_lens).item<int64_t>() >= 0, "{}: valid_lens must be non-negative",
                  module);
    Tensor steps = ops::arange(static_cast<double>(T), DType::Int64, targets.device()).view({1, T});
    keep = ops::lt(steps, valid_lens.view({B, 1}));
  }
  if (pad_id) keep = ops::logical_and(keep, ops::ne(targets, static_cast<double>(*pad_id)));
  Tensor masked = ops::where(keep, targets, ops::full({}, static_cast<double>(kIgnore), DType::Int64));
  return named(module, [&] {
    return cross_entropy(reshape(logits, {B * T, V}), masked.reshape({B * T}), kIgnore, reduction,
                         label_smoothing);
  });
}

}  // namespace

// input, target: same shape -> () or input's shape
Variable MSELoss::forward(const Variable& input, const Variable& target) {
  ErrorScope scope(name(), {shape_of(input), shape_of(target)});
  SACCADE_CHECK(input.defined() && target.defined(), "MSELoss: got an undefined input");
  SACCADE_CHECK(input.shape() == target.shape(),
                "MSELoss: input and target must have one shape, got {} and {}", input.shape(),
                target.shape());
  return named("MSELoss", [&] { return mse_loss(input, target, reduction_); });
}

CrossEntropyLoss::CrossEntropyLoss(int64_t ignore_index, double label_smoothing, Reduction reduction)
    : Module("CrossEntropyLoss"),
      ignore_index_(ignore_index),
      label_smoothing_(label_smoothing),
      reduction_(reduction) {
  ErrorScope scope(name());
  SACCADE_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
                "CrossEntropyLoss: label_smoothing must be in [0, 1], got {}", label_smoothing);
}

// logits: (N, C, d...) or (C), target: (N, d...) or () -> () or target's shape
Variable CrossEntropyLoss::forward(const Variable& logits, const Tensor& target) {
  ErrorScope scope(name(), {shape_of(logits), shape_of(target)});
  SACCADE_CHECK(logits.defined() && target.defined(), "CrossEntropyLoss: got an undefined input");
  SACCADE_CHECK(target.dtype() == DType::Int64, "CrossEntropyLoss: expected int64 class indices, got {}",
                target.dtype());
  SACCADE_CHECK(logits.dim() >= 1, "CrossEntropyLoss: expected logits (N, C, ...) or (C), got a 0-d tensor");
  // The target's expected shape: logits' without the class dim (dim 1, or dim 0 when unbatched).
  Shape want = logits.shape();
  want.erase(logits.dim() == 1 ? 0 : 1);
  SACCADE_CHECK(target.shape() == want, "CrossEntropyLoss: expected target of shape {} for logits {}, got {}",
                want, logits.shape(), target.shape());
  // Bring the classes to the last dim and flatten the rest: (M, C) against (M).
  Variable z = logits;
  if (logits.dim() == 1) z = unsqueeze(logits, 0);
  if (logits.dim() > 2) {
    Shape perm{0};
    for (int d = 2; d < logits.dim(); ++d) perm.push_back(d);
    perm.push_back(1);
    z = reshape(permute(logits, perm), {-1, logits.size(1)});
  }
  Variable loss = named("CrossEntropyLoss", [&] {
    return cross_entropy(z, target.reshape({-1}), ignore_index_, reduction_, label_smoothing_);
  });
  return reduction_ == Reduction::None ? reshape(loss, target.shape()) : loss;
}

SequenceLoss::SequenceLoss(std::optional<int64_t> pad_id, double label_smoothing, Reduction reduction)
    : Module("SequenceLoss"), pad_id_(pad_id), label_smoothing_(label_smoothing), reduction_(reduction) {
  ErrorScope scope(name());
  SACCADE_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
                "SequenceLoss: label_smoothing must be in [0, 1], got {}", label_smoothing);
}

// logits: (B, T, V), targets: (B, T), valid_lens: (B) or undefined -> () or (B, T)
Variable SequenceLoss::forward(const Variable& logits, const Tensor& targets, const Tensor& valid_lens) {
  ErrorScope scope(name(), {shape_of(logits), shape_of(targets), shape_of(valid_lens)});
  Variable loss =
      masked_sequence_ce("SequenceLoss", logits, targets, valid_lens, pad_id_, label_smoothing_, reduction_);
  return reduction_ == Reduction::None ? reshape(loss, targets.shape()) : loss;
}

// pred: (B, T, V), label: (B, T), valid_len: (B) -> (B)
Variable MaskedSoftmaxCELoss::forward(const Variable& pred, const Tensor& label, const Tensor& valid_len) {
  ErrorScope scope(name(), {shape_of(pred), shape_of(label), shape_of(valid_len)});
  SACCADE_CHECK(valid_len.defined(), "MaskedSoftmaxCELoss: got undefined valid_len");
  Variable per_token =
      masked_sequence_ce("MaskedSoftmaxCELoss", pred, label, valid_len, std::nullopt, 0.0, Reduction::None);
  return mean(reshape(per_token, label.shape()), {1});
}

}  // namespace saccade::nn
