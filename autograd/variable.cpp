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

void Variable::backward(const Tensor& gradient, bool retain_graph) const {
  SACCADE_CHECK(impl_ != nullptr, "backward: undefined Variable");
  SACCADE_CHECK(requires_grad(), "backward: the Variable (shape {}) does not require grad and has no grad_fn",
                shape());
  Tensor g = gradient;
  if (!g.defined()) {
    SACCADE_CHECK(numel() == 1,
                  "backward: a gradient can be created implicitly only for one-element results, got shape {}",
                  shape());
    g = ops::ones_like(data());
  }
  SACCADE_CHECK(g.shape() == shape(), "backward: gradient of shape {} for a result of shape {}", g.shape(),
                shape());
  SACCADE_CHECK(g.device() == device(), "backward: gradient on {} for a result on {}", g.device(), device());
  run_backward(gradient_edge(), g.to(dtype()), retain_graph);
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
