#pragma once
// Linear, Flatten and Identity (as torch.nn.Linear / Flatten / Identity).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/unary_module.h"
#include "ops/kernels/quant.h"
#include "ops/random.h"

namespace saccade::nn {

/// y = x W^T + b (torch.nn.Linear).
///
/// Parameters: `weight` (out_features, in_features), `bias` (out_features) when `bias` is true, registered
/// under torch's names. Default init as torch: weight ~ kaiming_uniform(a = √5), i.e. U(±1/√in_features),
/// bias ~ U(±1/√in_features), drawn from `gen` (the default generator when null).
///
/// forward: x (*, in_features) (1-d (in_features) too) -> (*, out_features), of the weight's dtype; plus the
/// LoRA adapter's update when apply_lora (nn/lora.h) gave it one. Throws saccade::Error naming "Linear" for
/// negative sizes, an undefined input, x whose last dim is not in_features, or x of another dtype than the
/// weight.
///
/// Quantized for inference: after quantize_q8_0(), forward multiplies by weight_q8_0 (GGUF's Q8_0,
/// ops/quant.h) in float32 instead of by weight, and the result is not differentiable: forward then throws
/// saccade::Error naming "Linear" when grad mode is on and x or the weight requires a gradient (decode under
/// NoGradGuard). `weight` itself stays as it was (state_dict, saving and dequantize_q8_0 see no change).
class Linear : public UnaryModule {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator* gen = nullptr);
  Variable forward(const Variable& x) override;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  Variable weight, bias;  // bias undefined when built with bias = false
  /// The LoRA adapter (nn/lora.h), null until apply_lora adds it: children lora_A Linear(in, r), lora_B
  /// Linear(r, out) and lora_dropout; forward adds lora_scale · lora_B(lora_A(lora_dropout(x))) unless
  /// lora_merged (merge_lora folded it into weight).
  std::shared_ptr<Linear> lora_A, lora_B;
  std::shared_ptr<UnaryModule> lora_dropout;
  double lora_scale = 0;
  bool lora_merged = false;
  /// The Q8_0 copy of weight that forward multiplies by; undefined until quantize_q8_0().
  Q8_0Matrix weight_q8_0;
  /// weight_q8_0 = ops::quantize_q8_0(weight) (any floating dtype; weight must not change afterwards, or call
  /// again). Throws saccade::Error naming "Linear" as ops::quantize_q8_0 does.
  void quantize_q8_0();

 private:
  int64_t in_features_, out_features_;
};

/// x (*, K) · wᵀ for a weight kept in Q8_0 (ops::linear_q8_0), as a Variable without history, recorded in
/// profiles as "linear_q8_0" (the GEMM family): Linear's quantized forward, and an output layer tied to an
/// embedding (examples/gpt's GPT). `weight` is the float matrix w stands for (or undefined). Throws
/// saccade::Error naming `who` when grad mode is on and x or `weight` requires a gradient, and what
/// ops::linear_q8_0 throws.
Variable linear_q8_0(const Variable& x, const Q8_0Matrix& w, const Variable& weight, const char* who);

/// An output layer tied to an embedding: logits (*, V) = hidden (*, E) · weightᵀ for weight (V, E), through
/// the Q8_0 copy `q8_0` when it is defined (a model's quantize_q8_0 made it: linear_q8_0, inference only),
/// else with autograd's linear. Errors as linear's, or linear_q8_0's naming `who`.
Variable tied_output(const Variable& hidden, const Variable& weight, const Q8_0Matrix& q8_0, const char* who);

/// Every Linear of `model` with its dotted name ("model.layers.0.self_attn.q_proj"), in module order; a
/// Linear's own children (a LoRA adapter's lora_A and lora_B) are not listed.
std::vector<std::pair<std::string, Linear*>> named_linears(const Module& model);

/// Linear::quantize_q8_0 on each of named_linears(model) whose last name component is not in `skip` (for
/// instance {"lm_head"}, which llama.cpp's q8_0 quantizes too); returns their names. Shared weights
/// (GPT-2's tied output layer is the embedding, not a Linear) are not Linears and stay as they are.
std::vector<std::string> quantize_q8_0(const Module& model, const std::vector<std::string>& skip = {});

/// Merges dims start_dim..end_dim into one (torch.nn.Flatten; defaults keep the batch dim: (N, *) -> (N,
/// ∏*)). Throws saccade::Error naming "Flatten" when the dims are out of range for the input.
class Flatten : public UnaryModule {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Variable forward(const Variable& x) override;

 private:
  int64_t start_dim_, end_dim_;
};

/// Returns its input (torch.nn.Identity): a placeholder in a Sequential.
class Identity : public UnaryModule {
 public:
  Identity() : UnaryModule("Identity") {}
  Variable forward(const Variable& x) override { return x; }
};

}  // namespace saccade::nn
