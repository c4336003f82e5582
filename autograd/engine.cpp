// The backward engine. Read it in one sitting:
//   1. count, for every node behind the roots, how many edges point at it (its in-degree);
//   2. start from the roots; run a node once all its consumers have handed it their gradient
//      (in-degree reached zero), summing what they handed (gradient_sum.h: in place once the engine owns the
//      sum, recorded under create_graph, a part view's gradient into its part of the input's);
//   3. a node's derivative rule turns its output gradient into one gradient per input, passed down its edges;
//   4. accumulator nodes add into leaf grads (backward; accumulate_grad.h), or the gradients reaching the
//   asked-for nodes are
//      kept and returned (grad; grad_capture.h says which rules run then).
// Rules run with grad mode off, or on under create_graph: then the gradients returned carry the graph of the
// backward pass. No recursion: every pass uses explicit stacks, so a chain of 10^5 ops is fine.
#include "autograd/engine.h"

#include <algorithm>
#include <unordered_map>

#include "autograd/accumulate_grad.h"
#include "autograd/grad_capture.h"
#include "autograd/grad_mode.h"
#include "autograd/gradient_sum.h"
#include "autograd/profiling.h"
#include "ops/elementwise.h"

namespace saccade {

namespace {

// How many edges point at each node reachable from the roots (a root no other root reaches: 0). Iterative
// depth-first walk.
std::unordered_map<Node*, int> count_dependencies(const std::vector<std::shared_ptr<Node>>& roots) {
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack;
  for (const auto& r : roots)
    if (deps.try_emplace(r.get(), 0).second) stack.push_back(r.get());
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

// The derivative rule of `n`, with the engine's checks on what it returns: one gradient per input, each of
// that input's shape, and (in anomaly mode) finite.
std::vector<Variable> apply_rule(Node& n, const Variable& g, bool retain_graph) {
  detail::BackwardRange range(n);  // the profiler's "MatmulBackward" (autograd/profiling.h)
  std::vector<Variable> outs = n.apply(g);
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
      SACCADE_CHECK(all_finite(outs[i].data()),
                    "anomaly mode: backward of {} produced a NaN or Inf for input {}", n.name(), i);
  }
  return outs;
}

}  // namespace

std::vector<Variable> run_backward(const std::vector<std::shared_ptr<Node>>& roots,
                                   const std::vector<Variable>& grads, bool retain_graph, bool create_graph,
                                   const std::vector<std::shared_ptr<Node>>& inputs) {
  SACCADE_CHECK(roots.size() == grads.size(), "backward: {} outputs but {} gradients", roots.size(),
                grads.size());
  for (const auto& r : roots) SACCADE_CHECK(r != nullptr, "backward: nothing requires grad");
  profiler::RecordFunction range("autograd::backward", "autograd");
  AutoGradMode mode(create_graph);  // rules record a graph only under create_graph
  // autocast casts nothing during backward: a gradient stays in the dtype its forward ran in
  AutocastExcludeGuard no_autocast;

  // 1. in-degrees of every node reachable from the roots; for grad(), which nodes lead to an input
  std::unordered_map<Node*, int> deps = count_dependencies(roots);
  detail::GradCapture capture(roots, inputs);

  // 2. Kahn: `ready` holds nodes whose every consumer has run; `pending` the sums handed to waiting nodes
  std::unordered_map<Node*, detail::GradientSum> pending;
  for (size_t i = 0; i < roots.size(); ++i) pending[roots[i].get()].add(grads[i]);
  std::vector<Node*> ready;
  for (const auto& r : roots)
    if (deps[r.get()] == 0 && std::find(ready.begin(), ready.end(), r.get()) == ready.end())
      ready.push_back(r.get());
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    Variable g;
    if (auto it = pending.find(n); it != pending.end()) {
      g = it->second.take();
      pending.erase(it);
    }
    std::vector<Variable> outs;  // stays empty for a node no gradient reached: it still releases its inputs
    if (g.defined()) {
      g = detail::run_hooks(n->hooks(), g);
      if (capture.active()) capture.offer(n, g);
      if (n->is_accumulator()) {  // 4. a leaf (accumulators have no inputs)
        if (!capture.active()) detail::accumulate_into_leaf(*n, std::move(g));
        continue;
      }
      if (capture.must_run(*n)) outs = apply_rule(*n, g, retain_graph);  // 3. the derivative rule
    }
    for (size_t i = 0; i < n->next().size(); ++i) {
      Node* next = n->next()[i].get();
      if (!next) continue;
      if (!outs.empty() && outs[i].defined()) pending[next].add(std::move(outs[i]), *n, *next);
      if (--deps[next] == 0) ready.push_back(next);
    }
  }
  return capture.results();
}

}  // namespace saccade
