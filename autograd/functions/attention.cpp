// Derivative rule of fused attention, beside its forward. `g` is dL/d(out).
#include "autograd/functions/attention.h"

#include <array>
#include <cmath>
#include <optional>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "autograd/grad_mode.h"
#include "ops/elementwise.h"

namespace saccade {

// x (..., H, T, C) viewed as (..., H_kv, G·T, C): the rows of the G query heads of each group stacked
static Variable fold_groups(const Variable& x, int64_t h_kv) {
  Shape s = x.shape();
  const size_t nd = s.size();
  s[nd - 2] *= s[nd - 3] / h_kv;
  s[nd - 3] = h_kv;
  return reshape(x, s);
}

// q: (B, ..., H, Tq, D), k: (B, ..., H_kv, Tk, D) -> (B, ..., H, Tq, Tk)
Variable attention_scores(const Variable& q, const Variable& k, double scale) {
  if (q.dim() < 4 || q.size(-3) == k.size(-3)) return mul(matmul(q, transpose(k, -2, -1)), scale);
  // (B, ..., H_kv, G·Tq, D) @ (B, ..., H_kv, D, Tk): one product a key head, no copy of k
  Shape s = q.shape();
  s[s.size() - 1] = k.size(-2);
  return reshape(mul(matmul(fold_groups(q, k.size(-3)), transpose(k, -2, -1)), scale), s);
}

// weights: (B, ..., H, Tq, Tk), v: (B, ..., H_kv, Tk, Dv) -> (B, ..., H, Tq, Dv)
Variable attention_values(const Variable& weights, const Variable& v) {
  if (weights.dim() < 4 || weights.size(-3) == v.size(-3)) return matmul(weights, v);
  Shape s = weights.shape();
  s[s.size() - 1] = v.size(-1);
  return reshape(matmul(fold_groups(weights, v.size(-3)), v), s);
}

// Z(softmax(q kᵀ · scale, masked)) v composed of autograd ops, with the kernel's own dropout mask Z (flash
// attention's second derivative); grouped heads as attention_scores
static Variable attention_composed(const Variable& q, const Variable& k, const Variable& v,
                                   const ops::AttentionMask& mask, double scale,
                                   const ops::AttentionDropout& drop) {
  Variable scores = attention_scores(q, k, scale);
  Tensor keep = ops::attention_keep_mask(mask, scores.shape(), scores.device());
  Variable weights = keep.defined() ? masked_softmax(scores, keep) : softmax(scores, -1);
  if (drop.p > 0)
    weights =
        mul(weights,
            Variable(ops::attention_dropout_mask(drop, weights.shape(), weights.dtype(), weights.device())));
  return attention_values(weights, v);
}

// q: (B, ..., H, Tq, D), k: (B, ..., H_kv, Tk, D), v: (B, ..., H_kv, Tk, Dv); out: (B, ..., H, Tq, Dv);
// lse: (B, ..., H, Tq)
Variable flash_attention(const Variable& q, const Variable& k, const Variable& v,
                         const ops::AttentionMask& mask, double scale, double dropout_p, bool training,
                         Generator* gen) {
  OpScope op(op_info::flash_attention, q, k, v);
  SACCADE_AUTOCAST(op, flash_attention, q, k, v, mask, scale, dropout_p, training, gen);
  // out = Z(P) V with P = softmax(S), S = q kᵀ · scale (masked), Z the dropout mask:
  //   dV = Z(P)ᵀ g,  dP = Z(g Vᵀ),  dS = P ⊙ (dP - rowsum(g ⊙ out)),  dq = scale dS k,  dk = scale dSᵀ q
  SACCADE_CHECK(q.defined() && k.defined() && v.defined(),
                "flash_attention: got an undefined query, key or value");
  SACCADE_CHECK(dropout_p >= 0 && dropout_p < 1, "flash_attention: dropout_p must be in [0, 1), got {}",
                dropout_p);
  ops::AttentionDropout drop;
  if (training && dropout_p > 0 && q.dim() >= 2 && k.dim() >= 2) {
    Generator& g = gen ? *gen : default_generator();
    uint64_t n = static_cast<uint64_t>(k.size(-2));  // one counter per weight: B·…·Tq·Tk
    for (int i = 0; i + 1 < q.dim(); ++i) n *= static_cast<uint64_t>(q.size(i));
    drop = {dropout_p, g.seed(), g.advance(n), Tensor()};
  }
  ops::FlashAttentionForward f =
      ops::flash_attention_forward(q.data(), k.data(), v.data(), mask, scale, drop);
  drop.kept = f.kept;  // the backward reads the forward's keep flags where the CPU kept them
  const OpInfo& row = op_info::flash_attention;
  SavedVariable sq(q, row), sk(k, row), sv(v, row);
  SavedTensor so(f.out, row);
  Tensor lse = f.lse;
  return make_result(op, f.out, {q, k, v}, [sq, sk, sv, so, lse, mask, scale, drop](const Variable& g) {
    const Variable qv = sq.get(), kv = sk.get(), vv = sv.get();
    if (grad_enabled())  // create_graph: through the composed reference, dropping what the kernel dropped
      return recompute_backward(
          {qv, kv, vv},
          [&](const std::vector<Variable>& in) {
            return attention_composed(in[0], in[1], in[2], mask, scale, drop);
          },
          g);
    const Tensor& qd = qv.data();
    ops::FlashAttentionGrads r = ops::flash_attention_backward(g.data().to(qd.dtype()), qd, kv.data(),
                                                               vv.data(), so.get(), lse, mask, scale, drop);
    return std::vector<Variable>{Variable(r.gq), Variable(r.gk), Variable(r.gv)};
  });
}

// qp: (B, Tq, A), kp: (B, L, A), w_v: (A) -> scores (B, Tq, L)
Variable additive_attention_scores(const Variable& qp, const Variable& kp, const Variable& w_v) {
  OpScope op(op_info::additive_attention_scores, qp, kp, w_v);
  SACCADE_AUTOCAST(op, additive_attention_scores, qp, kp, w_v);
  // scores = Σ_a w_v tanh(qp + kp), t = tanh(qp + kp):
  //   dw_v = Σ g t,  dqp = Σ_l g w_v (1 - t²),  dkp = Σ_i g w_v (1 - t²)
  const OpInfo& row = op_info::additive_attention_scores;
  SACCADE_CHECK(qp.defined() && kp.defined() && w_v.defined(),
                "{}: got an undefined projected query, projected key or w_v", row.name);
  Tensor scores = ops::additive_attention_scores(qp.data(), kp.data(), w_v.data());
  SavedVariable sq(qp, row), sk(kp, row), sw(w_v, row);
  return make_result(op, scores, {qp, kp, w_v}, [sq, sk, sw](const Variable& g) {
    const Variable q = sq.get(), k = sk.get(), w = sw.get();
    if (grad_enabled())  // create_graph: through the composed reference
      return recompute_backward(
          {q, k, w},
          [](const std::vector<Variable>& in) { return additive_scores_composed(in[0], in[1], in[2]); }, g);
    ops::AdditiveScoresGrads r =
        ops::additive_attention_scores_backward(g.data().to(q.dtype()), q.data(), k.data(), w.data());
    return std::vector<Variable>{Variable(r.gqp), Variable(r.gkp), Variable(r.gw_v)};
  });
}

// qp: (B, Tq, A), kp: (B, L, A), w_v: (A) -> (B, Tq, L)
Variable additive_scores_composed(const Variable& qp, const Variable& kp, const Variable& w_v) {
  const char* name = op_info::additive_scores_composed.name;
  ErrorScope scope(name);
  OpScope op(op_info::additive_scores_composed, qp, kp, w_v);
  ops::check_additive_scores(name, qp.data(), kp.data(), w_v.data());
  // features: (B, Tq, 1, A) + (B, 1, L, A) -> (B, Tq, L, A); scores: features @ w_v -> (B, Tq, L)
  Variable features = tanh(add(unsqueeze(qp, 2), unsqueeze(kp, 1)));
  return squeeze(linear(features, unsqueeze(w_v, 0), Variable()), -1);
}

// ---- scaled dot-product attention ----

namespace {

// Under autocast, q, k and v cast as torch.autocast casts scaled_dot_product_attention's inputs (on its
// lower-precision lists): before any check. There a float32 q and k out of an RMSNorm (OLMo 2's and Qwen3's
// q_norm and k_norm; norms are on autocast's float32 list) meet a 16-bit v, and all three run in 16 bits.
// Every path of the attention would cast them so (flash_attention's row; the scores' matmuls), so this
// changes no result, only lets them meet. Empty when autocast is off or no input changes (so the caller's
// second call does not come back here).
std::optional<std::array<Variable, 3>> autocast_qkv(const Variable& q, const Variable& k, const Variable& v) {
  if (!autocast::active() || !q.defined() || !k.defined() || !v.defined()) return std::nullopt;
  const AutocastPolicy policy = autocast_policy(op_info::flash_attention, q.device());
  std::array<Variable, 3> c{q, k, v};
  bool changed = false;
  for (Variable& x : c) {
    if (!is_floating(x.dtype())) continue;
    const DType to = autocast::target_dtype(policy, x.dtype(), x.dtype());
    if (to != x.dtype()) x = autocast::cast(x, to), changed = true;
  }
  return changed ? std::optional(c) : std::nullopt;
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

// scores: (B, ..., H, Tq, Tk), values: (B, ..., H_kv, Tk, Dv): the composed path (the readable reference);
// H = G·H_kv groups the heads as attention_values does.
AttentionOutput attend_from_scores(const Variable& scores, const Variable& values,
                                   const ops::AttentionMask& mask, double dropout_p, Generator* gen) {
  Variable weights = masked_softmax(scores, ops::attention_keep_mask(mask, scores.shape(), scores.device()));
  Variable dropped = saccade::dropout(weights, dropout_p, dropout_p > 0, gen);
  return {attention_values(dropped, values), weights};
}

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
  ops::AttentionMask mask = ops::with_documents(
      ops::attention_mask(options.attn_mask, s, causal_align(options.is_causal), scores.device(), op),
      options.document_ids, s, scores.device(), op);
  return attend_from_scores(scores, values, mask, options.dropout_p, options.generator);
}

// q: (B, ..., H, Tq, D), k: (B, ..., H_kv, Tk, D), v: (B, ..., H_kv, Tk, Dv)
AttentionOutput scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                             const AttentionOptions& options) {
  ErrorScope scope("scaled_dot_product_attention");
  if (const auto c = autocast_qkv(q, k, v)) [[unlikely]]
    return scaled_dot_product_attention((*c)[0], (*c)[1], (*c)[2], options);
  const char* op = "scaled_dot_product_attention";
  check_qkv(op, q, k, v, options.enable_gqa);
  const Shape scores = ops::attention_scores_shape(q.shape(), k.shape());
  ops::AttentionMask mask =
      ops::with_documents(ops::attention_mask(options.attn_mask, scores, causal_align(options.is_causal),
                                              q.device(), op, options.window),
                          options.document_ids, scores, q.device(), op);
  AttentionOptions rest = options;
  rest.attn_mask = Tensor(), rest.is_causal = false, rest.window = 0,
  rest.document_ids = Tensor();  // in `mask`
  return scaled_dot_product_attention(q, k, v, mask, rest, op);
}

// q: (B, ..., H, Tq, D), k: (B, ..., H_kv, Tk, D), v: (B, ..., H_kv, Tk, Dv)
AttentionOutput scaled_dot_product_attention(const Variable& q, const Variable& k, const Variable& v,
                                             const ops::AttentionMask& mask, const AttentionOptions& options,
                                             const char* op) {
  ErrorScope scope(op);
  if (const auto c = autocast_qkv(q, k, v)) [[unlikely]]
    return scaled_dot_product_attention((*c)[0], (*c)[1], (*c)[2], mask, options, op);
  check_qkv(op, q, k, v, options.enable_gqa);
  SACCADE_CHECK(
      !options.attn_mask.defined() && !options.is_causal && options.window == 0 &&
          !options.document_ids.defined(),
      "{}: the mask is given twice (an ops::AttentionMask and options' attn_mask, is_causal, window "
      "or document_ids)",
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
        attend_from_scores(mul(tanh(div(attention_scores(q, k, scale), cap)), cap), v, mask, p, gen);
    if (!options.need_weights) r.weights = Variable();
    return r;
  }
  // NOTE: the one place every dot-product attention goes through: fused unless the weights are asked for
  if (!options.need_weights) return {flash_attention(q, k, v, mask, scale, p, p > 0, gen), Variable()};
  return attend_from_scores(attention_scores(q, k, scale), v, mask, p, gen);
}

}  // namespace saccade
