// The backward engine. Read it in one sitting:
//   1. count, for every node behind the root, how many edges point at it (its in-degree);
//   2. start from the root; run a node once all its consumers have handed it their gradient
//      (in-degree reached zero), summing what they handed;
//   3. a node's derivative rule turns its output gradient into one gradient per input, passed down its edges;
//   4. accumulator nodes add into leaf grads.
// Sums are made in place once the engine owns the sum (it allocated it); a gradient a rule returned is never
// written, since rules may hand one tensor to several inputs. A view of part of its input (Node::part) hands
// on only its part, which is added into that part of the input's gradient.
// No recursion: both passes use explicit stacks, so a chain of 10^5 ops is fine.
#include "autograd/engine.h"

#include <unordered_map>

#include "autograd/grad_mode.h"
#include "autograd/profiling.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace saccade {

namespace {

// How many edges point at each node reachable from `root` (the root itself: 0). Iterative depth-first walk.
std::unordered_map<Node*, int> count_dependencies(Node* root) {
  std::unordered_map<Node*, int> deps{{root, 0}};
  std::vector<Node*> stack{root};
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
  return deps;
}

// The hooks registered on a node (Variable::register_hook, retain_grad) rewrite the gradient arriving there.
Tensor run_hooks(std::vector<Node::Hook>& hooks, Tensor g) {
  for (auto& hook : hooks) g = hook(g);
  return g;
}

// A leaf's accumulator: run the leaf's own hooks, then add into its grad (the first gradient is copied:
// g may be shared with other leaves or with the caller). Nothing happens once the leaf is gone.
void accumulate_into_leaf(const Node& accumulator, const Tensor& g) {
  std::shared_ptr<VariableImpl> leaf = accumulator.leaf();
  if (!leaf) return;  // nobody can read this gradient
  Tensor h = run_hooks(leaf->hooks, g);
  leaf->grad = leaf->grad.defined() ? ops::add(leaf->grad, h) : h.contiguous().clone();
}

// The derivative rule of `n`, with the engine's checks on what it returns: one gradient per input, each of
// that input's shape, and (in anomaly mode) finite.
std::vector<Tensor> apply_rule(Node& n, const Tensor& g, bool retain_graph) {
  detail::BackwardRange range(n);  // the profiler's "MatmulBackward" (autograd/profiling.h)
  std::vector<Tensor> outs = n.apply(g);
  if (!retain_graph) n.release();
  SACCADE_CHECK(outs.size() == n.next().size(), "backward of {}: returned {} gradients for {} inputs",
                n.name(), outs.size(), n.next().size());
  for (size_t i = 0; i < outs.size(); ++i) {
    const Node* next = n.next()[i].get();
    if (!next || !outs[i].defined()) continue;
    // a part view's rule returns the gradient of its part: its own output's shape
    const Shape& want = n.part() ? n.output_shape() : next->output_shape();
    SACCADE_CHECK(outs[i].shape() == want, "backward of {}: gradient of shape {} for input {} of shape {}",
                  n.name(), outs[i].shape(), i, want);
    // as PyTorch's validate_outputs: a gradient comes back in its input's dtype (a rule that computed in
    // float32 for a 16-bit input is rounded here, once)
    const DType want_dtype = n.part() ? n.dtype() : next->dtype();
    if (outs[i].dtype() != want_dtype) outs[i] = outs[i].to(want_dtype);
    if (anomaly_mode_enabled())
      SACCADE_CHECK(all_finite(outs[i]), "anomaly mode: backward of {} produced a NaN or Inf for input {}",
                    n.name(), i);
  }
  return outs;
}

// The gradient summed so far for a node that still waits for some of its consumers.
struct PendingGrad {
  Tensor sum;
  bool owned = false;  // allocated by the engine, so adding into it in place changes nothing else
};

// Adds `g`, the gradient `from` hands to its input `to`, into that input's pending sum.
void accumulate(PendingGrad& acc, Tensor g, const Node& from, const Node& to) {
  if (const Node::PartFn& part = from.part()) {  // g covers part(input) only
    if (!acc.sum.defined()) {
      acc.sum = ops::zeros(to.output_shape(), g.dtype(), g.device());
    } else if (!acc.owned) {
      acc.sum = acc.sum.clone();
    }
    acc.owned = true;
    Tensor dst = part(acc.sum);
    ops::add_(dst, g);
  } else if (!acc.sum.defined()) {
    acc.sum = std::move(g);  // not owned: the rule may have handed the same tensor elsewhere
  } else if (acc.owned) {
    ops::add_(acc.sum, g);
  } else {
    acc.sum = ops::add(acc.sum, g);
    acc.owned = true;
  }
}

}  // namespace

void run_backward(const std::shared_ptr<Node>& root, const Tensor& grad, bool retain_graph) {
  SACCADE_CHECK(root != nullptr, "backward: nothing requires grad");
  profiler::RecordFunction range("autograd::backward", "autograd");
  NoGradGuard no_grad;  // derivative rules compute with ops; they record nothing
  // autocast casts nothing during backward: a gradient stays in the dtype its forward ran in
  AutocastExcludeGuard no_autocast;

  // 1. in-degrees of every node reachable from the root
  std::unordered_map<Node*, int> deps = count_dependencies(root.get());

  // 2. Kahn: `ready` holds nodes whose every consumer has run; `grads` the sums handed to waiting nodes
  std::unordered_map<Node*, PendingGrad> grads{{root.get(), {grad}}};
  std::vector<Node*> ready{root.get()};
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    Tensor g;
    if (auto it = grads.find(n); it != grads.end()) {
      g = std::move(it->second.sum);
      grads.erase(it);
    }
    std::vector<Tensor> outs;  // stays empty for a node no gradient reached: it still releases its inputs
    if (g.defined()) {
      g = run_hooks(n->hooks(), g);
      if (n->is_accumulator()) {  // 4. a leaf (accumulators have no inputs)
        accumulate_into_leaf(*n, g);
        continue;
      }
      outs = apply_rule(*n, g, retain_graph);  // 3. the derivative rule
    }
    for (size_t i = 0; i < n->next().size(); ++i) {
      Node* next = n->next()[i].get();
      if (!next) continue;
      if (!outs.empty() && outs[i].defined()) accumulate(grads[next], std::move(outs[i]), *n, *next);
      if (--deps[next] == 0) ready.push_back(next);
    }
  }
}

}  // namespace saccade
