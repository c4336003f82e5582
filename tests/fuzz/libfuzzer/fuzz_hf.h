#pragma once
// What the hf_weights target and the seed generator share: the input's layout (a flags byte, then the files
// of a checkpoint folder cut at kShardSeparator), the tiny models the checkpoints load into, and their name
// tables (the Llama's is hf::llama_name_table).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hf/checkpoint.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/llama.h"
#include "nn/module.h"

namespace saccade::fuzz {

/// Cuts the hf_weights input's files apart: four bytes that no JSON text holds (0xff, 0xfe are never UTF-8)
/// and that no seed's tensor bytes happen to hold.
inline constexpr std::string_view kShardSeparator{"\xff\xfe\xfd\xfc", 4};

/// The flags byte of an hf_weights input.
enum HfWeightsFlags : uint8_t {
  kIndexed = 1,    ///< set: index JSON | shard 1 | shard 2 (model.safetensors.index.json and the two
                   ///< model-0000N-of-00002.safetensors); clear: the rest is model.safetensors
  kModelMask = 6,  ///< (flags & kModelMask) >> 1: 0 Llama, 1 tied Llama, 2 Conv1D model f32, 3 the same bf16
  kNonStrict = 8,  ///< load_weights(strict = false)
};
inline constexpr const char* kShardNames[2] = {"model-00001-of-00002.safetensors",
                                               "model-00002-of-00002.safetensors"};

/// A two-layer Llama of a few hundred parameters (grouped-query: 2 heads, 1 key/value head).
inline nn::LlamaConfig tiny_llama_config(bool tied) {
  nn::LlamaConfig c;
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 4;
  c.vocab_size = 10;
  c.num_hidden_layers = 2;
  c.max_position_embeddings = 16;
  c.tie_word_embeddings = tied;
  return c;
}

/// GPT-2's layout in small: c_attn, a Conv1D (in, 3 out) holding W_q, W_k and W_v side by side, fills three
/// Linear (out, in), its bias three biases; c_proj is a transposed Conv1D; wte loads one to one.
struct Conv1DModel : nn::Module {
  std::shared_ptr<nn::Embedding> wte;
  std::shared_ptr<nn::Linear> q, k, v, proj;
  Conv1DModel() : Module("Conv1DModel") {
    wte = register_module("wte", std::make_shared<nn::Embedding>(5, 4));
    q = register_module("q", std::make_shared<nn::Linear>(4, 4));
    k = register_module("k", std::make_shared<nn::Linear>(4, 4));
    v = register_module("v", std::make_shared<nn::Linear>(4, 4));
    proj = register_module("proj", std::make_shared<nn::Linear>(4, 4));
  }
  static std::vector<hf::NameRule> table() {
    return {{"wte.weight", {"wte.weight"}},
            {"attn.c_attn.weight", {"q.weight", "k.weight", "v.weight"}, true, 1},
            {"attn.c_attn.bias", {"q.bias", "k.bias", "v.bias"}, false, 0},
            {"attn.c_proj.weight", {"proj.weight"}, true},
            {"attn.c_proj.bias", {"proj.bias"}}};
  }
  /// GPT-2's stored causal mask, which a loader skips.
  static std::vector<std::string> ignore() { return {"attn.bias"}; }
};

}  // namespace saccade::fuzz
