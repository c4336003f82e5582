// Node, SavedTensor, make_result: how one op records itself.
#include "autograd/node.h"

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace saccade {

const Tensor& SavedTensor::get() const {
  SACCADE_CHECK(t_.version() == version_,
                "{}: a tensor of shape {} saved for backward was modified by an in-place operation "
                "(version {} at save, now {}); compute on a copy instead",
                op_, t_.shape(), version_, t_.version());
  return t_;
}

Node::~Node() {
  // Unlink the chain behind this node without recursion: a node whose only owner is us is moved onto an
  // explicit stack and emptied before it dies, so each destructor finds nothing left to recurse into.
  std::vector<std::shared_ptr<Node>> stack;
  auto take = [&stack](std::vector<std::shared_ptr<Node>>& v) {
    for (auto& n : v)
      if (n && n.use_count() == 1) stack.push_back(std::move(n));
    v.clear();
  };
  take(next_);
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    take(n->next_);
  }
}

std::vector<Tensor> Node::apply(const Tensor& grad_output) {
  SACCADE_CHECK(fn_ != nullptr,
                "backward through {}: its saved tensors were already freed by an earlier backward; pass "
                "retain_graph=true to the first backward to run it twice",
                name_);
  return fn_(grad_output);
}

std::shared_ptr<Node> Node::make_accumulator(const std::shared_ptr<VariableImpl>& leaf) {
  auto n = std::make_shared<Node>("AccumulateGrad", std::vector<std::shared_ptr<Node>>{}, nullptr,
                                  leaf->data.shape(), leaf->data.dtype(), leaf->data.device());
  n->leaf_ = leaf;
  n->is_accumulator_ = true;
  return n;
}

static Variable record(const char* op, Tensor result, const Variable* inputs, size_t n,
                       Node::BackwardFn backward) {
  if (anomaly_mode_enabled())
    SACCADE_CHECK(all_finite(result),
                  "anomaly mode: {} produced a NaN or Inf in its forward result of shape {}", op,
                  result.shape());
  bool any = false;
  if (grad_enabled())
    for (size_t i = 0; i < n; ++i) any = any || (inputs[i].defined() && inputs[i].requires_grad());
  if (!any) return Variable(std::move(result));
  std::vector<std::shared_ptr<Node>> next(n);
  for (size_t i = 0; i < n; ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) next[i] = inputs[i].gradient_edge();
  Shape shape = result.shape();
  auto node = std::make_shared<Node>(op, std::move(next), std::move(backward), shape, result.dtype(),
                                     result.device());
  return Variable::make_result(std::move(result), std::move(node));
}

Variable make_result(const char* op, Tensor result, std::initializer_list<Variable> inputs,
                     Node::BackwardFn backward) {
  return record(op, std::move(result), inputs.begin(), inputs.size(), std::move(backward));
}

Variable make_result(const char* op, Tensor result, const std::vector<Variable>& inputs,
                     Node::BackwardFn backward) {
  return record(op, std::move(result), inputs.data(), inputs.size(), std::move(backward));
}

}  // namespace saccade
