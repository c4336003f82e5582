// nn::MultiHeadAttention with grouped key/value heads (num_kv_heads; Ainslie et al. 2023) and rotary
// positions (rotary; Su et al. 2021), beside its sliding window: the module against a readable reference
// (heads split by reshape, queries and keys rotated by ops::rotary_embedding by hand, K and V repeated per
// query head, softmax over an explicit causal/window mask), fused and composed; cached decoding against the
// full causal forward; the KV cache's bytes per token (also LlamaAttention's, which shares the head
// arithmetic); a float64 gradcheck; and bad input.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "helpers.h"
#include "nn/llama.h"
#include "nn/multihead.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;

namespace {

// x (B, T, n·d) -> (B, n, T, d)
Tensor split(const Tensor& x, int64_t n) {
  return x.reshape({x.size(0), x.size(1), n, x.size(2) / n}).permute({0, 2, 1, 3});
}

// The readable reference of m's forward from queries xq (B, Tq, ·) and keys = values xkv (B, Tk, ·), float64.
// Keys sit at positions 0 .. Tk - 1, the queries at the last Tq of them (the module's alignment).
Tensor reference(nn::MultiHeadAttention& m, const std::optional<nn::RotaryConfig>& rotary, const Tensor& xq,
                 const Tensor& xkv, bool causal, int64_t window) {
  NoGradGuard no_grad;
  const int64_t B = xq.size(0), Tq = xq.size(1), Tk = xkv.size(1), H = m.num_heads(), Hkv = m.num_kv_heads(),
                d = m.head_dim();
  Tensor q = split(m.W_q->forward(Variable(xq)).data(), H);
  Tensor k = split(m.W_k->forward(Variable(xkv)).data(), Hkv);
  Tensor v = split(m.W_v->forward(Variable(xkv)).data(), Hkv);
  if (rotary) {
    const int64_t R = static_cast<int64_t>(static_cast<double>(d) * rotary->fraction) / 2 * 2;
    const ops::RotaryTables t = ops::rotary_tables(Tk, R, rotary->theta, DType::Float64);
    q = ops::rotary_embedding(q, t.cos.narrow(0, Tk - Tq, Tq), t.sin.narrow(0, Tk - Tq, Tq), rotary->style);
    k = ops::rotary_embedding(k, t.cos, t.sin, rotary->style);
  }
  // K and V repeated per query head: query head h reads key/value head h / (H / Hkv)
  std::vector<int64_t> group(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h) group[static_cast<size_t>(h)] = h / (H / Hkv);
  const Tensor index = ops::from_vector(group, {H});
  k = ops::index_select(k, 1, index);
  v = ops::index_select(v, 1, index);
  std::vector<int64_t> keep(static_cast<size_t>(Tq * Tk));
  for (int64_t i = 0; i < Tq; ++i)
    for (int64_t j = 0; j < Tk; ++j) {
      const int64_t last = i + Tk - Tq;  // the causal limit of query i
      keep[static_cast<size_t>(i * Tk + j)] = !causal || (j <= last && (window == 0 || j > last - window));
    }
  Variable s = mul(matmul(Variable(q), transpose(Variable(k), -2, -1)), 1.0 / std::sqrt(double(d)));
  s = masked_fill(s, ops::logical_not(ops::gt(ops::from_vector(keep, {Tq, Tk}), 0.5)), -INFINITY);
  const Variable o = matmul(softmax(s, -1), Variable(v));
  return m.W_o->forward(reshape(permute(o, {0, 2, 1, 3}), {B, Tq, H * d})).data();
}

std::shared_ptr<nn::MultiHeadAttention> make(int64_t num_hiddens, int64_t H, int64_t Hkv,
                                             const std::optional<nn::RotaryConfig>& rotary, bool bias = true,
                                             uint64_t seed = 5) {
  static Generator gen(0);  // the modules draw their init from it; tests reseed it
  gen = Generator(seed);
  auto m = std::make_shared<nn::MultiHeadAttention>(
      num_hiddens, H,
      nn::MultiHeadAttentionOptions{.bias = bias, .num_kv_heads = Hkv, .rotary = rotary, .generator = &gen});
  m->to(DType::Float64);
  return m;
}

}  // namespace

TEST_CASE("MultiHeadAttention with num_kv_heads: attention over key/value heads repeated per query head",
          "[nn][attention][gqa]") {
  // H = 6 query heads over H_kv = 6 (multi-head), 3, 2 and 1 (multi-query) key/value heads; self-attention
  // causal and not, cross-attention with Tq != Tk; the fused kernel and the composed path
  const int64_t E = 12, H = 6, d = 2;
  const Tensor x = rand64({2, 7, E}, 1), y = rand64({2, 4, E}, 2);
  for (int64_t Hkv : {6, 3, 2, 1}) {
    auto m = make(E, H, Hkv, std::nullopt);
    CHECK(m->num_kv_heads() == Hkv);
    CHECK(m->W_k->weight.shape() == Shape{Hkv * d, E});
    CHECK(m->W_v->weight.shape() == Shape{Hkv * d, E});
    CHECK(m->W_q->weight.shape() == Shape{E, E});
    for (bool fused : {true, false}) {
      INFO("H_kv " << Hkv << (fused ? ", fused" : ", composed"));
      m->need_weights = !fused;
      NoGradGuard no_grad;
      for (bool causal : {false, true})
        CHECK(allclose(m->forward(Variable(x), Variable(x), Variable(x), Tensor(), causal).data(),
                       reference(*m, std::nullopt, x, x, causal, 0), 1e-12, 1e-12));
      CHECK(allclose(m->forward(Variable(y), Variable(x), Variable(x)).data(),
                     reference(*m, std::nullopt, y, x, false, 0), 1e-12, 1e-12));
    }
  }
  // the grouping matters: H_kv = 1 differs from the same weights read as one head each (H_kv = H)
  auto mqa = make(E, H, 1, std::nullopt);
  CHECK(!allclose(mqa->forward(Variable(x), Variable(x), Variable(x)).data(),
                  reference(*make(E, H, H, std::nullopt), std::nullopt, x, x, false, 0), 1e-3, 1e-3));
}

TEST_CASE("MultiHeadAttention with rotary: queries and keys rotated by ops::rotary_embedding",
          "[nn][attention][rotary]") {
  const int64_t E = 32, H = 4;  // head_dim 8
  const Tensor x = rand64({2, 6, E}, 3), y = rand64({2, 3, E}, 4);
  for (ops::RotaryStyle style : {ops::RotaryStyle::Half, ops::RotaryStyle::Interleaved})
    for (double fraction : {1.0, 0.5, 0.3}) {
      const nn::RotaryConfig rc{style, 500.0, fraction};
      auto m = make(E, H, 2, rc);
      REQUIRE(m->rotary_emb);
      CHECK(m->rotary_emb->rotary_dim() == (fraction == 1.0 ? 8 : fraction == 0.5 ? 4 : 2));
      CHECK(m->state_dict().keys().size() == 8);  // the rotary embedding has no state
      for (bool fused : {true, false}) {
        INFO((style == ops::RotaryStyle::Half ? "half" : "interleaved")
             << ", fraction " << fraction << (fused ? ", fused" : ", composed"));
        m->need_weights = !fused;
        NoGradGuard no_grad;
        CHECK(allclose(m->forward(Variable(x), Variable(x), Variable(x), Tensor(), true).data(),
                       reference(*m, rc, x, x, true, 0), 1e-12, 1e-12));
        // cross-attention: the 3 queries are positions 3 .. 5 of the 6 keys
        CHECK(allclose(m->forward(Variable(y), Variable(x), Variable(x)).data(),
                       reference(*m, rc, y, x, false, 0), 1e-12, 1e-12));
        // and the rotation matters
        CHECK(!allclose(m->forward(Variable(x), Variable(x), Variable(x)).data(),
                        reference(*m, std::nullopt, x, x, false, 0), 1e-3, 1e-3));
      }
    }
}

TEST_CASE("MultiHeadAttention: cached decoding with GQA, rotary and a window equals the causal forward",
          "[nn][attention][gqa][rotary][window]") {
  const int64_t E = 16, H = 4, Hkv = 2, T = 11, B = 2;
  const Tensor x = rand64({B, T, E}, 6);
  const nn::RotaryConfig rc{ops::RotaryStyle::Interleaved, 100.0, 1.0};
  auto m = make(E, H, Hkv, rc);
  m->window = 4;
  for (bool fused : {true, false}) {
    INFO((fused ? "fused" : "composed"));
    m->need_weights = !fused;
    NoGradGuard no_grad;
    const Tensor full = m->forward(Variable(x), Variable(x), Variable(x), Tensor(), true).data();
    REQUIRE(allclose(full, reference(*m, rc, x, x, true, 4), 1e-12, 1e-12));
    // one position a step, then steps of several positions (the queries rotate at their own positions)
    for (int64_t chunk : {1, 3}) {
      nn::KVCache cache;
      for (int64_t t = 0; t < T; t += chunk) {
        const int64_t n = std::min(chunk, T - t);
        CAPTURE(chunk, t);
        Variable xt(x.slice(1, t, t + n));
        CHECK(allclose(m->forward_cached(xt, xt, xt, cache).data(), full.slice(1, t, t + n), 1e-12, 1e-12));
      }
      CHECK(cache.keys().shape() == Shape{B, Hkv, T, E / H});  // H_kv heads, every position
      CHECK(cache.values().shape() == Shape{B, Hkv, T, E / H});
    }
  }
}

TEST_CASE("KV cache bytes per token: 2 H_kv d_head bytes, MultiHeadAttention and LlamaAttention alike",
          "[nn][attention][gqa]") {
  const int64_t E = 32, H = 8, d = 4;
  for (int64_t Hkv : {8, 2, 1}) {
    Generator gen(1);
    nn::MultiHeadAttention m(E, H, {.num_kv_heads = Hkv, .rotary = nn::RotaryConfig{}, .generator = &gen});
    CHECK(m.kv_cache_bytes_per_token() == 2 * Hkv * d * 4);  // float32
    nn::LlamaConfig c;
    c.hidden_size = E, c.num_attention_heads = H, c.num_key_value_heads = Hkv;
    nn::LlamaAttention llama(c, &gen);
    CHECK(llama.kv_cache_bytes_per_token() == m.kv_cache_bytes_per_token());
    m.to(DType::Float64);
    CHECK(m.kv_cache_bytes_per_token() == 2 * Hkv * d * 8);
    // the figure is what the cache holds: B · t · bytes per token
    NoGradGuard no_grad;
    nn::KVCache cache;
    CHECK(cache.bytes() == 0);
    const Tensor x = rand64({3, 5, E}, 2);
    m.forward_cached(Variable(x), Variable(x), Variable(x), cache);
    m.forward_cached(Variable(x.slice(1, 0, 2)), Variable(x.slice(1, 0, 2)), Variable(x.slice(1, 0, 2)),
                     cache);
    CHECK(cache.bytes() == 3 * 7 * m.kv_cache_bytes_per_token());
  }
}

TEST_CASE("MultiHeadAttention with GQA and rotary: float64 gradcheck",
          "[nn][attention][gqa][rotary][gradcheck]") {
  auto m = make(8, 4, 2, nn::RotaryConfig{ops::RotaryStyle::Half, 50.0, 1.0});
  m->window = 3;
  const Variable x(rand64({1, 5, 8}, 8), true), y(rand64({1, 5, 8}, 9), true);
  for (bool fused : {true, false}) {
    INFO((fused ? "fused" : "composed"));
    m->need_weights = !fused;
    // the queries, and the keys and values, whose gradients sum over the two query heads of each group
    CHECK(gradcheck(
        [&](const std::vector<Variable>& v) { return m->forward(v[0], v[1], v[1], Tensor(), true); },
        {x, y}));
  }
}

TEST_CASE("MultiHeadAttention: bad head groupings and rotary settings name the module and the sizes",
          "[nn][attention][gqa][rotary][errors]") {
  Generator gen(1);
  auto build = [&](int64_t E, int64_t H, int64_t Hkv, std::optional<nn::RotaryConfig> rc) {
    return std::make_shared<nn::MultiHeadAttention>(
        E, H, nn::MultiHeadAttentionOptions{.num_kv_heads = Hkv, .rotary = rc, .generator = &gen});
  };
  REQUIRE_THROWS_SACCADE(build(12, 4, 3, std::nullopt),
                         "MultiHeadAttention: num_heads 4 must be a positive multiple of num_kv_heads 3");
  REQUIRE_THROWS_SACCADE(build(12, 4, 0, std::nullopt), "num_kv_heads 0");
  REQUIRE_THROWS_SACCADE(build(12, 4, 8, std::nullopt),
                         "num_heads 4 must be a positive multiple of num_kv_heads 8");
  // an odd head dim with the whole of it rotated; a fraction outside (0, 1]
  REQUIRE_THROWS_SACCADE(build(12, 4, 2, nn::RotaryConfig{}),
                         "MultiHeadAttention > RotaryEmbedding: the rotated dims must be even and positive: "
                         "head_dim 3");
  for (double f : {0.0, -0.5, 1.5, double(NAN)})
    REQUIRE_THROWS_SACCADE(build(16, 4, 2, nn::RotaryConfig{ops::RotaryStyle::Half, 1e4, f}),
                           "MultiHeadAttention > RotaryEmbedding: rotary_fraction must be in (0, 1]");
  REQUIRE_THROWS_SACCADE(build(16, 4, 2, nn::RotaryConfig{ops::RotaryStyle::Half, 0.5, 1.0}),
                         "RotaryEmbedding: theta must be finite and > 1");
  // rotary cross-attention needs the queries to be the last positions of the keys
  auto m = build(16, 4, 2, nn::RotaryConfig{});
  const Variable q(rand64({2, 5, 16}, 1).to(DType::Float32)), kv(rand64({2, 3, 16}, 2).to(DType::Float32));
  REQUIRE_THROWS_SACCADE(m->forward(q, kv, kv),
                         "MultiHeadAttention: rotary positions make the Tq = 5 queries");
  REQUIRE_THROWS_SACCADE(m->forward(q, kv, kv), "(queries [2, 5, 16], keys [2, 2, 3, 4])");
  // windows below 1 and without causal, with grouped heads as without
  m->window = -1;
  REQUIRE_THROWS_SACCADE(m->forward(q, q, q, Tensor(), true), "MultiHeadAttention: window must be >= 1");
  m->window = 2;
  REQUIRE_THROWS_SACCADE(m->forward(q, q, q), "MultiHeadAttention: window 2 needs causal attention");
  // a cache of other key/value heads
  m->window = 0;
  NoGradGuard no_grad;
  nn::KVCache cache;
  build(16, 4, 4, std::nullopt)->forward_cached(q, q, q, cache);
  REQUIRE_THROWS_SACCADE(m->forward_cached(q, q, q, cache),
                         "MultiHeadAttention: the cache holds keys [2, 4, 5, 4]");
}
