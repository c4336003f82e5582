#pragma once
// Summing the gradients that meet at a node, for the engine (engine.cpp): each consumer of a node's output
// hands it a gradient, and the node's rule runs on their sum.
// - A sum is made in place once the engine owns it (it allocated it) and no graph is recorded; a gradient a
//   rule returned is never written, since rules may hand one tensor to several inputs.
// - Under create_graph every sum is a recorded `add`, so the gradient can be differentiated again.
// - A view of part of its input (Node::part: select, narrow, slice, split, chunk) hands on only the gradient
//   of its part, which is added into that part of the input's sum: T selects of a (B, T, n) tensor fill one
//   zeros of the input, not T. Under create_graph the placing is a recorded op too (embed_part).
#include "autograd/node.h"
#include "autograd/variable.h"

namespace saccade::detail {

/// The gradient summed so far for one node, while some of its consumers have not run yet. Every gradient
/// added has the node's dtype and device (the engine converts a rule's gradients first).
class GradientSum {
 public:
  /// Adds `g`, a gradient of the node's whole output (its output's shape): a root's seed, or what a
  /// consumer's rule returned.
  void add(Variable g);
  /// Adds `g`, what the rule of `from` returned for its input `to` (the node this sum is for): of `to`'s
  /// output shape, or, when `from` is a part view (Node::part), of the part's shape, added into that part.
  void add(Variable g, const Node& from, const Node& to);
  /// The sum (undefined when nothing was added), moved out.
  Variable take() { return std::move(sum_); }

 private:
  Variable sum_;
  bool owned_ = false;  // allocated by the engine, so adding into it in place changes nothing else
};

/// saccade::grad: adds `g`, a gradient that reached an asked-for node, into `slot`, what reached that node
/// before (through a rule's own backward, backward_in_rule). A recorded add under create_graph.
void add_captured(Variable& slot, const Variable& g);

}  // namespace saccade::detail
