#pragma once
// The decoder block of the Llama family (Touvron et al. 2023; Hugging Face's LlamaDecoderLayer): pre-norm
// RMSNorm, causal grouped-query self-attention with rotary positions, and a SwiGLU feed-forward, without
// biases. The children carry Hugging Face's names, so a checkpoint's "model.layers.N.self_attn.q_proj.weight"
// is this block's "self_attn.q_proj.weight".
//
//   h = x + self_attn(input_layernorm(x)),   y = h + mlp(post_attention_layernorm(h))
//   self_attn(x) = o_proj(attention(rope(q_proj x), rope(k_proj x), v_proj x))   (H query, H_kv key/value
//   heads)
#include <cstdint>
#include <memory>

#include "nn/linear.h"
#include "nn/module.h"
#include "nn/normalization.h"
#include "nn/positional.h"
#include "nn/transformer_layers.h"

namespace saccade::nn {

/// The fields of Hugging Face's LlamaConfig that shape one block (their names and defaults).
struct LlamaConfig {
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 32;  ///< H_kv: grouped-query attention when < num_attention_heads
  int64_t head_dim = 0;              ///< 0: hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool attention_bias = false;
  bool mlp_bias = false;
};

/// Causal grouped-query self-attention with rotary positions (Hugging Face's LlamaAttention; Ainslie et al.
/// 2023; Su et al. 2021). Children: q_proj Linear(hidden, H·head_dim), k_proj and v_proj Linear(hidden,
/// H_kv·head_dim), o_proj Linear(H·head_dim, hidden); rotary_emb (no state). Init as Linear, from `gen`.
/// Throws saccade::Error naming "LlamaAttention" for sizes that are not positive, H not a multiple of H_kv,
/// or an odd head_dim.
class LlamaAttention : public Module {
 public:
  explicit LlamaAttention(const LlamaConfig& config, Generator* gen = nullptr);
  /// x (B, T, hidden) at positions offset .. offset + T - 1 -> (B, T, hidden); the fused attention kernel
  /// (need_weights = false). Throws saccade::Error naming "LlamaAttention" for another shape.
  Variable forward(const Variable& x, int64_t offset = 0);

  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
  std::shared_ptr<RotaryEmbedding> rotary_emb;
  int64_t num_heads, num_kv_heads, head_dim;
};

/// One Llama decoder block (Hugging Face's LlamaDecoderLayer). Children: input_layernorm and
/// post_attention_layernorm RMSNorm(hidden, rms_norm_eps), self_attn LlamaAttention, mlp SwiGLU(hidden,
/// intermediate, mlp_bias). forward: x (B, T, hidden) -> (B, T, hidden). Errors as its children's.
class LlamaBlock : public Module {
 public:
  explicit LlamaBlock(const LlamaConfig& config, Generator* gen = nullptr);
  Variable forward(const Variable& x, int64_t offset = 0);

  std::shared_ptr<RMSNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<SwiGLU> mlp;
};

}  // namespace saccade::nn
