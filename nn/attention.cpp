#include "nn/attention.h"

#include <cmath>

#include "autograd/function.h"
#include "autograd/functions/attention.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/nn.h"

namespace saccade::nn {

Tensor causal_mask(int64_t tq, int64_t tk, Device device) {
  ErrorScope scope("causal_mask");
  SACCADE_CHECK(tq >= 0 && tk >= 0, "causal_mask: negative sizes Tq = {}, Tk = {}", tq, tk);
  // keep[i, j] = j <= i + (Tk - Tq)
  Tensor rows =
      ops::add(ops::arange(0, static_cast<double>(tq), 1, DType::Int64, device), static_cast<double>(tk - tq))
          .view({tq, 1});
  Tensor cols = ops::arange(0, static_cast<double>(tk), 1, DType::Int64, device).view({1, tk});
  return ops::le(cols, rows);
}

void check_valid_lens_or_mask(const char* module, const Tensor& mask, const Shape& x) {
  if (mask.defined()) ops::attention_mask(mask, x, ops::CausalAlign::None, mask.device(), module);
}

namespace {

// scores: (B, ..., H, Tq, Tk), values: (B, ..., H_kv, Tk, Dv): the composed path (the readable reference);
// H = G·H_kv groups the heads as attention_values does.
AttentionOutput attend_composed(const Variable& scores, const Variable& values,
                                const ops::AttentionMask& mask, double dropout_p, Generator* gen) {
  Variable weights = masked_softmax(scores, ops::attention_keep_mask(mask, scores.shape(), scores.device()));
  Variable dropped = saccade::dropout(weights, dropout_p, dropout_p > 0, gen);
  return {attention_values(dropped, values), weights};
}

void check_qkv(const char* op, const Variable& q, const Variable& k, const Variable& v, bool enable_gqa) {
  check_defined(op, q, k, v);
  ops::check_attention_inputs(op, q.data(), k.data(), v.data(), enable_gqa);
}

void check_dropout_p(const char* op, double p) {
  SACCADE_CHECK(p >= 0 && p < 1, "{}: dropout_p must be in [0, 1), got {}", op, p);
}

ops::CausalAlign causal_align(bool is_causal) {
  return is_causal ? ops::CausalAlign::BottomRight : ops::CausalAlign::None;
}

}  // namespace

// scores: (B, ..., Tq, Tk), values: (B, ..., Tk, Dv) -> output (B, ..., Tq, Dv), weights (B, ..., Tq, Tk)
AttentionOutput attend_from_scores(const Variable& scores, const Variable& values,
                                   const AttentionOptions& options, const char* op) {
  check_defined(op, scores, values);
  const Shape& s = scores.shape();
  const Shape& v = values.shape();
  const int nd = s.size();
  SACCADE_CHECK(nd >= 2 && v.size() == nd && same_leading_dims(s, v, nd - 2) && v[nd - 2] == s[nd - 1],
                "{}: scores {} (B, ..., Tq, Tk) and values {} (B, ..., Tk, Dv) do not match", op, s, v);
  SACCADE_CHECK(options.window == 0 && !options.scale && !options.enable_gqa,
                "{}: window, scale and enable_gqa do not apply to scores already computed (scores {})", op,
                s);
  check_dropout_p(op, options.dropout_p);
  ops::check_same_device(op, {&scores.data(), &values.data()});
  ops::AttentionMask mask =
      ops::attention_mask(options.attn_mask, s, causal_align(options.is_causal), scores.device(), op);
  return attend_composed(scores, values, mask, options.dropout_p, options.generator);
}

// q: (B, ..., H, Tq, D), k: (B, ..., H_kv, Tk, D), v: (B, ..., H_kv, Tk, Dv)
AttentionOutput scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                             const AttentionOptions& options) {
  ErrorScope scope("scaled_dot_product_attention");
  const char* op = "scaled_dot_product_attention";
  check_qkv(op, q, k, v, options.enable_gqa);
  ops::AttentionMask mask =
      ops::attention_mask(options.attn_mask, ops::attention_scores_shape(q.shape(), k.shape()),
                          causal_align(options.is_causal), q.device(), op, options.window);
  AttentionOptions rest = options;
  rest.attn_mask = Tensor(), rest.is_causal = false, rest.window = 0;  // now in `mask`
  return scaled_dot_product_attention(q, k, v, mask, rest, op);
}

// q: (B, ..., H, Tq, D), k: (B, ..., H_kv, Tk, D), v: (B, ..., H_kv, Tk, Dv)
AttentionOutput scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                             const ops::AttentionMask& mask, const AttentionOptions& options,
                                             const char* op) {
  ErrorScope scope(op);
  check_qkv(op, q, k, v, options.enable_gqa);
  SACCADE_CHECK(!options.attn_mask.defined() && !options.is_causal && options.window == 0,
                "{}: the mask is given twice (an ops::AttentionMask and options' attn_mask, is_causal or "
                "window)",
                op);
  check_dropout_p(op, options.dropout_p);
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  SACCADE_CHECK(std::isfinite(scale), "{}: scale must be finite, got {}", op, scale);
  ops::check_attention_window(op, mask.window, mask.causal,
                              ops::attention_scores_shape(q.shape(), k.shape()));
  const double p = options.dropout_p;
  Generator* gen = options.generator;
  if (options.softcap) {  // composed: softcap · tanh(scores / softcap), then as without it
    const double cap = *options.softcap;
    SACCADE_CHECK(cap > 0 && std::isfinite(cap), "{}: softcap must be positive and finite, got {}", op, cap);
    AttentionOutput r =
        attend_composed(mul(tanh(div(attention_scores(q, k, scale), cap)), cap), v, mask, p, gen);
    if (!options.need_weights) r.weights = Variable();
    return r;
  }
  // NOTE: the one place every dot-product attention goes through: fused unless the weights are asked for
  if (!options.need_weights) return {flash_attention(q, k, v, mask, scale, p, p > 0, gen), Variable()};
  return attend_composed(attention_scores(q, k, scale), v, mask, p, gen);
}

// ---- AdditiveAttention ----

AdditiveAttention::AdditiveAttention(int64_t key_size, int64_t query_size, int64_t num_hiddens,
                                     double dropout, Generator* gen)
    : Module("AdditiveAttention"), dropout(dropout), gen_(gen) {
  ErrorScope scope(name());
  SACCADE_CHECK(key_size > 0 && query_size > 0 && num_hiddens > 0,
                "AdditiveAttention: sizes must be positive, got key_size {}, query_size {}, num_hiddens {}",
                key_size, query_size, num_hiddens);
  SACCADE_CHECK(dropout >= 0 && dropout < 1, "AdditiveAttention: dropout must be in [0, 1), got {}", dropout);
  W_k = register_module("W_k", std::make_shared<Linear>(key_size, num_hiddens, false, gen));
  W_q = register_module("W_q", std::make_shared<Linear>(query_size, num_hiddens, false, gen));
  w_v = register_module("w_v", std::make_shared<Linear>(num_hiddens, 1, false, gen));
}

Variable AdditiveAttention::forward(const Variable& queries, const Variable& keys, const Variable& values,
                                    const Tensor& valid_lens_or_mask) {
  ErrorScope scope(name(),
                   {shape_of(queries), shape_of(keys), shape_of(values), shape_of(valid_lens_or_mask)});
  return forward_with_weights(queries, keys, values, valid_lens_or_mask).output;
}

// queries: (B, Tq, q), keys: (B, Tk, k), values: (B, Tk, v) -> output (B, Tq, v), weights (B, Tq, Tk)
AttentionOutput AdditiveAttention::forward_with_weights(const Variable& queries, const Variable& keys,
                                                        const Variable& values,
                                                        const Tensor& valid_lens_or_mask) {
  ErrorScope scope(name(),
                   {shape_of(queries), shape_of(keys), shape_of(values), shape_of(valid_lens_or_mask)});
  return forward_projected(queries, project_keys(keys), values, valid_lens_or_mask);
}

// keys: (B, Tk, k) -> (B, Tk, h)
Variable AdditiveAttention::project_keys(const Variable& keys) {
  SACCADE_CHECK(keys.defined(), "AdditiveAttention: got an undefined keys tensor");
  SACCADE_CHECK(keys.dim() == 3 && keys.size(2) == W_k->in_features(),
                "AdditiveAttention: expected keys (B, Tk, {}), got {}", W_k->in_features(), keys.shape());
  return W_k->forward(keys);
}

// queries: (B, Tq, q), projected_keys: (B, Tk, h), values: (B, Tk, v)
//   -> output (B, Tq, v), weights (B, Tq, Tk)
AttentionOutput AdditiveAttention::forward_projected(const Variable& queries, const Variable& projected_keys,
                                                     const Variable& values,
                                                     const Tensor& valid_lens_or_mask) {
  ErrorScope scope(
      name(), {shape_of(queries), shape_of(projected_keys), shape_of(values), shape_of(valid_lens_or_mask)});
  const char* op = "AdditiveAttention";
  const Variable& keys = projected_keys;
  SACCADE_CHECK(queries.defined() && keys.defined() && values.defined(),
                "{}: got an undefined queries, keys or values tensor", op);
  SACCADE_CHECK(
      queries.dim() == 3 && keys.dim() == 3 && values.dim() == 3,
      "{}: expected queries (B, Tq, query_size), projected keys (B, Tk, num_hiddens), values (B, Tk, "
      "Dv), got {}, {}, {}",
      op, queries.shape(), keys.shape(), values.shape());
  SACCADE_CHECK(
      queries.size(0) == keys.size(0) && keys.size(0) == values.size(0) && keys.size(1) == values.size(1) &&
          queries.size(2) == W_q->in_features() && keys.size(2) == W_q->out_features(),
      "{}: queries {}, projected keys {}, values {} do not match (B, Tq, {}), (B, Tk, {}), (B, Tk, Dv)", op,
      queries.shape(), keys.shape(), values.shape(), W_q->in_features(), W_q->out_features());
  const ops::AttentionMask mask =
      ops::attention_mask(valid_lens_or_mask, Shape{queries.size(0), queries.size(1), keys.size(1)},
                          ops::CausalAlign::None, queries.device(), op);
  // qp: (B, Tq, h), w: (h); scores: (B, Tq, Tk)
  Variable qp = W_q->forward(queries), w = reshape(w_v->weight, {-1});
  // fused on every device (CPU: ops/cpu/additive_attention.cpp, CUDA: ops/cuda/additive_attention.cu)
  Variable scores =
      use_fused ? additive_attention_scores(qp, keys, w) : additive_scores_composed(qp, keys, w);
  AttentionOutput r = attend_composed(scores, values, mask, is_training() ? dropout : 0.0, gen_);
  weights_ = r.weights.data();
  return r;
}

// ---- DotProductAttention ----

DotProductAttention::DotProductAttention(double dropout, Generator* gen)
    : Module("DotProductAttention"), dropout(dropout), gen_(gen) {
  ErrorScope scope(name());
  SACCADE_CHECK(dropout >= 0 && dropout < 1, "DotProductAttention: dropout must be in [0, 1), got {}",
                dropout);
}

// queries: (B, Tq, D), keys: (B, Tk, D), values: (B, Tk, Dv) -> (B, Tq, Dv)
Variable DotProductAttention::forward(const Variable& queries, const Variable& keys, const Variable& values,
                                      const Tensor& valid_lens_or_mask, bool causal) {
  ErrorScope scope(name(),
                   {shape_of(queries), shape_of(keys), shape_of(values), shape_of(valid_lens_or_mask)});
  const char* op = "DotProductAttention";
  SACCADE_CHECK(queries.defined() && keys.defined() && values.defined(),
                "{}: got an undefined queries, keys or values tensor", op);
  SACCADE_CHECK(queries.dim() == 3 && keys.dim() == 3 && values.dim() == 3,
                "{}: expected queries (B, Tq, D), keys (B, Tk, D), values (B, Tk, Dv), got {}, {}, {}", op,
                queries.shape(), keys.shape(), values.shape());
  SACCADE_CHECK(queries.size(0) == keys.size(0) && keys.size(0) == values.size(0) &&
                    keys.size(1) == values.size(1) && queries.size(2) == keys.size(2),
                "{}: queries {}, keys {}, values {} do not match (B, Tq, D), (B, Tk, D), (B, Tk, Dv)", op,
                queries.shape(), keys.shape(), values.shape());
  const ops::AttentionMask mask =
      ops::attention_mask(valid_lens_or_mask, Shape{queries.size(0), queries.size(1), keys.size(1)},
                          causal_align(causal), queries.device(), op);
  const bool keep = keeps_weights(need_weights, is_training());
  AttentionOutput r = scaled_dot_product_attention(
      queries, keys, values, mask,
      {.dropout_p = is_training() ? dropout : 0.0, .generator = gen_, .need_weights = keep}, op);
  weights_ = keep ? r.weights.data() : Tensor();
  weights_skipped_ = !keep;
  return r.output;
}

Tensor DotProductAttention::attention_weights() const {
  return kept_attention_weights(weights_, weights_skipped_, "DotProductAttention::attention_weights");
}

Tensor kept_attention_weights(const Tensor& weights, bool skipped, const char* accessor) {
  SACCADE_CHECK(!skipped,
                "{}: the last forward kept no attention weights: it ran in training mode, where the fused "
                "kernel (FlashAttention) never forms them. Call eval() before that forward, or set "
                "need_weights = true (the composed path, O(T^2) memory) to keep them",
                accessor);
  return weights;
}

}  // namespace saccade::nn
