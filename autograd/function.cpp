// SavedTensor's version check and make_result: how one op records itself (see function.h).
#include "autograd/function.h"

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

namespace {

// The one place history is recorded: check the result under anomaly mode, then attach a Node whose edges
// lead to the inputs that require grad (nullptr for the others), or return a plain Variable.
Variable record(const char* op, Tensor result, const Variable* inputs, size_t n, Node::BackwardFn backward) {
  const uint64_t flow = profiler::is_active() ? detail::profile_forward(op, result, inputs, n) : 0;
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
  if (flow) detail::profile_link_node(node.get(), flow);
  return Variable::make_result(std::move(result), std::move(node));
}

}  // namespace

Variable make_result(const char* op, Tensor result, std::initializer_list<Variable> inputs,
                     Node::BackwardFn backward) {
  return record(op, std::move(result), inputs.begin(), inputs.size(), std::move(backward));
}

Variable make_result(const char* op, Tensor result, const std::vector<Variable>& inputs,
                     Node::BackwardFn backward) {
  return record(op, std::move(result), inputs.data(), inputs.size(), std::move(backward));
}

}  // namespace saccade
