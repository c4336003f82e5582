#include "nn/transformer_layers.h"

#include <algorithm>

#include <fmt/format.h>

#include "autograd/functions/elementwise.h"

namespace saccade::nn {

PositionWiseFFN::PositionWiseFFN(int64_t ffn_num_inputs, int64_t ffn_num_hiddens, int64_t ffn_num_outputs,
                                 Generator* gen)
    : UnaryModule("PositionWiseFFN") {
  ErrorScope scope(name());
  dense1 = register_module("dense1", std::make_shared<Linear>(ffn_num_inputs, ffn_num_hiddens, true, gen));
  relu = register_module("relu", std::make_shared<ReLU>());
  dense2 = register_module("dense2", std::make_shared<Linear>(ffn_num_hiddens, ffn_num_outputs, true, gen));
}

SwiGLU::SwiGLU(int64_t hidden_size, int64_t intermediate_size, bool bias, Generator* gen,
               const std::string& hidden_act)
    : UnaryModule("SwiGLU"), hidden_act_(hidden_act) {
  ErrorScope scope(name());
  gelu_ = gelu_for("SwiGLU", hidden_act);
  gate_proj =
      register_module("gate_proj", std::make_shared<Linear>(hidden_size, intermediate_size, bias, gen));
  up_proj = register_module("up_proj", std::make_shared<Linear>(hidden_size, intermediate_size, bias, gen));
  down_proj =
      register_module("down_proj", std::make_shared<Linear>(intermediate_size, hidden_size, bias, gen));
}

const std::vector<std::string>& SwiGLU::activations() {
  static const std::vector<std::string> names = {"silu", "gelu_pytorch_tanh", "gelu_new", "gelu"};
  return names;
}

std::shared_ptr<GELU> SwiGLU::gelu_for(const std::string& op, const std::string& hidden_act) {
  const std::vector<std::string>& known = activations();
  SACCADE_CHECK(std::find(known.begin(), known.end(), hidden_act) != known.end(),
                "{}: hidden_act '{}' is not supported ({})", op, hidden_act, fmt::join(known, ", "));
  if (hidden_act == "silu") return nullptr;
  return std::make_shared<GELU>(hidden_act == "gelu" ? "none" : "tanh");
}

// x: (*, hidden) -> gate, up: (*, intermediate) -> (*, hidden)
Variable SwiGLU::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  if (!gelu_) return down_proj->forward(swiglu(gate_proj->forward(x), up_proj->forward(x)));
  return down_proj->forward(mul(gelu_->forward(gate_proj->forward(x)), up_proj->forward(x)));
}

MLP::MLP(int64_t hidden_size, int64_t intermediate_size, bool bias, Generator* gen,
         const std::string& hidden_act)
    : UnaryModule("MLP"), hidden_act_(hidden_act) {
  ErrorScope scope(name());
  gelu_ = SwiGLU::gelu_for("MLP", hidden_act);
  up_proj = register_module("up_proj", std::make_shared<Linear>(hidden_size, intermediate_size, bias, gen));
  down_proj =
      register_module("down_proj", std::make_shared<Linear>(intermediate_size, hidden_size, bias, gen));
}

// x: (*, hidden) -> up: (*, intermediate) -> (*, hidden)
Variable MLP::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  const Variable up = up_proj->forward(x);
  return down_proj->forward(gelu_ ? gelu_->forward(up) : silu(up));
}

// x: (*, in) -> (*, out)
Variable PositionWiseFFN::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  return dense2->forward(relu->forward(dense1->forward(x)));
}

AddNorm::AddNorm(const Shape& normalized_shape, double p, Generator* gen) : Module("AddNorm") {
  ErrorScope scope(name());
  dropout = register_module("dropout", std::make_shared<Dropout>(p, gen));
  ln = register_module("ln", std::make_shared<LayerNorm>(normalized_shape));
}

// X, Y: (*, normalized_shape) -> same
Variable AddNorm::forward(const Variable& X, const Variable& Y) {
  ErrorScope scope(name(), {shape_of(X), shape_of(Y)});
  SACCADE_CHECK(X.defined() && Y.defined(), "AddNorm: got an undefined input");
  SACCADE_CHECK(X.shape() == Y.shape(), "AddNorm: X and Y must have one shape, got {} and {}", X.shape(),
                Y.shape());
  return ln->forward(dropout->forward(Y) + X);
}

}  // namespace saccade::nn
