// The backward engine. Read it in one sitting:
//   1. count, for every node behind the root, how many edges point at it (its in-degree);
//   2. start from the root; run a node once all its consumers have handed it their gradient
//      (in-degree reached zero), summing what they handed;
//   3. a node's derivative rule turns its output gradient into one gradient per input, passed down its edges;
//   4. accumulator nodes add into leaf grads.
// No recursion: both passes use explicit stacks, so a chain of 10^5 ops is fine.
#include "autograd/engine.h"

#include <unordered_map>

#include "autograd/grad_mode.h"
#include "ops/elementwise.h"

namespace saccade {

void run_backward(const std::shared_ptr<Node>& root, const Tensor& grad, bool retain_graph) {
  SACCADE_CHECK(root != nullptr, "backward: nothing requires grad");
  NoGradGuard no_grad;  // derivative rules compute with ops; they record nothing

  // 1. in-degrees of every node reachable from the root
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack{root.get()};
  deps[root.get()] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const auto& next : n->next()) {
      if (!next) continue;
      auto [it, inserted] = deps.try_emplace(next.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(next.get());
    }
  }

  // 2. Kahn: `ready` holds nodes whose every consumer has run
  std::unordered_map<Node*, Tensor> grads;
  grads[root.get()] = grad;
  std::vector<Node*> ready{root.get()};
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    Tensor g;
    if (auto it = grads.find(n); it != grads.end()) {
      g = std::move(it->second);
      grads.erase(it);
    }
    std::vector<Tensor> outs;
    if (g.defined()) {  // a node no gradient reached still releases its inputs' in-degrees below
      for (auto& hook : n->hooks()) g = hook(g);
      if (n->is_accumulator()) {
        std::shared_ptr<VariableImpl> owner = n->leaf();
        if (!owner) continue;  // the leaf is gone: nobody can read this gradient
        VariableImpl& leaf = *owner;
        for (auto& hook : leaf.hooks) g = hook(g);
        // first gradient: a private copy (g may be shared with other leaves or the caller)
        leaf.grad = leaf.grad.defined() ? ops::add(leaf.grad, g) : g.contiguous().clone();
        continue;
      }
      // 3. the derivative rule
      outs = n->apply(g);
      if (!retain_graph) n->release();
      SACCADE_CHECK(outs.size() == n->next().size(), "backward of {}: returned {} gradients for {} inputs",
                    n->name(), outs.size(), n->next().size());
    }
    for (size_t i = 0; i < n->next().size(); ++i) {
      Node* next = n->next()[i].get();
      if (!next) continue;
      if (!outs.empty() && outs[i].defined()) {
        SACCADE_CHECK(outs[i].shape() == next->output_shape(),
                      "backward of {}: gradient of shape {} for input {} of shape {}", n->name(),
                      outs[i].shape(), i, next->output_shape());
        if (anomaly_mode_enabled())
          SACCADE_CHECK(all_finite(outs[i]),
                        "anomaly mode: backward of {} produced a NaN or Inf for input {}", n->name(), i);
        Tensor& acc = grads[next];
        acc = acc.defined() ? ops::add(acc, outs[i]) : std::move(outs[i]);
      }
      if (--deps[next] == 0) ready.push_back(next);
    }
  }
}

}  // namespace saccade
