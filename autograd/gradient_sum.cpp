// Summing the gradients that meet at a node: in place, recorded, or into a part (see gradient_sum.h).
#include "autograd/gradient_sum.h"

#include "autograd/function.h"
#include "autograd/functions/elementwise.h"
#include "autograd/grad_mode.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace saccade::detail {

namespace {

// Under create_graph, a part view's gradient placed into zeros of the whole input, recorded: its rule picks
// the part back out, and that one's rule places it again (so every order of derivative exists).
Variable part_of(const Variable& whole, const Node::PartFn& part);
Variable embed_part(const Variable& g, const Shape& whole, const Node::PartFn& part) {
  OpScope op(op_info::part_backward, g);
  Tensor z = ops::zeros(whole, g.dtype(), g.device());
  Tensor dst = part(z);
  ops::add_(dst, g.data());
  return make_result(op, z, {g},
                     [part](const Variable& gz) -> std::vector<Variable> { return {part_of(gz, part)}; });
}
Variable part_of(const Variable& whole, const Node::PartFn& part) {
  OpScope op(op_info::part, whole);
  Shape s = whole.shape();
  return make_result(op, part(whole.data()), {whole}, [s, part](const Variable& g) -> std::vector<Variable> {
    return {embed_part(g, s, part)};
  });
}

}  // namespace

void GradientSum::add(Variable g) {
  if (!sum_.defined()) {
    sum_ = std::move(g);  // not owned: the rule may have handed the same tensor elsewhere
  } else if (grad_enabled()) {
    sum_ = saccade::add(sum_, g);
  } else if (owned_) {
    Tensor s = sum_.data();
    ops::add_(s, g.data());
  } else {
    sum_ = Variable(ops::add(sum_.data(), g.data()));
    owned_ = true;
  }
}

void GradientSum::add(Variable g, const Node& from, const Node& to) {
  const Node::PartFn& part = from.part();
  if (!part) return add(std::move(g));
  // g covers part(input) only
  if (grad_enabled()) return add(embed_part(g, to.output_shape(), part));
  if (!sum_.defined()) {
    sum_ = Variable(ops::zeros(to.output_shape(), g.dtype(), g.device()));
  } else if (!owned_) {
    sum_ = Variable(sum_.data().clone());
  }
  owned_ = true;
  Tensor dst = part(sum_.data());
  ops::add_(dst, g.data());
}

void add_captured(Variable& slot, const Variable& g) { slot = slot.defined() ? saccade::add(slot, g) : g; }

}  // namespace saccade::detail
