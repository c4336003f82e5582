// nn::LlamaBlock (issue 40): Hugging Face's parameter names and shapes, the block against a composed
// reference written from readable pieces (rms_norm_composed, rotary_embedding_composed, key/value heads
// repeated per group, softmax attention with a causal mask), causality, gradcheck, and bad input; Qwen3's
// per-head q and k norms (qk_norm, issue 51) against the same reference; decoding through the KV cache
// (written in place, logits_to_keep, no allocation in the steady state: issue 53).
#include <algorithm>
#include <cmath>
#include <string>

#include "attention_checks.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/reduce.h"
#include "autograd/grad_mode.h"
#include "helpers.h"
#include "module_gradcheck.h"
#include "nn/llama.h"
#include "nn/lora.h"
#include "ops/caching_allocator.h"
#include "ops/creation.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::leaves;
using saccade::testing::module_gradcheck;
using saccade::testing::rand64;

namespace {

nn::LlamaConfig tiny() {
  nn::LlamaConfig c;
  c.hidden_size = 16, c.intermediate_size = 24, c.num_attention_heads = 4, c.num_key_value_heads = 2;
  c.rms_norm_eps = 1e-5, c.rope_theta = 500.0;
  return c;
}

// The block from readable pieces: x (B, T, hidden), float64; with post-norms (OLMo 2's: no input norm, each
// sublayer's output normed; Gemma 3's sandwich: the inputs normed too) and q and k norms over all heads when
// the block has them
Variable reference(nn::LlamaBlock& b, const Variable& x, bool parallel = false) {
  const bool post = b.post_feedforward_layernorm != nullptr;
  const bool full = b.self_attn->q_norm && b.self_attn->q_norm->weight.numel() != b.self_attn->head_dim;
  auto norm = [](const Variable& y, const std::shared_ptr<nn::Module>& n) {
    if (auto ln = std::dynamic_pointer_cast<nn::LayerNorm>(n))  // GPT-NeoX's and StableLM's
      return layer_norm_composed(y, {y.size(-1)}, ln->weight, ln->bias, 1e-5);
    return rms_norm_composed(y, {y.size(-1)}, std::dynamic_pointer_cast<nn::RMSNorm>(n)->weight, 1e-5);
  };
  const nn::LlamaAttention& a = *b.self_attn;
  const int64_t B = x.size(0), T = x.size(1), H = a.num_heads, Hkv = a.num_kv_heads, hd = a.head_dim;
  ops::RotaryTables t = ops::rotary_tables(T, hd, 500.0, DType::Float64);
  // (B, T, h·hd) -> (B, h, T, hd), each head's vector normed first when the block has q and k norms
  auto heads = [&](const Variable& y, int64_t h, const std::shared_ptr<nn::RMSNorm>& n = nullptr) {
    Variable split = reshape(full && n ? norm(y, n) : y, {B, T, h, hd});
    if (n && !full) split = rms_norm_composed(split, {hd}, n->weight, 1e-5);
    return permute(split, {0, 2, 1, 3});
  };
  const Variable xn = b.input_layernorm ? norm(x, b.input_layernorm) : x;
  const Variable q =
      rotary_embedding_composed(heads(a.q_proj->forward(xn), H, a.q_norm), t.cos, t.sin, RotaryStyle::Half);
  Variable k =
      rotary_embedding_composed(heads(a.k_proj->forward(xn), Hkv, a.k_norm), t.cos, t.sin, RotaryStyle::Half);
  Variable v = heads(a.v_proj->forward(xn), Hkv);
  Tensor index = Tensor::empty({H}, DType::Int64);  // query head h reads key/value head h / (H / Hkv)
  for (int64_t h = 0; h < H; ++h) index.data<int64_t>()[h] = h / (H / Hkv);
  k = index_select(k, 1, index);
  v = index_select(v, 1, index);
  Variable s = mul(matmul(q, transpose(k, -2, -1)), 1.0 / std::sqrt(static_cast<double>(hd)));
  s = masked_fill(s, ops::logical_not(nn::causal_mask(T, T)), -INFINITY);
  const Variable o = reshape(permute(matmul(softmax(s, -1), v), {0, 2, 1, 3}), {B, T, H * hd});
  const Variable attended = a.o_proj->forward(o);
  auto mlp = [&](const Variable& in) {
    if (b.plain_mlp)  // GPT-NeoX's: down(gelu(up in))
      return b.plain_mlp->down_proj->forward(gelu(b.plain_mlp->up_proj->forward(in)));
    return b.mlp->down_proj->forward(mul(silu(b.mlp->gate_proj->forward(in)), b.mlp->up_proj->forward(in)));
  };
  if (parallel)  // two norms (GPT-NeoX's), or the attention's normed input (one norm: Falcon 7B's)
    return add(add(x, attended), mlp(b.post_attention_layernorm ? norm(x, b.post_attention_layernorm) : xn));
  const Variable h = add(x, post ? norm(attended, b.post_attention_layernorm) : attended);
  const Variable hn = !post                         ? norm(h, b.post_attention_layernorm)
                      : b.pre_feedforward_layernorm ? norm(h, b.pre_feedforward_layernorm)
                                                    : h;
  const Variable m = mlp(hn);
  return add(h, post ? norm(m, b.post_feedforward_layernorm) : m);
}

// The block's steps through a KV cache, the first 3 positions of x (B, 5, hidden) then the last 2, equal y,
// its forward over all 5 (float64).
void check_steps(nn::LlamaBlock& block, const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  nn::KVCache cache;
  const Tensor first = block.step(Variable(x.narrow(1, 0, 3)), cache).data();
  const Tensor rest = block.step(Variable(x.narrow(1, 3, 2)), cache).data();
  CHECK(allclose(first, y.narrow(1, 0, 3), 1e-12, 1e-12));
  CHECK(allclose(rest, y.narrow(1, 3, 2), 1e-12, 1e-12));
}

}  // namespace

TEST_CASE("LlamaBlock: Hugging Face's names, and the composed reference", "[nn][llama]") {
  Generator gen(7);
  nn::LlamaBlock block(tiny(), &gen);
  std::vector<std::string> keys = block.state_dict().keys();
  std::sort(keys.begin(), keys.end());
  CHECK(keys == std::vector<std::string>{
                    "input_layernorm.weight", "mlp.down_proj.weight", "mlp.gate_proj.weight",
                    "mlp.up_proj.weight", "post_attention_layernorm.weight", "self_attn.k_proj.weight",
                    "self_attn.o_proj.weight", "self_attn.q_proj.weight", "self_attn.v_proj.weight"});
  CHECK(block.self_attn->k_proj->weight.shape() == Shape{8, 16});  // H_kv · head_dim = 2 · 4
  CHECK(block.self_attn->q_proj->weight.shape() == Shape{16, 16});
  block.to(DType::Float64);
  for (const Variable& w : {std::dynamic_pointer_cast<nn::RMSNorm>(block.input_layernorm)->weight,
                            std::dynamic_pointer_cast<nn::RMSNorm>(block.post_attention_layernorm)->weight}) {
    Tensor d = w.data();  // not all ones, so the norms' weights count
    ops::copy_(d, ops::add(rand64({16}, 8), 1.0));
  }
  Variable x(rand64({2, 5, 16}, 9), true);
  Variable y = block.forward(x);
  CHECK(y.shape() == Shape{2, 5, 16});
  REQUIRE(allclose(y.data(), reference(block, Variable(x.data())).data(), 1e-12, 1e-12));
  // causal: a later token changes nothing before it
  Tensor x2 = x.data().clone();
  Tensor last = x2.narrow(1, 4, 1);
  ops::fill_(last, 3.0);
  Tensor y2 = block.forward(Variable(x2)).data();
  CHECK(allclose(y2.narrow(1, 0, 4), y.data().narrow(1, 0, 4), 1e-13, 1e-13));
  CHECK_FALSE(allclose(y2.narrow(1, 4, 1), y.data().narrow(1, 4, 1), 1e-6, 1e-6));
  // gradients through the whole block, to the input and to the parameters
  CHECK(gradcheck([&](const std::vector<Variable>& v) { return block.forward(v[0]); },
                  {Variable(rand64({1, 3, 16}, 10), true)}));
  sum(y).backward();
  for (const Variable& p : block.parameters()) CHECK(p.grad().defined());
}

TEST_CASE(
    "LlamaBlock: GPT-NeoX's switches (LayerNorms, a parallel residual, an ungated MLP) against the composed "
    "reference, with their gradients",
    "[nn][llama]") {
  for (const auto& [parallel, norms] : {std::pair{true, 2}, std::pair{true, 1}, std::pair{false, 2}}) {
    CAPTURE(parallel, norms);
    nn::LlamaConfig c = tiny();
    c.norm_type = "layer_norm";
    c.parallel_residual = parallel;
    c.parallel_norms = norms;
    c.gated_mlp = false;
    c.hidden_act = "gelu";
    c.attention_bias = c.mlp_bias = true;
    Generator gen(13);
    nn::LlamaBlock block(c, &gen);
    std::vector<std::string> keys = block.state_dict().keys();
    for (const char* name :
         {"input_layernorm.bias", "mlp.up_proj.bias", "mlp.down_proj.weight", "self_attn.o_proj.bias"}) {
      CAPTURE(name);
      CHECK(std::find(keys.begin(), keys.end(), name) != keys.end());
    }
    CHECK(std::find(keys.begin(), keys.end(), "mlp.gate_proj.weight") == keys.end());
    CHECK((std::find(keys.begin(), keys.end(), "post_attention_layernorm.weight") != keys.end()) ==
          (norms == 2));
    block.to(DType::Float64);
    for (auto& [name, p] : block.named_parameters())
      if (name.find("norm") != std::string::npos) {  // not ones and zeros, so that both count
        Tensor d = p.data();
        ops::copy_(d, ops::add(rand64(p.shape(), 14), 1.0));
      }
    const Variable x(rand64({2, 5, 16}, 15));
    const Tensor y = block.forward(x).data();
    CHECK(allclose(y, reference(block, x, parallel).data(), 1e-12, 1e-12));
    if (norms == 2) CHECK_FALSE(allclose(y, reference(block, x, !parallel).data(), 1e-6, 1e-6));
    check_steps(block, x.data(), y);
    CHECK(gradcheck([&](const std::vector<Variable>& v) { return block.forward(v[0]); },
                    {Variable(rand64({1, 3, 16}, 16), true)}));
  }
  nn::LlamaConfig bad = tiny();
  bad.norm_type = "batch_norm";
  REQUIRE_THROWS_SACCADE(nn::LlamaBlock(bad), "norm_type must be 'rms_norm' or 'layer_norm'");
  bad = tiny();
  bad.parallel_residual = true;
  bad.norm_placement = "post";
  REQUIRE_THROWS_SACCADE(nn::LlamaBlock(bad), "parallel_residual needs norm_placement 'pre'");
}

TEST_CASE("LlamaBlock: Qwen3's q and k norms, per head before the rotation, with their gradients",
          "[nn][llama]") {
  nn::LlamaConfig c = tiny();
  c.qk_norm = true;
  c.head_dim = 8;  // != hidden / heads, as Qwen3's
  Generator gen(11);
  nn::LlamaBlock block(c, &gen);
  const std::vector<std::string> keys = block.state_dict().keys();
  for (const char* name : {"self_attn.q_norm.weight", "self_attn.k_norm.weight"}) {
    CAPTURE(name);
    REQUIRE(std::find(keys.begin(), keys.end(), name) != keys.end());
    CHECK(block.state_dict().at(name).shape() == Shape{8});
  }
  CHECK(block.self_attn->q_proj->weight.shape() == Shape{32, 16});  // H · head_dim = 4 · 8
  block.to(DType::Float64);
  for (const Variable& w : {block.self_attn->q_norm->weight, block.self_attn->k_norm->weight}) {
    Tensor d = w.data();  // not all ones, so the norms' weights count
    ops::copy_(d, ops::add(rand64({8}, 12), 1.0));
  }
  Variable x(rand64({2, 5, 16}, 13), true);
  const Variable y = block.forward(x);
  CHECK(allclose(y.data(), reference(block, Variable(x.data())).data(), 1e-12, 1e-12));
  // without the norms the block computes something else
  nn::LlamaConfig plain = c;
  plain.qk_norm = false;
  nn::LlamaBlock unnormed(plain, &gen);
  unnormed.to(DType::Float64);
  CHECK(unnormed.load_state_dict(block.state_dict(), /*strict=*/false).unexpected_keys ==
        std::vector<std::string>{"self_attn.q_norm.weight", "self_attn.k_norm.weight"});
  CHECK_FALSE(allclose(unnormed.forward(x).data(), y.data(), 1e-6, 1e-6));
  // the KV cache holds normed, rotated keys: step by step equals the whole sequence
  check_steps(block, x.data(), y.data());
  // gradients to the input and to every parameter of the attention, q_norm's and k_norm's included
  Variable small(rand64({1, 3, 16}, 14), true);
  CHECK(module_gradcheck([&] { return block.self_attn->forward(small); }, leaves(*block.self_attn, {small})));
}

TEST_CASE(
    "LlamaBlock: OLMo 2's norms after each sublayer and q/k norms over all heads, Gemma 3's four norms, with "
    "their gradients",
    "[nn][llama]") {
  nn::LlamaConfig olmo2 = tiny(), gemma3 = tiny();
  olmo2.qk_norm_full_width = true;
  olmo2.norm_placement = "post";
  gemma3.qk_norm = true;
  gemma3.norm_placement = "sandwich";
  for (const nn::LlamaConfig& c : {olmo2, gemma3}) {
    CAPTURE(c.norm_placement);
    const bool sandwich = c.norm_placement == "sandwich";
    Generator gen(15);
    nn::LlamaBlock block(c, &gen);
    const std::vector<std::string> keys = block.state_dict().keys();
    CHECK((std::find(keys.begin(), keys.end(), "input_layernorm.weight") != keys.end()) == sandwich);
    CHECK((std::find(keys.begin(), keys.end(), "pre_feedforward_layernorm.weight") != keys.end()) ==
          sandwich);
    CHECK(block.self_attn->q_norm->weight.shape() == Shape{sandwich ? 4 : 16});  // head_dim, or H · head_dim
    CHECK(block.self_attn->k_norm->weight.shape() ==
          Shape{sandwich ? 4 : 8});  // head_dim, or H_kv · head_dim
    block.to(DType::Float64);
    for (auto& [name, p] : block.named_parameters())
      if (name.find("norm") != std::string::npos) {  // not all ones, so that each norm's weight counts
        Tensor d = p.data();
        ops::copy_(d, ops::add(rand64(p.shape(), 16), 1.0));
      }
    Variable x(rand64({2, 5, 16}, 17), true);
    const Variable y = block.forward(x);
    CHECK(allclose(y.data(), reference(block, Variable(x.data())).data(), 1e-12, 1e-12));
    check_steps(block, x.data(), y.data());  // the KV cache holds the normed, rotated keys
    Variable small(rand64({1, 3, 16}, 18), true);
    CHECK(module_gradcheck([&] { return block.forward(small); }, leaves(block, {small})));
  }
}

TEST_CASE("LlamaBlock: agrees with transformers' Llama layer (tests/fixtures/make_llama_block.py)",
          "[nn][llama][torch]") {
  // one decoder layer and the final RMSNorm of a random LlamaModel, float32, with the gradients of
  // sum(output * R) to the input and to every weight
  nn::Safetensors f = nn::load_safetensors(std::string(SACCADE_TEST_DATA_DIR) + "/llama_block.safetensors");
  nn::LlamaBlock block(tiny());
  nn::RMSNorm norm(16, 1e-5);
  nn::StateDict layer;
  for (const auto& [name, t] : f.tensors)
    if (name.rfind("layers.0.", 0) == 0) layer.insert(name.substr(9), t);
  block.load_state_dict(layer);  // strict: every name matches transformers'
  norm.load_state_dict([&] {
    nn::StateDict d;
    d.insert("weight", f.tensors.at("norm.weight"));
    return d;
  }());
  Variable x(f.tensors.at("input"), true);
  Variable y = norm.forward(block.forward(x));
  CHECK(allclose(y.data(), f.tensors.at("output"), 1e-5, 1e-5));
  sum(mul(y, Variable(f.tensors.at("grad_output")))).backward();
  CHECK(allclose(x.grad(), f.tensors.at("grad.input"), 1e-4, 1e-5));
  for (const auto& [name, p] : block.named_parameters()) {
    INFO(name);
    CHECK(allclose(p.grad(), f.tensors.at("grad.layers.0." + name), 1e-4, 1e-5));
  }
  CHECK(allclose(norm.weight.grad(), f.tensors.at("grad.norm.weight"), 1e-4, 1e-5));
}

TEST_CASE("LlamaBlock: bad configurations", "[nn][llama][errors]") {
  nn::LlamaConfig c = tiny();
  c.num_key_value_heads = 3;
  REQUIRE_THROWS_SACCADE(nn::LlamaBlock{c},
                         "LlamaAttention: num_attention_heads 4 is not a multiple of num_key_value_heads 3");
  c = tiny();
  c.head_dim = 3;
  REQUIRE_THROWS_SACCADE(nn::LlamaBlock{c}, "RotaryEmbedding");
  c = tiny();
  c.num_attention_heads = 0;
  REQUIRE_THROWS_SACCADE(nn::LlamaBlock{c}, "must be positive");
  nn::LlamaBlock b(tiny());
  REQUIRE_THROWS_SACCADE(b.forward(Variable(rand64({5, 16}).to(DType::Float32))),
                         "LlamaAttention: expected x (B, T, hidden)");
}

TEST_CASE("LlamaForCausalLM: sliding window, and the KV cache equals the whole sequence",
          "[nn][llama][window]") {
  nn::LlamaConfig c;
  c.hidden_size = 16, c.intermediate_size = 24, c.num_attention_heads = 4, c.num_key_value_heads = 2;
  c.vocab_size = 30, c.num_hidden_layers = 1, c.max_position_embeddings = 40, c.rms_norm_eps = 1e-5;
  nn::LlamaForCausalLM full(c, 7);
  c.sliding_window = 5;
  nn::LlamaForCausalLM local(c, 7);  // the same weights (same seed, same shapes)
  full.eval(), local.eval();
  NoGradGuard no_grad;
  std::vector<int64_t> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9};
  const int64_t T = static_cast<int64_t>(ids.size());
  const Tensor x = ops::from_vector(ids, {1, T});
  const Tensor windowed = local.forward(x).data();
  // one layer, rotary (relative) positions: position t with a window of 5 sees exactly what the model without
  // a window sees at the end of the 5 tokens up to t
  for (int64_t t = 0; t < T; ++t) {
    CAPTURE(t);
    const int64_t from = std::max<int64_t>(0, t - 4);
    const Tensor tail =
        ops::from_vector(std::vector<int64_t>(ids.begin() + from, ids.begin() + t + 1), {1, t + 1 - from});
    const Tensor want = full.forward(tail).data().select(1, t - from);
    REQUIRE(allclose(windowed.select(1, t), want, 1e-5, 1e-5));
  }
  CHECK_FALSE(allclose(windowed, full.forward(x).data(), 1e-3, 1e-3));
  // decoding one position at a time through the cache (which keeps all positions and masks the old ones)
  auto state = local.init_state();
  for (int64_t t = 0; t < T; ++t)
    REQUIRE(allclose(local.step(x.narrow(1, t, 1), state).data().select(1, 0), windowed.select(1, t), 1e-5,
                     1e-5));
  c.sliding_window = -1;
  CHECK_THROWS_WITH(nn::LlamaForCausalLM(c), Catch::Contains("sliding_window must be >= 0"));
}

TEST_CASE("LlamaForCausalLM decoding: the KV cache written in place, logits_to_keep, no steady allocation",
          "[nn][llama][decode]") {
  // 4 key/value heads of 32 float32 features: 512 bytes a position, so a cache of 128 positions and more
  // is a block the caching allocator serves (64 KiB and up, ops/cpu/memory.cpp) and counts
  nn::LlamaConfig c;
  c.hidden_size = 128, c.intermediate_size = 64, c.num_attention_heads = 4, c.num_key_value_heads = 4;
  c.vocab_size = 40, c.num_hidden_layers = 1, c.max_position_embeddings = 256, c.rms_norm_eps = 1e-5;
  nn::LlamaForCausalLM model(c, 3);
  model.eval();
  NoGradGuard no_grad;
  const int64_t P = 140, N = 6;  // prompt, new positions
  std::vector<int64_t> ids(P + N);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7 + 3) % 40);
  const Tensor x = ops::from_vector(ids, {1, P + N});
  const Tensor full = model.forward(x).data();  // (1, P + N, vocab)

  auto state = model.init_state();
  state.reserve(P + N);
  // the prefill's logits of its last position only
  const Tensor last = model.step(x.narrow(1, 0, P), state, 1).data();
  REQUIRE(last.shape() == Shape({1, 1, 40}));
  REQUIRE(allclose(last.select(1, 0), full.select(1, P - 1), 1e-4, 1e-4));
  const nn::KVCache& cache = state.caches[0];
  REQUIRE(cache.capacity() == P + N);
  const float* buffer = cache.keys().data().data<float>();
  AllocatorStats before;
  for (int64_t n = 0; n < N; ++n) {
    CAPTURE(n);
    if (n == 1) before = memory_stats();  // after the first new token: the steady state
    const Tensor y = model.step(x.narrow(1, P + n, 1), state, 1).data();
    REQUIRE(allclose(y.select(1, 0), full.select(1, P + n), 1e-4, 1e-4));
    REQUIRE(cache.keys().data().data<float>() == buffer);  // the same buffer, written in place
  }
  const AllocatorStats after = memory_stats();
  CHECK(after.raw_alloc_count == before.raw_alloc_count);
  CHECK(cache.length() == P + N);
  CHECK(cache.bytes() == 2 * (P + N) * 4 * 32 * 4);

  // without reserve the buffer grows by doubling: a few buffers for many positions
  auto grown = model.init_state();
  std::vector<const float*> buffers;
  for (int64_t t = 0; t < 40; ++t) {
    const Tensor y = model.step(x.narrow(1, t, 1), grown, 1).data();
    REQUIRE(allclose(y.select(1, 0), full.select(1, t), 1e-4, 1e-4));
    const float* p = grown.caches[0].keys().data().data<float>();
    if (buffers.empty() || buffers.back() != p) buffers.push_back(p);
  }
  CHECK(buffers.size() <= 7);  // capacities 1, 2, 4, ..., 64
  CHECK(grown.caches[0].capacity() >= 40);
  // reset keeps the buffer for the next sequence
  grown.reset();
  CHECK(grown.length() == 0);
  CHECK(grown.caches[0].capacity() >= 40);
  CHECK_THROWS_WITH(model.step(x.narrow(1, 0, 2), grown, -1), Catch::Contains("logits_to_keep >= 0"));
  CHECK_THROWS_WITH(state.reserve(-1), Catch::Contains("KVCache::reserve"));
}

TEST_CASE("KVCache: with a graph it concatenates (gradients through the cache), and reorder",
          "[nn][decode]") {
  nn::KVCache cache;
  Variable k1(rand64({2, 1, 3, 4}, 1), true), v1(rand64({2, 1, 3, 4}, 2), true);
  Variable k2(rand64({2, 1, 2, 4}, 3), true), v2(rand64({2, 1, 2, 4}, 4), true);
  cache.append(k1, v1, "test");
  auto [k, v] = cache.append(k2, v2, "test");
  REQUIRE(k.shape() == Shape({2, 1, 5, 4}));
  CHECK(cache.capacity() == 0);  // no in-place buffer on the graph path
  sum(k * v).backward();
  REQUIRE(allclose(k1.grad(), v1.data(), 1e-12, 1e-12));
  REQUIRE(allclose(v2.grad(), k2.data(), 1e-12, 1e-12));
  // in place (no graph), then reordered: rows swapped, and the next append lands after them
  nn::KVCache decoding;
  {
    NoGradGuard no_grad;
    decoding.append(Variable(k1.data()), Variable(v1.data()), "test");
    decoding.reorder(ops::from_vector(std::vector<int64_t>{1, 0, 1}, {3}));
    auto [rk, rv] = decoding.append(Variable(k2.data().narrow(0, 0, 1).expand({3, 1, 2, 4})),
                                    Variable(v2.data().narrow(0, 0, 1).expand({3, 1, 2, 4})), "test");
    REQUIRE(rk.shape() == Shape({3, 1, 5, 4}));
    REQUIRE(allclose(rk.data().select(0, 0).narrow(1, 0, 3), k1.data().select(0, 1), 0, 0));
    REQUIRE(allclose(rk.data().select(0, 1).narrow(1, 0, 3), k1.data().select(0, 0), 0, 0));
    REQUIRE(allclose(rv.data().select(0, 2).narrow(1, 3, 2), v2.data().select(0, 0), 0, 0));
  }
  CHECK_THROWS_WITH(
      decoding.append(Variable(rand64({3, 2, 1, 4}, 5)), Variable(rand64({3, 2, 1, 4}, 6)), "mine"),
      Catch::Contains("mine: the cache holds keys"));
  CHECK_THROWS_WITH(
      decoding.append(Variable(rand64({3, 1, 1, 4}, 5)), Variable(rand64({3, 1, 2, 4}, 6)), "mine"),
      Catch::Contains("mine: expected new keys and values"));
}

TEST_CASE("packed Llama: each document's logits and gradients are those of its own forward",
          "[llama][packing]") {
  const std::vector<std::vector<int64_t>> lengths{{5, 9, 1, 5}, {20}, {12, 8}};
  const int64_t B = 3, T = 20;
  const Tensor ids = saccade::testing::document_ids_of(lengths);
  Generator g(11);
  const Tensor idx = ops::randint(0, 50, {B, T}, Device::cpu(), &g);
  struct Variant {
    const char* name;
    void (*set)(nn::LlamaConfig&);
  };
  for (const Variant& variant : {Variant{"GQA, rotary", [](nn::LlamaConfig&) {}},
                                 Variant{"window 3, per-head q/k norms, half the dims rotated",
                                         [](nn::LlamaConfig& c) {
                                           c.sliding_window = 3, c.qk_norm = true,
                                           c.partial_rotary_factor = 0.5;
                                         }},
                                 Variant{"a NoPE layer", [](nn::LlamaConfig& c) {
                                           c.no_rope_layers = {1, 0};
                                         }}}) {
    INFO(variant.name);
    nn::LlamaConfig c;
    c.vocab_size = 50, c.hidden_size = 16, c.intermediate_size = 24, c.num_attention_heads = 4;
    c.num_key_value_heads = 2, c.num_hidden_layers = 2, c.max_position_embeddings = 64, c.rope_theta = 500.0;
    variant.set(c);
    nn::LlamaForCausalLM m(c, 3);
    m.to(DType::Float64);
    const Tensor R = ops::randn({B, T, c.vocab_size}, DType::Float64, Device::cpu(), &g);
    // packed: the logits and the gradients of sum(logits ⊙ R)
    Variable packed = m.forward(idx, ids);
    sum(mul(packed, Variable(R))).backward();
    std::vector<Tensor> want;
    for (Variable p : m.parameters()) want.push_back(p.grad().clone()), p.zero_grad();
    // each document alone, its gradients summed over the documents
    saccade::testing::check_documents_alone([&](const Tensor& x) { return m.forward(x); }, idx, lengths,
                                            packed.data(), R);
    size_t i = 0;
    for (const Variable& p : m.parameters()) CHECK(allclose(p.grad(), want[i++], 1e-9, 1e-9));
  }
  nn::LlamaConfig c;
  c.vocab_size = 50, c.hidden_size = 16, c.intermediate_size = 24, c.num_attention_heads = 4;
  c.num_key_value_heads = 2, c.num_hidden_layers = 1, c.max_position_embeddings = 64;
  nn::LlamaForCausalLM m(c, 3);
  REQUIRE_THROWS_SACCADE(m.forward(idx, ids.slice(1, 0, 19)),
                         "LlamaModel: document_ids [3, 19] must have the shape of the ids [3, 20]");
  REQUIRE_THROWS_SACCADE(m.forward(idx, ops::neg(ids)), "document_ids must not decrease along T");
}

TEST_CASE(
    "Llama with checkpoint_activations: the same logits and gradients, padded or packed, with LoRA dropout",
    "[llama][checkpoint][packing]") {
  nn::LlamaConfig c;
  c.vocab_size = 40, c.hidden_size = 16, c.intermediate_size = 24, c.num_attention_heads = 4;
  c.num_key_value_heads = 2, c.num_hidden_layers = 3, c.max_position_embeddings = 32, c.rope_theta = 500.0;
  nn::LlamaForCausalLM m(c, 5);
  m.to(DType::Float64);
  nn::LoraConfig cfg;
  cfg.r = 4, cfg.lora_alpha = 8, cfg.lora_dropout = 0.3, cfg.target_modules = {"all-linear"};
  Generator gen(6);
  nn::apply_lora(m, cfg, &gen);
  m.to(DType::Float64);
  m.train();
  Generator g(7);
  const Tensor idx = ops::randint(0, 40, {2, 12}, Device::cpu(), &g);
  const Tensor ids = saccade::testing::document_ids_of({{4, 8}, {12}});
  const Tensor R = ops::randn({2, 12, 40}, DType::Float64, Device::cpu(), &g);
  for (bool packed : {false, true}) {
    auto run = [&](bool ckpt) {
      for (auto& block : m.model->layers)
        block->checkpoint_activations = ckpt, block->checkpoint_generators = {&gen};
      for (Variable p : m.parameters()) p.zero_grad();
      gen.manual_seed(9);  // the same dropout draws in both runs
      const Variable z = packed ? m.forward(idx, ids) : m.forward(idx);
      sum(mul(z, Variable(R))).backward();
      std::vector<Tensor> r{z.data()};
      for (const Variable& p : m.parameters())
        if (p.requires_grad()) r.push_back(p.grad().clone());
      return r;
    };
    INFO((packed ? "packed" : "padded"));
    const std::vector<Tensor> plain = run(false), ckpt = run(true);
    REQUIRE(plain.size() == ckpt.size());
    REQUIRE(plain.size() > 1);
    for (size_t i = 0; i < plain.size(); ++i) CHECK(allclose(plain[i], ckpt[i], 1e-12, 1e-12));
  }
}
