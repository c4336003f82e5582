// Variable: the handle users hold. The graph logic lives in node.cpp and engine.cpp; Variable::to, a
// differentiable op, is recorded with the other rules (functions/elementwise.cpp).
#include "autograd/variable.h"

#include "autograd/engine.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace saccade {

Variable::Variable(Tensor data, bool requires_grad) : impl_(std::make_shared<VariableImpl>()) {
  SACCADE_CHECK(!requires_grad || is_floating(data.dtype()),
                "Variable: only float tensors can require grad, got {} of shape {}", data.dtype(),
                data.shape());
  impl_->data = std::move(data);
  impl_->requires_grad = requires_grad;
}

Variable Variable::make_result(Tensor data, std::shared_ptr<Node> grad_fn) {
  Variable v;
  v.impl_ = std::make_shared<VariableImpl>();
  v.impl_->data = std::move(data);
  v.impl_->requires_grad = true;
  v.impl_->grad_fn = std::move(grad_fn);
  return v;
}

static const Tensor kUndefined;
static const std::shared_ptr<Node> kNoNode;

const Tensor& Variable::data() const {
  SACCADE_CHECK(impl_ != nullptr, "Variable: used an undefined Variable");
  return impl_->data;
}

Variable& Variable::requires_grad_(bool value) {
  SACCADE_CHECK(impl_ != nullptr, "requires_grad_: undefined Variable");
  SACCADE_CHECK(is_leaf(), "requires_grad_: can only change requires_grad of a leaf (shape {})", shape());
  SACCADE_CHECK(!value || is_floating(dtype()), "requires_grad_: only float tensors can require grad, got {}",
                dtype());
  impl_->requires_grad = value;
  return *this;
}

const std::shared_ptr<Node>& Variable::grad_fn() const { return impl_ ? impl_->grad_fn : kNoNode; }
const Tensor& Variable::grad() const { return impl_ ? impl_->grad : kUndefined; }

void Variable::set_grad(const Tensor& g) {
  SACCADE_CHECK(impl_ != nullptr, "set_grad: undefined Variable");
  SACCADE_CHECK(!g.defined() || g.shape() == shape(),
                "set_grad: gradient of shape {} for a Variable of shape {}", g.shape(), shape());
  impl_->grad = g;
}

void Variable::zero_grad() {
  if (impl_) impl_->grad = Tensor();
}

void Variable::retain_grad() {
  SACCADE_CHECK(requires_grad(), "retain_grad: the Variable (shape {}) does not require grad", shape());
  if (is_leaf() || impl_->retains_grad) return;
  impl_->retains_grad = true;
  std::weak_ptr<VariableImpl> weak = impl_;
  impl_->grad_fn->hooks().push_back([weak](const Tensor& g) {
    if (auto self = weak.lock()) self->grad = self->grad.defined() ? ops::add(self->grad, g) : g.clone();
    return g;
  });
}

std::shared_ptr<Node> Variable::gradient_edge() const {
  if (!impl_ || !impl_->requires_grad) return nullptr;
  if (impl_->grad_fn) return impl_->grad_fn;
  const std::shared_ptr<Node>& acc = impl_->accumulator;
  // (re)made when missing or when the leaf's data changed dtype, device or shape (Module::to)
  if (!acc || acc->dtype() != impl_->data.dtype() || acc->device() != impl_->data.device() ||
      !(acc->output_shape() == impl_->data.shape()))
    impl_->accumulator = Node::make_accumulator(impl_);
  return impl_->accumulator;
}

// dL/d output for `out`: `gradient`, or 1 for a one-element output; checked and cast to the output's dtype.
static Variable seed_gradient(const char* op, const Variable& out, const Variable& gradient) {
  if (!gradient.defined() || !gradient.data().defined()) {  // Variable() or Variable(Tensor())
    SACCADE_CHECK(out.numel() == 1,
                  "{}: a gradient can be created implicitly only for one-element results, got shape {}", op,
                  out.shape());
    return Variable(ops::ones_like(out.data()));
  }
  SACCADE_CHECK(gradient.shape() == out.shape(), "{}: gradient of shape {} for a result of shape {}", op,
                gradient.shape(), out.shape());
  SACCADE_CHECK(gradient.device() == out.device(), "{}: gradient on {} for a result on {}", op,
                gradient.device(), out.device());
  return gradient.to(out.dtype());
}

void Variable::backward(const Variable& gradient, std::optional<bool> retain_graph, bool create_graph) const {
  SACCADE_CHECK(impl_ != nullptr, "backward: undefined Variable");
  SACCADE_CHECK(requires_grad(), "backward: the Variable (shape {}) does not require grad and has no grad_fn",
                shape());
  run_backward({gradient_edge()}, {seed_gradient("backward", *this, gradient)},
               retain_graph.value_or(create_graph), create_graph);
}

std::vector<Variable> grad(const std::vector<Variable>& outputs, const std::vector<Variable>& inputs,
                           const std::vector<Variable>& grad_outputs, std::optional<bool> retain_graph,
                           bool create_graph, bool allow_unused) {
  SACCADE_CHECK(!outputs.empty() && !inputs.empty(),
                "grad: got {} outputs and {} inputs; need at least one each", outputs.size(), inputs.size());
  SACCADE_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
                "grad: {} grad_outputs for {} outputs", grad_outputs.size(), outputs.size());
  std::vector<std::shared_ptr<Node>> roots, edges;
  std::vector<Variable> seeds;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Variable& out = outputs[i];
    SACCADE_CHECK(out.defined() && out.requires_grad(),
                  "grad: output {} does not require grad (no input it depends on requires grad)", i);
    roots.push_back(out.gradient_edge());
    seeds.push_back(seed_gradient("grad", out, grad_outputs.empty() ? Variable() : grad_outputs[i]));
  }
  for (size_t j = 0; j < inputs.size(); ++j) {
    SACCADE_CHECK(inputs[j].defined() && inputs[j].requires_grad(), "grad: input {} does not require grad",
                  j);
    edges.push_back(inputs[j].gradient_edge());
  }
  std::vector<Variable> result =
      run_backward(roots, seeds, retain_graph.value_or(create_graph), create_graph, edges);
  for (size_t j = 0; j < result.size(); ++j)
    SACCADE_CHECK(allow_unused || result[j].defined(),
                  "grad: input {} (shape {}) was not used to compute the outputs; pass allow_unused=true to "
                  "get an undefined gradient for it",
                  j, inputs[j].shape());
  return result;
}

Variable Variable::detach() const { return Variable(data(), false); }

void Variable::register_hook(Node::Hook hook) {
  SACCADE_CHECK(requires_grad(), "register_hook: the Variable (shape {}) does not require grad", shape());
  if (is_leaf()) {
    impl_->hooks.push_back(std::move(hook));
  } else {
    impl_->grad_fn->hooks().push_back(std::move(hook));
  }
}

}  // namespace saccade
