#pragma once
// Variable: a Tensor with history. It is what users compute with: every op in autograd/functions/ takes
// Variables, computes the result with ops/, and records a Node holding the derivative rule.
//
// A Variable is a shared handle (copying it shares data, grad and history), like torch.Tensor.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "ops/tensor.h"

namespace saccade {

/// A differentiable tensor.
///
/// - Leaves are made by the user (`Variable(t, /*requires_grad=*/true)`); results of ops are non-leaves with
///   a grad_fn when any input requires grad and grad mode is on.
/// - `backward()` on a one-element result (or with an explicit gradient of the result's shape) fills `grad()`
///   of every leaf that requires grad, accumulating across calls until `zero_grad()`.
class Variable {
 public:
  /// An undefined Variable.
  Variable() = default;
  /// A leaf holding `data`. Implicit, so that a Tensor can be passed where a Variable is expected.
  Variable(Tensor data, bool requires_grad = false);  // NOLINT
  /// A non-leaf made by `grad_fn` (used by saccade::make_result, autograd/function.h).
  static Variable make_result(Tensor data, std::shared_ptr<Node> grad_fn);

  bool defined() const { return impl_ != nullptr; }
  const Tensor& data() const;
  /// Tensor shortcuts.
  const Shape& shape() const { return data().shape(); }
  int dim() const { return data().dim(); }
  int64_t size(int64_t d) const { return data().size(d); }
  int64_t numel() const { return data().numel(); }
  DType dtype() const { return data().dtype(); }
  Device device() const { return data().device(); }
  template <class T = double>
  T item() const {
    return data().item<T>();
  }

  bool requires_grad() const { return impl_ && impl_->requires_grad; }
  /// Sets requires_grad on a leaf; throws on a non-leaf (as PyTorch).
  Variable& requires_grad_(bool value = true);
  bool is_leaf() const { return !impl_ || !impl_->grad_fn; }
  const std::shared_ptr<Node>& grad_fn() const;

  /// The accumulated gradient (undefined Tensor until backward reaches this Variable).
  const Tensor& grad() const;
  void set_grad(const Tensor& g);
  /// Drops the gradient (PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();
  /// Non-leaves keep their gradient too (torch.Tensor.retain_grad()).
  void retain_grad();

  /// Computes gradients of this Variable with respect to every leaf that requires grad.
  /// `gradient`: dL/d(this), of this Variable's shape; may be omitted for one-element results (then 1).
  /// `retain_graph`: keep the saved tensors so that backward can run again through this graph (default:
  /// `create_graph`). `create_graph`: the rules record the graph of the backward pass (as torch); the leaves'
  /// grad() then hold its values, and saccade::grad returns the gradients with their graph.
  /// Throws saccade::Error when this Variable does not require grad, when the gradient's shape is wrong, or
  /// when the graph was already freed by an earlier backward.
  void backward(const Variable& gradient = Variable(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;

  /// A new leaf sharing this Variable's data, with no history (torch.Tensor.detach()).
  Variable detach() const;
  /// Registers `hook(grad) -> new grad`, run when the gradient with respect to this Variable is computed.
  void register_hook(Node::Hook hook);

  /// The node that backward starts from for this Variable: grad_fn, or the leaf's accumulator, or null.
  std::shared_ptr<Node> gradient_edge() const;
  const std::shared_ptr<VariableImpl>& impl() const { return impl_; }

  /// The same tensor data converted (a differentiable copy when the dtype or device changes).
  Variable to(DType dtype) const;
  Variable to(Device device) const;

 private:
  std::shared_ptr<VariableImpl> impl_;
};

/// The gradients of `outputs` with respect to `inputs` (torch::autograd::grad), accumulating nothing into any
/// grad(): Σ_i grad_outputs[i] · d outputs[i] / d inputs[j], one Variable per input, of its shape.
///
/// - `grad_outputs`: one per output, of its shape; may be empty when every output has one element (then 1).
/// - `retain_graph`: keep the graph for another backward (default: `create_graph`).
/// - `create_graph`: record the backward pass, so that the gradients can be differentiated again (Hessian-
///   vector products, gradient penalties). Throws naming the op when the path goes through an op with no
///   second derivative (autograd/README.md lists them).
/// - `allow_unused`: an input no output depends on gets an undefined Variable instead of an error.
/// Throws saccade::Error (naming `grad`) for an output that does not require grad, a non-scalar output
/// without a grad_output, a grad_output of the wrong shape, an input that does not require grad, an unused
/// input (unless allow_unused), or a graph already freed by an earlier backward.
std::vector<Variable> grad(const std::vector<Variable>& outputs, const std::vector<Variable>& inputs,
                           const std::vector<Variable>& grad_outputs = {},
                           std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                           bool allow_unused = false);

}  // namespace saccade
