// Derivative rule of fused attention, beside its forward. `g` is dL/d(out).
#include "autograd/functions/attention.h"

#include "autograd/autocast.h"
#include "autograd/function.h"

namespace saccade {

// q: (B, ..., Tq, D), k: (B, ..., Tk, D), v: (B, ..., Tk, Dv); out: (B, ..., Tq, Dv); lse: (B, ..., Tq)
Variable flash_attention(const Variable& q, const Variable& k, const Variable& v,
                         const ops::AttentionMask& mask, double scale, double dropout_p, bool training,
                         Generator* gen) {
  check_defined("flash_attention", q, k, v);
  SACCADE_AUTOCAST("flash_attention", flash_attention, q, k, v, mask, scale, dropout_p, training, gen);
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
    drop = {dropout_p, g.seed(), g.advance(n)};
  }
  ops::FlashAttentionForward f =
      ops::flash_attention_forward(q.data(), k.data(), v.data(), mask, scale, drop);
  const char* op = "flash_attention";
  SavedTensor sq(q.data(), op), sk(k.data(), op), sv(v.data(), op), so(f.out, op);
  Tensor lse = f.lse;
  return make_result(op, f.out, {q, k, v}, [sq, sk, sv, so, lse, mask, scale, drop](const Tensor& g) {
    const Tensor& qd = sq.get();
    ops::FlashAttentionGrads r = ops::flash_attention_backward(g.to(qd.dtype()), qd, sk.get(), sv.get(),
                                                               so.get(), lse, mask, scale, drop);
    return std::vector<Tensor>{r.gq, r.gk, r.gv};
  });
}

// qp: (B, Tq, A), kp: (B, L, A), w_v: (A) -> scores (B, Tq, L)
Variable additive_attention_scores(const Variable& qp, const Variable& kp, const Variable& w_v) {
  check_defined("additive_attention_scores", qp, kp, w_v);
  SACCADE_AUTOCAST("additive_attention_scores", additive_attention_scores, qp, kp, w_v);
  // scores = Σ_a w_v tanh(qp + kp), t = tanh(qp + kp):
  //   dw_v = Σ g t,  dqp = Σ_l g w_v (1 - t²),  dkp = Σ_i g w_v (1 - t²)
  const char* op = "additive_attention_scores";
  SACCADE_CHECK(qp.defined() && kp.defined() && w_v.defined(),
                "{}: got an undefined projected query, projected key or w_v", op);
  Tensor scores = ops::additive_attention_scores(qp.data(), kp.data(), w_v.data());
  SavedTensor sq(qp.data(), op), sk(kp.data(), op), sw(w_v.data(), op);
  return make_result(op, scores, {qp, kp, w_v}, [sq, sk, sw](const Tensor& g) {
    const Tensor& q = sq.get();
    ops::AdditiveScoresGrads r =
        ops::additive_attention_scores_backward(g.to(q.dtype()), q, sk.get(), sw.get());
    return std::vector<Tensor>{r.gqp, r.gkp, r.gw_v};
  });
}

}  // namespace saccade
