#pragma once
// What happens where a gradient arrives, for the engine (engine.cpp): a node's hooks rewrite it, and at a
// leaf it is added into the leaf's `grad` (PyTorch's AccumulateGrad). The first gradient a leaf receives is
// kept as it is when no one else can see its memory, else copied, so that an in-place change of one leaf's
// grad (zero_grad, clipping) never reaches another tensor.
#include <vector>

#include "autograd/node.h"
#include "autograd/variable.h"

namespace saccade::detail {

/// Runs the hooks registered on a node (Variable::register_hook, retain_grad) on `g`, in order, and returns
/// the rewritten gradient (same shape and dtype as `g`; a hook that returns a new tensor cuts the history of
/// a create_graph gradient).
Variable run_hooks(std::vector<Node::Hook>& hooks, Variable g);

/// A leaf's accumulator node: runs the leaf's own hooks on `g`, then adds it into the leaf's grad (of the
/// leaf's shape and dtype). Nothing happens once the leaf is gone.
/// NOTE: the leaf's grad is a Tensor: under create_graph it holds the values, not their graph (use grad()).
void accumulate_into_leaf(const Node& accumulator, Variable g);

}  // namespace saccade::detail
