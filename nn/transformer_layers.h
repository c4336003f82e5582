#pragma once
// The position-wise feed-forward network and the residual add & norm of the Transformer (d2l section 11.7;
// Vaswani et al. 2017, section 3.3 and 5.4), and Llama's SwiGLU feed-forward (Shazeer 2020).
#include <memory>
#include <string>
#include <vector>

#include "nn/activation.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/normalization.h"

namespace saccade::nn {

/// FFN(x) = dense2(ReLU(dense1(x))) applied at every position (d2l section 11.7, PositionWiseFFN; Vaswani et
/// al. 2017, eq. 2).
///
/// Children (d2l's names): `dense1` Linear(ffn_num_inputs, ffn_num_hiddens), `relu`, `dense2`
/// Linear(ffn_num_hiddens, ffn_num_outputs); state_dict keys "dense1.weight", "dense1.bias", "dense2.weight",
/// "dense2.bias". d2l builds dense1 with LazyLinear; here the input size is given (as in d2l 0.17), so the
/// parameters exist before the first forward. Init as Linear, from `gen`.
/// forward: x (*, ffn_num_inputs) -> (*, ffn_num_outputs). Errors as Linear's.
class PositionWiseFFN : public UnaryModule {
 public:
  PositionWiseFFN(int64_t ffn_num_inputs, int64_t ffn_num_hiddens, int64_t ffn_num_outputs,
                  Generator* gen = nullptr);
  Variable forward(const Variable& x) override;

  std::shared_ptr<Linear> dense1;
  std::shared_ptr<ReLU> relu;
  std::shared_ptr<Linear> dense2;
};

/// The gated feed-forward block of Llama-family models (Shazeer 2020, "GLU Variants Improve Transformer",
/// FFN_SwiGLU and FFN_GEGLU; Hugging Face's LlamaMLP and GemmaMLP): down_proj(act(gate_proj(x)) ⊙
/// up_proj(x)). `hidden_act` names act as transformers' ACT2FN does: "silu" (SwiGLU, the gating fused in one
/// pass: swiglu, autograd/functions/elementwise.h), "gelu_pytorch_tanh" or "gelu_new" (GeGLU with GELU's tanh
/// form, Gemma's), "gelu" (exact GELU), the last two composed (GELU, then mul).
///
/// Children (Hugging Face's names, so a Llama checkpoint's "mlp.gate_proj.weight" maps one to one):
/// `gate_proj` and `up_proj` Linear(hidden_size, intermediate_size), `down_proj` Linear(intermediate_size,
/// hidden_size), without biases unless `bias` (LlamaConfig.mlp_bias). Init as Linear, from `gen`.
/// forward: x (*, hidden_size) -> (*, hidden_size). Throws saccade::Error naming "SwiGLU" for another
/// hidden_act; Linear's errors otherwise.
class SwiGLU : public UnaryModule {
 public:
  SwiGLU(int64_t hidden_size, int64_t intermediate_size, bool bias = false, Generator* gen = nullptr,
         const std::string& hidden_act = "silu");
  Variable forward(const Variable& x) override;
  const std::string& hidden_act() const { return hidden_act_; }
  /// The hidden_act names this block runs: "silu", "gelu_pytorch_tanh", "gelu_new", "gelu" (hf/ reads a
  /// config's against this list).
  static const std::vector<std::string>& activations();
  /// The activation `hidden_act` names, as the blocks of this file and nn::MoeExperts build it: null for
  /// "silu" (their callers use silu or the fused swiglu), otherwise GELU exact ("gelu") or in its tanh form.
  /// Throws saccade::Error naming `op` for a name outside activations().
  static std::shared_ptr<GELU> gelu_for(const std::string& op, const std::string& hidden_act);

  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;

 private:
  std::string hidden_act_;
  std::shared_ptr<GELU> gelu_;  // the gate's activation unless silu (fused)
};

/// The plain (ungated) feed-forward block of GPT-NeoX-family decoders (Black et al. 2022; Hugging Face's
/// GPTNeoXMLP): down_proj(act(up_proj(x))), act named as for SwiGLU ("gelu" exact, "gelu_new" or
/// "gelu_pytorch_tanh" GELU's tanh form, "silu"). The Transformer's position-wise FFN (Vaswani et al. 2017,
/// eq. 2) with GELU, as GPT-2's MLP; nn::LlamaBlock runs it when LlamaConfig::gated_mlp is false.
///
/// Children: `up_proj` Linear(hidden_size, intermediate_size), `down_proj` Linear(intermediate_size,
/// hidden_size), with biases when `bias` (GPT-NeoX's dense_h_to_4h and dense_4h_to_h: hf::llama_name_table
/// maps the names). Init as Linear, from `gen`.
/// forward: x (*, hidden_size) -> (*, hidden_size). Throws saccade::Error naming "MLP" for a hidden_act
/// outside SwiGLU::activations(); Linear's errors otherwise.
class MLP : public UnaryModule {
 public:
  MLP(int64_t hidden_size, int64_t intermediate_size, bool bias = true, Generator* gen = nullptr,
      const std::string& hidden_act = "gelu");
  Variable forward(const Variable& x) override;
  const std::string& hidden_act() const { return hidden_act_; }

  std::shared_ptr<Linear> up_proj, down_proj;

 private:
  std::string hidden_act_;
  std::shared_ptr<GELU> gelu_;  // null for silu
};

/// The residual connection followed by layer normalisation: AddNorm(X, Y) = LayerNorm(Dropout(Y) + X) (d2l
/// section 11.7, AddNorm; Vaswani et al. 2017, section 5.4).
///
/// Children (d2l's names): `dropout` Dropout(dropout, gen), `ln` LayerNorm(normalized_shape); state_dict keys
/// "ln.weight", "ln.bias".
/// forward: X and Y of one shape (*, normalized_shape...) -> that shape. Throws saccade::Error naming
/// "AddNorm" when X and Y differ in shape; LayerNorm's errors otherwise.
class AddNorm : public Module {
 public:
  AddNorm(const Shape& normalized_shape, double dropout, Generator* gen = nullptr);
  AddNorm(int64_t normalized_shape, double dropout, Generator* gen = nullptr)
      : AddNorm(Shape{normalized_shape}, dropout, gen) {}
  Variable forward(const Variable& X, const Variable& Y);

  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<LayerNorm> ln;
};

}  // namespace saccade::nn
