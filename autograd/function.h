#pragma once
// How one op records itself. Every derivative rule in autograd/functions/ opens an OpScope on its row of the
// op table (beside its public function; the type: autograd/op_info.h), computes its result with ops::, keeps
// what its backward needs in SavedVariables, and hands both to make_result, which attaches a Node (or, under
// NoGradGuard or when no input requires grad, nothing). The rule itself is written once, on Variables, with
// saccade:: functions: the engine runs it with grad mode off (it records nothing, as a rule on Tensors
// would), or on under create_graph, when the gradient it returns can be differentiated again.
//
//   Variable exp(const Variable& a) {
//     OpScope op(op_info::exp, a);  // checks a; while a profile records, exp's range is open until return
//     Tensor y = ops::exp(a.data());
//     SavedVariable sy = SavedVariable::output(y, op_info::exp);
//     return make_result(op, y, {a}, [sy](const Variable& g) -> std::vector<Variable> {
//       return {mul(g, sy.get())};  // y = e^a:  da = g * y
//     });
//   }
#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "autograd/op_info.h"
#include "autograd/profiling.h"
#include "autograd/variable.h"
#include "ops/tensor.h"

namespace saccade {

namespace detail {
/// Throws "`op`: got an undefined `what` (argument `position`)" (", element `element`" when >= 0).
[[noreturn]] void undefined_argument(const char* op, int position, const char* what, int64_t element = -1);
inline void check_argument(const char* op, int position, const Variable& v) {
  // a Variable made from an undefined Tensor (Variable(Tensor())) is as unusable as Variable()
  if (!v.defined() || !v.impl()->data.defined()) [[unlikely]]
    undefined_argument(op, position, "Variable");
}
inline void check_argument(const char* op, int position, const Tensor& t) {
  if (!t.defined()) [[unlikely]]
    undefined_argument(op, position, "tensor");
}
inline void check_argument(const char* op, int position, const std::vector<Variable>& vs) {
  for (size_t i = 0; i < vs.size(); ++i)
    if (!vs[i].defined() || !vs[i].impl()->data.defined()) [[unlikely]]
      undefined_argument(op, position, "Variable", static_cast<int64_t>(i));
}
// sizes, dims, flags: checked by the op. (For a Variable, Tensor or vector argument the overloads above are
// exact matches too, and a non-template wins a tie.)
template <class T>
inline void check_argument(const char*, int, const T&) {}

inline void append_shape(std::string& s, const Variable& v) { s += fmt::format("{}, ", v.shape()); }
inline void append_shape(std::string& s, const Tensor& t) { s += fmt::format("{}, ", t.shape()); }
inline void append_shape(std::string& s, const std::vector<Variable>& vs) {
  s += "[";
  for (const auto& v : vs) s += fmt::format("{}, ", v.shape());
  s += "], ";
}
template <class T>
inline void append_shape(std::string&, const T&) {}

/// Opens the forward op `op` on this thread (its input shapes when record_shapes is on) and returns the id of
/// its profiler range. Only called while a profile is active, after the op's arguments were checked.
// NOTE: cold and out of line: the ops' code stays as it was but for one load and branch.
template <class... Args>
[[gnu::cold, gnu::noinline]] uint64_t profile_op_begin(const char* op, const Args&... args) {
  std::string shapes;
  if (profiler::active_options().record_shapes) (append_shape(shapes, args), ...);
  return profile_op_begin_shapes(op, std::move(shapes));
}

}  // namespace detail

/// The one check of the arguments a saccade:: function was given: pass the function's arguments in the order
/// of its signature, up to the last one that must be defined (optional Variables such as a bias come after
/// it, or are left out). Each Variable and Tensor among them must be defined, and each Variable must hold a
/// defined Tensor; a std::vector<Variable> must hold only such Variables. Other arguments (dims, sizes,
/// flags) only count positions. Throws saccade::Error naming `op` and the first undefined argument, counted
/// from 1. It only checks (a rule's OpScope calls it, and opens the profiler's range):
///
///     check_defined("add", a, b);      // "add: got an undefined Variable (argument 2)"
///     check_defined("cat", xs);        // "cat: got an undefined Variable (argument 1, element 0)"
///     check_defined("where", c, a, b); // "where: got an undefined tensor (argument 1)"
template <class... Args>
void check_defined(const char* op, const Args&... args) {
  int position = 0;
  (detail::check_argument(op, ++position, args), ...);
}

/// The first line of every derivative rule: the op's row of the op table and its arguments (as
/// check_defined takes them, which it calls with the row's name: an undefined argument throws
/// saccade::Error naming the op). While a profile is active it also opens the op's profiler range, with the
/// input shapes; make_result(scope, ...) closes it with the op's cost, and a scope left without it (an op
/// that threw, a composite whose parts record themselves, an op autocast handed on to a second call of
/// itself) drops its range when it ends. Costs one relaxed load and two branches when no profile records: no
/// lookup, no allocation.
class OpScope {
 public:
  template <class... Args>
  explicit OpScope(const OpInfo& op, const Args&... args) : op_(op) {
    check_defined(op.name, args...);
    if (profiler::is_active()) [[unlikely]]
      range_ = detail::profile_op_begin(op.name, args...);
  }
  ~OpScope() {
    if (range_) [[unlikely]]
      detail::profile_op_discard(range_);
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

  /// The op's row.
  const OpInfo& info() const { return op_; }
  /// Hands over the id of the open profiler range (0: none, or already handed over) and forgets it: the
  /// caller closes it (make_result does).
  uint64_t take_range() { return std::exchange(range_, 0); }

 private:
  const OpInfo& op_;
  uint64_t range_ = 0;
};

/// A tensor saved for backward together with its storage's version at save time. get() throws saccade::Error
/// naming the op if the tensor was modified in place since (the gradient would silently be wrong), as
/// PyTorch's saved-variable version check.
class SavedTensor {
 public:
  SavedTensor() = default;
  /// Saves `t` (may be undefined) for the op named `op` (a string literal: only the pointer is kept).
  SavedTensor(Tensor t, const char* op) : t_(std::move(t)), version_(t_.version()), op_(op) {}
  /// Saves `t` for the op of row `op`.
  SavedTensor(Tensor t, const OpInfo& op) : SavedTensor(std::move(t), op.name) {}
  /// The saved tensor; throws if its storage was modified in place since it was saved.
  const Tensor& get() const;

 private:
  Tensor t_;
  uint64_t version_ = 0;
  const char* op_ = "";
};

/// A Variable saved for backward, with its storage's version at save time (the same check as SavedTensor).
///
/// - An input is kept as its Variable, so a second derivative sees the history that made it.
/// - The op's own output is kept as data only (SavedVariable::output): holding the output Variable would make
///   its node own itself, a cycle. get() reattaches it to the node whose rule is running (Node::current),
///   which is that output's grad_fn, as PyTorch's SavedVariable does with is_output.
class SavedVariable {
 public:
  SavedVariable() = default;
  /// Saves the input `v` (may be undefined) for the op named `op` (a string literal).
  SavedVariable(Variable v, const char* op);
  /// Saves the input `v` for the op of row `op`.
  SavedVariable(Variable v, const OpInfo& op) : SavedVariable(std::move(v), op.name) {}
  /// Saves the data of the op's own result.
  static SavedVariable output(Tensor data, const char* op);
  static SavedVariable output(Tensor data, const OpInfo& op) { return output(std::move(data), op.name); }
  /// The saved Variable; throws if its storage was modified in place since it was saved. An output, while
  /// grad mode is on, comes back with the running node as its grad_fn.
  Variable get() const;
  bool defined() const { return data_.defined(); }

 private:
  Variable var_;  // inputs
  Tensor data_;   // the data of either
  uint64_t version_ = 0;
  const char* op_ = "";
  bool is_output_ = false;
};

/// For a rule that has no second derivative (a hand-written backward kernel with no composed reference; its
/// row says twice_differentiable = false): throws saccade::Error "`op`: create_graph through an op with no
/// second derivative" when grad mode is on (create_graph) and any of `vs` requires grad. Call it first in
/// such a rule.
void check_once_differentiable(const char* op, std::initializer_list<Variable> vs);
/// As above, for a rule whose result depends on an input it did not save: throws whenever grad mode is on.
void check_once_differentiable(const char* op);

/// The one recompute path: the gradients of `reference(inputs)` at grad_output `g`, found by running
/// `reference` again with recording on, from stand-ins for the inputs, and the engine over what it recorded.
/// One Variable per input, each of that input's shape (undefined for inputs that do not require grad).
/// Which stand-ins, and what the engine does, depends on grad mode (on: the enclosing pass has create_graph):
/// - on: a fused kernel's rule (flash_attention, layer_norm, ...), whose composed reference gives its
///   second derivative. Each input that requires grad enters through an alias node of its own, and
///   saccade::grad takes the gradients there with create_graph and retain_graph: partial derivatives, even
///   when one input is computed from another (gh from h in a GRU step), that lead back to the inputs'
///   history, so they can be differentiated again.
/// - off: activation checkpointing (autograd/checkpoint.h). Each input enters as a leaf holding its data,
///   where the recomputed graph ends, and backward_in_rule (engine.h) runs over it: any other leaf it
///   reaches (the segment's parameters) is treated as the enclosing pass treats leaves.
/// Throws what `reference` and the engine throw.
std::vector<Variable> recompute_backward(
    const std::vector<Variable>& inputs,
    const std::function<Variable(const std::vector<Variable>&)>& reference, const Variable& g);

/// Records one op: returns a Variable holding `result` whose grad_fn runs `backward` — when grad mode is on
/// and any of `inputs` requires grad; otherwise a plain Variable without history. Closes `op`'s profiler
/// range (if open) with the cost of its row's model. With anomaly mode on, throws saccade::Error if `result`
/// has a NaN or Inf, naming the op.
///
/// `backward(grad_output)` returns one Variable per input, in order, each of that input's shape (or
/// undefined when that input needs no gradient).
Variable make_result(OpScope& op, Tensor result, std::initializer_list<Variable> inputs,
                     Node::BackwardFn backward);
/// As above, for ops with a variable number of inputs (cat, stack).
Variable make_result(OpScope& op, Tensor result, const std::vector<Variable>& inputs,
                     Node::BackwardFn backward);

}  // namespace saccade
