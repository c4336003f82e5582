#include "hf/llama.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "nn/init.h"

namespace saccade::hf {

nn::LlamaConfig llama_config(const Config& c) {
  SACCADE_CHECK(c.architecture == Architecture::Llama, "hf::llama_config: a '{}' config is not a Llama's",
                c.model_type);
  nn::LlamaConfig l;
  l.hidden_size = c.hidden_size;
  l.intermediate_size = c.intermediate_size;
  l.num_attention_heads = c.num_attention_heads;
  l.num_key_value_heads = c.num_key_value_heads;
  l.head_dim = c.head_dim;
  l.rms_norm_eps = c.norm_eps;
  l.rope_theta = c.rope_theta;
  l.rope_scaling = c.rope_scaling;
  l.attention_bias = c.attention_bias;
  l.mlp_bias = c.mlp_bias;
  l.qkv_bias = c.qkv_bias;
  l.qk_norm = c.qk_norm;
  l.vocab_size = c.vocab_size;
  l.num_hidden_layers = c.num_hidden_layers;
  l.max_position_embeddings = c.max_position_embeddings;
  l.tie_word_embeddings = c.tie_word_embeddings;
  l.sliding_window = c.sliding_window;
  l.hidden_act = c.hidden_act;
  l.norm_unit_offset = c.norm_unit_offset;
  l.embedding_multiplier = c.embedding_multiplier;
  l.embedding_multiplier_in_dtype = c.norm_unit_offset;  // GemmaModel's normalizer, a tensor (Gemma 1 and 3)
  l.residual_multiplier = c.residual_multiplier;
  l.attention_multiplier = c.attention_multiplier;
  l.logits_scaling = c.logits_scaling;
  l.pad_token_id = c.pad_token_id;
  l.no_rope_layers = c.no_rope_layers;
  l.partial_rotary_factor = c.partial_rotary_factor;
  l.qk_norm_full_width = c.qk_norm_full_width;
  l.norm_placement = c.norm_placement;
  l.norm_type = c.norm_type;
  l.parallel_residual = c.parallel_residual;
  l.parallel_norms = c.parallel_norms;
  l.gated_mlp = c.gated_mlp;
  l.layer_types = c.layer_types;
  l.rope_local_base_freq = c.rope_local_base_freq;
  l.attn_logit_softcapping = c.attn_logit_softcapping;
  l.final_logit_softcapping = c.final_logit_softcapping;
  l.num_experts = c.num_experts;
  l.num_experts_per_tok = c.num_experts_per_tok;
  l.moe_intermediate_size = c.moe_intermediate_size;
  l.norm_topk_prob = c.norm_topk_prob;
  l.shared_expert_intermediate_size = c.shared_expert_intermediate_size;
  l.decoder_sparse_step = c.decoder_sparse_step;
  l.mlp_only_layers = c.mlp_only_layers;
  l.output_router_logits = c.output_router_logits;
  l.router_aux_loss_coef = c.router_aux_loss_coef;
  l.model_type = c.model_type;
  return l;
}

Config llama_hf_config(const nn::LlamaConfig& l) {
  Config c;
  c.architecture = Architecture::Llama;
  c.vocab_size = l.vocab_size;
  c.hidden_size = l.hidden_size;
  c.num_hidden_layers = l.num_hidden_layers;
  c.num_attention_heads = l.num_attention_heads;
  c.num_key_value_heads = l.num_key_value_heads;
  c.head_dim = l.head_dim > 0 ? l.head_dim : l.hidden_size / l.num_attention_heads;
  c.intermediate_size = l.intermediate_size;
  c.max_position_embeddings = l.max_position_embeddings;
  c.norm_eps = l.rms_norm_eps;
  c.rope_theta = l.rope_theta;
  c.rope_scaling = l.rope_scaling;
  c.tie_word_embeddings = l.tie_word_embeddings;
  c.hidden_act = l.hidden_act;
  c.attention_bias = l.attention_bias;
  c.mlp_bias = l.mlp_bias;
  c.qkv_bias = l.qkv_bias;
  c.qk_norm = l.qk_norm;
  c.sliding_window = l.sliding_window;
  c.norm_unit_offset = l.norm_unit_offset;
  c.embedding_multiplier = l.embedding_multiplier;
  c.residual_multiplier = l.residual_multiplier;
  c.attention_multiplier = l.attention_multiplier;
  c.logits_scaling = l.logits_scaling;
  c.pad_token_id = l.pad_token_id;
  c.no_rope_layers = l.no_rope_layers;
  c.partial_rotary_factor = l.partial_rotary_factor;
  c.qk_norm_full_width = l.qk_norm_full_width;
  c.norm_placement = l.norm_placement;
  c.norm_type = l.norm_type;
  c.parallel_residual = l.parallel_residual;
  c.parallel_norms = l.parallel_norms;
  c.gated_mlp = l.gated_mlp;
  c.layer_types = l.layer_types;
  c.rope_local_base_freq = l.rope_local_base_freq;
  c.attn_logit_softcapping = l.attn_logit_softcapping;
  c.final_logit_softcapping = l.final_logit_softcapping;
  c.num_experts = l.num_experts;
  if (l.num_experts > 0) {
    c.num_experts_per_tok = l.num_experts_per_tok;
    c.moe_intermediate_size = l.moe_intermediate_size;
    c.norm_topk_prob = l.norm_topk_prob;
    c.shared_expert_intermediate_size = l.shared_expert_intermediate_size;
    c.decoder_sparse_step = l.decoder_sparse_step;
    c.mlp_only_layers = l.mlp_only_layers;
    c.output_router_logits = l.output_router_logits;
    c.router_aux_loss_coef = l.router_aux_loss_coef;
  }
  c.model_type = l.model_type;
  c.model_type = llama_family(c);  // the row that holds the layout
  return c;
}

namespace {

// A sparse layer's MLP on disk: one tensor per expert, "<prefix>experts.<e>.<proj>.weight", under Mixtral's
// names ("block_sparse_moe.", w1 gate, w3 up, w2 down) or the Qwen-MoE / OLMoE ones ("mlp.", gate_proj,
// up_proj, down_proj); the router is "<prefix>gate.weight" either way. Returns false for any other entry.
bool expert_rows(const std::string& name, const Tensor& t, bool mixtral, std::vector<NameRule>& rows) {
  const size_t at = name.find(".mlp.");
  if (at == std::string::npos) return false;
  const std::string layer = name.substr(0, at + 1), rest = name.substr(at + 5);
  const std::string prefix = layer + (mixtral ? "block_sparse_moe." : "mlp.");
  if (rest == "gate.weight") {
    rows.push_back({prefix + rest, {name}});
    return true;
  }
  const std::vector<std::pair<std::string, std::string>> projections = {
      {"gate_proj", mixtral ? "w1" : "gate_proj"},
      {"up_proj", mixtral ? "w3" : "up_proj"},
      {"down_proj", mixtral ? "w2" : "down_proj"}};
  for (const auto& [ours, theirs] : projections) {
    if (rest != "experts." + ours) continue;
    for (int64_t e = 0; e < t.size(0); ++e)
      rows.push_back({fmt::format("{}experts.{}.{}.weight", prefix, e, theirs), {name}, false, 0, e});
    return true;
  }
  return false;
}

// The names of a row whose transformers model renames the Llama's modules (`renames`: our name's piece, the
// file's, applied in order) and holds q, k and v in one tensor `qkv` ("<layer>.<qkv>.weight" and ".bias"),
// split into `groups` blocks (NameRule::groups), each block a share of q's rows, then of k's, then of v's.
std::vector<NameRule> renamed_table(const nn::StateDict& dict,
                                    const std::vector<std::pair<std::string, std::string>>& renames,
                                    const std::string& qkv, int64_t groups) {
  std::vector<NameRule> t;
  for (const auto& entry : dict) {
    const std::string& name = entry.first;
    if (name.find("self_attn.k_proj.") != std::string::npos ||
        name.find("self_attn.v_proj.") != std::string::npos)
      continue;  // in q's row
    std::string theirs = name;
    for (const auto& [ours, disk] : renames)
      if (const size_t at = theirs.find(ours); at != std::string::npos) theirs.replace(at, ours.size(), disk);
    if (const size_t at = theirs.find("self_attn.q_proj."); at != std::string::npos) {
      const std::string prefix = name.substr(0, name.find("q_proj.")), tail = name.substr(name.rfind('.'));
      theirs.replace(at, std::string("self_attn.q_proj.").size(), qkv + ".");
      t.push_back({theirs,
                   {prefix + "q_proj" + tail, prefix + "k_proj" + tail, prefix + "v_proj" + tail},
                   false,
                   0,
                   -1,
                   groups});
      continue;
    }
    t.push_back({theirs, {name}});
  }
  return t;
}

// GPT-NeoX's names (GPTNeoXForCausalLM): "gpt_neox." for "model.", embed_in, final_layer_norm,
// attention.dense and the MLP's dense_h_to_4h and dense_4h_to_h, embed_out for lm_head; q, k and v in one
// query_key_value, head by head (each head's q, k, v rows: transformers views its output (..., H, 3 head_dim)
// and chunks).
std::vector<NameRule> gpt_neox_name_table(const nn::LlamaConfig& c, const nn::StateDict& dict) {
  return renamed_table(dict,
                       {{"model.embed_tokens.", "gpt_neox.embed_in."},
                        {"model.norm.", "gpt_neox.final_layer_norm."},
                        {"self_attn.o_proj.", "attention.dense."},
                        {"mlp.up_proj.", "mlp.dense_h_to_4h."},
                        {"mlp.down_proj.", "mlp.dense_4h_to_h."},
                        {"model.layers.", "gpt_neox.layers."},
                        {"lm_head.", "embed_out."}},
                       "attention.query_key_value", c.num_attention_heads);
}

// Falcon's names (FalconForCausalLM): "transformer.h." for "model.layers.", word_embeddings, ln_f,
// self_attention.dense, the MLP's dense_h_to_4h and dense_4h_to_h; a parallel layer's two norms are ln_attn
// and ln_mlp (new_decoder_architecture's); q, k and v in one self_attention.query_key_value grouped by
// key/value head (each group's queries, then its key and value: FalconAttention's view (..., H_kv,
// H / H_kv + 2, head_dim); with one key/value head, Falcon 7B's [q; k; v], and with one a head, (..., H, 3,
// head_dim) are that layout too).
std::vector<NameRule> falcon_name_table(const nn::LlamaConfig& c, const nn::StateDict& dict) {
  std::vector<std::pair<std::string, std::string>> renames = {
      {"model.embed_tokens.", "transformer.word_embeddings."},
      {"model.norm.", "transformer.ln_f."},
      {"self_attn.o_proj.", "self_attention.dense."},
      {"mlp.up_proj.", "mlp.dense_h_to_4h."},
      {"mlp.down_proj.", "mlp.dense_4h_to_h."},
      {"model.layers.", "transformer.h."}};
  if (c.parallel_residual && c.parallel_norms == 2) {
    renames.push_back({"input_layernorm.", "ln_attn."});
    renames.push_back({"post_attention_layernorm.", "ln_mlp."});
  }
  return renamed_table(dict, renames, "self_attention.query_key_value", c.num_key_value_heads);
}

}  // namespace

std::vector<NameRule> llama_name_table(const nn::LlamaForCausalLM& model) {
  return llama_name_table(model.config(), model.state_dict());
}

std::vector<NameRule> llama_name_table(const nn::LlamaConfig& config, const nn::StateDict& dict) {
  std::vector<NameRule> t;
  const std::string row = llama_hf_config(config).model_type;
  if (row == "gpt_neox") return gpt_neox_name_table(config, dict);
  if (row == "falcon") return falcon_name_table(config, dict);
  const bool fused = row == "phi3", moe = config.num_experts > 0;
  // Phi-3's fused tensors: one row each, split along the output rows in the order transformers slices them
  auto fuse = [&](const std::string& prefix, const std::string& theirs,
                  const std::vector<std::string>& ours) {
    std::vector<std::string> parts;
    for (const std::string& o : ours) parts.push_back(prefix + o + ".weight");
    t.push_back({prefix + theirs + ".weight", parts});
  };
  for (const auto& entry : dict) {
    const std::string& name = entry.first;
    const auto at = [&](const char* tail) { return name.ends_with(tail); };
    if (moe && (name.find(".mlp.experts.") != std::string::npos || at(".mlp.gate.weight")) &&
        expert_rows(name, entry.second, row == "mixtral", t))
      continue;
    if (!fused) {
      t.push_back({name, {name}});
    } else if (at("self_attn.q_proj.weight")) {  // (H + 2 H_kv) head_dim rows: q, then k, then v
      fuse(name.substr(0, name.size() - std::string("q_proj.weight").size()), "qkv_proj",
           {"q_proj", "k_proj", "v_proj"});
    } else if (at("mlp.gate_proj.weight")) {  // 2 · intermediate rows: gate, then up (gate_up_proj.chunk(2))
      fuse(name.substr(0, name.size() - std::string("gate_proj.weight").size()), "gate_up_proj",
           {"gate_proj", "up_proj"});
    } else if (!at("self_attn.k_proj.weight") && !at("self_attn.v_proj.weight") &&
               !at("mlp.up_proj.weight")) {
      t.push_back({name, {name}});
    }
  }
  return t;
}

namespace {

// "model.layers.<digits>.self_attn.rotary_emb.inv_freq" (transformers' pattern
// r"model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq").
bool is_rotary_buffer(const std::string& name) {
  const std::string head = "model.layers.", tail = ".self_attn.rotary_emb.inv_freq";
  if (name.size() <= head.size() + tail.size() || name.compare(0, head.size(), head) != 0 ||
      name.compare(name.size() - tail.size(), tail.size(), tail) != 0)
    return false;
  const std::string digits = name.substr(head.size(), name.size() - head.size() - tail.size());
  return std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// The buffers older GPT-NeoX checkpoints (Pythia's) hold beside the weights: each layer's causal mask
// "attention.bias", "attention.masked_bias" and "attention.rotary_emb.inv_freq", which transformers skips too
// (_keys_to_ignore_on_load_unexpected).
bool is_neox_buffer(const std::string& name) {
  return name.starts_with("gpt_neox.layers.") &&
         (name.ends_with(".attention.bias") || name.ends_with(".attention.masked_bias") ||
          name.ends_with(".attention.rotary_emb.inv_freq"));
}

}  // namespace

std::vector<std::string> llama_ignored_tensors(const Config& config, const TensorSource& weights) {
  std::vector<std::string> ignore;
  const bool neox = llama_family(config) == "gpt_neox";
  if (config.tie_word_embeddings) ignore.push_back(neox ? "embed_out.weight" : "lm_head.weight");
  for (const std::string& name : weights.names())
    if (is_rotary_buffer(name) || (neox && is_neox_buffer(name))) ignore.push_back(name);
  return ignore;
}

std::shared_ptr<nn::LlamaForCausalLM> load_llama(const std::string& dir, bool strict, LoadReport* report) {
  return load_llama(dir, load_config(dir + "/config.json"), strict, report);
}

std::shared_ptr<nn::LlamaForCausalLM> load_llama(const std::string& dir, const Config& config, bool strict,
                                                 LoadReport* report) {
  SACCADE_CHECK(config.architecture == Architecture::Llama,
                "hf::load_llama: '{}/config.json' describes a '{}' model, not a Llama", dir,
                config.model_type);
  return load_llama_weights(Weights(dir), config, strict, report);
}

std::shared_ptr<nn::LlamaForCausalLM> load_llama_weights(const TensorSource& weights, const Config& config,
                                                         bool strict, LoadReport* report) {
  std::shared_ptr<nn::LlamaForCausalLM> model;
  {
    nn::init::SkipInitGuard skip;  // every parameter is loaded below (or the load throws)
    model = std::make_shared<nn::LlamaForCausalLM>(llama_config(config));
  }
  LoadReport r =
      load_weights(*model, weights, llama_name_table(*model), strict, llama_ignored_tensors(config, weights));
  if (report) *report = std::move(r);
  model->eval();
  return model;
}

void save_llama(const nn::LlamaForCausalLM& model, const std::string& dir, DType dtype) {
  Config c = llama_hf_config(model.config());
  c.torch_dtype = std::string(dtype_name(dtype));
  save_pretrained(dir, c, export_weights(model, llama_name_table(model), dtype));
}

}  // namespace saccade::hf
