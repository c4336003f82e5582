// Fused attention: argument checks, the one mask conversion, and the (B, ..., T, D) -> (B, H, T, D) plumbing.
// The tiles themselves live in ops/cpu/ (attention_loop.h, attention.cpp, attention_half.cpp).
#include "ops/attention.h"

#include "ops/backend.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/nn.h"

namespace saccade::ops {

namespace {

// x: (B, ..., T, D) -> a (B, H, T, D) view (or copy) with unit stride on D; H = the product of the middle
// dims.
Tensor as_4d(const Tensor& x) {
  const int nd = x.dim();
  Tensor y = x.dim() == 3 ? x.unsqueeze(1) : x;
  if (nd > 4) y = y.reshape({x.size(0), -1, x.size(-2), x.size(-1)});
  // the kernels' GEMMs need a unit stride on D and a row stride >= D (an expanded gradient has stride 0)
  const bool rows_ok = y.size(2) <= 1 || y.stride(2) >= y.size(3);
  return (y.size(3) > 1 && y.stride(3) != 1) || !rows_ok ? y.contiguous() : y;
}

// An uninitialised (B, H, T, D) tensor laid out like x4: heads inside time when x4 comes from splitting
// heads out of (B, T, H·D) (nn's split_heads), so that merging them back is a view, not a copy.
Tensor empty_like_4d(const Tensor& x4, int64_t last) {
  const int64_t B = x4.size(0), H = x4.size(1), T = x4.size(2);
  if (H > 1 && T > 1 && x4.stride(1) < x4.stride(2))
    return Tensor::empty({B, T, H, last}, x4.dtype(), x4.device()).permute({0, 2, 1, 3});
  return Tensor::empty({B, H, T, last}, x4.dtype(), x4.device());
}

// The mask with its keep tensor viewed as (B, H, Tq, Tk).
AttentionMask mask_4d(const AttentionMask& m) {
  AttentionMask r = m;
  if (m.keep.defined()) r.keep = m.keep.dim() == 3 ? m.keep.unsqueeze(1) : m.keep;
  if (r.keep.defined() && r.keep.dim() > 4)
    r.keep = r.keep.reshape({m.keep.size(0), -1, m.keep.size(-2), m.keep.size(-1)});
  return r;
}

// The fused kernels' check of a mask built by hand (attention_mask checks the ones it builds): the window's
// rules.
void check_fused_window(const char* op, const AttentionMask& m, const Tensor& q, const Tensor& k) {
  check_attention_window(op, m.window, m.causal, attention_scores_shape(q.shape(), k.shape()));
}

// A hand-built mask's key_starts (with_documents builds them right): int64 (B, Tq), contiguous, on the
// device.
void check_key_starts(const char* op, const AttentionMask& m, const Shape& x, Device device) {
  if (!m.key_starts.defined()) return;
  const Tensor& s = m.key_starts;
  SACCADE_CHECK(s.dtype() == DType::Int64 && s.is_contiguous() && s.device() == device &&
                    s.shape() == Shape({x[0], x[x.size() - 2]}),
                "{}: key_starts {} {} on {} for attention scores {}: expected contiguous int64 (B, Tq) on {}",
                op, s.dtype(), s.shape(), s.device(), x, device);
}

void check_dropout(const char* op, const AttentionDropout& d) {
  SACCADE_CHECK(d.p >= 0 && d.p < 1, "{}: dropout_p must be in [0, 1), got {}", op, d.p);
}

// int64 words of dropout keep flags a query row holds for Tk keys (AttentionDropout::kept's columns).
int64_t keep_flag_words(int64_t tk) { return (tk + 63) / 64; }

}  // namespace

// q: (B, ..., H, Tq, D), k: (B, ..., H_kv, Tk, D), v: (B, ..., H_kv, Tk, Dv); H_kv = H unless enable_gqa
void check_attention_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                            bool enable_gqa) {
  SACCADE_CHECK(q.defined() && k.defined() && v.defined(), "{}: got an undefined query, key or value", op);
  const int nd = q.dim();
  // grouped-query attention: the heads dim (-3) of k and v may be a divisor of q's; every other one matches
  const bool grouped = nd >= 4 && k.dim() == nd && v.dim() == nd && k.size(-3) != q.size(-3);
  const int lead = grouped ? nd - 3 : nd - 2;
  SACCADE_CHECK(
      nd >= 3 && k.dim() == nd && v.dim() == nd && same_leading_dims(q.shape(), k.shape(), lead) &&
          same_leading_dims(q.shape(), v.shape(), lead) && q.size(-1) == k.size(-1) &&
          k.size(-2) == v.size(-2) && (!grouped || k.size(-3) == v.size(-3)),
      "{}: q {}, k {} and v {} do not match: expected (B, ..., H, Tq, D), (B, ..., H_kv, Tk, D), (B, "
      "..., H_kv, Tk, Dv) of one rank >= 3, H_kv = H{}",
      op, q.shape(), k.shape(), v.shape(), enable_gqa ? " or a divisor of H" : "");
  if (grouped) {
    SACCADE_CHECK(
        enable_gqa,
        "{}: q {} has {} heads but k {} and v {} have {}: grouped-query attention needs enable_gqa = "
        "true",
        op, q.shape(), q.size(-3), k.shape(), v.shape(), k.size(-3));
    // (G >= 1: no query heads over some key/value heads would leave dK and dV unwritten)
    SACCADE_CHECK(k.size(-3) > 0 && q.size(-3) > 0 && q.size(-3) % k.size(-3) == 0,
                  "{}: q {} has {} heads, not a multiple of the {} key/value heads of k {} and v {} "
                  "(grouped-query attention: H = G·H_kv)",
                  op, q.shape(), q.size(-3), k.size(-3), k.shape(), v.shape());
  }
  SACCADE_CHECK(is_floating(q.dtype()) && q.dtype() == k.dtype() && q.dtype() == v.dtype(),
                "{}: q, k and v must have one float dtype, got {}, {}, {}", op, q.dtype(), k.dtype(),
                v.dtype());
  check_same_device(op, {&q, &k, &v});
}

Shape attention_scores_shape(const Shape& q, const Shape& k) {
  Shape s = q;
  s[s.size() - 1] = k[k.size() - 2];
  return s;
}

void check_attention_window(const char* op, int64_t window, CausalAlign causal, const Shape& x) {
  SACCADE_CHECK(window >= 0, "{}: window must be >= 1 (or 0: no window), got {} for attention scores {}", op,
                window, x);
  SACCADE_CHECK(
      window == 0 || causal != CausalAlign::None,
      "{}: window {} needs causal attention (a sliding window is causal here: query i sees the last "
      "{} keys up to its causal limit), got causal = false for attention scores {}",
      op, window, window, x);
}

AttentionMask attention_mask(const Tensor& m, const Shape& x, CausalAlign causal, Device device,
                             const char* op, int64_t window) {
  check_attention_window(op, window, causal, x);
  AttentionMask r;
  r.causal = causal;
  r.window = window;
  if (!m.defined()) return r;
  const int nd = x.size();
  SACCADE_CHECK(m.device() == device, "{}: the mask is on {} but the attention inputs are on {}", op,
                m.device(), device);
  if (m.dtype() == DType::Int64) {
    const Shape& v = m.shape();
    SACCADE_CHECK(nd >= 2, "{}: attention scores need (..., Tq, Tk), got shape {}", op, x);
    SACCADE_CHECK(
        (v.size() == 1 && v[0] == x[0]) || (v.size() == 2 && nd >= 3 && v[0] == x[0] && v[1] == x[nd - 2]),
        "{}: valid_lens of shape {} must be (B) or (B, Tq) for attention scores of shape {} (B, ..., Tq, Tk)",
        op, v, x);
    r.valid_lens = m.contiguous();
    return r;
  }
  SACCADE_CHECK(
      m.dtype() == DType::Bool,
      "{}: expected int64 valid_lens or a bool mask, got {} of shape {} for attention scores of shape {}", op,
      m.dtype(), m.shape(), x);
  bool ok = m.dim() <= nd;
  for (int i = 1; ok && i <= m.dim(); ++i)
    ok = m.shape()[m.dim() - i] == 1 || m.shape()[m.dim() - i] == x[nd - i];
  SACCADE_CHECK(ok, "{}: mask of shape {} does not broadcast to the attention scores' shape {}", op,
                m.shape(), x);
  r.keep = m.expand(x);
  return r;
}

// document_ids: (B, T) -> key_starts and valid_lens (B, T): each position's document [start, end)
AttentionMask with_documents(AttentionMask m, const Tensor& ids, const Shape& x, Device device,
                             const char* op) {
  if (!ids.defined()) return m;
  const int nd = x.size();
  SACCADE_CHECK(nd >= 3 && x[nd - 2] == x[nd - 1],
                "{}: document_ids need self-attention scores (B, ..., T, T), got attention scores {}", op, x);
  const int64_t B = x[0], T = x[nd - 1];
  SACCADE_CHECK(ids.dtype() == DType::Int64 && ids.shape() == Shape({B, T}),
                "{}: document_ids must be int64 (B, T) = {} for attention scores {}, got {} {}", op,
                Shape({B, T}), x, ids.dtype(), ids.shape());
  SACCADE_CHECK(ids.device() == device, "{}: document_ids are on {} but the attention inputs are on {}", op,
                ids.device(), device);
  const Tensor id = ids.to(Device::cpu()).contiguous();
  const Tensor lens = m.valid_lens.defined() ? m.valid_lens.to(Device::cpu()).contiguous() : Tensor();
  Tensor starts = Tensor::empty({B, T}, DType::Int64), ends = Tensor::empty({B, T}, DType::Int64);
  const int64_t* d = id.data<int64_t>();
  int64_t *s = starts.data<int64_t>(), *e = ends.data<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* row = d + b * T;
    for (int64_t i0 = 0; i0 < T;) {  // the document [i0, i1)
      int64_t i1 = i0 + 1;
      while (i1 < T && row[i1] == row[i0]) ++i1;
      SACCADE_CHECK(i1 == T || row[i1] > row[i0],
                    "{}: document_ids must not decrease along T (each document one contiguous run): row {} "
                    "goes from {} to {} at position {}",
                    op, b, row[i0], row[i1], i1);
      for (int64_t i = i0; i < i1; ++i) {
        int64_t end = i1;
        if (lens.defined()) end = std::min(end, lens.data<int64_t>()[lens.dim() == 2 ? b * T + i : b]);
        s[b * T + i] = i0, e[b * T + i] = end;
      }
      i0 = i1;
    }
  }
  m.key_starts = starts.to(device);
  m.valid_lens = ends.to(device);
  return m;
}

// scores: (B, ..., Tq, Tk) -> Bool broadcastable to it
Tensor attention_keep_mask(const AttentionMask& m, const Shape& x, Device device) {
  const int nd = x.size();
  const int64_t tq = x[nd - 2], tk = x[nd - 1];
  Tensor keep = m.keep;
  auto both = [&](const Tensor& a) { return keep.defined() ? logical_and(keep, a) : a; };
  if (m.valid_lens.defined()) {
    // k < valid_len with valid_lens as (B, 1, ..., 1) or (B, 1, ..., Tq, 1); a negative length keeps nothing
    Shape vs = Shape::filled(nd, 1), ks = Shape::filled(nd, 1);
    vs[0] = x[0];
    if (m.valid_lens.dim() == 2) vs[nd - 2] = tq;
    ks[nd - 1] = tk;
    Tensor pos = arange(0, static_cast<double>(tk), 1, DType::Int64, device).view(ks);
    keep = both(lt(pos, m.valid_lens.view(vs)));
  }
  if (m.key_starts.defined()) {  // k >= key_starts[b, i], as (B, 1, ..., Tq, 1)
    Shape vs = Shape::filled(nd, 1), ks = Shape::filled(nd, 1);
    vs[0] = x[0], vs[nd - 2] = tq, ks[nd - 1] = tk;
    Tensor pos = arange(0, static_cast<double>(tk), 1, DType::Int64, device).view(ks);
    keep = both(ge(pos, m.key_starts.view(vs)));
  }
  if (m.causal != CausalAlign::None) {
    // keep[i, j] = j <= i + shift
    const int64_t shift = m.causal == CausalAlign::BottomRight ? tk - tq : 0;
    Tensor rows =
        add(arange(0, static_cast<double>(tq), 1, DType::Int64, device), static_cast<double>(shift));
    Tensor cols = arange(0, static_cast<double>(tk), 1, DType::Int64, device).view({1, tk});
    keep = both(le(cols, rows.view({tq, 1})));
    // the window: j > i + shift - W, the last W keys up to the causal limit
    if (m.window > 0)
      keep = logical_and(keep, gt(cols, sub(rows, static_cast<double>(m.window)).view({tq, 1})));
  }
  return keep;
}

Tensor attention_dropout_mask(const AttentionDropout& d, const Shape& scores_shape, DType dtype,
                              Device device) {
  if (d.p == 0) return Tensor();
  // the kernels' counter of weight (bh, i, j) is offset + (bh·Tq + i)·Tk + j (ops/cpu/attention_tiles.h's
  // dropout_of, cuda/attention.cuh's Masking::dropout): ops::dropout's counter of that flat element
  Generator replay(d.seed);
  replay.advance(d.offset);
  return dropout(ones(scores_shape, dtype, device), d.p, true, &replay).mask;
}

// q: (B, ..., H, Tq, D), k: (B, ..., H_kv, Tk, D), v: (B, ..., H_kv, Tk, Dv) -> out (B, ..., H, Tq, Dv),
// lse (B, ..., H, Tq)
FlashAttentionForward flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const AttentionMask& mask, double scale,
                                              const AttentionDropout& dropout) {
  const char* op = "flash_attention";
  check_attention_inputs(op, q, k, v, /*enable_gqa=*/true);
  check_fused_window(op, mask, q, k);
  check_dropout(op, dropout);
  const Shape s = attention_scores_shape(q.shape(), k.shape());
  SACCADE_CHECK(!mask.keep.defined() || mask.keep.shape() == s, "{}: keep-mask {} for attention scores {}",
                op, mask.keep.defined() ? mask.keep.shape() : Shape{}, s);
  check_key_starts(op, mask, s, q.device());
  // 16-bit q, k, v go to the backend as they are, with a float32 lse: each backend's kernel picks its route
  // (the CPU widens head by head; CUDA runs the tensor-core kernel or float32 copies, out rounded once).
  Tensor q4 = as_4d(q), k4 = as_4d(k), v4 = as_4d(v);
  Tensor out4 = empty_like_4d(q4, v4.size(3));
  Tensor lse = Tensor::empty({q4.size(0), q4.size(1), q4.size(2)}, compute_dtype(q.dtype()), q.device());
  AttentionDropout d = dropout;
  d.kept = Tensor();
  const int64_t words = keep_flag_words(k4.size(2));
  Backend& b = backend(q.device());
  if (d.p > 0 && b.keeps_dropout_flags() && words * 8 <= v4.size(3) * static_cast<int64_t>(q.itemsize()))
    d.kept = zeros({q4.size(0) * q4.size(1) * q4.size(2), words}, DType::Int64, q.device());
  b.flash_attention_forward(q4, k4, v4, mask_4d(mask), scale, d, out4, lse);
  Shape os = q.shape(), ls;
  os[os.size() - 1] = v.size(-1);
  for (int i = 0; i + 1 < q.dim(); ++i) ls.push_back(q.size(i));
  return {out4.reshape(os), lse.view(ls), d.kept};
}

FlashAttentionGrads flash_attention_backward(const Tensor& gout, const Tensor& q, const Tensor& k,
                                             const Tensor& v, const Tensor& out, const Tensor& lse,
                                             const AttentionMask& mask, double scale,
                                             const AttentionDropout& dropout) {
  const char* op = "flash_attention_backward";
  check_attention_inputs(op, q, k, v, /*enable_gqa=*/true);
  check_fused_window(op, mask, q, k);
  check_key_starts(op, mask, attention_scores_shape(q.shape(), k.shape()), q.device());
  check_dropout(op, dropout);
  SACCADE_CHECK(gout.defined() && out.defined() && lse.defined() && gout.shape() == out.shape() &&
                    out.dim() == q.dim() && out.size(-2) == q.size(-2) && out.size(-1) == v.size(-1) &&
                    lse.numel() * v.size(-1) == out.numel() && gout.dtype() == q.dtype() &&
                    out.dtype() == q.dtype() && lse.dtype() == compute_dtype(q.dtype()),
                "{}: gout {}, out {} and lse {} do not fit q {} and v {}", op,
                gout.defined() ? gout.shape() : Shape{}, out.defined() ? out.shape() : Shape{},
                lse.defined() ? lse.shape() : Shape{}, q.shape(), v.shape());
  if (dropout.kept.defined()) {
    int64_t rows = 1;
    for (int i = 0; i + 1 < q.dim(); ++i) rows *= q.size(i);
    const int64_t words = keep_flag_words(k.size(-2));
    SACCADE_CHECK(dropout.kept.dtype() == DType::Int64 && dropout.kept.device() == q.device() &&
                      dropout.kept.is_contiguous() && dropout.kept.shape() == Shape({rows, words}),
                  "{}: dropout keep flags {} ({}) do not fit q {} and k {}: expected the forward's int64 "
                  "(B·H·Tq, ⌈Tk/64⌉) = ({}, {})",
                  op, dropout.kept.shape(), dtype_name(dropout.kept.dtype()), q.shape(), k.shape(), rows,
                  words);
  }
  Tensor q4 = as_4d(q), k4 = as_4d(k), v4 = as_4d(v), o4 = as_4d(out), g4 = as_4d(gout);
  Tensor gq4 = empty_like_4d(q4, q4.size(3)), gk4 = empty_like_4d(k4, k4.size(3)),
         gv4 = empty_like_4d(v4, v4.size(3));
  Tensor lse3 = lse.contiguous().view({q4.size(0), q4.size(1), q4.size(2)});
  backend(q.device())
      .flash_attention_backward(q4, k4, v4, o4, g4, lse3, mask_4d(mask), scale, dropout, gq4, gk4, gv4);
  return {gq4.reshape(q.shape()), gk4.reshape(k.shape()), gv4.reshape(v.shape())};
}

// ---- additive attention scores ----

void check_additive_scores(const char* op, const Tensor& qp, const Tensor& kp, const Tensor& w_v) {
  SACCADE_CHECK(qp.defined() && kp.defined() && w_v.defined(),
                "{}: got an undefined projected query, projected key or w_v", op);
  SACCADE_CHECK(qp.dim() == 3 && kp.dim() == 3 && w_v.dim() == 1 && qp.size(0) == kp.size(0) &&
                    qp.size(2) == kp.size(2) && w_v.size(0) == qp.size(2),
                "{}: qp {}, kp {} and w_v {} do not match: expected (B, Tq, A), (B, L, A), (A)", op,
                qp.shape(), kp.shape(), w_v.shape());
  SACCADE_CHECK(is_floating(qp.dtype()) && qp.dtype() == kp.dtype() && qp.dtype() == w_v.dtype(),
                "{}: qp, kp and w_v must have one float dtype, got {}, {}, {}", op, qp.dtype(), kp.dtype(),
                w_v.dtype());
  check_same_device(op, {&qp, &kp, &w_v});
}

// qp: (B, Tq, A), kp: (B, L, A), w_v: (A) -> (B, Tq, L)
Tensor additive_attention_scores(const Tensor& qp, const Tensor& kp, const Tensor& w_v) {
  check_additive_scores("additive_attention_scores", qp, kp, w_v);
  Tensor scores = Tensor::empty({qp.size(0), qp.size(1), kp.size(1)}, qp.dtype(), qp.device());
  backend(qp.device()).additive_attention_scores(qp.contiguous(), kp.contiguous(), w_v.contiguous(), scores);
  return scores;
}

AdditiveScoresGrads additive_attention_scores_backward(const Tensor& gscores, const Tensor& qp,
                                                       const Tensor& kp, const Tensor& w_v) {
  const char* op = "additive_attention_scores_backward";
  check_additive_scores(op, qp, kp, w_v);
  const Shape s{qp.size(0), qp.size(1), kp.size(1)};
  SACCADE_CHECK(gscores.defined() && gscores.shape() == s && gscores.dtype() == qp.dtype(),
                "{}: gscores {} {} does not fit scores {} {}", op,
                gscores.defined() ? gscores.shape() : Shape{},
                gscores.defined() ? gscores.dtype() : qp.dtype(), s, qp.dtype());
  check_same_device(op, {&gscores, &qp});
  AdditiveScoresGrads r{Tensor::empty(qp.shape(), qp.dtype(), qp.device()),
                        Tensor::empty(kp.shape(), kp.dtype(), kp.device()),
                        Tensor::empty(w_v.shape(), w_v.dtype(), w_v.device())};
  backend(qp.device())
      .additive_attention_scores_backward(gscores.contiguous(), qp.contiguous(), kp.contiguous(),
                                          w_v.contiguous(), r.gqp, r.gkp, r.gw_v);
  return r;
}

}  // namespace saccade::ops
