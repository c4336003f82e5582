// DOT export: an iterative depth-first walk over Node::next() from the root's node.
#include "autograd/dot.h"

#include <unordered_map>
#include <vector>

namespace saccade {

std::string to_dot(const Variable& root) {
  SACCADE_CHECK(root.defined(), "to_dot: got an undefined Variable");
  std::string out = "digraph saccade {\n  node [shape=box, fontname=\"monospace\"];\n";
  std::shared_ptr<Node> start = root.gradient_edge();
  if (!start) return out + "}\n";

  std::unordered_map<const Node*, int> id;
  std::vector<const Node*> order;  // nodes in the order they were numbered
  auto number = [&](const Node* n) {
    auto [it, inserted] = id.try_emplace(n, static_cast<int>(order.size()));
    if (inserted) order.push_back(n);
    return inserted;
  };
  number(start.get());
  std::vector<const Node*> stack{start.get()};
  std::string edges;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    const auto& next = n->next();
    // number new inputs in order, then push them in reverse so that input 0 is walked first
    std::vector<const Node*> fresh;
    for (const auto& m : next)
      if (m && number(m.get())) fresh.push_back(m.get());
    stack.insert(stack.end(), fresh.rbegin(), fresh.rend());
    for (size_t i = 0; i < next.size(); ++i) {
      if (!next[i]) continue;
      edges += fmt::format("  n{} -> n{}", id[next[i].get()], id[n]);
      edges += next.size() > 1 ? fmt::format(" [label=\"{}\"];\n", i) : ";\n";
    }
  }
  for (const Node* n : order) {
    std::string style = n->is_accumulator() ? ", style=filled, fillcolor=lightblue"
                        : n == start.get()  ? ", style=bold"
                                            : "";
    out += fmt::format("  n{} [label=\"{}\\n{} {}\"{}];\n", id[n], n->name(), n->output_shape(), n->dtype(),
                       style);
  }
  return out + edges + "}\n";
}

}  // namespace saccade
