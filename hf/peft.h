#pragma once
// LoRA adapters in Hugging Face PEFT's folder layout, both ways (peft.PeftModel.save_pretrained /
// from_pretrained):
//
//   dir/adapter_config.json          {"peft_type": "LORA", "r": 16, "lora_alpha": 32, ...}
//   dir/adapter_model.safetensors    "base_model.model.<module>.lora_A.weight" (r, in)
//                                    "base_model.model.<module>.lora_B.weight" (out, r)
//
// <module> is the adapted Linear's dotted name in the model, which for modules whose state_dict names are
// transformers' own (nn::LlamaForCausalLM: "model.layers.0.self_attn.q_proj") is PEFT's name too. A model
// whose names differ from transformers' (the GPT example's GPT-2: "h.0.attn.W_q") gives an AdapterLayout:
// its units (nn::LoraUnit) name transformers' modules and the Linears that hold them, and a fused module
// (GPT-2's c_attn, held as W_q, W_k and W_v) is saved as PEFT saves it, one lora_A and the rows of lora_B
// joined. The adapters themselves are nn/lora.h's.
#include <string>
#include <vector>

#include "nn/llama.h"
#include "nn/lora.h"
#include "nn/module.h"

namespace saccade::hf {

/// What adapter_config.json says (the fields saccade reads) and the base model it names.
struct AdapterConfig {
  nn::LoraConfig lora;
  std::string base_model_name_or_path;
};

/// How a model's Linears appear in PEFT's files: its LoRA units (empty: each Linear under its own dotted
/// name, as for nn::LlamaForCausalLM) and whether the base stores its weights (in, out) (transformers'
/// Conv1D, in GPT-2: PEFT then writes fan_in_fan_out true, which changes only how PEFT merges, never the
/// forward).
struct AdapterLayout {
  std::vector<nn::LoraUnit> units;
  bool fan_in_fan_out = false;
};

/// The layout of a Llama-family model (nn::LlamaForCausalLM) in PEFT's files: empty (every Linear under its
/// own name, transformers' too) unless its row keeps projections fused on disk, where each Linear goes by the
/// name of the checkpoint tensor that holds it (hf::llama_name_table) and a fused tensor's Linears are one
/// unit: Phi-3's "self_attn.qkv_proj" (q_proj, k_proj, v_proj) and "mlp.gate_up_proj" (gate_proj, up_proj),
/// GPT-NeoX's "attention.query_key_value" (q, k and v interleaved head by head: groups H), Falcon's
/// "self_attention.query_key_value" (grouped by key/value head) and its renamed Linears,
/// "attention.dense", "mlp.dense_h_to_4h" and "mlp.dense_4h_to_h" under "gpt_neox.layers.N." (its output
/// layer stays "lm_head", transformers 5's module name).
AdapterLayout llama_adapter_layout(const nn::LlamaForCausalLM& model);

/// Reads `dir`/adapter_config.json. Throws saccade::Error naming "hf::load_adapter_config" and the file for a
/// missing or unparsable file, a peft_type other than "LORA", a missing or non-integer r or one below 1, a
/// missing or non-positive lora_alpha, a lora_dropout that is not a number in [0, 1), a use_rslora that is
/// not a boolean, a target_modules entry that is not a non-empty string, or a feature saccade
/// does not apply and would silently drop: bias other than "none", use_dora, modules_to_save,
/// layers_to_transform, a non-empty rank_pattern or alpha_pattern, lora_bias, exclude_modules,
/// target_parameters, layer_replication, trainable_token_indices, alora_invocation_tokens, use_qalora,
/// use_bdlora, or target_modules given as a regular expression (a string other than "all-linear").
/// fan_in_fan_out is read as PEFT reads it: a fact about the base's weight storage (PEFT sets it per module
/// type), not about the adapter's product, so either value loads.
AdapterConfig load_adapter_config(const std::string& dir);

/// Writes the adapters of `model` (those apply_lora added with `config` and `layout.units`) to `dir` in
/// PEFT's layout: the factors as float32 under PEFT's names (a unit's lora_A once, its Linears' lora_B rows
/// joined in order), and adapter_config.json with `config`'s fields (target_modules as the names the adapted
/// units end in, so "all-linear" is saved expanded as PEFT saves it), layout.fan_in_fan_out and
/// `base_model_name_or_path`. Each file is written atomically; `dir` is made if missing. Throws
/// saccade::Error naming "hf::save_adapter" for a model without adapters or an I/O failure.
void save_adapter(const std::string& dir, const nn::Module& model, const nn::LoraConfig& config,
                  const std::string& base_model_name_or_path, const AdapterLayout& layout = {});

/// Reads the adapter folder `dir` and applies it to `model` (apply_lora with its config and layout.units,
/// then its factors, a unit's lora_B split into its Linears' rows):
/// the model is frozen and adapted as PEFT's from_pretrained leaves it. When `base_dir` is not empty, the
/// adapter's base_model_name_or_path must end in the same folder name as `base_dir` (a hub name
/// "org/SmolLM2-135M" matches a folder ".../SmolLM2-135M"). Everything is checked before the model changes:
/// every adapted unit's two factors present with shapes (r, in) and (out, r) (out: the unit's Linears'
/// out_features summed), and no other tensor. Returns
/// the config read. Throws saccade::Error naming "hf::load_adapter", the file and the tensor, or
/// load_adapter_config's and apply_lora's errors.
AdapterConfig load_adapter(const std::string& dir, nn::Module& model, const std::string& base_dir = "",
                           const AdapterLayout& layout = {});

}  // namespace saccade::hf
