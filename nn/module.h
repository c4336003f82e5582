#pragma once
// Module: the base of every layer. It registers parameters (Variables that require grad), buffers (state that
// is saved but not trained) and child modules by name, so that state_dict() names read like PyTorch's
// ("decoder.attention.W_q.weight") and optimizers can collect every parameter of a model.
//
// Design: the base has no virtual forward(). Layers take different arguments (Linear one Variable, attention
// queries/keys/values/valid_lens, a GRU a state too), so each module declares its own `forward(...)`, as in
// the torch::nn C++ API. A Sequential container can hold `std::function<Variable(const Variable&)>` (or the
// subclasses of a small single-input interface) next to the registered child modules.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "ops/tensor.h"

namespace saccade::nn {

/// An insertion-ordered map from names to Tensors: a module's or an optimizer's state, the contents of a
/// checkpoint. Names are unique; iteration yields (name, Tensor) pairs in insertion order.
class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;
  /// Adds `name`; throws saccade::Error if it is already present.
  void insert(const std::string& name, Tensor t);
  /// Adds or replaces `name`.
  void insert_or_assign(const std::string& name, Tensor t);
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  /// The tensor called `name`; throws saccade::Error naming the key when absent.
  const Tensor& at(const std::string& name) const;
  /// Pointer to the tensor called `name`, or nullptr.
  const Tensor* find(const std::string& name) const;
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const;
  std::vector<Item>::const_iterator begin() const { return items_.begin(); }
  std::vector<Item>::const_iterator end() const { return items_.end(); }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

/// The shape of `v`, or nullptr when it is undefined: what a module's ErrorScope lists (core/error.h), so an
/// error raised inside a module names the module and the shapes the user passed.
inline const Shape* shape_of(const Variable& v) { return v.defined() ? &v.shape() : nullptr; }
inline const Shape* shape_of(const Tensor& t) { return t.defined() ? &t.shape() : nullptr; }

/// The keys load_state_dict(strict=false) skipped.
struct LoadResult {
  std::vector<std::string> missing_keys;     // in the module, not in the dict (left unchanged)
  std::vector<std::string> unexpected_keys;  // in the dict, not in the module (ignored)
};

/// Base class of all modules (as torch.nn.Module).
///
/// Subclasses register their state in the constructor and keep the returned handles:
///
///     struct Affine : nn::Module {
///       Variable weight, bias;
///       Affine(int64_t n) : Module("Affine") {
///         weight = register_parameter("weight", ops::ones({n}));
///         bias = register_parameter("bias", ops::zeros({n}));
///       }
///       Variable forward(const Variable& x) { return x * weight + bias; }
///     };
///
/// Modules are not copyable (a copy would silently share or split the parameters); hold them by
/// std::shared_ptr when they are children (register_module).
class Module {
 public:
  explicit Module(std::string name = "Module") : name_(std::move(name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The module's type name, e.g. "Linear" (for messages and printing).
  const std::string& name() const { return name_; }

  // ---- registration (names: non-empty, no '.', unique among this module's parameters, buffers, children)
  // ----
  /// Registers `t` as a parameter: a leaf Variable sharing t's data, requiring grad when `requires_grad`
  /// (t must be float then). Returns the handle the module keeps; it stays valid across to(). Throws
  /// saccade::Error for an undefined tensor or a bad or duplicate name.
  Variable register_parameter(const std::string& name, const Tensor& t, bool requires_grad = true);
  /// Registers `t` as a buffer (saved in state_dict, moved by to(), never trained). Returns a Variable handle
  /// that does not require grad: hold it rather than the Tensor, since to() replaces the data behind it.
  Variable register_buffer(const std::string& name, const Tensor& t);
  /// Registers a child module; its parameters appear as "name.<param>". Returns the child.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    static_assert(std::is_base_of_v<Module, M>, "register_module: M must derive from nn::Module");
    add_child(name, module);
    return module;
  }
  /// Removes the child registered under `name` (torch: `del module.name`) and returns it; its parameters
  /// leave parameters() and state_dict(). Throws saccade::Error naming the module and `name` when it has no
  /// such child.
  std::shared_ptr<Module> unregister_module(const std::string& name);

  // ---- access (registration order; children after this module's own entries) ----
  /// All parameters of this module and (when `recurse`) its descendants; a Variable registered in two places
  /// appears once (as torch's parameters()).
  std::vector<Variable> parameters(bool recurse = true) const;
  /// (dotted name, parameter) pairs, e.g. ("decoder.attention.W_q.weight", W); duplicates appear once.
  std::vector<std::pair<std::string, Variable>> named_parameters(bool recurse = true) const;
  /// (dotted name, buffer tensor) pairs.
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  /// The direct children, and (name, child) pairs.
  std::vector<std::shared_ptr<Module>> children() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  /// The parameter or buffer handle registered under this module's own `name` (not dotted); throws
  /// saccade::Error naming the module and the key when absent.
  Variable parameter(const std::string& name) const;
  Variable buffer(const std::string& name) const;
  /// Total number of parameter elements (torch: sum(p.numel() for p in parameters())).
  int64_t num_parameters() const;

  // ---- mode, gradients, placement ----
  /// Sets training mode on this module and every descendant (Dropout and BatchNorm read it).
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Drops the gradient of every parameter (zero_grad(set_to_none=True)).
  void zero_grad();
  /// Moves every parameter, gradient and buffer to `device`. The Variable handles keep their identity (their
  /// data is replaced), so optimizers built before the move stay valid; their state tensors are not moved.
  /// Returns this module, for chaining (torch's `model.to(device)` returns the model too).
  Module& to(Device device);
  /// Converts every floating parameter, gradient and buffer to `dtype` (a float dtype), as torch's
  /// module.to(dtype). Throws saccade::Error for a non-float dtype. Returns this module, for chaining.
  Module& to(DType dtype);

  // ---- state ----
  /// name -> tensor for every parameter, then every buffer, recursively (torch's state_dict order: own
  /// parameters, own buffers, then each child's). The tensors share storage with the module (as torch's):
  /// clone them to keep a snapshot.
  StateDict state_dict() const;
  /// Checks `dict` against this module as load_state_dict would, without changing anything: every entry's
  /// shape must match; with `strict`, the key sets must match exactly. Throws saccade::Error naming the first
  /// offending key (and both shapes for a shape mismatch). Returns what a non-strict load would skip.
  LoadResult check_state_dict(const StateDict& dict, bool strict = true) const;
  /// Copies `dict` into the parameters and buffers in place (converting dtype and device as torch's copy_),
  /// after check_state_dict: on any error the module is unchanged. Handles keep their identity.
  LoadResult load_state_dict(const StateDict& dict, bool strict = true);

 private:
  struct Entry {
    std::string name;
    Variable var;
  };
  void check_new_name(const std::string& name, const char* what) const;
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  // Every (dotted name, handle) of parameters or buffers, own first, then each child's (with duplicates).
  void collect(const std::string& prefix, bool params, bool recurse,
               std::vector<std::pair<std::string, Variable>>& out) const;
  // Parameters then buffers, as state_dict orders them.
  std::vector<std::pair<std::string, Variable>> state_entries() const;

  std::string name_;
  bool training_ = true;
  std::vector<Entry> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace saccade::nn
