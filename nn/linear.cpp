#include "nn/linear.h"

#include <algorithm>
#include <functional>

#include "autograd/autocast.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/shape.h"
#include "autograd/grad_mode.h"
#include "nn/init.h"
#include "nn/lora.h"
#include "ops/creation.h"
#include "ops/quant.h"
#include "profiler/profiler.h"

namespace saccade::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, Generator* gen)
    : UnaryModule("Linear"), in_features_(in_features), out_features_(out_features) {
  ErrorScope scope(name());
  SACCADE_CHECK(in_features >= 0 && out_features >= 0,
                "Linear: expected non-negative sizes, got in_features = {}, out_features = {}", in_features,
                out_features);
  Tensor w = Tensor::empty({out_features, in_features});
  Tensor b = with_bias ? Tensor::empty({out_features}) : Tensor();
  init::linear_default_init_(w, b, gen);
  weight = register_parameter("weight", w);
  if (with_bias) bias = register_parameter("bias", b);
}

// x: (*, in), weight: (out, in), bias: (out) -> (*, out)
Variable Linear::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  SACCADE_CHECK(x.defined(), "Linear: got an undefined input");
  SACCADE_CHECK(x.dim() >= 1 && x.size(-1) == in_features_,
                "Linear: expected input of shape (*, {}) (in_features = {}), got {}", in_features_,
                in_features_, x.shape());
  SACCADE_CHECK(x.dtype() == weight.dtype() || autocast_enabled(),  // autocast casts both (linear's policy)
                "Linear: expected a {} input (the weight's dtype), got {}", weight.dtype(), x.dtype());
  Variable y;
  if (weight_q8_0.defined()) {
    y = linear_q8_0(x, weight_q8_0, weight, "Linear");
    if (bias.defined()) y = y + bias;
  } else {
    y = linear(x, weight, bias);
  }
  if (lora_A && !lora_merged) y = y + lora_delta(*this, x);
  return y;
}

Variable linear_q8_0(const Variable& x, const Q8_0Matrix& w, const Variable& weight, const char* who) {
  SACCADE_CHECK(
      !grad_enabled() || (!x.requires_grad() && !(weight.defined() && weight.requires_grad())),
      "{}: the weight is quantized to Q8_0, which has no gradient: call under NoGradGuard (input {})", who,
      x.shape());
  profiler::RecordFunction range("linear_q8_0", "forward");  // the GEMM family of profiles
  range.set_cost(2 * x.numel() * w.rows, w.bytes());
  return Variable(ops::linear_q8_0(x.data(), w));
}

Variable tied_output(const Variable& hidden, const Variable& weight, const Q8_0Matrix& q8_0,
                     const char* who) {
  return q8_0.defined() ? linear_q8_0(hidden, q8_0, weight, who) : linear(hidden, weight);
}

void Linear::quantize_q8_0() {
  ErrorScope scope(name());
  weight_q8_0 = ops::quantize_q8_0(weight.data());
}

std::vector<std::pair<std::string, Linear*>> named_linears(const Module& model) {
  std::vector<std::pair<std::string, Linear*>> out;
  std::function<void(const Module&, const std::string&)> walk = [&](const Module& m,
                                                                    const std::string& prefix) {
    for (const auto& [name, child] : m.named_children()) {
      const std::string dotted = prefix.empty() ? name : prefix + "." + name;
      if (auto* lin = dynamic_cast<Linear*>(child.get())) {
        out.emplace_back(dotted, lin);
        continue;  // a Linear's children are its adapter's
      }
      walk(*child, dotted);
    }
  };
  walk(model, "");
  return out;
}

std::vector<std::string> quantize_q8_0(const Module& model, const std::vector<std::string>& skip) {
  std::vector<std::string> out;
  for (const auto& [name, lin] : named_linears(model)) {
    const size_t dot = name.rfind('.');
    const std::string last = dot == std::string::npos ? name : name.substr(dot + 1);
    if (std::find(skip.begin(), skip.end(), last) != skip.end()) continue;
    lin->quantize_q8_0();
    out.push_back(name);
  }
  return out;
}

Flatten::Flatten(int64_t start_dim, int64_t end_dim)
    : UnaryModule("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}

Variable Flatten::forward(const Variable& x) {
  ErrorScope scope(name());
  SACCADE_CHECK(x.defined(), "Flatten: got an undefined input");
  int n = x.dim();
  auto in_range = [n](int64_t d) { return d >= -std::max(n, 1) && d < std::max(n, 1); };
  SACCADE_CHECK(in_range(start_dim_) && in_range(end_dim_),
                "Flatten: dims ({}, {}) out of range for an input of shape {}", start_dim_, end_dim_,
                x.shape());
  return flatten(x, start_dim_, end_dim_);
}

}  // namespace saccade::nn
