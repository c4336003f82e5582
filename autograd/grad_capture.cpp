// The gradients saccade::grad captures at the nodes it asked for (see grad_capture.h).
#include "autograd/grad_capture.h"

#include <cstdint>

#include "autograd/engine.h"
#include "autograd/gradient_sum.h"

namespace saccade::detail {

namespace {

thread_local GradCapture* g_current = nullptr;

// Whether each node is, or leads to, one of the asked-for nodes (a node whose rule runs a backward of its
// own may lead anywhere). Iterative post-order walk (the graph is acyclic, so a child is never on the stack).
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

}  // namespace

GradCapture::GradCapture(const std::vector<std::shared_ptr<Node>>& roots,
                         const std::vector<std::shared_ptr<Node>>& wanted)
    : wanted_(wanted), enclosing_(g_current) {
  for (const auto& w : wanted) captured_.try_emplace(w.get());
  if (active()) reaches_ = reaching(roots, captured_);
  g_current = this;
}

GradCapture::~GradCapture() { g_current = enclosing_; }

GradCapture* GradCapture::current() { return g_current; }

void GradCapture::offer(Node* n, const Variable& g) {
  if (auto it = captured_.find(n); it != captured_.end()) add_captured(it->second, g);
}

bool GradCapture::must_run(const Node& n) const {
  if (!active() || n.runs_backward()) return true;
  for (const auto& c : n.next())
    if (auto it = c ? reaches_.find(c.get()) : reaches_.end(); it != reaches_.end() && it->second)
      return true;
  return false;
}

std::vector<Variable> GradCapture::results() const {
  std::vector<Variable> result;
  for (const auto& w : wanted_) result.push_back(captured_.at(w.get()));
  return result;
}

}  // namespace saccade::detail

namespace saccade {

std::vector<Variable> backward_in_rule(const Variable& output, const Variable& grad,
                                       const std::vector<Variable>& leaves) {
  detail::GradCapture* outer = detail::GradCapture::current();
  std::vector<Variable> result(leaves.size());
  if (!output.requires_grad()) return result;
  if (!outer || !outer->active()) {  // backward(): every leaf accumulates, those standing for the inputs too
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
  nodes.insert(nodes.end(), outer->wanted().begin(), outer->wanted().end());
  std::vector<Variable> got = run_backward({output.gradient_edge()}, {grad}, false, false, nodes);
  for (size_t i = 0; i < leaves.size(); ++i)
    if (slot[i] != SIZE_MAX) result[i] = got[slot[i]];
  for (size_t j = first_wanted; j < nodes.size(); ++j)
    if (got[j].defined()) outer->offer(nodes[j].get(), got[j]);
  return result;
}

}  // namespace saccade
