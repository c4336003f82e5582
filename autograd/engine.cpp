// The backward engine. Read it in one sitting:
//   1. count, for every node behind the roots, how many edges point at it (its in-degree);
//   2. start from the roots; run a node once all its consumers have handed it their gradient
//      (in-degree reached zero), summing what they handed;
//   3. a node's derivative rule turns its output gradient into one gradient per input, passed down its edges;
//   4. accumulator nodes add into leaf grads (backward), or the gradients reaching the asked-for nodes are
//      kept and returned (grad).
// Rules run with grad mode off, or on under create_graph: then each sum below is a recorded add too, and the
// gradients returned carry the graph of the backward pass.
// Sums are made in place once the engine owns the sum (it allocated it) and no graph is recorded; a gradient
// a rule returned is never written, since rules may hand one tensor to several inputs. A view of part of its
// input (Node::part) hands on only its part, which is added into that part of the input's gradient.
// No recursion: every pass uses explicit stacks, so a chain of 10^5 ops is fine.
#include "autograd/engine.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "autograd/function.h"
#include "autograd/functions/elementwise.h"
#include "autograd/grad_mode.h"
#include "autograd/profiling.h"
#include "ops/creation.h"
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

// For grad(): whether each node is, or leads to, one of the asked-for nodes (a node whose rule runs a
// backward of its own may lead anywhere). Only nodes with an edge to such a node run their rule. Iterative
// post-order walk (the graph is acyclic, so a child is never on the stack).
std::unordered_map<Node*, bool> reaching(const std::vector<std::shared_ptr<Node>>& roots,
                                         const std::unordered_map<Node*, Variable>& wanted) {
  std::unordered_map<Node*, bool> reaches;
  std::vector<std::pair<Node*, size_t>> stack;
  for (const auto& r : roots)
    if (reaches.try_emplace(r.get(), false).second) stack.push_back({r.get(), 0});
  while (!stack.empty()) {
    auto [n, i] = stack.back();
    if (i < n->next().size()) {
      ++stack.back().second;
      Node* c = n->next()[i].get();
      if (c && reaches.try_emplace(c, false).second) stack.push_back({c, 0});
      continue;
    }
    bool r = wanted.count(n) > 0 || n->runs_backward();
    for (const auto& c : n->next()) r = r || (c && reaches[c.get()]);
    reaches[n] = r;
    stack.pop_back();
  }
  return reaches;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.storage() == b.storage() && a.offset() == b.offset() && a.shape() == b.shape() &&
         a.strides() == b.strides();
}

// The hooks registered on a node (Variable::register_hook, retain_grad) rewrite the gradient arriving there.
// NOTE: hooks map Tensors; a hook that returns a new tensor cuts the history of a create_graph gradient.
Variable run_hooks(std::vector<Node::Hook>& hooks, Variable g) {
  for (auto& hook : hooks) {
    Tensor h = hook(g.data());
    if (!same_tensor(h, g.data())) g = Variable(std::move(h));
  }
  return g;
}

// A leaf's accumulator: run the leaf's own hooks, then add into its grad (the first gradient is copied:
// g may be shared with other leaves or with the caller). Nothing happens once the leaf is gone.
// NOTE: the leaf's grad is a Tensor: under create_graph it holds the values, not their graph (use grad()).
void accumulate_into_leaf(const Node& accumulator, const Variable& g) {
  std::shared_ptr<VariableImpl> leaf = accumulator.leaf();
  if (!leaf) return;  // nobody can read this gradient
  Tensor h = run_hooks(leaf->hooks, g).data();
  leaf->grad = leaf->grad.defined() ? ops::add(leaf->grad, h) : h.contiguous().clone();
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

// Under create_graph, a part view's gradient placed into zeros of the whole input, recorded: its rule picks
// the part back out, and that one's rule places it again (so every order of derivative exists).
Variable part_of(const Variable& whole, const Node::PartFn& part);
Variable embed_part(const Variable& g, const Shape& whole, const Node::PartFn& part) {
  Tensor z = ops::zeros(whole, g.dtype(), g.device());
  Tensor dst = part(z);
  ops::add_(dst, g.data());
  return make_result("part_backward", z, {g},
                     [part](const Variable& gz) -> std::vector<Variable> { return {part_of(gz, part)}; });
}
Variable part_of(const Variable& whole, const Node::PartFn& part) {
  Shape s = whole.shape();
  return make_result(
      "part", part(whole.data()), {whole},
      [s, part](const Variable& g) -> std::vector<Variable> { return {embed_part(g, s, part)}; });
}

// The gradient summed so far for a node that still waits for some of its consumers.
struct PendingGrad {
  Variable sum;
  bool owned = false;  // allocated by the engine, so adding into it in place changes nothing else
};

// Adds `g` into a pending sum: recorded under create_graph, else in place once the engine owns the sum.
void add_into(PendingGrad& acc, Variable g) {
  if (!acc.sum.defined()) {
    acc.sum = std::move(g);  // not owned: the rule may have handed the same tensor elsewhere
  } else if (grad_enabled()) {
    acc.sum = add(acc.sum, g);
  } else if (acc.owned) {
    Tensor s = acc.sum.data();
    ops::add_(s, g.data());
  } else {
    acc.sum = Variable(ops::add(acc.sum.data(), g.data()));
    acc.owned = true;
  }
}

// Adds `g`, the gradient `from` hands to its input `to`, into that input's pending sum.
void accumulate(PendingGrad& acc, Variable g, const Node& from, const Node& to) {
  const Node::PartFn& part = from.part();
  if (!part) return add_into(acc, std::move(g));
  // g covers part(input) only
  if (grad_enabled()) return add_into(acc, embed_part(g, to.output_shape(), part));
  if (!acc.sum.defined()) {
    acc.sum = Variable(ops::zeros(to.output_shape(), g.dtype(), g.device()));
  } else if (!acc.owned) {
    acc.sum = Variable(acc.sum.data().clone());
  }
  acc.owned = true;
  Tensor dst = part(acc.sum.data());
  ops::add_(dst, g.data());
}

// The pass running in this thread: for grad(), the nodes it asked for and the gradients found so far (a
// rule that runs a backward of its own adds into them: backward_in_rule); null pointers for backward().
struct Pass {
  const std::vector<std::shared_ptr<Node>>* wanted = nullptr;
  std::unordered_map<Node*, Variable>* captured = nullptr;
};
thread_local Pass g_pass;

class PassScope {
 public:
  explicit PassScope(Pass p) : prev_(g_pass) { g_pass = p; }
  ~PassScope() { g_pass = prev_; }
  PassScope(const PassScope&) = delete;
  PassScope& operator=(const PassScope&) = delete;

 private:
  Pass prev_;
};

// A gradient that reached an asked-for node, added to what reached it before (through a rule's own backward).
void capture_into(Variable& slot, const Variable& g) { slot = slot.defined() ? add(slot, g) : g; }

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
  const bool capture = !inputs.empty();
  std::unordered_map<Node*, Variable> captured;
  for (const auto& in : inputs) captured.try_emplace(in.get());
  std::unordered_map<Node*, bool> reaches;
  if (capture) reaches = reaching(roots, captured);
  PassScope pass(capture ? Pass{&inputs, &captured} : Pass{});

  // 2. Kahn: `ready` holds nodes whose every consumer has run; `pending` the sums handed to waiting nodes
  std::unordered_map<Node*, PendingGrad> pending;
  for (size_t i = 0; i < roots.size(); ++i) add_into(pending[roots[i].get()], grads[i]);
  std::vector<Node*> ready;
  for (const auto& r : roots)
    if (deps[r.get()] == 0 && std::find(ready.begin(), ready.end(), r.get()) == ready.end())
      ready.push_back(r.get());
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    Variable g;
    if (auto it = pending.find(n); it != pending.end()) {
      g = std::move(it->second.sum);
      pending.erase(it);
    }
    std::vector<Variable> outs;  // stays empty for a node no gradient reached: it still releases its inputs
    if (g.defined()) {
      g = run_hooks(n->hooks(), g);
      if (capture) {
        if (auto it = captured.find(n); it != captured.end()) capture_into(it->second, g);
      } else if (n->is_accumulator()) {  // 4. a leaf (accumulators have no inputs)
        accumulate_into_leaf(*n, g);
        continue;
      }
      bool run = !n->is_accumulator();
      if (capture && run) {
        run = n->runs_backward();
        for (const auto& c : n->next()) run = run || (c && reaches[c.get()]);
      }
      if (run) outs = apply_rule(*n, g, retain_graph);  // 3. the derivative rule
    }
    for (size_t i = 0; i < n->next().size(); ++i) {
      Node* next = n->next()[i].get();
      if (!next) continue;
      if (!outs.empty() && outs[i].defined()) accumulate(pending[next], std::move(outs[i]), *n, *next);
      if (--deps[next] == 0) ready.push_back(next);
    }
  }
  std::vector<Variable> result;
  for (const auto& in : inputs) result.push_back(captured[in.get()]);
  return result;
}

std::vector<Variable> backward_in_rule(const Variable& output, const Variable& grad,
                                       const std::vector<Variable>& leaves) {
  const Pass outer = g_pass;
  std::vector<Variable> result(leaves.size());
  if (!output.requires_grad()) return result;
  if (!outer.wanted) {  // backward(): every leaf accumulates, those standing for the inputs too
    run_backward({output.gradient_edge()}, {grad}, false, false);
    for (size_t i = 0; i < leaves.size(); ++i)
      if (leaves[i].requires_grad() && leaves[i].grad().defined()) result[i] = Variable(leaves[i].grad());
    return result;
  }
  // grad(): capture the input leaves and the nodes the enclosing grad() asked for, accumulate nothing
  std::vector<std::shared_ptr<Node>> nodes;
  std::vector<size_t> slot(leaves.size(), SIZE_MAX);
  for (size_t i = 0; i < leaves.size(); ++i)
    if (leaves[i].requires_grad()) slot[i] = nodes.size(), nodes.push_back(leaves[i].gradient_edge());
  const size_t first_wanted = nodes.size();
  nodes.insert(nodes.end(), outer.wanted->begin(), outer.wanted->end());
  std::vector<Variable> got = run_backward({output.gradient_edge()}, {grad}, false, false, nodes);
  for (size_t i = 0; i < leaves.size(); ++i)
    if (slot[i] != SIZE_MAX) result[i] = got[slot[i]];
  for (size_t j = first_wanted; j < nodes.size(); ++j)
    if (got[j].defined()) capture_into((*outer.captured)[nodes[j].get()], got[j]);
  return result;
}

}  // namespace saccade
