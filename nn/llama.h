#pragma once
// The decoder block of the Llama family (Touvron et al. 2023; Hugging Face's LlamaDecoderLayer): pre-norm
// RMSNorm, causal grouped-query self-attention with rotary positions, and a SwiGLU feed-forward, without
// biases. The children carry Hugging Face's names, so a checkpoint's "model.layers.N.self_attn.q_proj.weight"
// is this block's "self_attn.q_proj.weight".
//
//   h = x + self_attn(input_layernorm(x)),   y = h + mlp(post_attention_layernorm(h))
//   self_attn(x) = o_proj(attention(rope(q_proj x), rope(k_proj x), v_proj x))   (H query, H_kv key/value
//   heads; with qk_norm, Qwen3's, rope(q_norm(q_proj x)) and rope(k_norm(k_proj x)), normed per head)
//
// The switches of LlamaConfig make the other families' blocks from it: Qwen2's q/k/v biases, Qwen3's q/k
// norms, Mistral's window, Gemma's (1 + w) norms, √d embedding scale and GeGLU MLP, Granite's multipliers,
// SmolLM3's layers without rotary positions.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/moe.h"
#include "nn/multihead.h"
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
  /// The rotary frequencies' rescaling for a longer context (rope_scaling: linear, dynamic, llama3, yarn,
  /// longrope; none by default)
  ops::RopeScaling rope_scaling;
  bool attention_bias = false;  ///< biases on q_proj, k_proj, v_proj and o_proj
  bool mlp_bias = false;
  /// Biases on q_proj, k_proj and v_proj only (Qwen2's layout; attention_bias puts them on all four)
  bool qkv_bias = false;
  /// RMSNorm(head_dim, rms_norm_eps) on each head's query and key vectors, after the projection and before
  /// the rotation (Qwen3's q_norm and k_norm; Yang et al. 2025)
  bool qk_norm = false;
  /// RMSNorm over all heads' queries (H·head_dim) and keys (H_kv·head_dim) after the projection, before the
  /// split into heads (OLMo 2's q_norm and k_norm; OLMo et al. 2024); excludes qk_norm
  bool qk_norm_full_width = false;
  /// Where each block's norms sit: "pre" (Llama: input_layernorm before the attention,
  /// post_attention_layernorm before the MLP), "post" (OLMo 2: no input norm; post_attention_layernorm on
  /// the attention's output and post_feedforward_layernorm on the MLP's, each before its residual add) or
  /// "sandwich" (Gemma 2/3: both, with pre_feedforward_layernorm on the MLP's input)
  std::string norm_placement = "pre";
  /// Every block norm and the final one: "rms_norm" (RMSNorm, the Llama family's) or "layer_norm"
  /// (LayerNorm with a bias, GPT-NeoX's and StableLM's; eps rms_norm_eps either way)
  std::string norm_type = "rms_norm";
  /// GPT-NeoX's parallel residual (transformers' use_parallel_residual; Black et al. 2022): y = x +
  /// attn(input_layernorm(x)) + mlp(post_attention_layernorm(x)), both sublayers reading the block's input;
  /// false (the default): sequential, the MLP reading x + attn(...). Pre-norm blocks only
  bool parallel_residual = false;
  /// With parallel_residual, the norms a block reads its input through (transformers' Falcon
  /// num_ln_in_parallel_attn): 2 (GPT-NeoX's, Falcon 40B's ln_attn and ln_mlp: input_layernorm for the
  /// attention, post_attention_layernorm for the MLP) or 1 (Falcon 7B's, StableLM's parallel layer: the MLP
  /// reads the attention's normed input; no post_attention_layernorm)
  int64_t parallel_norms = 2;
  /// The MLP: gated (SwiGLU: down(act(gate x) ⊙ up x), the Llama family's) or not (nn::MLP: down(act(up
  /// x)), GPT-NeoX's dense_h_to_4h and dense_4h_to_h)
  bool gated_mlp = true;
  /// Each layer's attention, transformers' layer_types: "full_attention" or "sliding_attention" (the
  /// sliding_window applies to these layers only; Gemma 3's five local layers to one global); empty (the
  /// default): every layer alike, windowed when sliding_window > 0
  std::vector<std::string> layer_types;
  /// The rotary base of the "sliding_attention" layers, without rope_scaling (Gemma 3's
  /// rope_local_base_freq); 0 (the default): rope_theta in every layer
  double rope_local_base_freq = 0.0;
  /// The MLP's gate activation as transformers names it (SwiGLU's hidden_act): "silu" (Llama's SwiGLU),
  /// "gelu_pytorch_tanh" (Gemma's GeGLU), "gelu_new", "gelu"
  std::string hidden_act = "silu";
  /// Every RMSNorm's weight stored as an offset from one, x̂ ⊙ (1 + w), initialised to zeros (Gemma's
  /// GemmaRMSNorm; nn::RMSNorm's unit_offset)
  bool norm_unit_offset = false;
  /// Granite's multipliers (transformers' GraniteConfig): each sublayer's output scaled before its residual
  /// add, h = x + residual_multiplier · attn(...); the scores' factor softmax(q kᵀ · attention_multiplier)
  /// (0: 1/√head_dim); the logits divided by logits_scaling
  double residual_multiplier = 1.0;
  double attention_multiplier = 0.0;
  double logits_scaling = 1.0;
  /// Gemma 2's logit soft-capping: the scaled attention scores become c · tanh(scores / c) with c =
  /// attn_logit_softcapping (AttentionOptions::softcap: the composed attention path), and the logits
  /// f · tanh(logits / f) with f = final_logit_softcapping; 0 (the default): none
  double attn_logit_softcapping = 0.0;
  double final_logit_softcapping = 0.0;
  // the whole model's (LlamaForCausalLM)
  /// The token embeddings multiplied by it before the first block (Granite's embedding_multiplier; Gemma's
  /// normalizer √hidden_size); 1: none
  double embedding_multiplier = 1.0;
  /// Round embedding_multiplier to the embeddings' dtype first (Gemma: its normalizer is a tensor of that
  /// dtype, √2048 = 45.25 in bfloat16; Granite multiplies by the Python float)
  bool embedding_multiplier_in_dtype = false;
  /// The token whose embedding row gets no gradient (nn::Embedding's padding_idx; transformers' LlamaModel
  /// passes pad_token_id to nn.Embedding); none by default
  std::optional<int64_t> pad_token_id;
  int64_t vocab_size = 32000;
  int64_t num_hidden_layers = 32;
  int64_t max_position_embeddings = 2048;  ///< the context (see context())
  bool tie_word_embeddings = false;        ///< lm_head multiplies by embed_tokens.weight (SmolLM)
  /// Sliding-window attention (Mistral's sliding_window; nn::scaled_dot_product_attention's window): each
  /// position sees the last W positions, itself included; 0 = none. A KV cache keeps every position and
  /// masks the older ones.
  int64_t sliding_window = 0;
  /// SmolLM3's no_rope_layers, transformers' name and meaning: one flag a layer, 1 = rotary positions, 0 =
  /// none (a NoPE layer, Kazemnejad et al. 2023); empty (the default): every layer rotates
  std::vector<int64_t> no_rope_layers;
  /// The share of each head's dims that rotates (Phi-3's partial_rotary_factor; RotaryEmbedding's
  /// rotary_fraction): the first head_dim · factor dims, the rest pass; 1 (the default): all
  double partial_rotary_factor = 1.0;
  /// Sparse mixture-of-experts MLPs (nn::SparseMoeBlock: Mixtral's num_local_experts, Qwen-MoE's and
  /// OLMoE's num_experts): each sparse layer's MLP is E experts of which num_experts_per_tok run per token;
  /// 0 (the default): dense MLPs
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 2;
  int64_t moe_intermediate_size = 0;  ///< each expert's width; 0: intermediate_size (Mixtral, OLMoE)
  bool norm_topk_prob = true;         ///< the top-k weights renormalised (Mixtral: always)
  int64_t shared_expert_intermediate_size = 0;  ///< Qwen2-MoE's gated shared expert; 0: none
  /// Which layers are sparse (Qwen-MoE's keys): layer i unless i is in mlp_only_layers or (i + 1) is not a
  /// multiple of decoder_sparse_step; the others keep a dense SwiGLU of intermediate_size
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  /// The load-balancing loss in training (LlamaForCausalLM::aux_loss): router_aux_loss_coef times
  /// load_balancing_loss, when output_router_logits (transformers adds it to the loss only then)
  bool output_router_logits = false;
  double router_aux_loss_coef = 0.001;
  /// The Hugging Face model_type this configuration was read as (hf::llama_config sets it, and
  /// hf::llama_hf_config writes that row again where its config can say every switch: a Phi-3 that rotates
  /// whole heads stays a Phi-3 with its fused projections on disk); empty: the row the switches pick
  std::string model_type;

  /// The positions a model of this configuration runs (LlamaModel's check, generation's limit):
  /// max_position_embeddings, or under "dynamic" rope scaling factor times it (rounded), the length that
  /// scaling stretches the model to (its base grows with each length past max_position_embeddings).
  int64_t context() const;
};

/// True when layer `layer_idx` of `config` has a sparse MoE MLP (LlamaConfig::num_experts and the layer
/// switches beside it).
bool is_sparse_layer(const LlamaConfig& config, int64_t layer_idx);

/// The norm over hidden_size that a block and the model's end use: RMSNorm(hidden_size, rms_norm_eps,
/// unit_offset norm_unit_offset) or, with norm_type "layer_norm", LayerNorm(hidden_size, rms_norm_eps) with a
/// bias. Throws saccade::Error naming `op` for another norm_type.
std::shared_ptr<UnaryModule> hidden_norm(const LlamaConfig& config, const char* op);

/// The token embeddings x (B, T, hidden) times embedding_multiplier (Granite's embedding_multiplier, Gemma's
/// √hidden_size normalizer, rounded to x's dtype first with embedding_multiplier_in_dtype); x itself for 1.
Variable scale_embeddings(const Variable& x, const LlamaConfig& config);

/// The logits (B, T, vocab) divided by logits_scaling (Granite), then soft-capped f · tanh(logits / f) with f
/// the final_logit_softcapping (Gemma 2; Team Gemma 2024, section 2); the logits themselves by default.
Variable scale_logits(const Variable& logits, const LlamaConfig& config);

/// The parameter elements of LlamaForCausalLM(config) (its num_parameters()), from the sizes alone, without
/// building it: the embeddings (and lm_head unless tied), the final norm, and per layer its norms, q, k, v
/// and o with their biases and q/k norms, and the dense MLP or, in a sparse layer (is_sparse_layer), the
/// router, the experts and the shared expert. -1 for a size that is not positive (head_dim and the expert
/// sizes: negative), any size from 2^40 on, or a total past 2^62: a loader compares it with what a file
/// holds before it allocates the model.
int64_t num_parameters(const LlamaConfig& config);

/// Causal grouped-query self-attention with rotary positions (Hugging Face's LlamaAttention; Ainslie et al.
/// 2023; Su et al. 2021). Children: q_proj Linear(hidden, H·head_dim), k_proj and v_proj Linear(hidden,
/// H_kv·head_dim), o_proj Linear(H·head_dim, hidden); rotary_emb (no state); with qk_norm_full_width, q_norm
/// RMSNorm(H·head_dim) and k_norm RMSNorm(H_kv·head_dim) on the projections before the split; with qk_norm,
/// q_norm and k_norm RMSNorm(head_dim, rms_norm_eps) (weights 1), each head's queries and keys normed before
/// the rotation. Init as Linear, from `gen`. Throws saccade::Error naming "LlamaAttention" for sizes that are
/// not positive, H not a multiple of H_kv, an odd head_dim, a negative sliding_window or no_rope_layers of
/// another length than num_hidden_layers.
class LlamaAttention : public Module {
 public:
  /// `layer_idx` picks the layer's no_rope_layers flag.
  explicit LlamaAttention(const LlamaConfig& config, Generator* gen = nullptr, int64_t layer_idx = 0);
  /// x (B, T, hidden) at positions offset .. offset + T - 1 -> (B, T, hidden); the fused attention kernel
  /// (need_weights = false). Throws saccade::Error naming "LlamaAttention" for another shape.
  Variable forward(const Variable& x, int64_t offset = 0);
  /// Packed documents: x (B, T, hidden) holding several documents a row (PackedDocuments), each attending
  /// causally (and within the window) inside itself only, its positions restarting at 0 -> (B, T, hidden),
  /// each document's rows those of its own forward.
  Variable forward(const Variable& x, const PackedDocuments& docs);
  /// Incremental decoding: x (B, Tn, hidden) holds the positions after the cache.length() already in `cache`
  /// (keys and values (B, H_kv, t, head_dim), the keys normed and rotated) -> (B, Tn, hidden), equal to those
  /// rows of forward over the whole prefix; the cache grows by Tn (H_kv heads: grouped-query attention keeps
  /// the cache H / H_kv times smaller than the queries'). Throws saccade::Error naming "LlamaAttention" for
  /// another shape or a cache of another batch or dtype.
  Variable step(const Variable& x, KVCache& cache);
  /// The KV cache's bytes per cached position and batch row: 2 · H_kv · head_dim · sizeof(dtype) for the
  /// dtype of k_proj's weight (GroupedHeads::kv_cache_bytes_per_token).
  int64_t kv_cache_bytes_per_token() const;

  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
  std::shared_ptr<RotaryEmbedding> rotary_emb;  ///< null in a NoPE layer (no_rope_layers)
  std::shared_ptr<RMSNorm> q_norm, k_norm;      ///< null unless qk_norm or qk_norm_full_width
  int64_t num_heads, num_kv_heads, head_dim, window;
  double scale;    ///< the scores' factor (LlamaConfig::attention_multiplier); 0: 1/√head_dim
  double softcap;  ///< LlamaConfig::attn_logit_softcapping; 0: none

 private:
  // the head arithmetic this layer shares with MultiHeadAttention, over the fields above
  GroupedHeads heads() const;
  void check_input(const Variable& x) const;
  Variable attend(const Variable& q, const Variable& k, const Variable& v,
                  const PackedDocuments* docs = nullptr);
  Variable project_q(const Variable& x);
  Variable project_k(const Variable& x);
  bool full_width_qk_norm_ = false;
};

/// One Llama decoder block (Hugging Face's LlamaDecoderLayer). Children: input_layernorm and
/// post_attention_layernorm RMSNorm(hidden, rms_norm_eps, unit_offset norm_unit_offset), or LayerNorm(hidden,
/// rms_norm_eps) with norm_type "layer_norm" (with norm_placement "post", OLMo 2's Olmo2DecoderLayer:
/// post_attention_layernorm and post_feedforward_layernorm; "sandwich", Gemma 3's: all four,
/// pre_feedforward_layernorm too), self_attn LlamaAttention, mlp SwiGLU(hidden, intermediate, mlp_bias,
/// hidden_act), MLP (the same arguments) when not gated_mlp, or in a sparse layer (is_sparse_layer) mlp
/// SparseMoeBlock (Mixtral's, Qwen-MoE's, OLMoE's decoder layer). forward: x (B, T, hidden) -> (B, T,
/// hidden), each sublayer's output times residual_multiplier before its residual add; with
/// parallel_residual, GPT-NeoX's and Falcon's layer (both sublayers read x, through their own norms or one).
/// Throws saccade::Error naming "LlamaBlock" for another norm_placement or norm_type, parallel_residual
/// without pre-norm, or parallel_norms other than 1 or 2; its children's errors.
class LlamaBlock : public Module {
 public:
  /// `layer_idx`: the block's place in the stack (its no_rope_layers flag).
  explicit LlamaBlock(const LlamaConfig& config, Generator* gen = nullptr, int64_t layer_idx = 0);
  Variable forward(const Variable& x, int64_t offset = 0);
  /// Packed documents (see LlamaAttention::forward).
  Variable forward(const Variable& x, const PackedDocuments& docs);
  /// Incremental decoding through self_attn.step (see LlamaAttention::step).
  Variable step(const Variable& x, KVCache& cache);

  /// RMSNorm or LayerNorm (norm_type)
  std::shared_ptr<UnaryModule> input_layernorm;             ///< null with norm_placement "post"
  std::shared_ptr<UnaryModule> pre_feedforward_layernorm;   ///< only with norm_placement "sandwich"
  std::shared_ptr<UnaryModule> post_attention_layernorm;    ///< null with parallel_norms 1
  std::shared_ptr<UnaryModule> post_feedforward_layernorm;  ///< with norm_placement "post" or "sandwich"
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<SwiGLU> mlp;          ///< null in a sparse layer or without gated_mlp
  std::shared_ptr<MLP> plain_mlp;       ///< the MLP without gated_mlp (registered as "mlp"), else null
  std::shared_ptr<SparseMoeBlock> moe;  ///< a sparse layer's MLP (registered as "mlp"), else null
  double residual_multiplier;           ///< LlamaConfig's (1 but Granite)
  /// Activation checkpointing (transformers' gradient_checkpointing; saccade::checkpoint): a training
  /// forward keeps only the block's input and recomputes the block in the backward, when grad mode is on and
  /// the input needs a gradient (a first block behind a frozen embedding keeps its activations: no gradient
  /// could reach a recomputation from it). The same numbers and gradients, less memory, one more forward.
  bool checkpoint_activations = false;
  /// The generators the block draws from besides the default one (LoRA's dropout: apply_lora's), replayed in
  /// the recomputation so that it drops what the forward dropped.
  std::vector<Generator*> checkpoint_generators;

 private:
  Variable finish(const Variable& x, const Variable& normed, const Variable& attended);
  Variable feed_forward(const Variable& x);
  Variable run(const Variable& x, const std::function<Variable(const Variable&)>& block);
  bool post_norms_ = false, parallel_ = false;
};

/// Hugging Face's LlamaModel: the decoder stack without the output layer. Children: embed_tokens
/// Embedding(vocab, hidden, padding_idx pad_token_id), layers.0 ... layers.<n - 1> (LlamaBlock), norm
/// RMSNorm(hidden, rms_norm_eps) (LayerNorm with norm_type "layer_norm"). Rotary positions, no position
/// embedding; the embeddings times embedding_multiplier. Init: every weight N(0, 0.02²) (transformers'
/// initializer_range), the padding row 0, norms 1 (0 with norm_unit_offset), from Generator(seed). Throws
/// saccade::Error naming "LlamaModel" for sizes that are not positive, "Embedding" for a pad_token_id outside
/// the vocabulary.
class LlamaModel : public Module {
 public:
  explicit LlamaModel(const LlamaConfig& config, Generator* gen = nullptr);
  /// idx int64 (B, T) at positions offset .. offset + T - 1 -> the last hidden states (B, T, hidden) (after
  /// norm). Throws saccade::Error naming "LlamaModel" for another rank, an id outside the vocabulary, or
  /// positions past the context (LlamaConfig::context()).
  Variable forward(const Tensor& idx, int64_t offset = 0);
  /// Packed documents (transformers' packing; FlashAttention-2's variable-length batches): idx int64 (B, T)
  /// holding several documents a row, document_ids int64 (B, T) naming each token's document (non-decreasing
  /// along T, each document one run) -> (B, T, hidden): every document attends inside itself only and its
  /// positions restart at 0, so its rows equal its own forward's; no (T, T) mask is formed. Throws
  /// saccade::Error naming "LlamaModel" as forward does, and for ids that ops::with_documents refuses.
  Variable forward(const Tensor& idx, const Tensor& document_ids);
  /// Incremental: idx (B, Tn) after caches[0].length() positions -> (B, Tn, hidden); one cache per layer.
  Variable step(const Tensor& idx, std::vector<KVCache>& caches);

  std::shared_ptr<Embedding> embed_tokens;
  std::vector<std::shared_ptr<LlamaBlock>> layers;
  std::shared_ptr<UnaryModule> norm;  ///< RMSNorm or LayerNorm (norm_type)

 private:
  void check(const Tensor& idx, int64_t offset) const;
  Variable embed(const Tensor& idx);
  LlamaConfig config_;  // its context() bounds the positions; its embedding_multiplier scales the embeddings
};

/// Hugging Face's LlamaForCausalLM: children model (LlamaModel) and lm_head Linear(hidden, vocab, no bias),
/// or, when tie_word_embeddings, no lm_head: the logits multiply by model.embed_tokens.weight. state_dict()
/// names are transformers' ("model.layers.0.self_attn.q_proj.weight", "lm_head.weight"), so a checkpoint
/// loads by name (hf::load_llama). Errors as LlamaModel's.
class LlamaForCausalLM : public Module {
 public:
  explicit LlamaForCausalLM(const LlamaConfig& config, uint64_t seed = 0);
  /// idx int64 (B, T) -> logits (B, T, vocab).
  Variable forward(const Tensor& idx);
  /// Packed documents: idx and document_ids int64 (B, T) -> logits (B, T, vocab), each document's rows its
  /// own forward's (LlamaModel::forward with document_ids).
  Variable forward(const Tensor& idx, const Tensor& document_ids);
  /// One KV cache per layer (see LlamaModel::step).
  using State = KVCaches;
  State init_state() const { return State{std::vector<KVCache>(model->layers.size())}; }
  /// Incremental: idx (B, Tn) at positions state.length() .. -> logits (B, Tn, vocab), equal (up to float
  /// rounding) to those rows of forward over the whole prefix; or, with logits_to_keep > 0, those of the
  /// last logits_to_keep positions only (B, min(Tn, logits_to_keep), vocab), as transformers' argument of
  /// that name: a prompt's prefill needs the last one. Throws saccade::Error naming "LlamaForCausalLM::step"
  /// for a negative logits_to_keep, and LlamaModel's errors.
  Variable step(const Tensor& idx, State& state, int64_t logits_to_keep = 0);
  const LlamaConfig& config() const { return config_; }

  /// nn::quantize_q8_0 on every Linear and, when the output layer is tied to embed_tokens, a Q8_0 copy of
  /// its weight (output_q8_0) that the output layer multiplies by instead (llama.cpp quantizes a tied token
  /// embedding the same way); the embedding lookup keeps the float weight. Returns the matrices quantized.
  /// Inference only: forward and step then throw saccade::Error under grad mode (nn::linear_q8_0).
  int64_t quantize_q8_0();

  /// The router's load-balancing loss of the last forward, as MixtralForCausalLM adds it to the loss:
  /// router_aux_loss_coef · load_balancing_loss over every sparse layer's router logits (0-d); undefined
  /// unless the model has sparse layers and output_router_logits.
  Variable aux_loss() const;

  std::shared_ptr<LlamaModel> model;
  std::shared_ptr<Linear> lm_head;  ///< null when tied
  Q8_0Matrix output_q8_0;           ///< the tied output layer's Q8_0 copy; undefined until quantize_q8_0()

 private:
  Variable head(const Variable& hidden);
  LlamaConfig config_;
  std::unique_ptr<Generator> gen_;
};

}  // namespace saccade::nn
