// SavedTensor's version check and make_result: how one op records itself (see function.h).
#include "autograd/function.h"

#include "autograd/engine.h"
#include "autograd/grad_mode.h"

namespace saccade {

void detail::undefined_argument(const char* op, int position, const char* what, int64_t element) {
  throw Error(element < 0 ? fmt::format("{}: got an undefined {} (argument {})", op, what, position)
                          : fmt::format("{}: got an undefined {} (argument {}, element {})", op, what,
                                        position, element));
}

const Tensor& SavedTensor::get() const {
  SACCADE_CHECK(t_.version() == version_,
                "{}: a tensor of shape {} saved for backward was modified by an in-place operation "
                "(version {} at save, now {}); compute on a copy instead",
                op_, t_.shape(), version_, t_.version());
  return t_;
}

SavedVariable::SavedVariable(Variable v, const char* op)
    : var_(std::move(v)),
      data_(var_.defined() ? var_.data() : Tensor()),
      version_(data_.version()),
      op_(op) {}

SavedVariable SavedVariable::output(Tensor data, const char* op) {
  SavedVariable s;
  s.data_ = std::move(data);
  s.version_ = s.data_.version();
  s.op_ = op;
  s.is_output_ = true;
  return s;
}

Variable SavedVariable::get() const {
  if (!data_.defined()) return Variable();
  SACCADE_CHECK(data_.version() == version_,
                "{}: a tensor of shape {} saved for backward was modified by an in-place operation "
                "(version {} at save, now {}); compute on a copy instead",
                op_, data_.shape(), version_, data_.version());
  if (!is_output_) return var_;
  Node* node = Node::current();
  if (!grad_enabled() || !node) return Variable(data_);
  return Variable::make_result(data_, node->shared_from_this());
}

void check_once_differentiable(const char* op) {
  SACCADE_CHECK(!grad_enabled(),
                "{}: create_graph through an op with no second derivative (its backward is a kernel with no "
                "composed reference); see autograd/README.md",
                op);
}

void check_once_differentiable(const char* op, std::initializer_list<Variable> vs) {
  for (const Variable& v : vs)
    if (v.defined() && v.requires_grad()) return check_once_differentiable(op);
}

std::vector<Variable> recompute_backward(
    const std::vector<Variable>& inputs,
    const std::function<Variable(const std::vector<Variable>&)>& reference, const Variable& g) {
  const bool create_graph = grad_enabled();
  std::vector<Variable> xs;  // the stand-ins (function.h)
  Variable out;
  {
    AutoGradMode record(true);
    for (const Variable& x : inputs) {
      const bool req = x.defined() && x.requires_grad();
      if (!create_graph)
        xs.push_back(x.defined() ? Variable(x.data(), req) : x);
      else if (req) {
        OpScope op(op_info::alias, x);
        xs.push_back(
            make_result(op, x.data(), {x}, [](const Variable& ga) -> std::vector<Variable> { return {ga}; }));
      } else
        xs.push_back(x);
    }
    out = reference(xs);
  }
  if (!create_graph) return backward_in_rule(out, g, xs);
  // the recomputed graph is kept (retain_graph): the gradients' own graph runs through it
  std::vector<Variable> result(inputs.size()), wanted;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) wanted.push_back(xs[i]);
  if (wanted.empty() || !out.requires_grad()) return result;
  std::vector<Variable> grads = grad({out}, wanted, {g}, true, true, true);
  for (size_t i = 0, j = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) result[i] = grads[j++];
  return result;
}

namespace {

// The one place history is recorded: close the op's profiler range (`range`, 0 when none is open) with its
// cost, check the result under anomaly mode, then attach a Node whose edges lead to the inputs that require
// grad (nullptr for the others), or return a plain Variable.
Variable record(const char* op, const CostModel& cost, uint64_t range, Tensor result, const Variable* inputs,
                size_t n, Node::BackwardFn backward) {
  const uint64_t flow =
      profiler::is_active() ? detail::profile_forward(range, op, cost, result, inputs, n) : 0;
  // inside a derivative rule the engine checks what the rule returns, naming the rule's op
  if (anomaly_mode_enabled() && !Node::current())
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
  if (flow) detail::profile_link_node(node.get(), flow);
  return Variable::make_result(std::move(result), std::move(node));
}

}  // namespace

Variable make_result(OpScope& op, Tensor result, std::initializer_list<Variable> inputs,
                     Node::BackwardFn backward) {
  return record(op.info().name, *op.info().cost, op.take_range(), std::move(result), inputs.begin(),
                inputs.size(), std::move(backward));
}

Variable make_result(OpScope& op, Tensor result, const std::vector<Variable>& inputs,
                     Node::BackwardFn backward) {
  return record(op.info().name, *op.info().cost, op.take_range(), std::move(result), inputs.data(),
                inputs.size(), std::move(backward));
}

}  // namespace saccade
