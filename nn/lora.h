#pragma once
// LoRA: low-rank adapters on the Linear layers of a frozen model (Hu et al. 2021, arXiv 2106.09685, §4.1,
// eq. 3), as Hugging Face's PEFT adds them (peft.LoraConfig, peft.tuners.lora.layer.Linear):
//
//   h = W0 x + b + scale · B A dropout(x)     W0 (out, in) and b frozen; A (r, in) and B (out, r) trained
//   scale = lora_alpha / r                     (rsLoRA, Kalajdzievski 2023: lora_alpha / √r)
//
// B starts at zero and A as a Linear's default (kaiming_uniform, a = √5, as PEFT's init_lora_weights=True),
// so the adapted model starts equal to its base. apply_lora first freezes every parameter of the model
// (requires_grad false, as PEFT's get_peft_model): linear's backward then makes no dW product and no gradient
// buffer for W0 (autograd/functions/linalg.cpp asks each input's requires_grad), and only A and B train.
//
// Where an adapter lives: inside the Linear it adapts, as the children lora_A, lora_B and lora_dropout, the
// names PEFT gives them. So state_dict() names the factors as PEFT's adapter file does
// ("model.layers.0.self_attn.q_proj.lora_A.weight"; hf/peft.h adds PEFT's "base_model.model." prefix), and a
// parent such as LlamaAttention keeps its q_proj handle: nothing is swapped out of the model. Linear::forward
// adds lora_delta while an adapter is present and not merged.
//
// The adapters are float32 on the base's device whatever the base's dtype (PEFT's autocast_adapter_dtype):
// with a bfloat16 (or float16) base, the adapter's two products run in the base's dtype on the factors cast
// to it, as PEFT's under torch.autocast; the factors, their gradients and the optimizer's state stay
// float32.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nn/linear.h"
#include "nn/module.h"
#include "ops/random.h"

namespace saccade::nn {

/// The fields of peft.LoraConfig that shape the adapters (their names and defaults).
struct LoraConfig {
  int64_t r = 8;              ///< the rank of A (r, in) and B (out, r)
  double lora_alpha = 8;      ///< scale = lora_alpha / r (or / √r with use_rslora)
  double lora_dropout = 0.0;  ///< dropout on the adapter's input (training mode only)
  bool use_rslora = false;    ///< rank-stabilised scaling (Kalajdzievski 2023, arXiv 2312.03732)
  /// Which Linear modules get an adapter: a module matches a name equal to its dotted name or to its last
  /// components ("q_proj" matches "model.layers.0.self_attn.q_proj", as PEFT's list form), or every Linear
  /// but the output layer `lm_head` (and a MoE layer's router, `mlp.gate`) for the single entry "all-linear".
  std::vector<std::string> target_modules = {"q_proj", "v_proj"};
  /// lora_alpha / r, or lora_alpha / √r with use_rslora.
  double scale() const;
};

/// One adapted unit: the module name that an adapter file and target_modules know it by, and the Linear
/// modules of the model (dotted names) whose outputs, side by side along the feature axis, are that module's
/// output. A unit of several Linears is a projection fused on disk and held split here (GPT-2's c_attn, held
/// as attn.W_q, W_k and W_v): they share one A (and its dropout module) and each takes its own rows of B, so
/// scale · B A x is the fused module's update with B = [B_q; B_k; B_v]. Every Linear of a unit must take the
/// same in_features. (With lora_dropout > 0 the shared dropout module draws a mask per Linear, where PEFT
/// draws one for the fused module: the same distribution, other draws.)
struct LoraUnit {
  std::string name;                  ///< e.g. "transformer.h.0.attn.c_attn"
  std::vector<std::string> linears;  ///< e.g. {"h.0.attn.W_q", "h.0.attn.W_k", "h.0.attn.W_v"}
  /// How the fused module's output rows hold the Linears' (and so B's rows, in an adapter file): one after
  /// another (1), or interleaved in `groups` blocks, each block every Linear's share in order (GPT-NeoX's
  /// query_key_value, head by head: hf::NameRule::groups)
  int64_t groups = 1;
};

/// The units of `model`: `units` as given, or when it is empty each Linear of the model under its own dotted
/// name (named_linears). Throws saccade::Error naming "apply_lora" for a unit with no Linear, a name that is
/// not a Linear of the model, a Linear in two units, or a unit whose Linears take different in_features.
std::vector<LoraUnit> lora_units(const Module& model, const std::vector<LoraUnit>& units = {});

/// The Linear modules of each of `units` (names as lora_units checked them), unit by unit in order, found
/// with one walk of the model. Throws saccade::Error naming "apply_lora" for a name that is not a Linear of
/// it.
std::vector<std::vector<Linear*>> unit_linears(const Module& model, const std::vector<LoraUnit>& units);

/// The units of `model` (lora_units(model, units)) that `target_modules` selects (LoraConfig's rules, on the
/// units' names), in order; changes nothing. Throws saccade::Error naming "apply_lora" for a target that
/// selects no unit (listing the names the units end in) or that selects a unit which already has an adapter,
/// and lora_units' errors.
std::vector<LoraUnit> lora_targets(const Module& model, const std::vector<std::string>& target_modules,
                                   const std::vector<LoraUnit>& units = {});

/// Freezes every parameter of `model` and adds an adapter of `config` to each unit lora_targets selects:
/// children lora_A Linear(in, r, no bias) (init as a Linear's weight; one module shared by a unit's Linears),
/// lora_B Linear(r, out, no bias) (zeros; one per Linear), lora_dropout Dropout(lora_dropout) (shared), all
/// float32 on the Linear's device, drawn from `gen` (the default generator when null). Returns the adapted
/// units' names. Checks everything first: on error the model is unchanged. Throws saccade::Error naming
/// "apply_lora" for r < 1, lora_alpha <= 0, lora_dropout outside [0, 1), or lora_targets' errors.
std::vector<std::string> apply_lora(Module& model, const LoraConfig& config, Generator* gen = nullptr,
                                    const std::vector<LoraUnit>& units = {});

/// The adapter's update for `layer` and its input x (*, in): scale · B A dropout(x), (*, out), in x's dtype:
/// computed in the adapter's dtype (float32) for a float32 or float64 x, in x's for a 16-bit x (A and B cast
/// to it, the gradients cast back), and as autocast picks where it is enabled. Linear::forward adds it;
/// `layer` must have an adapter.
Variable lora_delta(Linear& layer, const Variable& x);

/// Folds every unmerged adapter of `model` into its base weight, W0 += scale · B A (in W0's dtype, rounded
/// once), so that forward costs what the base costs; unmerge_lora subtracts it again (exact in float32 up to
/// rounding; a 16-bit W0 keeps the rounding of both steps, as PEFT warns). Neither records history. Returns
/// how many adapters changed.
int64_t merge_lora(Module& model);
int64_t unmerge_lora(Module& model);

/// merge_lora, then removes every adapter (its lora_A, lora_B and lora_dropout children), leaving the plain
/// model whose state_dict has the base's names only, as PEFT's merge_and_unload: what an export of the
/// fine-tuned model saves. The parameters keep their requires_grad (frozen after apply_lora). Returns how
/// many adapters were removed.
int64_t merge_and_unload(Module& model);

/// The Linear modules of `model` that have an adapter, with their dotted names, in module order.
std::vector<std::pair<std::string, Linear*>> lora_layers(const Module& model);

/// The parameters that require grad (after apply_lora: the adapters' A and B), in module order: what an
/// optimizer of a LoRA run takes.
std::vector<Variable> trainable_parameters(const Module& model);

}  // namespace saccade::nn
