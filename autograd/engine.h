#pragma once
// The backward engine (engine.cpp): Kahn's algorithm over the graph behind one root.
#include <memory>

#include "autograd/node.h"

namespace saccade {

/// Propagates `grad` (dL/d root output) from `root` to every leaf behind it, accumulating into the leaves'
/// grads. Frees each node's saved tensors after use unless `retain_graph`.
void run_backward(const std::shared_ptr<Node>& root, const Tensor& grad, bool retain_graph);

}  // namespace saccade
