#pragma once
// Node: one recorded op in the graph. It holds edges to the nodes that made its inputs (pointing backward,
// so a graph never forms a cycle) and a closure that maps the gradient of its output to the gradients of its
// inputs. Every node has exactly one output. The rule maps Variables to Variables: the engine runs it with
// grad mode off (it records nothing) unless create_graph asks it to record a graph of the backward pass.
//
// A leaf that requires grad owns an accumulator node (is_accumulator()): backward adds into the leaf's grad,
// held in its VariableImpl (defined here, below Node, so that the engine needs no Variable).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops/tensor.h"

namespace saccade {

struct VariableImpl;  // below
class Variable;       // autograd/variable.h

/// One recorded op of the graph: edges to its inputs' nodes, the derivative rule, and the shape, dtype and
/// device of its one output (what the engine checks each incoming gradient against).
class Node : public std::enable_shared_from_this<Node> {
 public:
  /// grad of the output -> grads of the inputs, one per input (undefined where an input needs none).
  using BackwardFn = std::function<std::vector<Variable>(const Variable& grad_output)>;
  using Hook = std::function<Tensor(const Tensor&)>;
  /// For a view that picks a part of its one input (select, narrow, slice, split, chunk): maps a tensor of
  /// the input's shape to the view of that part. See set_part.
  using PartFn = std::function<Tensor(const Tensor& whole)>;

  Node(std::string name, std::vector<std::shared_ptr<Node>> next, BackwardFn fn, Shape output_shape,
       DType dtype, Device device)
      : name_(std::move(name)),
        next_(std::move(next)),
        fn_(std::move(fn)),
        shape_(output_shape),
        dtype_(dtype),
        device_(device) {}
  /// Destroys long chains iteratively: a graph of 10^5 nodes does not overflow the stack.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& name() const { return name_; }
  /// One entry per input of the op; nullptr for inputs that need no gradient.
  const std::vector<std::shared_ptr<Node>>& next() const { return next_; }
  const Shape& output_shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }

  /// Runs the derivative rule. Throws if the saved tensors were already freed by an earlier backward.
  /// While it runs, current() is this node (how a saved output finds its grad_fn, SavedVariable).
  std::vector<Variable> apply(const Variable& grad_output);
  /// The node whose rule is running in this thread (null outside a rule).
  static Node* current();
  /// Frees the closure and the tensors it saved (after backward, unless retain_graph). A node marked
  /// saves_nothing keeps its closure: there is nothing to free.
  void release() {
    if (!saves_nothing_) fn_ = nullptr;
  }
  bool released() const { return !fn_ && !is_accumulator_; }
  /// Marks this node's rule as holding no saved tensor (a cast, a copy to another device: PyTorch's
  /// ToCopyBackward0 saves nothing either), so release() keeps it and a second backward through it works
  /// without retain_graph. Autocast's weight cache shares one cast node among the graphs built in a guard.
  void set_saves_nothing() { saves_nothing_ = true; }
  /// Marks this node's rule as running the engine over a graph it builds itself (checkpoint's
  /// recomputation), which reaches leaves that this node's edges do not show: grad() then runs the rule
  /// whenever a gradient reaches the node, and the rule hands what it finds to that grad() call
  /// (backward_in_rule, autograd/engine.h).
  void set_runs_backward() { runs_backward_ = true; }
  bool runs_backward() const { return runs_backward_; }

  /// Marks this node as a view of part of its one input: its rule returns the gradient of that part only (the
  /// shape of this node's output), and the engine adds it into part(gradient of the input), which it makes
  /// once as zeros. So T selects of one (B, T, n) tensor cost one zeros of it, not T zeros and T - 1 sums.
  void set_part(PartFn part) { part_ = std::move(part); }
  /// The part this node's gradient covers (empty: the whole input, the usual case).
  const PartFn& part() const { return part_; }

  /// Hooks run on the gradient arriving at this node's output before it is used (Variable::register_hook).
  std::vector<Hook>& hooks() { return hooks_; }

  // ---- accumulator nodes (leaves) ----
  static std::shared_ptr<Node> make_accumulator(const std::shared_ptr<VariableImpl>& leaf);
  bool is_accumulator() const { return is_accumulator_; }
  /// The leaf whose grad this accumulator adds into (null once the leaf is gone).
  std::shared_ptr<VariableImpl> leaf() const { return leaf_.lock(); }

 private:
  std::string name_;
  std::vector<std::shared_ptr<Node>> next_;
  BackwardFn fn_;
  Shape shape_;
  DType dtype_;
  Device device_;
  std::vector<Hook> hooks_;
  PartFn part_;
  // Accumulators: the leaf owns its accumulator (so it lives as long as the leaf and is made once), and the
  // accumulator refers back weakly, so the two never form a cycle.
  std::weak_ptr<VariableImpl> leaf_;
  bool is_accumulator_ = false;
  bool saves_nothing_ = false;
  bool runs_backward_ = false;
};

/// The state shared by every handle of one Variable (autograd/variable.h): its data, its gradient and the
/// node that made it. It sits here, beside Node, because the engine's accumulator nodes write a leaf's grad.
struct VariableImpl {
  Tensor data;
  Tensor grad;  // undefined until a backward reaches this leaf
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;      // the op that made this Variable; null for leaves
  std::shared_ptr<Node> accumulator;  // leaves: the node that adds into grad (it points back weakly)
  std::vector<Node::Hook> hooks;      // leaves: run on the gradient before it is accumulated
  bool retains_grad = false;          // non-leaves: keep grad (retain_grad())
};

}  // namespace saccade
