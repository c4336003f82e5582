#include "nn/llama.h"

#include "autograd/functions/elementwise.h"
#include "autograd/functions/shape.h"
#include "nn/attention.h"

namespace saccade::nn {

LlamaAttention::LlamaAttention(const LlamaConfig& c, Generator* gen)
    : Module("LlamaAttention"),
      num_heads(c.num_attention_heads),
      num_kv_heads(c.num_key_value_heads),
      head_dim(c.head_dim > 0 ? c.head_dim
                              : (c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0)) {
  ErrorScope scope(name());
  SACCADE_CHECK(
      c.hidden_size > 0 && num_heads > 0 && num_kv_heads > 0 && head_dim > 0,
      "LlamaAttention: hidden_size {}, num_attention_heads {}, num_key_value_heads {} and head_dim {} "
      "must be positive",
      c.hidden_size, num_heads, num_kv_heads, head_dim);
  SACCADE_CHECK(num_heads % num_kv_heads == 0,
                "LlamaAttention: num_attention_heads {} is not a multiple of num_key_value_heads {}",
                num_heads, num_kv_heads);
  q_proj = register_module(
      "q_proj", std::make_shared<Linear>(c.hidden_size, num_heads * head_dim, c.attention_bias, gen));
  k_proj = register_module(
      "k_proj", std::make_shared<Linear>(c.hidden_size, num_kv_heads * head_dim, c.attention_bias, gen));
  v_proj = register_module(
      "v_proj", std::make_shared<Linear>(c.hidden_size, num_kv_heads * head_dim, c.attention_bias, gen));
  o_proj = register_module(
      "o_proj", std::make_shared<Linear>(num_heads * head_dim, c.hidden_size, c.attention_bias, gen));
  rotary_emb = register_module("rotary_emb", std::make_shared<RotaryEmbedding>(head_dim, c.rope_theta));
}

// x: (B, T, hidden) -> q (B, H, T, hd), k, v (B, H_kv, T, hd) -> (B, T, hidden)
Variable LlamaAttention::forward(const Variable& x, int64_t offset) {
  ErrorScope scope(name(), {shape_of(x)});
  SACCADE_CHECK(x.defined() && x.dim() == 3, "LlamaAttention: expected x (B, T, hidden), got {}",
                x.defined() ? x.shape() : Shape{});
  const int64_t B = x.size(0), T = x.size(1);
  auto heads = [&](const Variable& y, int64_t h) {
    return permute(reshape(y, {B, T, h, head_dim}), {0, 2, 1, 3});
  };
  const Variable q = rotary_emb->forward(heads(q_proj->forward(x), num_heads), offset);
  const Variable k = rotary_emb->forward(heads(k_proj->forward(x), num_kv_heads), offset);
  const Variable v = heads(v_proj->forward(x), num_kv_heads);
  Variable o = scaled_dot_product_attention(q, k, v, Tensor(), /*causal=*/true, 0.0, false, nullptr,
                                            /*need_weights=*/false, /*enable_gqa=*/num_kv_heads != num_heads)
                   .output;
  return o_proj->forward(reshape(permute(o, {0, 2, 1, 3}), {B, T, num_heads * head_dim}));
}

LlamaBlock::LlamaBlock(const LlamaConfig& c, Generator* gen) : Module("LlamaBlock") {
  ErrorScope scope(name());
  input_layernorm =
      register_module("input_layernorm", std::make_shared<RMSNorm>(c.hidden_size, c.rms_norm_eps));
  self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(c, gen));
  post_attention_layernorm =
      register_module("post_attention_layernorm", std::make_shared<RMSNorm>(c.hidden_size, c.rms_norm_eps));
  mlp = register_module("mlp", std::make_shared<SwiGLU>(c.hidden_size, c.intermediate_size, c.mlp_bias, gen));
}

// x: (B, T, hidden) -> (B, T, hidden)
Variable LlamaBlock::forward(const Variable& x, int64_t offset) {
  ErrorScope scope(name(), {shape_of(x)});
  const Variable h = add(x, self_attn->forward(input_layernorm->forward(x), offset));
  return add(h, mlp->forward(post_attention_layernorm->forward(h)));
}

}  // namespace saccade::nn
