#pragma once
// Sequential (torch.nn.Sequential) and Lambda, a function as a parameterless layer.
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "nn/unary_module.h"

namespace saccade::nn {

/// Applies its layers in order: forward(x) = layer_{n-1}(... layer_1(layer_0(x))) (torch.nn.Sequential).
///
/// The layers are registered as children "0", "1", ..., so state_dict keys read as torch's ("0.weight",
/// "2.bias"). An empty Sequential returns its input. Layers are any UnaryModule (Sequential included), held
/// by shared_ptr (a layer may be shared with other modules).
/// forward: whatever the layers accept and return. An error in layer i is rethrown as saccade::Error
/// "Sequential: layer i (Name): <the layer's message>".
class Sequential : public UnaryModule {
 public:
  Sequential() : UnaryModule("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<UnaryModule>> layers);
  /// Appends `layer` as child "<size()>"; throws saccade::Error naming "Sequential" for a null layer.
  Sequential& push_back(std::shared_ptr<UnaryModule> layer);
  Variable forward(const Variable& x) override;

  size_t size() const { return layers_.size(); }
  /// Layer i; throws saccade::Error naming "Sequential" when i >= size().
  const std::shared_ptr<UnaryModule>& operator[](size_t i) const;

 private:
  std::vector<std::shared_ptr<UnaryModule>> layers_;
};

/// A function Variable -> Variable as a layer without parameters (for a reshape or a custom activation inside
/// a Sequential). `name` is what messages and printing call it.
class Lambda : public UnaryModule {
 public:
  explicit Lambda(std::function<Variable(const Variable&)> f, std::string name = "Lambda")
      : UnaryModule(std::move(name)), f_(std::move(f)) {}
  Variable forward(const Variable& x) override { return f_(x); }

 private:
  std::function<Variable(const Variable&)> f_;
};

}  // namespace saccade::nn
