// Q8_0 weights (issue 53): GGUF's block layout and llama.cpp's rounding on a hand-made block, the error bound
// of quantize/dequantize, the fused linear_q8_0 against its readable twin (dequantize, then matmul) at every
// vector width and shape class (decoding rows, prefill panels, a padded last block), bad input, Linear's
// quantized forward, and a Llama's logits and greedy continuations against float32.
#include <cmath>
#include <memory>
#include <vector>

#include "autograd/grad_mode.h"
#include "helpers.h"
#include "nn/linear.h"
#include "nn/llama.h"
#include "ops/cpu/simd.h"
#include "ops/creation.h"
#include "ops/quant.h"
#include "ops/reduce.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::randn32;

TEST_CASE("quantize_q8_0: GGUF's 34-byte block, llama.cpp's rounding, a zero-padded last block", "[quant]") {
  // one row of 40: a whole block (weights (i - 16) / 4, max |x| 4) and 8 more in a padded second block
  std::vector<float> row(40);
  for (int i = 0; i < 32; ++i) row[i] = static_cast<float>(i - 16) / 4;
  for (int i = 32; i < 40; ++i) row[i] = 1.0f;
  const Q8_0Matrix q = ops::quantize_q8_0(ops::from_vector(row, {1, 40}));
  REQUIRE(q.rows == 1);
  REQUIRE(q.cols == 40);
  REQUIRE(q.blocks_per_row() == 2);
  CHECK(q.bytes() == 68);
  const BlockQ8_0& b0 = (*q.blocks)[0];
  CHECK(b0.d.bits == float16(4.0f / 127).bits);
  // q_i = round(x_i · 127 / 4) = round((i - 16) · 7.9375), halves away from zero
  CHECK(b0.qs[0] == -127);  // -4
  CHECK(b0.qs[16] == 0);
  CHECK(b0.qs[17] == 8);    // 7.9375
  CHECK(b0.qs[18] == 16);   // 15.875
  CHECK(b0.qs[31] == 119);  // 119.0625
  const BlockQ8_0& b1 = (*q.blocks)[1];
  CHECK(b1.d.bits == float16(1.0f / 127).bits);
  for (int i = 0; i < 8; ++i) CHECK(b1.qs[i] == 127);
  for (int i = 8; i < 32; ++i) CHECK(b1.qs[i] == 0);  // the padding
  // an all-zero block: scale 0, every q 0, dequantized to zeros
  const Q8_0Matrix z = ops::quantize_q8_0(ops::zeros({2, 32}));
  CHECK(static_cast<float>((*z.blocks)[1].d) == 0.0f);
  CHECK(ops::dequantize_q8_0(z).to_vector<float>() == std::vector<float>(64, 0.0f));
}

TEST_CASE("quantize_q8_0: every weight within half a step of its block, from each floating dtype",
          "[quant]") {
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
    CAPTURE(dtype_name(dt));
    const Tensor w = randn32({13, 100}, 5).to(dt);
    const Tensor deq = ops::dequantize_q8_0(ops::quantize_q8_0(w));
    REQUIRE(deq.shape() == Shape({13, 100}));
    const std::vector<float> a = w.to_vector<float>(), b = deq.to_vector<float>();
    bool any_differs = false;
    for (int64_t r = 0; r < 13; ++r)
      for (int64_t c0 = 0; c0 < 100; c0 += 32) {
        float amax = 0;
        for (int64_t c = c0; c < std::min<int64_t>(c0 + 32, 100); ++c)
          amax = std::max(amax, std::fabs(a[r * 100 + c]));
        // rounding to the step d = amax / 127 (half a step), and d's float16 rounding (2^-11 relative) times
        // |q| <= 127
        const float bound = amax / 254 + amax * std::ldexp(1.0f, -11) + 1e-7f;
        for (int64_t c = c0; c < std::min<int64_t>(c0 + 32, 100); ++c) {
          CAPTURE(r, c);
          REQUIRE(std::fabs(a[r * 100 + c] - b[r * 100 + c]) <= bound);
          any_differs = any_differs || a[r * 100 + c] != b[r * 100 + c];
        }
      }
    CHECK(any_differs);
  }
}

TEST_CASE("linear_q8_0: the fused kernel equals dequantize-then-matmul at every width and shape", "[quant]") {
  std::vector<cpu::Isa> widths;
  for (cpu::Isa i : {cpu::Isa::Avx512, cpu::Isa::Avx2, cpu::Isa::Baseline})
    if (i <= cpu::cpu_isa()) widths.push_back(i);
  for (cpu::Isa isa : widths) {
    cpu::IsaGuard guard(isa);
    // rows of x: 1 and 8 (the widening loop), 9 and 40 (dequantized panels + sgemm); N: a tail of 1-3 rows
    // of 4 and several panels of 64; K: whole blocks and a padded last one
    for (int64_t m : {1, 8, 9, 40})
      for (int64_t n : {1, 7, 131})
        for (int64_t k : {32, 45, 96}) {
          CAPTURE(static_cast<int>(isa), m, n, k);
          const Q8_0Matrix w = ops::quantize_q8_0(randn32({n, k}, static_cast<uint64_t>(n * 100 + k)));
          const Tensor x = randn32({m, k}, static_cast<uint64_t>(m));
          const Tensor fast = ops::linear_q8_0(x, w), slow = ops::linear_q8_0_composed(x, w);
          REQUIRE(fast.shape() == Shape({m, n}));
          REQUIRE(allclose(fast, slow, 1e-5, 1e-5));
        }
  }
  // K = 0: a sum of nothing, zeros of x's rows (as the composed version)
  const Q8_0Matrix empty = ops::quantize_q8_0(ops::zeros({5, 0}));
  const Tensor none = ops::linear_q8_0(ops::zeros({3, 0}), empty);
  REQUIRE(none.shape() == Shape({3, 5}));
  CHECK(allclose(none, ops::linear_q8_0_composed(ops::zeros({3, 0}), empty)));
  CHECK(ops::max(ops::abs(none)).item<double>() == 0.0);
  // any leading dims, a strided (transposed) input, and a bfloat16 input rounded once at the end
  const Q8_0Matrix w = ops::quantize_q8_0(randn32({24, 64}, 3));
  const Tensor x3 = randn32({2, 3, 64}, 4);
  const Tensor y3 = ops::linear_q8_0(x3, w);
  REQUIRE(y3.shape() == Shape({2, 3, 24}));
  CHECK(allclose(y3, ops::linear_q8_0_composed(x3, w), 1e-5, 1e-5));
  const Tensor xt = randn32({64, 5}, 6).t();
  CHECK(allclose(ops::linear_q8_0(xt, w), ops::linear_q8_0_composed(xt, w), 1e-5, 1e-5));
  const Tensor xb = x3.to(DType::BFloat16);
  const Tensor yb = ops::linear_q8_0(xb, w);
  CHECK(yb.dtype() == DType::BFloat16);
  CHECK(allclose(yb.to(DType::Float32), ops::linear_q8_0_composed(xb, w).to(DType::Float32), 1e-2, 1e-2));
  // and close to the float32 product itself: the quantization's error, not the kernel's
  const Tensor wf = randn32({24, 64}, 3);
  const Tensor exact = ops::matmul(x3, wf.t()), approx = ops::linear_q8_0(x3, ops::quantize_q8_0(wf));
  const double scale = ops::max(ops::abs(exact)).item<double>();
  CHECK(ops::max(ops::abs(ops::sub(exact, approx))).item<double>() < 0.02 * scale);
}

TEST_CASE("quantize_q8_0 and linear_q8_0: bad input", "[quant][errors]") {
  CHECK_THROWS_WITH(ops::quantize_q8_0(ops::zeros({32})),
                    Catch::Contains("quantize_q8_0") && Catch::Contains("[32]"));
  CHECK_THROWS_WITH(ops::quantize_q8_0(ops::zeros({2, 32}, DType::Int64)),
                    Catch::Contains("floating matrix"));
  Tensor bad = ops::zeros({2, 32});
  bad.data<float>()[37] = NAN;
  CHECK_THROWS_WITH(ops::quantize_q8_0(bad), Catch::Contains("quantize_q8_0") && Catch::Contains("(1, 5)"));
  const Q8_0Matrix w = ops::quantize_q8_0(ops::zeros({4, 32}));
  CHECK_THROWS_WITH(ops::linear_q8_0(ops::zeros({3, 31}), w), Catch::Contains("linear_q8_0") &&
                                                                  Catch::Contains("[3, 31]") &&
                                                                  Catch::Contains("(4, 32)"));
  CHECK_THROWS_WITH(ops::linear_q8_0(ops::zeros({3, 32}, DType::Int64), w), Catch::Contains("floating"));
  CHECK_THROWS_WITH(ops::linear_q8_0(ops::zeros({3, 32}), Q8_0Matrix{}), Catch::Contains("undefined"));
  CHECK_THROWS_WITH(ops::dequantize_q8_0(Q8_0Matrix{}), Catch::Contains("dequantize_q8_0"));
}

TEST_CASE("Linear: quantized forward under NoGradGuard, refused with a graph", "[quant][nn]") {
  Generator gen(11);
  nn::Linear lin(64, 10, true, &gen);
  const Tensor x = randn32({3, 64}, 12);
  lin.quantize_q8_0();
  REQUIRE(lin.weight_q8_0.defined());
  {
    NoGradGuard no_grad;
    const Tensor y = lin.forward(Variable(x)).data();
    CHECK(allclose(y, ops::add(ops::linear_q8_0_composed(x, lin.weight_q8_0), lin.bias.data()), 1e-5, 1e-5));
  }
  CHECK_THROWS_WITH(lin.forward(Variable(x)), Catch::Contains("Linear") && Catch::Contains("NoGradGuard"));
}

TEST_CASE("nn::quantize_q8_0: every Linear of a model but those whose last name component is skipped",
          "[quant][nn]") {
  nn::LlamaConfig c;
  c.hidden_size = 32, c.intermediate_size = 64, c.num_attention_heads = 4, c.num_key_value_heads = 2;
  c.vocab_size = 40, c.num_hidden_layers = 2, c.max_position_embeddings = 16;
  nn::LlamaForCausalLM model(c, 5);  // untied: lm_head is a Linear
  const std::vector<std::string> done = nn::quantize_q8_0(model, {"lm_head", "down_proj"});
  CHECK(done.size() == 2 * 6);  // q, k, v, o, gate, up in each layer
  for (const std::string& name : done)
    CHECK((name.find("lm_head") == std::string::npos && name.find("down_proj") == std::string::npos));
  CHECK_FALSE(model.lm_head->weight_q8_0.defined());
  CHECK_FALSE(model.model->layers[1]->mlp->down_proj->weight_q8_0.defined());
  CHECK(model.model->layers[1]->mlp->up_proj->weight_q8_0.defined());
  // a skip list naming a whole dotted name skips nothing: only last components count
  nn::LlamaForCausalLM other(c, 5);
  CHECK(nn::quantize_q8_0(other, {"model.layers.0.mlp.down_proj"}).size() == 2 * 7 + 1);
}

TEST_CASE("LlamaForCausalLM in Q8_0: logits within 2 % of float32, greedy flips only at near-ties",
          "[quant][nn][llama]") {
  nn::LlamaConfig c;
  c.hidden_size = 128, c.intermediate_size = 256, c.num_attention_heads = 4, c.num_key_value_heads = 2;
  c.vocab_size = 96, c.num_hidden_layers = 2, c.max_position_embeddings = 64, c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = true;                // the output layer is embed_tokens' weight (SmolLM's layout)
  nn::LlamaForCausalLM f32(c, 21), q8(c, 21);  // the same weights (same seed)
  f32.eval(), q8.eval();
  CHECK(q8.quantize_q8_0() == 2 * 7 + 1);  // q, k, v, o, gate, up, down a layer, and the tied output layer
  REQUIRE(q8.output_q8_0.defined());
  CHECK(q8.output_q8_0.rows == 96);
  NoGradGuard no_grad;
  int same = 0;
  for (int64_t p = 0; p < 10; ++p) {
    CAPTURE(p);
    std::vector<int64_t> prompt(6);
    for (int64_t i = 0; i < 6; ++i) prompt[static_cast<size_t>(i)] = (p * 13 + i * 7 + 1) % c.vocab_size;
    // relative error: max |Δ| over a position's logits / max |logit| of that position, max over positions
    const Tensor x = ops::from_vector(prompt, {1, 6});
    const Tensor a = f32.forward(x).data(), b = q8.forward(x).data();
    const Tensor rel = ops::div(ops::amax(ops::abs(ops::sub(a, b)), {-1}), ops::amax(ops::abs(a), {-1}));
    CHECK(ops::max(rel).item<double>() < 0.02);
    // 32 greedy tokens through the KV cache
    auto greedy = [&](nn::LlamaForCausalLM& m) {
      auto state = m.init_state();
      std::vector<int64_t> out;
      Tensor logits = m.step(x, state, 1).data();
      for (int t = 0; t < 32; ++t) {
        const int64_t next = ops::argmax(logits.select(1, 0), -1).item<int64_t>();
        out.push_back(next);
        logits = m.step(ops::from_vector(std::vector<int64_t>{next}, {1, 1}), state, 1).data();
      }
      return out;
    };
    const std::vector<int64_t> cont = greedy(f32);
    same += cont == greedy(q8);
    // where a token flips, float32's own top two nearly tie
    std::vector<int64_t> seq = prompt;
    seq.insert(seq.end(), cont.begin(), cont.end());
    testing::greedy_flips_within_error(f32, q8, ops::from_vector(seq, {1, static_cast<int64_t>(seq.size())}));
  }
  // random weights give flat logits (near-ties); measured 7 of 10 identical
  CHECK(same >= 5);
}
