// Node: running a derivative rule, accumulator nodes for leaves, and the iterative destruction of long
// chains.
#include "autograd/node.h"

#include "autograd/variable.h"

namespace saccade {

Node::~Node() {
  // Unlink the chain behind this node without recursion: a node whose only owner is us is moved onto an
  // explicit stack and emptied before it dies, so each destructor finds nothing left to recurse into.
  // A rule's closure may hold saved input Variables, and through them the nodes behind: it dies first, so
  // that those nodes are owned by next_ alone.
  std::vector<std::shared_ptr<Node>> stack;
  fn_ = nullptr;
  auto take = [&stack](std::vector<std::shared_ptr<Node>>& v) {
    for (auto& n : v)
      if (n && n.use_count() == 1) stack.push_back(std::move(n));
    v.clear();
  };
  take(next_);
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    n->fn_ = nullptr;
    take(n->next_);
  }
}

namespace {
thread_local Node* g_current = nullptr;
}

Node* Node::current() { return g_current; }

std::vector<Variable> Node::apply(const Variable& grad_output) {
  SACCADE_CHECK(fn_ != nullptr,
                "backward through {}: its saved tensors were already freed by an earlier backward; pass "
                "retain_graph=true to the first backward to run it twice",
                name_);
  struct Current {  // restored on exit, also when the rule throws (rules may run the engine again)
    Node* prev;
    explicit Current(Node* n) : prev(g_current) { g_current = n; }
    ~Current() { g_current = prev; }
  } current(this);
  return fn_(grad_output);
}

std::shared_ptr<Node> Node::make_accumulator(const std::shared_ptr<VariableImpl>& leaf) {
  auto n = std::make_shared<Node>("AccumulateGrad", std::vector<std::shared_ptr<Node>>{}, nullptr,
                                  leaf->data.shape(), leaf->data.dtype(), leaf->data.device());
  n->leaf_ = leaf;
  n->is_accumulator_ = true;
  return n;
}

}  // namespace saccade
