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
  AttentionOutput r = attend_from_scores(scores, values, mask, is_training() ? dropout : 0.0, gen_);
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
  const ops::AttentionMask mask = ops::attention_mask(
      valid_lens_or_mask, Shape{queries.size(0), queries.size(1), keys.size(1)},
      causal ? ops::CausalAlign::BottomRight : ops::CausalAlign::None, queries.device(), op);
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
