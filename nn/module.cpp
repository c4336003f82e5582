// Module registration, traversal, placement and state_dict.
#include "nn/module.h"

#include <algorithm>
#include <unordered_set>

#include "ops/elementwise.h"

namespace saccade::nn {

// ---- StateDict ----

void StateDict::insert(const std::string& name, Tensor t) {
  SACCADE_CHECK(!contains(name), "StateDict: duplicate key '{}'", name);
  index_.emplace(name, items_.size());
  items_.emplace_back(name, std::move(t));
}

void StateDict::insert_or_assign(const std::string& name, Tensor t) {
  auto it = index_.find(name);
  if (it == index_.end()) return insert(name, std::move(t));
  items_[it->second].second = std::move(t);
}

const Tensor& StateDict::at(const std::string& name) const {
  const Tensor* t = find(name);
  SACCADE_CHECK(t != nullptr, "StateDict: no key '{}'", name);
  return *t;
}

const Tensor* StateDict::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& [k, v] : items_) out.push_back(k);
  return out;
}

// ---- registration ----

void Module::check_new_name(const std::string& name, const char* what) const {
  SACCADE_CHECK(!name.empty() && name.find('.') == std::string::npos,
                "{}: invalid name '{}' in {} (must be non-empty and contain no '.')", what, name, name_);
  bool taken = false;
  for (const Entry& e : params_) taken |= e.name == name;
  for (const Entry& e : buffers_) taken |= e.name == name;
  for (const auto& c : children_) taken |= c.first == name;
  SACCADE_CHECK(!taken, "{}: '{}' is already registered in {}", what, name, name_);
}

Variable Module::register_parameter(const std::string& name, const Tensor& t, bool requires_grad) {
  check_new_name(name, "register_parameter");
  SACCADE_CHECK(t.defined(), "register_parameter: undefined tensor for '{}' in {}", name, name_);
  SACCADE_CHECK(!requires_grad || is_floating(t.dtype()),
                "register_parameter: '{}' in {} must be a float tensor to require grad, got {}", name, name_,
                t.dtype());
  Variable v(t, requires_grad);
  params_.push_back({name, v});
  return v;
}

Variable Module::register_buffer(const std::string& name, const Tensor& t) {
  check_new_name(name, "register_buffer");
  SACCADE_CHECK(t.defined(), "register_buffer: undefined tensor for '{}' in {}", name, name_);
  Variable v(t, false);
  buffers_.push_back({name, v});
  return v;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "register_module");
  SACCADE_CHECK(module != nullptr, "register_module: null module for '{}' in {}", name, name_);
  SACCADE_CHECK(module.get() != this, "register_module: {} cannot be its own child '{}'", name_, name);
  children_.emplace_back(name, std::move(module));
}

std::shared_ptr<Module> Module::unregister_module(const std::string& name) {
  auto it = std::find_if(children_.begin(), children_.end(), [&](const auto& c) { return c.first == name; });
  SACCADE_CHECK(it != children_.end(), "unregister_module: {} has no child '{}'", name_, name);
  std::shared_ptr<Module> child = std::move(it->second);
  children_.erase(it);
  return child;
}

// ---- access ----

void Module::collect(const std::string& prefix, bool params, bool recurse,
                     std::vector<std::pair<std::string, Variable>>& out) const {
  for (const Entry& e : params ? params_ : buffers_) out.emplace_back(prefix + e.name, e.var);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", params, true, out);
}

std::vector<std::pair<std::string, Variable>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Variable>> all, out;
  collect("", true, recurse, all);
  std::unordered_set<const VariableImpl*> seen;
  for (auto& [name, v] : all)
    if (seen.insert(v.impl().get()).second) out.emplace_back(std::move(name), std::move(v));
  return out;
}

std::vector<Variable> Module::parameters(bool recurse) const {
  std::vector<Variable> out;
  for (auto& [name, v] : named_parameters(recurse)) out.push_back(std::move(v));
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Variable>> all;
  collect("", false, recurse, all);
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, v] : all) out.emplace_back(std::move(name), v.data());
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [name, child] : children_) out.push_back(child);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

Variable Module::parameter(const std::string& name) const {
  for (const Entry& e : params_)
    if (e.name == name) return e.var;
  throw Error(fmt::format("Module::parameter: {} has no parameter '{}'", name_, name));
}

Variable Module::buffer(const std::string& name) const {
  for (const Entry& e : buffers_)
    if (e.name == name) return e.var;
  throw Error(fmt::format("Module::buffer: {} has no buffer '{}'", name_, name));
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Variable& p : parameters()) n += p.numel();
  return n;
}

// ---- mode, gradients, placement ----

void Module::train(bool on) {
  training_ = on;
  for (const auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (Variable& p : parameters()) p.zero_grad();
}

// Replaces the data (and grad) behind a handle: every copy of the handle, e.g. inside an optimizer, sees it.
static void replace_data(const Variable& v, const Tensor& data, const Tensor& grad) {
  v.impl()->data = data;
  v.impl()->grad = grad;
}

Module& Module::to(Device device) {
  std::vector<std::pair<std::string, Variable>> all;
  collect("", true, true, all);
  collect("", false, true, all);
  for (const auto& [name, v] : all) {
    const Tensor& g = v.grad();
    replace_data(v, v.data().to(device), g.defined() ? g.to(device) : g);
  }
  return *this;
}

Module& Module::to(DType dtype) {
  SACCADE_CHECK(is_floating(dtype), "{}.to: expected a float dtype, got {}", name(), dtype);
  std::vector<std::pair<std::string, Variable>> all;
  collect("", true, true, all);
  collect("", false, true, all);
  for (const auto& [name, v] : all) {
    if (!is_floating(v.dtype())) continue;
    const Tensor& g = v.grad();
    replace_data(v, v.data().to(dtype), g.defined() ? g.to(dtype) : g);
  }
  return *this;
}

// ---- state ----

std::vector<std::pair<std::string, Variable>> Module::state_entries() const {
  std::vector<std::pair<std::string, Variable>> out;
  collect("", true, false, out);
  collect("", false, false, out);
  for (const auto& [name, child] : children_)
    for (auto& [k, v] : child->state_entries()) out.emplace_back(name + "." + k, std::move(v));
  return out;
}

StateDict Module::state_dict() const {
  StateDict out;
  for (const auto& [name, v] : state_entries()) out.insert(name, v.data());
  return out;
}

LoadResult Module::check_state_dict(const StateDict& dict, bool strict) const {
  LoadResult result;
  std::unordered_set<std::string> own;
  for (const auto& [name, v] : state_entries()) {
    own.insert(name);
    const Tensor* t = dict.find(name);
    if (t == nullptr) {
      SACCADE_CHECK(!strict, "load_state_dict: missing key '{}' (shape {}) for {}", name, v.shape(), name_);
      result.missing_keys.push_back(name);
      continue;
    }
    SACCADE_CHECK(t->defined(), "load_state_dict: undefined tensor for key '{}'", name);
    SACCADE_CHECK(t->shape() == v.shape(),
                  "load_state_dict: size mismatch for '{}': the checkpoint has shape {}, the module {}", name,
                  t->shape(), v.shape());
  }
  for (const auto& [name, t] : dict) {
    if (own.count(name)) continue;
    SACCADE_CHECK(!strict, "load_state_dict: unexpected key '{}' (shape {}) for {}", name, t.shape(), name_);
    result.unexpected_keys.push_back(name);
  }
  return result;
}

LoadResult Module::load_state_dict(const StateDict& dict, bool strict) {
  LoadResult result = check_state_dict(dict, strict);
  for (const auto& [name, v] : state_entries()) {
    const Tensor* t = dict.find(name);
    if (t == nullptr) continue;
    Tensor dst = v.data();
    ops::copy_(dst, *t);
  }
  return result;
}

}  // namespace saccade::nn
