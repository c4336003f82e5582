// A gradient's arrival: hooks, and a leaf's grad (accumulate_grad.h).
#include "autograd/accumulate_grad.h"

#include "autograd/grad_mode.h"
#include "ops/elementwise.h"

namespace saccade::detail {

namespace {

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.storage() == b.storage() && a.offset() == b.offset() && a.shape() == b.shape() &&
         a.strides() == b.strides();
}

// Whether the leaf may keep `h` itself as its first gradient instead of a copy (PyTorch's AccumulateGrad
// "steals" it the same way): nothing records a graph, and no one else can see h's memory, that is, the only
// references are the engine's Variable `g` (its one Tensor) and `h`, and h covers its whole storage
// contiguously. A gradient that a rule also handed to another input, saved, or that the caller passed to
// backward() has more references and is copied.
bool can_keep(const Variable& g, const Tensor& h) {
  return !grad_enabled() && g.impl().use_count() == 1 && same_tensor(g.data(), h) &&
         h.storage().use_count() == 2 && h.is_contiguous() && h.offset() == 0 &&
         size_t(h.numel()) * h.itemsize() == h.storage()->nbytes();
}

}  // namespace

Variable run_hooks(std::vector<Node::Hook>& hooks, Variable g) {
  for (auto& hook : hooks) {
    Tensor h = hook(g.data());
    if (!same_tensor(h, g.data())) g = Variable(std::move(h));
  }
  return g;
}

void accumulate_into_leaf(const Node& accumulator, Variable g) {
  std::shared_ptr<VariableImpl> leaf = accumulator.leaf();
  if (!leaf) return;  // nobody can read this gradient
  g = run_hooks(leaf->hooks, std::move(g));
  Tensor h = g.data();
  if (leaf->grad.defined())
    leaf->grad = ops::add(leaf->grad, h);
  else
    leaf->grad = can_keep(g, h) ? std::move(h) : h.contiguous().clone();
}

}  // namespace saccade::detail
