#pragma once
// The backward engine: Kahn's algorithm over the graph behind the roots (engine.cpp). Beside it, how the
// gradients meeting at a node are summed (gradient_sum.h) and what saccade::grad adds, the gradients captured
// at the nodes it asked for (grad_capture.h, where backward_in_rule is defined).
#include <memory>
#include <vector>

#include "autograd/node.h"
#include "autograd/variable.h"

namespace saccade {

/// Propagates `grads[i]` (dL/d output of roots[i], of that output's shape) from the roots to every node
/// behind them.
///
/// - Without `inputs`, accumulates into the grads of the leaves reached (Variable::backward) and returns
///   nothing. With `inputs` (nodes: a leaf's accumulator or a non-leaf's grad_fn), accumulates nothing and
///   returns the gradient that reached each of them (undefined where none did), running only the rules on a
///   path to one of them (saccade::grad).
/// - Rules run with grad mode off, or on when `create_graph`: then the gradients returned carry a graph and
///   can be differentiated again.
/// - Frees each node's saved tensors after use unless `retain_graph`.
std::vector<Variable> run_backward(const std::vector<std::shared_ptr<Node>>& roots,
                                   const std::vector<Variable>& grads, bool retain_graph, bool create_graph,
                                   const std::vector<std::shared_ptr<Node>>& inputs = {});

/// For a derivative rule that builds a graph and runs backward over it (recompute_backward in function.h, as
/// activation checkpointing uses it; such a rule's node is marked Node::set_runs_backward): propagates `grad`
/// from `output` and returns the gradient that reached each of `leaves` (the leaves that stand for the rule's
/// inputs in that graph; undefined where none did). Every other leaf the graph reaches is treated as the
/// enclosing pass treats leaves:
/// - under backward() (or outside any pass), its grad accumulates;
/// - under grad(), nothing accumulates, and the gradients reaching the nodes that grad() asked for are added
///   to that call's results, so grad() through the rule returns what it returns without it.
/// Frees the graph's saved tensors as it goes. Throws what run_backward throws.
std::vector<Variable> backward_in_rule(const Variable& output, const Variable& grad,
                                       const std::vector<Variable>& leaves);

}  // namespace saccade
