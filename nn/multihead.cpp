#include "nn/multihead.h"

#include <algorithm>

#include "autograd/functions/linalg.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "autograd/grad_mode.h"
#include "nn/attention.h"
#include "nn/init.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/index.h"

namespace saccade::nn {

namespace {

// X: (B, T, H * d) -> (B, H, T, d)  (d2l's transpose_qkv, without folding H into B); `norm` (over d) applied
// to each head's vector on the way, as transformers' Qwen3Attention norms the (B, T, H, d) view
Variable split_heads(const Variable& X, int64_t num_heads, UnaryModule* norm = nullptr) {
  Variable heads = reshape(X, {X.size(0), X.size(1), num_heads, -1});
  if (norm) heads = norm->forward(heads);
  return permute(heads, {0, 2, 1, 3});
}

// X: (B, H, T, d) -> (B, T, H * d)  (d2l's transpose_output)
Variable merge_heads(const Variable& X) {
  return reshape(permute(X, {0, 2, 1, 3}), {X.size(0), X.size(2), -1});
}

void check_qkv(const char* op, const Variable& q, const Variable& k, const Variable& v, int64_t dq,
               int64_t dk, int64_t dv) {
  SACCADE_CHECK(q.defined() && k.defined() && v.defined(),
                "{}: got an undefined queries, keys or values tensor", op);
  SACCADE_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3 && q.size(0) == k.size(0) &&
                    k.size(0) == v.size(0) && k.size(1) == v.size(1) && q.size(2) == dq && k.size(2) == dk &&
                    v.size(2) == dv,
                "{}: expected queries (B, Tq, {}), keys (B, Tk, {}), values (B, Tk, {}), got {}, {}, {}", op,
                dq, dk, dv, q.shape(), k.shape(), v.shape());
}

void check_heads(const char* op, int64_t num_hiddens, int64_t num_heads) {
  SACCADE_CHECK(num_hiddens > 0 && num_heads > 0 && num_hiddens % num_heads == 0,
                "{}: num_heads {} must be positive and divide num_hiddens {}", op, num_heads, num_hiddens);
  checked_mul(3, num_hiddens, op);  // the packed q, k, v projection has 3 * num_hiddens rows
}

}  // namespace

// ---- the KV cache and the grouped heads ----

int64_t KVCache::bytes() const {
  return keys_.defined() ? (keys_.numel() + values_.numel()) * static_cast<int64_t>(dtype_size(keys_.dtype()))
                         : 0;
}

void KVCache::reserve(int64_t positions) {
  SACCADE_CHECK(positions >= 0, "KVCache::reserve: positions must be >= 0, got {}", positions);
  reserved_ = positions;
}

namespace {

// Whether `buffer` (B, H_kv, capacity, d) can take positions like `x` (B, H_kv, Tn, d) up to `need`.
bool buffer_fits(const Tensor& buffer, const Tensor& x, int64_t need) {
  return buffer.defined() && buffer.size(0) == x.size(0) && buffer.size(1) == x.size(1) &&
         buffer.size(3) == x.size(3) && buffer.dtype() == x.dtype() && buffer.device() == x.device() &&
         buffer.size(2) >= need;
}

// The buffer after appending x at positions t .. t + Tn - 1: `buffer` itself when it fits, else a new one
// of `capacity` positions holding `cached` (its first t positions, or undefined when t = 0).
Tensor write_in_place(Tensor buffer, const Tensor& cached, const Tensor& x, int64_t capacity) {
  const int64_t t = cached.defined() ? cached.size(2) : 0, need = t + x.size(2);
  if (!buffer_fits(buffer, x, need)) {
    buffer = ops::empty({x.size(0), x.size(1), capacity, x.size(3)}, x.dtype(), x.device());
    if (t > 0) {
      Tensor head = buffer.narrow(2, 0, t);
      ops::copy_(head, cached);
    }
  }
  Tensor slot = buffer.narrow(2, t, x.size(2));
  ops::copy_(slot, x);
  return buffer;
}

}  // namespace

// new_keys, new_values: (B, H_kv, Tn, d) -> the cache's (B, H_kv, t + Tn, d)
std::pair<Variable, Variable> KVCache::append(const Variable& new_keys, const Variable& new_values,
                                              const char* op) {
  SACCADE_CHECK(new_keys.defined() && new_values.defined() && new_keys.dim() == 4 && new_values.dim() == 4 &&
                    new_keys.size(0) == new_values.size(0) && new_keys.size(1) == new_values.size(1) &&
                    new_keys.size(2) == new_values.size(2) && new_keys.dtype() == new_values.dtype() &&
                    new_keys.device() == new_values.device(),
                "{}: expected new keys and values (B, H_kv, Tn, d) of one dtype and device, got {} and {}",
                op, new_keys.defined() ? new_keys.shape() : Shape{},
                new_values.defined() ? new_values.shape() : Shape{});
  const int64_t t = length();
  if (t > 0)
    SACCADE_CHECK(keys_.size(0) == new_keys.size(0) && keys_.size(1) == new_keys.size(1) &&
                      keys_.size(3) == new_keys.size(3) && keys_.dtype() == new_keys.dtype() &&
                      keys_.device() == new_keys.device(),
                  "{}: the cache holds keys {} ({}, {}), the new keys are {} ({}, {})", op, keys_.shape(),
                  keys_.dtype(), keys_.device(), new_keys.shape(), new_keys.dtype(), new_keys.device());
  const bool graph = grad_enabled() && (new_keys.requires_grad() || new_values.requires_grad() ||
                                        (t > 0 && (keys_.requires_grad() || values_.requires_grad())));
  if (graph) {  // the gradient flows through the cache: concatenate
    keys_ = t > 0 ? cat({keys_, new_keys}, 2) : new_keys;
    values_ = t > 0 ? cat({values_, new_values}, 2) : new_values;
    key_buffer_ = value_buffer_ = Tensor();
    return {keys_, values_};
  }
  const int64_t need = t + new_keys.size(2);
  const int64_t capacity = std::max({need, reserved_, 2 * this->capacity()});
  const Tensor cached_keys = t > 0 ? keys_.data() : Tensor(),
               cached_values = t > 0 ? values_.data() : Tensor();
  key_buffer_ = write_in_place(key_buffer_, cached_keys, new_keys.data(), capacity);
  value_buffer_ = write_in_place(value_buffer_, cached_values, new_values.data(), capacity);
  keys_ = Variable(key_buffer_.narrow(2, 0, need));
  values_ = Variable(value_buffer_.narrow(2, 0, need));
  return {keys_, values_};
}

void KVCache::reorder(const Tensor& beam_idx) {
  if (!keys_.defined()) return;
  SACCADE_CHECK(beam_idx.defined() && beam_idx.dim() == 1 && beam_idx.dtype() == DType::Int64,
                "KVCache::reorder: expected beam_idx int64 (B') for a cache of keys {}, got {}",
                keys_.shape(), beam_idx.defined() ? beam_idx.shape() : Shape{});
  const Tensor idx = beam_idx.to(keys_.device());
  Tensor k = ops::index_select(keys_.data(), 0, idx), v = ops::index_select(values_.data(), 0, idx);
  if (!key_buffer_.defined()) {
    keys_ = Variable(k);
    values_ = Variable(v);
    return;
  }
  const int64_t t = length(), capacity = this->capacity();
  // B' rows: new buffers of the same capacity
  key_buffer_ = write_in_place(Tensor(), Tensor(), k, capacity);
  value_buffer_ = write_in_place(Tensor(), Tensor(), v, capacity);
  keys_ = Variable(key_buffer_.narrow(2, 0, t));
  values_ = Variable(value_buffer_.narrow(2, 0, t));
}

void KVCaches::reserve(int64_t positions) {
  for (KVCache& c : caches) c.reserve(positions);
}

void KVCaches::reset() {
  for (KVCache& c : caches) c.reset();
}

// hidden: (B, T, E) -> (B, min(T, logits_to_keep), E), or all of it for 0
Variable keep_last_positions(const Variable& hidden, int64_t logits_to_keep, const char* op) {
  SACCADE_CHECK(logits_to_keep >= 0 && hidden.defined() && hidden.dim() == 3,
                "{}: expected hidden states (B, T, E) and logits_to_keep >= 0, got {} and {}", op,
                hidden.defined() ? hidden.shape() : Shape{}, logits_to_keep);
  const int64_t T = hidden.size(1);
  return logits_to_keep == 0 || logits_to_keep >= T ? hidden
                                                    : narrow(hidden, 1, T - logits_to_keep, logits_to_keep);
}

// document_ids: (B, T) -> positions (B, T) = t - the first position of t's document, and the bounds
PackedDocuments PackedDocuments::of(const Tensor& document_ids, Device device, const char* op) {
  SACCADE_CHECK(document_ids.defined() && document_ids.dim() == 2,
                "{}: document_ids must be int64 (B, T), got {}", op,
                document_ids.defined() ? document_ids.shape() : Shape{});
  const int64_t B = document_ids.size(0), T = document_ids.size(1);
  PackedDocuments d;
  d.bounds = ops::with_documents({}, document_ids, Shape{B, 1, T, T}, device, op);
  d.positions = ops::sub(ops::arange(0, static_cast<double>(T), 1, DType::Int64, device).view({1, T}),
                         d.bounds.key_starts);
  return d;
}

ops::AttentionMask PackedDocuments::restrict(ops::AttentionMask mask) const {
  SACCADE_CHECK(!mask.valid_lens.defined(), "PackedDocuments: the mask has valid_lens already");
  mask.key_starts = bounds.key_starts;
  mask.valid_lens = bounds.valid_lens;
  return mask;
}

namespace {

// x (B, H, T, d) rotated at positions (B, T), each batch row at its own: as one (H, B·T, d) rotation
Variable rotate_rows(RotaryEmbedding& rotary, const Variable& x, const Tensor& positions) {
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), d = x.size(3);
  const Variable flat = reshape(permute(x, {1, 0, 2, 3}), {H, B * T, d});
  return permute(reshape(rotary.forward(flat, positions.reshape({B * T})), {H, B, T, d}), {1, 0, 2, 3});
}

}  // namespace

Variable GroupedHeads::queries(const Variable& projected, const PackedDocuments& docs) const {
  const Variable q = split_heads(projected, num_heads, q_norm);
  return rotary ? rotate_rows(*rotary, q, docs.positions) : q;
}

Variable GroupedHeads::keys(const Variable& projected, const PackedDocuments& docs) const {
  const Variable k = split_heads(projected, num_kv_heads, k_norm);
  return rotary ? rotate_rows(*rotary, k, docs.positions) : k;
}

// projected: (B, T, H · d) -> (B, H, T, d), each head normed, then rotated at offset ..
Variable GroupedHeads::queries(const Variable& projected, int64_t offset) const {
  const Variable q = split_heads(projected, num_heads, q_norm);
  return rotary ? rotary->forward(q, offset) : q;
}

Variable GroupedHeads::keys(const Variable& projected, int64_t offset) const {
  const Variable k = split_heads(projected, num_kv_heads, k_norm);
  return rotary ? rotary->forward(k, offset) : k;
}

Variable GroupedHeads::values(const Variable& projected) const {
  return split_heads(projected, num_kv_heads);
}

// q: (B, H, Tq, d), k, v: (B, H_kv, Tk, d) -> output (B, Tq, H · d), weights (B, H, Tq, Tk)
AttentionOutput GroupedHeads::attend(const Variable& q, const Variable& k, const Variable& v,
                                     const ops::AttentionMask& mask, const AttentionOptions& options,
                                     const char* op) const {
  AttentionOptions o = options;
  o.enable_gqa = num_kv_heads != num_heads;
  AttentionOutput r = scaled_dot_product_attention(q, k, v, mask, o, op);
  return {merge_heads(r.output), r.weights};
}

int64_t GroupedHeads::kv_cache_bytes_per_token(DType dtype) const {
  return 2 * num_kv_heads * head_dim * static_cast<int64_t>(dtype_size(dtype));
}

// ---- MultiHeadAttention (d2l) ----

MultiHeadAttention::MultiHeadAttention(int64_t num_hiddens, int64_t num_heads,
                                       const MultiHeadAttentionOptions& options)
    : Module("MultiHeadAttention"),
      dropout(options.dropout),
      num_hiddens_(num_hiddens),
      query_size_(options.query_size < 0 ? num_hiddens : options.query_size),
      key_size_(options.key_size < 0 ? num_hiddens : options.key_size),
      value_size_(options.value_size < 0 ? num_hiddens : options.value_size),
      heads_{num_heads, options.num_kv_heads < 0 ? num_heads : options.num_kv_heads,
             num_heads > 0 ? num_hiddens / num_heads : 0},
      gen_(options.generator) {
  ErrorScope scope(name());
  check_heads("MultiHeadAttention", num_hiddens, num_heads);
  SACCADE_CHECK(heads_.num_kv_heads > 0 && num_heads % heads_.num_kv_heads == 0,
                "MultiHeadAttention: num_heads {} must be a positive multiple of num_kv_heads {}", num_heads,
                heads_.num_kv_heads);
  SACCADE_CHECK(dropout >= 0 && dropout < 1, "MultiHeadAttention: dropout must be in [0, 1), got {}",
                dropout);
  const int64_t E = num_hiddens, kv_features = heads_.num_kv_heads * heads_.head_dim;
  const bool bias = options.bias;
  if (options.layout == ParameterLayout::Packed) {  // torch.nn.MultiheadAttention's names, order and init
    SACCADE_CHECK(query_size_ == E && key_size_ == E && value_size_ == E && heads_.num_kv_heads == num_heads,
                  "MultiHeadAttention: the Packed layout (torch's in_proj_weight) needs query, key and value "
                  "sizes equal to num_hiddens {} and num_kv_heads = num_heads {}, got {}, {}, {} and {}",
                  E, num_heads, query_size_, key_size_, value_size_, heads_.num_kv_heads);
    in_proj_weight =
        register_parameter("in_proj_weight", init::xavier_uniform_(ops::empty({3 * E, E}), 1.0, gen_));
    if (bias) in_proj_bias = register_parameter("in_proj_bias", ops::zeros({3 * E}));
    out_proj = W_o = register_module("out_proj", std::make_shared<Linear>(E, E, bias, gen_));
    if (bias) init::zeros_(out_proj->bias.data());
  } else {
    W_q = register_module("W_q", std::make_shared<Linear>(query_size_, E, bias, gen_));
    W_k = register_module("W_k", std::make_shared<Linear>(key_size_, kv_features, bias, gen_));
    W_v = register_module("W_v", std::make_shared<Linear>(value_size_, kv_features, bias, gen_));
    W_o = register_module("W_o", std::make_shared<Linear>(E, E, bias, gen_));
  }
  if (const std::optional<RotaryConfig>& rotary = options.rotary) {
    rotary_emb = register_module(
        "rotary_emb",
        std::make_shared<RotaryEmbedding>(heads_.head_dim, rotary->theta, rotary->style, rotary->fraction));
    heads_.rotary = rotary_emb.get();
  }
}

// x: (B, T, ·) -> (B, T, E) for the queries, (B, T, H_kv · d) for the keys and values
Variable MultiHeadAttention::project(const Variable& x, int which) const {
  if (!in_proj_weight.defined()) return (which == 0 ? W_q : which == 1 ? W_k : W_v)->forward(x);
  const int64_t E = num_hiddens_;  // the Packed layout: rows which·E .. of [W_q; W_k; W_v]
  Variable b = in_proj_bias.defined() ? narrow(in_proj_bias, 0, which * E, E) : Variable();
  return linear(x, narrow(in_proj_weight, 0, which * E, E), b);
}

// queries: (B, Tq, ·); k, v: (B, H_kv, Tk, d) already projected (k rotated) -> output (B, Tq, num_hiddens)
AttentionOutput MultiHeadAttention::attend(const Variable& queries, int64_t offset, const Variable& k,
                                           const Variable& v, const ops::AttentionMask& mask, bool keep) {
  return attend_heads(heads_.queries(project(queries, 0), offset), k, v, mask, keep);
}

AttentionOutput MultiHeadAttention::attend_heads(const Variable& q, const Variable& k, const Variable& v,
                                                 const ops::AttentionMask& mask, bool keep) {
  AttentionOutput r = heads_.attend(
      q, k, v, mask, {.dropout_p = is_training() ? dropout : 0.0, .generator = gen_, .need_weights = keep},
      "MultiHeadAttention");
  weights_ = keep ? r.weights.data() : Tensor();
  weights_skipped_ = !keep;
  return {W_o->forward(r.output), r.weights};
}

// queries: (B, Tq, ·), k, v: (B, H_kv, Tk, d) already projected (k rotated) -> (B, Tq, num_hiddens)
Variable MultiHeadAttention::attend_d2l(const Variable& queries, const Variable& k, const Variable& v,
                                        const Tensor& mask, bool causal) {
  const char* op = "MultiHeadAttention";
  const int64_t Tq = queries.size(1), Tk = k.size(2);
  const Shape scores{queries.size(0), heads_.num_heads, Tq, Tk};
  Tensor m = mask;
  // a Bool (B, Tq, Tk) mask gets a head dim; (Tq, Tk) and (B, H, Tq, Tk) broadcast as they are
  if (m.defined() && m.dtype() == DType::Bool && m.dim() == 3) m = m.unsqueeze(1);
  // checked and converted once, here; bottom-right causal alignment (KV cache, see the header)
  const ops::AttentionMask am =
      ops::attention_mask(m, scores, causal ? ops::CausalAlign::BottomRight : ops::CausalAlign::None,
                          queries.device(), op, window);
  SACCADE_CHECK(!heads_.rotary || Tq <= Tk,
                "{}: rotary positions make the Tq = {} queries the last positions of the Tk = {} keys, so Tq "
                "must be <= Tk (queries {}, keys {})",
                op, Tq, Tk, queries.shape(), k.shape());
  // the queries are the last Tq positions (the causal alignment), so they rotate at Tk - Tq ..
  return attend(queries, Tk - Tq, k, v, am, keeps_weights(need_weights, is_training())).output;
}

Tensor MultiHeadAttention::attention_weights() const {
  return kept_attention_weights(weights_, weights_skipped_, "MultiHeadAttention::attention_weights");
}

int64_t MultiHeadAttention::kv_cache_bytes_per_token() const {
  return heads_.kv_cache_bytes_per_token(in_proj_weight.defined() ? in_proj_weight.dtype()
                                                                  : W_k->weight.dtype());
}

// queries: (B, Tq, q), keys: (B, Tk, k), values: (B, Tk, v) -> (B, Tq, num_hiddens)
Variable MultiHeadAttention::forward(const Variable& queries, const Variable& keys, const Variable& values,
                                     const Tensor& valid_lens_or_mask, bool causal) {
  ErrorScope scope(name(),
                   {shape_of(queries), shape_of(keys), shape_of(values), shape_of(valid_lens_or_mask)});
  check_qkv("MultiHeadAttention", queries, keys, values, query_size_, key_size_, value_size_);
  return attend_d2l(queries, heads_.keys(project(keys, 1), 0), heads_.values(project(values, 2)),
                    valid_lens_or_mask, causal);
}

// x: (B, T, q) holding packed documents -> (B, T, num_hiddens)
Variable MultiHeadAttention::forward(const Variable& x, const PackedDocuments& docs) {
  ErrorScope scope(name(), {shape_of(x)});
  const char* op = "MultiHeadAttention";
  check_qkv(op, x, x, x, query_size_, key_size_, value_size_);
  const int64_t B = x.size(0), T = x.size(1);
  SACCADE_CHECK(docs.positions.defined() && docs.positions.shape() == Shape({B, T}),
                "{}: packed documents of {} for x {}", op,
                docs.positions.defined() ? docs.positions.shape() : Shape{}, x.shape());
  const ops::AttentionMask mask = docs.restrict(ops::attention_mask(
      Tensor(), Shape{B, heads_.num_heads, T, T}, ops::CausalAlign::BottomRight, x.device(), op, window));
  return attend_heads(heads_.queries(project(x, 0), docs), heads_.keys(project(x, 1), docs),
                      heads_.values(project(x, 2)), mask, keeps_weights(need_weights, is_training()))
      .output;
}

// queries: (B, Tq, q), new_keys: (B, Tn, k), new_values: (B, Tn, v); cache: (B, H_kv, t, d) -> (B, Tq,
// num_hiddens)
Variable MultiHeadAttention::forward_cached(const Variable& queries, const Variable& new_keys,
                                            const Variable& new_values, KVCache& cache,
                                            const Tensor& valid_lens_or_mask, bool causal) {
  ErrorScope scope(
      name(), {shape_of(queries), shape_of(new_keys), shape_of(new_values), shape_of(valid_lens_or_mask)});
  const char* op = "MultiHeadAttention";
  check_qkv(op, queries, new_keys, new_values, query_size_, key_size_, value_size_);
  auto [k, v] = cache.append(heads_.keys(project(new_keys, 1), cache.length()),
                             heads_.values(project(new_values, 2)), op);
  return attend_d2l(queries, k, v, valid_lens_or_mask, causal);
}

// query: (B, Tq, ·), key: (B, Tk, ·), value: (B, Tk, ·) -> output (B, Tq, E), weights (B, Tq, Tk) or
// (B, H, Tq, Tk)
AttentionOutput MultiHeadAttention::forward(const Variable& query, const Variable& key, const Variable& value,
                                            const MultiHeadAttentionArgs& args) {
  ErrorScope scope(name(),
                   {shape_of(query), shape_of(key), shape_of(value), shape_of(args.key_padding_mask)});
  const char* op = "MultiHeadAttention";
  check_qkv(op, query, key, value, query_size_, key_size_, value_size_);
  const int64_t B = query.size(0), H = heads_.num_heads, Tq = query.size(1), Tk = key.size(1);
  // torch's masks (true = not allowed) as one keep-mask (true = attend) broadcastable to (B, H, Tq, Tk)
  Tensor keep;
  if (const Tensor& kpm = args.key_padding_mask; kpm.defined()) {
    SACCADE_CHECK(kpm.dtype() == DType::Bool && kpm.shape() == Shape({B, Tk}),
                  "{}: key_padding_mask must be bool (B, Tk) = {}, got {} {}", op, Shape({B, Tk}),
                  kpm.dtype(), kpm.shape());
    keep = ops::logical_not(kpm).view({B, 1, 1, Tk});
  }
  if (const Tensor& am = args.attn_mask; am.defined()) {
    const Shape& s = am.shape();
    SACCADE_CHECK(am.dtype() == DType::Bool && (s == Shape({Tq, Tk}) || s == Shape({B * H, Tq, Tk})),
                  "{}: attn_mask must be bool (Tq, Tk) = {} or (B * H, Tq, Tk) = {}, got {} {}", op,
                  Shape({Tq, Tk}), Shape({B * H, Tq, Tk}), am.dtype(), s);
    Tensor a = ops::logical_not(am);
    if (a.dim() == 3) a = a.view({B, H, Tq, Tk});
    keep = keep.defined() ? ops::logical_and(keep, a) : a;
  }
  // torch's is_causal: top-left aligned (query i sees keys j <= i), so positions start at 0 on both sides
  const ops::AttentionMask mask = ops::attention_mask(
      keep, Shape{B, H, Tq, Tk}, args.is_causal ? ops::CausalAlign::TopLeft : ops::CausalAlign::None,
      query.device(), op, window);
  AttentionOutput r = attend(query, 0, heads_.keys(project(key, 1), 0), heads_.values(project(value, 2)),
                             mask, args.need_weights);
  if (r.weights.defined() && args.average_attn_weights) r.weights = mean(r.weights, {1});
  return r;
}

}  // namespace saccade::nn
