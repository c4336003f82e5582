#pragma once
// How one op records itself. Every derivative rule in autograd/functions/ computes its result with ops::,
// keeps what its backward needs in SavedTensors, and hands both to make_result, which attaches a Node (or,
// under NoGradGuard or when no input requires grad, nothing):
//
//   Variable exp(const Variable& a) {
//     Tensor y = ops::exp(a.data());
//     SavedTensor sy(y, "exp");
//     return make_result("exp", y, {a}, [sy](const Tensor& g) -> std::vector<Tensor> {
//       return {ops::mul(g, sy.get())};  // y = e^a:  da = g * y
//     });
//   }
#include <initializer_list>
#include <vector>

#include "autograd/node.h"
#include "autograd/variable.h"
#include "ops/tensor.h"

namespace saccade {

/// A tensor saved for backward together with its storage's version at save time. get() throws saccade::Error
/// naming the op if the tensor was modified in place since (the gradient would silently be wrong), as
/// PyTorch's saved-variable version check.
class SavedTensor {
 public:
  SavedTensor() = default;
  /// Saves `t` (may be undefined) for the op named `op` (a string literal: only the pointer is kept).
  SavedTensor(Tensor t, const char* op) : t_(std::move(t)), version_(t_.version()), op_(op) {}
  /// The saved tensor; throws if its storage was modified in place since it was saved.
  const Tensor& get() const;

 private:
  Tensor t_;
  uint64_t version_ = 0;
  const char* op_ = "";
};

/// Records one op: returns a Variable holding `result` whose grad_fn runs `backward` — when grad mode is on
/// and any of `inputs` requires grad; otherwise a plain Variable without history. With anomaly mode on,
/// throws saccade::Error if `result` has a NaN or Inf, naming `op`.
///
/// `backward(grad_output)` returns one Tensor per input, in order, each of that input's shape (or
/// undefined when that input needs no gradient).
Variable make_result(const char* op, Tensor result, std::initializer_list<Variable> inputs,
                     Node::BackwardFn backward);
/// As above, for ops with a variable number of inputs (cat, stack).
Variable make_result(const char* op, Tensor result, const std::vector<Variable>& inputs,
                     Node::BackwardFn backward);

}  // namespace saccade
