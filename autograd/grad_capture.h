#pragma once
// What saccade::grad adds to the engine's pass (engine.cpp): the nodes it asked for, which nodes lead to
// them (only their rules run), and the gradients that reach them, kept and summed instead of accumulated
// into leaves. A rule that runs a backward of its own (backward_in_rule, engine.h) finds the pass it runs
// in through GradCapture::current().
#include <memory>
#include <unordered_map>
#include <vector>

#include "autograd/node.h"
#include "autograd/variable.h"

namespace saccade::detail {

/// The gradients one engine pass captures at the nodes it was asked for. While it lives it is this thread's
/// current capture (GradCapture::current), the one a nested pass joins.
class GradCapture {
 public:
  /// For the pass from `roots` asking for `wanted` (a leaf's accumulator or a non-leaf's grad_fn each):
  /// finds which nodes lead to a wanted one, by one iterative walk. Empty `wanted`: a backward() pass, which
  /// captures nothing and walks nothing. Both vectors must outlive the capture.
  GradCapture(const std::vector<std::shared_ptr<Node>>& roots,
              const std::vector<std::shared_ptr<Node>>& wanted);
  ~GradCapture();
  GradCapture(const GradCapture&) = delete;
  GradCapture& operator=(const GradCapture&) = delete;

  /// The capture of the innermost pass running in this thread; nullptr outside any pass.
  static GradCapture* current();
  /// Whether this pass captures (grad()) rather than accumulating into leaves (backward()).
  bool active() const { return !wanted_.empty(); }
  /// The nodes asked for, in the caller's order (repeats allowed).
  const std::vector<std::shared_ptr<Node>>& wanted() const { return wanted_; }
  /// Adds `g`, the gradient that reached `n`, to n's result if n was asked for (add_captured).
  void offer(Node* n, const Variable& g);
  /// Whether the rule of `n` (not an accumulator) must run: always under backward(); under grad(), when `n`
  /// runs a backward of its own (Node::runs_backward, which may lead anywhere) or an edge leads to a wanted
  /// node.
  bool must_run(const Node& n) const;
  /// The gradient captured at each wanted node, in order (undefined where none arrived).
  std::vector<Variable> results() const;

 private:
  const std::vector<std::shared_ptr<Node>>& wanted_;
  std::unordered_map<Node*, Variable> captured_;
  std::unordered_map<Node*, bool> reaches_;  // a node is, or leads to, a wanted one
  GradCapture* enclosing_;
};

}  // namespace saccade::detail
