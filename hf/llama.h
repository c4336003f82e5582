#pragma once
// Llama-family checkpoints in the Hugging Face layout (transformers' LlamaForCausalLM: Llama 2 and 3,
// TinyLlama, SmolLM, ...) <-> nn::LlamaForCausalLM. The module's state_dict names are transformers' own, so
// the name table is the identity; with tie_word_embeddings the model has no lm_head and a stored
// "lm_head.weight" is ignored.
#include <memory>
#include <string>
#include <vector>

#include "hf/checkpoint.h"
#include "hf/config.h"
#include "nn/llama.h"

namespace saccade::hf {

/// The nn::LlamaConfig of a Llama config.json. Throws saccade::Error naming "hf::llama_config" for a config
/// of another architecture.
nn::LlamaConfig llama_config(const Config& config);

/// The config.json fields of `config` (transformers' names), under the row llama_family picks: the
/// model_type it was read as where that row's config can say every switch, else the row its switches need
/// ("qwen3" with q and k norms, "qwen2" with biases on q, k and v only, "mistral" with a sliding window,
/// ...).
Config llama_hf_config(const nn::LlamaConfig& config);

/// The name table of `model`: one row per state_dict entry, under its own name; for a Phi-3
/// (llama_hf_config's row "phi3") each layer's q, k and v weights are one row, "self_attn.qkv_proj.weight"
/// split along its rows into H, H_kv and H_kv heads, and the MLP's gate and up weights one row,
/// "mlp.gate_up_proj.weight" split in halves (transformers' Phi3Attention and Phi3MLP slice them so); for a
/// sparse layer, each expert's tensor on disk is one row filling its entry of the batched weight
/// ("mlp.experts.<e>.gate_proj.weight" -> entry e of "mlp.experts.gate_proj"; a Mixtral's are
/// "block_sparse_moe.experts.<e>.w1/w3/w2.weight" and its router "block_sparse_moe.gate.weight"); for a
/// GPT-NeoX (row "gpt_neox"), GPTNeoXForCausalLM's names ("gpt_neox.embed_in", "gpt_neox.layers.N.attention.
/// dense", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h", "gpt_neox.final_layer_norm", "embed_out") with q, k and
/// v in one "attention.query_key_value" weight and bias, interleaved head by head (NameRule::groups).
std::vector<NameRule> llama_name_table(const nn::LlamaForCausalLM& model);
/// The same table from `config` and a state_dict under LlamaForCausalLM(config)'s names (`dict`: that
/// model's, or another module's tensors renamed so), without the model.
std::vector<NameRule> llama_name_table(const nn::LlamaConfig& config, const nn::StateDict& dict);

/// The checkpoint tensors of `weights` that a Llama load skips, as transformers' from_pretrained skips them:
/// "lm_head.weight" when `config` ties the embeddings, and the rotary buffers that older conversions saved,
/// "model.layers.N.self_attn.rotary_emb.inv_freq" (LlamaPreTrainedModel's _keys_to_ignore_on_load_unexpected;
/// saccade computes the frequencies from rope_theta, as transformers does); for a GPT-NeoX,
/// "embed_out.weight" when tied and the buffers Pythia's files hold, "gpt_neox.layers.N.attention.bias",
/// ".masked_bias" and
/// ".rotary_emb.inv_freq".
std::vector<std::string> llama_ignored_tensors(const Config& config, const TensorSource& weights);

/// Loads the Llama checkpoint folder `dir` (config.json, model.safetensors or shards; float32, bfloat16 or
/// float16 on disk) into a new float32 nn::LlamaForCausalLM in eval mode. Strict unless `strict` is false
/// (then `report` lists what was skipped); llama_ignored_tensors are skipped either way. Throws what
/// load_config, Weights and load_weights throw, naming the file and the tensor; nothing is half-loaded.
std::shared_ptr<nn::LlamaForCausalLM> load_llama(const std::string& dir, bool strict = true,
                                                 LoadReport* report = nullptr);
/// As above, with `config` the folder's config.json already read (load_config), so it is parsed once.
std::shared_ptr<nn::LlamaForCausalLM> load_llama(const std::string& dir, const Config& config,
                                                 bool strict = true, LoadReport* report = nullptr);

/// A new float32 nn::LlamaForCausalLM of `config` in eval mode holding `weights` (load_weights by
/// llama_name_table, llama_ignored_tensors skipped; strict as load_llama): what load_llama and
/// load_llama_gguf share. Throws what load_weights throws; nothing is half-loaded.
std::shared_ptr<nn::LlamaForCausalLM> load_llama_weights(const TensorSource& weights, const Config& config,
                                                         bool strict = true, LoadReport* report = nullptr);

/// Writes `model` to `dir` in the Hugging Face layout (config.json + model.safetensors in `dtype`), which
/// transformers' LlamaForCausalLM.from_pretrained loads.
void save_llama(const nn::LlamaForCausalLM& model, const std::string& dir, DType dtype = DType::Float32);

}  // namespace saccade::hf
