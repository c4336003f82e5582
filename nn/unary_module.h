#pragma once
// UnaryModule: the small single-input interface (Variable -> Variable) that the one-input layers implement,
// so that Sequential can chain them. Module itself keeps no virtual forward (see nn/module.h): layers with
// other signatures (AddNorm, GRU, the losses) simply do not derive from this.
#include <string>

#include "autograd/variable.h"
#include "nn/module.h"

namespace saccade::nn {

/// A Module whose forward maps one Variable to one Variable (Linear, Conv2d, activations, Dropout, LayerNorm,
/// Sequential itself, ...). Sequential holds these.
class UnaryModule : public Module {
 public:
  explicit UnaryModule(std::string name) : Module(std::move(name)) {}
  /// The layer's computation; shapes and errors as documented by each subclass.
  virtual Variable forward(const Variable& x) = 0;
  /// forward(x).
  Variable operator()(const Variable& x) { return forward(x); }
};

}  // namespace saccade::nn
