#pragma once
// Graphviz export of the graph behind a result, for people studying what backward will run.
#include <string>

#include "autograd/variable.h"

namespace saccade {

/// The Graphviz DOT text of the backward graph behind `root` (render with `dot -Tsvg graph.dot`):
///
///     digraph saccade {
///       node [shape=box, fontname="monospace"];
///       n0 [label="mul\n[2, 3] float64", style=bold];
///       n1 [label="AccumulateGrad\n[2, 3] float64", style=filled, fillcolor=lightblue];
///       n1 -> n0;
///     }
///
/// One node per graph Node, labelled with its op name and its output's shape and dtype; leaves that require
/// grad appear as their AccumulateGrad node (filled), the root's node is bold. An edge `a -> b` means a's
/// output is an input of b (the forward direction); an op with several inputs labels each edge with the
/// input's position. Nodes are numbered from the root (n0) in walk order, a node's inputs in input order, so
/// the text is deterministic. The walk is iterative (deep graphs do not overflow the stack). A root that does
/// not require grad gives a graph with no nodes. Throws saccade::Error for an undefined root.
std::string to_dot(const Variable& root);

}  // namespace saccade
