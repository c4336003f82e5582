#include "nn/sequential.h"

#include <string>

namespace saccade::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<UnaryModule>> layers)
    : UnaryModule("Sequential") {
  ErrorScope scope(name());
  for (const auto& layer : layers) push_back(layer);
}

Sequential& Sequential::push_back(std::shared_ptr<UnaryModule> layer) {
  SACCADE_CHECK(layer != nullptr, "Sequential: got a null layer at position {}", layers_.size());
  register_module(std::to_string(layers_.size()), layer);
  layers_.push_back(std::move(layer));
  return *this;
}

Variable Sequential::forward(const Variable& x) {
  Variable y = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    try {
      y = layers_[i]->forward(y);
    } catch (const Error& e) {
      throw Error(fmt::format("Sequential: layer {} ({}): {}", i, layers_[i]->name(), e.what()));
    }
  }
  return y;
}

const std::shared_ptr<UnaryModule>& Sequential::operator[](size_t i) const {
  SACCADE_CHECK(i < layers_.size(), "Sequential: index {} out of range for {} layers", i, layers_.size());
  return layers_[i];
}

}  // namespace saccade::nn
