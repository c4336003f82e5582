#include "nn/llama.h"

#include <algorithm>
#include <cmath>

#include "autograd/checkpoint.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/shape.h"
#include "autograd/grad_mode.h"
#include "nn/attention.h"
#include "nn/init.h"
#include "ops/half.h"
#include "ops/quant.h"

namespace saccade::nn {

LlamaAttention::LlamaAttention(const LlamaConfig& c, Generator* gen, int64_t layer_idx)
    : Module("LlamaAttention"),
      num_heads(c.num_attention_heads),
      num_kv_heads(c.num_key_value_heads),
      head_dim(c.head_dim > 0 ? c.head_dim
                              : (c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0)),
      window(c.sliding_window),
      scale(c.attention_multiplier),
      softcap(c.attn_logit_softcapping) {
  ErrorScope scope(name());
  SACCADE_CHECK(scale >= 0, "LlamaAttention: attention_multiplier must be >= 0 (0: 1/sqrt(head_dim)), got {}",
                scale);
  SACCADE_CHECK(
      softcap >= 0 && c.final_logit_softcapping >= 0,
      "LlamaAttention: attn_logit_softcapping {} and final_logit_softcapping {} must be >= 0 (0: none)",
      softcap, c.final_logit_softcapping);
  SACCADE_CHECK(
      c.hidden_size > 0 && num_heads > 0 && num_kv_heads > 0 && head_dim > 0,
      "LlamaAttention: hidden_size {}, num_attention_heads {}, num_key_value_heads {} and head_dim {} "
      "must be positive",
      c.hidden_size, num_heads, num_kv_heads, head_dim);
  SACCADE_CHECK(window >= 0, "LlamaAttention: sliding_window must be >= 0 (0: none), got {}", window);
  SACCADE_CHECK(num_heads % num_kv_heads == 0,
                "LlamaAttention: num_attention_heads {} is not a multiple of num_key_value_heads {}",
                num_heads, num_kv_heads);
  const bool qkv_bias = c.attention_bias || c.qkv_bias;
  q_proj =
      register_module("q_proj", std::make_shared<Linear>(c.hidden_size, num_heads * head_dim, qkv_bias, gen));
  k_proj = register_module("k_proj",
                           std::make_shared<Linear>(c.hidden_size, num_kv_heads * head_dim, qkv_bias, gen));
  v_proj = register_module("v_proj",
                           std::make_shared<Linear>(c.hidden_size, num_kv_heads * head_dim, qkv_bias, gen));
  o_proj = register_module(
      "o_proj", std::make_shared<Linear>(num_heads * head_dim, c.hidden_size, c.attention_bias, gen));
  SACCADE_CHECK(
      c.no_rope_layers.empty() || static_cast<int64_t>(c.no_rope_layers.size()) == c.num_hidden_layers,
      "LlamaAttention: no_rope_layers has {} flags for num_hidden_layers {}", c.no_rope_layers.size(),
      c.num_hidden_layers);
  SACCADE_CHECK(c.layer_types.empty() || static_cast<int64_t>(c.layer_types.size()) == c.num_hidden_layers,
                "LlamaAttention: layer_types has {} entries for num_hidden_layers {}", c.layer_types.size(),
                c.num_hidden_layers);
  SACCADE_CHECK((c.no_rope_layers.empty() && c.layer_types.empty()) ||
                    (layer_idx >= 0 && layer_idx < c.num_hidden_layers),
                "LlamaAttention: layer_idx {} is not a layer of {}", layer_idx, c.num_hidden_layers);
  for (const std::string& t : c.layer_types)
    SACCADE_CHECK(t == "full_attention" || t == "sliding_attention",
                  "LlamaAttention: layer_types holds '{}' (full_attention or sliding_attention)", t);
  // Gemma 3: the sliding layers attend within the window, at their own rotary base, unscaled
  const bool sliding_layer = !c.layer_types.empty() && c.layer_types[layer_idx] == "sliding_attention";
  if (!c.layer_types.empty() && !sliding_layer) window = 0;
  const bool local_base = sliding_layer && c.rope_local_base_freq > 0;
  const bool rotates = c.no_rope_layers.empty() || c.no_rope_layers[layer_idx] != 0;
  if (rotates)
    rotary_emb = register_module(
        "rotary_emb",
        std::make_shared<RotaryEmbedding>(head_dim, local_base ? c.rope_local_base_freq : c.rope_theta,
                                          ops::RotaryStyle::Half, c.partial_rotary_factor,
                                          local_base ? ops::RopeScaling{} : c.rope_scaling));
  SACCADE_CHECK(!(c.qk_norm && c.qk_norm_full_width),
                "LlamaAttention: qk_norm (per head) and qk_norm_full_width (all heads) exclude each other");
  if (c.qk_norm || c.qk_norm_full_width) {
    // per head: over head_dim (Qwen3); full width: over all heads' H·head_dim or H_kv·head_dim (OLMo 2)
    const int64_t q_width = c.qk_norm ? head_dim : num_heads * head_dim;
    const int64_t k_width = c.qk_norm ? head_dim : num_kv_heads * head_dim;
    q_norm = register_module("q_norm",
                             std::make_shared<RMSNorm>(q_width, c.rms_norm_eps, true, c.norm_unit_offset));
    k_norm = register_module("k_norm",
                             std::make_shared<RMSNorm>(k_width, c.rms_norm_eps, true, c.norm_unit_offset));
    full_width_qk_norm_ = c.qk_norm_full_width;
  }
}

// the per-head norms go to GroupedHeads, which applies them after the split into heads
GroupedHeads LlamaAttention::heads() const {
  return GroupedHeads{num_heads,
                      num_kv_heads,
                      head_dim,
                      rotary_emb.get(),
                      full_width_qk_norm_ ? nullptr : q_norm.get(),
                      full_width_qk_norm_ ? nullptr : k_norm.get()};
}

// x (B, T, hidden) -> the projections (B, T, H·hd) and (B, T, H_kv·hd), full-width normed (OLMo 2's q_norm,
// k_norm) before the split into heads
Variable LlamaAttention::project_q(const Variable& x) {
  const Variable q = q_proj->forward(x);
  return full_width_qk_norm_ ? q_norm->forward(q) : q;
}
Variable LlamaAttention::project_k(const Variable& x) {
  const Variable k = k_proj->forward(x);
  return full_width_qk_norm_ ? k_norm->forward(k) : k;
}

int64_t LlamaAttention::kv_cache_bytes_per_token() const {
  return heads().kv_cache_bytes_per_token(k_proj->weight.dtype());
}

// x: (B, T, hidden) -> q (B, H, T, hd), k, v (B, H_kv, T, hd) -> (B, T, hidden)
Variable LlamaAttention::forward(const Variable& x, int64_t offset) {
  ErrorScope scope(name(), {shape_of(x)});
  check_input(x);
  const GroupedHeads g = heads();
  return attend(g.queries(project_q(x), offset), g.keys(project_k(x), offset), g.values(v_proj->forward(x)));
}

// x: (B, T, hidden) holding packed documents -> (B, T, hidden)
Variable LlamaAttention::forward(const Variable& x, const PackedDocuments& docs) {
  ErrorScope scope(name(), {shape_of(x)});
  check_input(x);
  const GroupedHeads g = heads();
  return attend(g.queries(project_q(x), docs), g.keys(project_k(x), docs), g.values(v_proj->forward(x)),
                &docs);
}

void LlamaAttention::check_input(const Variable& x) const {
  SACCADE_CHECK(x.defined() && x.dim() == 3, "LlamaAttention: expected x (B, T, hidden), got {}",
                x.defined() ? x.shape() : Shape{});
}

// q (B, H, Tq, hd), k, v (B, H_kv, Tk, hd), causal bottom-right -> (B, Tq, hidden)
Variable LlamaAttention::attend(const Variable& q, const Variable& k, const Variable& v,
                                const PackedDocuments* docs) {
  const char* op = "LlamaAttention";
  ops::AttentionMask mask = ops::attention_mask(Tensor(), Shape{q.size(0), num_heads, q.size(2), k.size(2)},
                                                ops::CausalAlign::BottomRight, q.device(), op, window);
  if (docs) mask = docs->restrict(mask);
  AttentionOptions options;
  if (scale > 0) options.scale = scale;
  if (softcap > 0) options.softcap = softcap;
  return o_proj->forward(heads().attend(q, k, v, mask, options, op).output);
}

Variable LlamaAttention::step(const Variable& x, KVCache& cache) {
  ErrorScope scope(name(), {shape_of(x)});
  check_input(x);
  const GroupedHeads g = heads();
  const int64_t offset = cache.length();
  auto [k, v] = cache.append(g.keys(project_k(x), offset), g.values(v_proj->forward(x)), "LlamaAttention");
  return attend(g.queries(project_q(x), offset), k, v);
}

std::shared_ptr<UnaryModule> hidden_norm(const LlamaConfig& c, const char* op) {
  SACCADE_CHECK(c.norm_type == "rms_norm" || c.norm_type == "layer_norm",
                "{}: norm_type must be 'rms_norm' or 'layer_norm', got '{}'", op, c.norm_type);
  if (c.norm_type == "layer_norm") return std::make_shared<LayerNorm>(c.hidden_size, c.rms_norm_eps);
  return std::make_shared<RMSNorm>(c.hidden_size, c.rms_norm_eps, true, c.norm_unit_offset);
}

LlamaBlock::LlamaBlock(const LlamaConfig& c, Generator* gen, int64_t layer_idx)
    : Module("LlamaBlock"), residual_multiplier(c.residual_multiplier) {
  ErrorScope scope(name());
  SACCADE_CHECK(c.norm_placement == "pre" || c.norm_placement == "post" || c.norm_placement == "sandwich",
                "LlamaBlock: norm_placement must be 'pre', 'post' or 'sandwich', got '{}'", c.norm_placement);
  SACCADE_CHECK(!c.parallel_residual || c.norm_placement == "pre",
                "LlamaBlock: parallel_residual needs norm_placement 'pre', got '{}'", c.norm_placement);
  SACCADE_CHECK(c.parallel_norms == 1 || c.parallel_norms == 2,
                "LlamaBlock: parallel_norms must be 1 or 2, got {}", c.parallel_norms);
  post_norms_ = c.norm_placement != "pre";
  parallel_ = c.parallel_residual;
  const bool sandwich = c.norm_placement == "sandwich";
  auto norm = [&](const char* name) { return register_module(name, hidden_norm(c, "LlamaBlock")); };
  if (!post_norms_ || sandwich) input_layernorm = norm("input_layernorm");
  self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(c, gen, layer_idx));
  if (!parallel_ || c.parallel_norms == 2) post_attention_layernorm = norm("post_attention_layernorm");
  if (sandwich) pre_feedforward_layernorm = norm("pre_feedforward_layernorm");
  if (post_norms_) post_feedforward_layernorm = norm("post_feedforward_layernorm");
  if (is_sparse_layer(c, layer_idx)) {
    MoeOptions o;
    o.num_experts = c.num_experts;
    o.num_experts_per_tok = c.num_experts_per_tok;
    o.intermediate_size = c.moe_intermediate_size > 0 ? c.moe_intermediate_size : c.intermediate_size;
    o.norm_topk_prob = c.norm_topk_prob;
    o.hidden_act = c.hidden_act;
    o.shared_expert_intermediate_size = c.shared_expert_intermediate_size;
    moe = register_module("mlp", std::make_shared<SparseMoeBlock>(c.hidden_size, o, gen));
  } else if (!c.gated_mlp) {
    plain_mlp = register_module(
        "mlp", std::make_shared<MLP>(c.hidden_size, c.intermediate_size, c.mlp_bias, gen, c.hidden_act));
  } else {
    mlp = register_module(
        "mlp", std::make_shared<SwiGLU>(c.hidden_size, c.intermediate_size, c.mlp_bias, gen, c.hidden_act));
  }
}

bool is_sparse_layer(const LlamaConfig& c, int64_t layer_idx) {
  if (c.num_experts <= 0) return false;
  if (std::find(c.mlp_only_layers.begin(), c.mlp_only_layers.end(), layer_idx) != c.mlp_only_layers.end())
    return false;
  return c.decoder_sparse_step > 0 && (layer_idx + 1) % c.decoder_sparse_step == 0;
}

Variable LlamaBlock::feed_forward(const Variable& x) {
  if (mlp) return mlp->forward(x);
  return plain_mlp ? plain_mlp->forward(x) : moe->forward(x);
}

// x: (B, T, hidden) -> (B, T, hidden)
Variable LlamaBlock::forward(const Variable& x, int64_t offset) {
  ErrorScope scope(name(), {shape_of(x)});
  return run(x, [this, offset](const Variable& h) {
    const Variable hn = input_layernorm ? input_layernorm->forward(h) : h;
    return finish(h, hn, self_attn->forward(hn, offset));
  });
}

// block(x), or through saccade::checkpoint when checkpoint_activations and a gradient can reach it
Variable LlamaBlock::run(const Variable& x, const std::function<Variable(const Variable&)>& block) {
  if (!checkpoint_activations || !grad_enabled() || !x.requires_grad()) return block(x);
  // NOTE: by value: the backward recomputes after this forward (and its caller's locals) returned
  return checkpoint([block](const std::vector<Variable>& in) { return block(in[0]); }, {x},
                    checkpoint_generators);
}

Variable LlamaBlock::forward(const Variable& x, const PackedDocuments& docs) {
  ErrorScope scope(name(), {shape_of(x)});
  return run(x, [this, docs](const Variable& h) {  // docs by value: see run
    const Variable hn = input_layernorm ? input_layernorm->forward(h) : h;
    return finish(h, hn, self_attn->forward(hn, docs));
  });
}

Variable LlamaBlock::step(const Variable& x, KVCache& cache) {
  ErrorScope scope(name(), {shape_of(x)});
  const Variable xn = input_layernorm ? input_layernorm->forward(x) : x;
  return finish(x, xn, self_attn->step(xn, cache));
}

// pre-norm:  h = x + r · attended,                            y = h + r · mlp(post_attention_layernorm(h))
// post-norm: h = x + r · post_attention_layernorm(attended),  y = h + r · post_feedforward_layernorm(mlp(h))
// sandwich:  as post-norm, the MLP's input normed too:         y = h + r · post_ff_ln(mlp(pre_ff_ln(h)))
// parallel:  y = x + r · attended + r · mlp(post_attention_layernorm(x))   (GPT-NeoX; Falcon 40B's ln_mlp)
//            y = x + r · attended + r · mlp(normed)   with one norm (parallel_norms 1: Falcon 7B, StableLM)
// r = residual_multiplier (1 but Granite); normed = input_layernorm(x), the attention's input
Variable LlamaBlock::finish(const Variable& x, const Variable& normed, const Variable& attended) {
  auto scaled = [&](const Variable& v) {
    return residual_multiplier == 1.0 ? v : mul(v, residual_multiplier);
  };
  if (parallel_) {
    const Variable mlp_in = post_attention_layernorm ? post_attention_layernorm->forward(x) : normed;
    return add(add(x, scaled(attended)), scaled(feed_forward(mlp_in)));
  }
  if (post_norms_) {
    const Variable h = add(x, scaled(post_attention_layernorm->forward(attended)));
    const Variable hn = pre_feedforward_layernorm ? pre_feedforward_layernorm->forward(h) : h;
    return add(h, scaled(post_feedforward_layernorm->forward(feed_forward(hn))));
  }
  const Variable h = add(x, scaled(attended));
  return add(h, scaled(feed_forward(post_attention_layernorm->forward(h))));
}

// ---- the whole model ----

int64_t LlamaConfig::context() const {
  if (rope_scaling.type != ops::RopeScaling::Type::Dynamic) return max_position_embeddings;
  return std::llround(rope_scaling.factor * static_cast<double>(max_position_embeddings));
}

LlamaModel::LlamaModel(const LlamaConfig& c, Generator* gen) : Module("LlamaModel"), config_(c) {
  ErrorScope scope(name());
  SACCADE_CHECK(
      c.vocab_size > 0 && c.num_hidden_layers > 0 && c.max_position_embeddings > 0,
      "LlamaModel: vocab_size {}, num_hidden_layers {} and max_position_embeddings {} must be positive",
      c.vocab_size, c.num_hidden_layers, c.max_position_embeddings);
  embed_tokens = register_module(
      "embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, c.pad_token_id, gen));
  auto list = register_module("layers", std::make_shared<Module>("ModuleList"));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    layers.push_back(list->register_module(std::to_string(i), std::make_shared<LlamaBlock>(c, gen, i)));
  norm = register_module("norm", hidden_norm(c, "LlamaModel"));
  for (auto& [n, p] : named_parameters())
    if (p.dim() >= 2) init::normal_(p.data(), 0.0, 0.02, gen);
  if (auto pad = embed_tokens->padding_idx()) init::zeros_(embed_tokens->weight.data().select(0, *pad));
}

void LlamaModel::check(const Tensor& idx, int64_t offset) const {
  SACCADE_CHECK(idx.defined() && idx.dim() == 2 && idx.dtype() == DType::Int64 && idx.size(1) >= 1,
                "LlamaModel: expected token ids int64 (B, T), got {}", idx.defined() ? idx.shape() : Shape{});
  const int64_t context = config_.context();
  SACCADE_CHECK(offset + idx.size(1) <= context,
                "LlamaModel: positions [{}, {}) of ids {} pass the context {}", offset, offset + idx.size(1),
                idx.shape(), context);
}

Variable LlamaModel::forward(const Tensor& idx, int64_t offset) {
  ErrorScope scope(name(), {shape_of(idx)});
  check(idx, offset);
  Variable x = embed(idx);
  for (auto& layer : layers) x = layer->forward(x, offset);
  return norm->forward(x);
}

// idx, document_ids: (B, T) -> (B, T, hidden)
Variable LlamaModel::forward(const Tensor& idx, const Tensor& document_ids) {
  ErrorScope scope(name(), {shape_of(idx), shape_of(document_ids)});
  check(idx, 0);
  SACCADE_CHECK(document_ids.defined() && document_ids.shape() == idx.shape(),
                "LlamaModel: document_ids {} must have the shape of the ids {}",
                document_ids.defined() ? document_ids.shape() : Shape{}, idx.shape());
  const PackedDocuments docs = PackedDocuments::of(document_ids, idx.device(), "LlamaModel");
  Variable x = embed(idx);
  for (auto& layer : layers) x = layer->forward(x, docs);
  return norm->forward(x);
}

Variable LlamaModel::step(const Tensor& idx, std::vector<KVCache>& caches) {
  ErrorScope scope("LlamaModel::step", {shape_of(idx)});
  SACCADE_CHECK(caches.size() == layers.size(), "LlamaModel::step: {} caches for {} layers", caches.size(),
                layers.size());
  check(idx, caches[0].length());
  Variable x = embed(idx);
  for (size_t i = 0; i < layers.size(); ++i) x = layers[i]->step(x, caches[i]);
  return norm->forward(x);
}

Variable scale_embeddings(const Variable& x, const LlamaConfig& c) {
  if (c.embedding_multiplier == 1.0) return x;
  double m = c.embedding_multiplier;
  if (c.embedding_multiplier_in_dtype && x.dtype() == DType::BFloat16)
    m = static_cast<float>(bfloat16(static_cast<float>(m)));
  else if (c.embedding_multiplier_in_dtype && x.dtype() == DType::Float16)
    m = static_cast<float>(float16(static_cast<float>(m)));
  else if (c.embedding_multiplier_in_dtype && x.dtype() == DType::Float32)
    m = static_cast<float>(m);
  return mul(x, m);
}

// idx (B, T) -> embed_tokens(idx) · embedding_multiplier (B, T, hidden)
Variable LlamaModel::embed(const Tensor& idx) {
  return scale_embeddings(embed_tokens->forward(idx), config_);
}

LlamaForCausalLM::LlamaForCausalLM(const LlamaConfig& c, uint64_t seed)
    : Module("LlamaForCausalLM"), config_(c), gen_(std::make_unique<Generator>(seed)) {
  ErrorScope scope(name());
  SACCADE_CHECK(
      c.logits_scaling > 0 && c.embedding_multiplier > 0 && c.residual_multiplier > 0,
      "LlamaForCausalLM: logits_scaling {}, embedding_multiplier {} and residual_multiplier {} must be "
      "positive",
      c.logits_scaling, c.embedding_multiplier, c.residual_multiplier);
  model = register_module("model", std::make_shared<LlamaModel>(c, gen_.get()));
  if (!c.tie_word_embeddings) {
    lm_head =
        register_module("lm_head", std::make_shared<Linear>(c.hidden_size, c.vocab_size, false, gen_.get()));
    init::normal_(lm_head->weight.data(), 0.0, 0.02, gen_.get());
  }
}

Variable scale_logits(const Variable& logits, const LlamaConfig& c) {
  const Variable scaled = c.logits_scaling == 1.0 ? logits : div(logits, c.logits_scaling);
  const double cap = c.final_logit_softcapping;  // Gemma 2: f · tanh(logits / f)
  return cap > 0 ? mul(tanh(div(scaled, cap)), cap) : scaled;
}

// hidden (B, T, hidden) -> logits (B, T, vocab), scaled as scale_logits says (1 but Granite and Gemma 2)
Variable LlamaForCausalLM::head(const Variable& hidden) {
  return scale_logits(lm_head
                          ? lm_head->forward(hidden)
                          : tied_output(hidden, model->embed_tokens->weight, output_q8_0, "LlamaForCausalLM"),
                      config_);
}

int64_t num_parameters(const LlamaConfig& c) {
  using I = __int128;
  const bool signs_ok = c.hidden_size > 0 && c.num_attention_heads > 0 && c.num_key_value_heads > 0 &&
                        c.vocab_size > 0 && c.num_hidden_layers > 0 && c.intermediate_size > 0 &&
                        c.head_dim >= 0 && c.num_experts >= 0 && c.moe_intermediate_size >= 0 &&
                        c.shared_expert_intermediate_size >= 0;
  if (!signs_ok) return -1;
  for (int64_t n : {c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.vocab_size,
                    c.num_hidden_layers, c.intermediate_size, c.head_dim, c.num_experts,
                    c.moe_intermediate_size, c.shared_expert_intermediate_size})
    if (n >= (int64_t{1} << 40)) return -1;  // below 2^40 each: a product of three stays below 2^121
  const I limit = I{1} << 62, d = c.hidden_size, H = c.num_attention_heads, Hkv = c.num_key_value_heads,
          V = c.vocab_size, L = c.num_hidden_layers;
  const I hd = c.head_dim > 0 ? c.head_dim : d / H;
  const I norm = c.norm_type == "layer_norm" ? 2 * d : d;  // LayerNorm: weight and bias
  const bool sandwich = c.norm_placement == "sandwich", post = c.norm_placement != "pre";
  const I norms = ((!post || sandwich) ? 1 : 0) + ((!c.parallel_residual || c.parallel_norms == 2) ? 1 : 0) +
                  (sandwich ? 1 : 0) + (post ? 1 : 0);
  I layer = norms * norm + 2 * d * H * hd + 2 * d * Hkv * hd;  // norms; q and o, k and v
  if (c.attention_bias || c.qkv_bias) layer += H * hd + 2 * Hkv * hd;
  if (c.attention_bias) layer += d;
  if (c.qk_norm) layer += 2 * hd;
  if (c.qk_norm_full_width) layer += H * hd + Hkv * hd;
  const I f = c.intermediate_size;
  const I dense =
      c.gated_mlp ? 3 * d * f + (c.mlp_bias ? 2 * f + d : 0) : 2 * d * f + (c.mlp_bias ? f + d : 0);
  const I fe = c.moe_intermediate_size > 0 ? c.moe_intermediate_size : f, E = c.num_experts,
          fs = c.shared_expert_intermediate_size;
  const I sparse = d * E + 3 * E * d * fe + (fs > 0 ? 3 * d * fs + d : 0);  // router, experts, shared expert
  if (layer > limit || dense > limit || sparse > limit) return -1;
  // the sparse layers (is_sparse_layer): every decoder_sparse_step-th, less the mlp_only_layers among them
  int64_t sparse_layers = 0;
  if (c.num_experts > 0 && c.decoder_sparse_step > 0) {
    sparse_layers = c.num_hidden_layers / c.decoder_sparse_step;
    std::vector<int64_t> only = c.mlp_only_layers;
    std::sort(only.begin(), only.end());
    only.erase(std::unique(only.begin(), only.end()), only.end());
    for (int64_t i : only)
      if (i >= 0 && i < c.num_hidden_layers && (i + 1) % c.decoder_sparse_step == 0) --sparse_layers;
  }
  const I n = V * d * (c.tie_word_embeddings ? 1 : 2) + norm + L * layer + sparse_layers * sparse +
              (L - sparse_layers) * dense;
  return n <= limit ? static_cast<int64_t>(n) : -1;
}

int64_t LlamaForCausalLM::quantize_q8_0() {
  ErrorScope scope(name());
  int64_t n = static_cast<int64_t>(nn::quantize_q8_0(*this).size());
  if (!lm_head) output_q8_0 = ops::quantize_q8_0(model->embed_tokens->weight.data()), ++n;
  return n;
}

Variable LlamaForCausalLM::aux_loss() const {
  if (!config_.output_router_logits) return Variable();
  std::vector<Variable> logits;
  for (const auto& layer : model->layers)
    if (layer->moe && layer->moe->router_logits.defined()) logits.push_back(layer->moe->router_logits);
  if (logits.empty()) return Variable();
  return mul(load_balancing_loss(logits, config_.num_experts, config_.num_experts_per_tok),
             config_.router_aux_loss_coef);
}

Variable LlamaForCausalLM::forward(const Tensor& idx) {
  ErrorScope scope(name(), {shape_of(idx)});
  return head(model->forward(idx));
}

Variable LlamaForCausalLM::forward(const Tensor& idx, const Tensor& document_ids) {
  ErrorScope scope(name(), {shape_of(idx), shape_of(document_ids)});
  return head(model->forward(idx, document_ids));
}

Variable LlamaForCausalLM::step(const Tensor& idx, State& state, int64_t logits_to_keep) {
  const char* op = "LlamaForCausalLM::step";
  ErrorScope scope(op, {shape_of(idx)});
  return head(keep_last_positions(model->step(idx, state.caches), logits_to_keep, op));
}

}  // namespace saccade::nn
