#pragma once
// Helpers and checks the attention tests share (test_gqa.cpp, test_window.cpp, test_packing.cpp; the packed
// models of test_llama.cpp and test_gpt.cpp).
#include <functional>
#include <vector>

#include "helpers.h"
#include "nn/attention.h"

namespace saccade::testing {

/// The output of one attention call and the gradients of sum(out ⊙ R) in q, k and v.
struct AttentionRun {
  Tensor out, gq, gk, gv;
};

/// Standard normal draws of `shape` from Generator(seed), drawn in float32 and cast to `dtype` (so every
/// dtype sees the same numbers).
inline Tensor seeded_randn(const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed);
  return ops::randn(shape, DType::Float32, Device::cpu(), &g).to(dtype);
}

/// Document ids int64 (B, T) for packed rows from each row's document lengths (every row's lengths summing to
/// one T): ids 0, 1, ... in a row, shifted by 10·b so that a row's ids need not start at 0.
inline Tensor document_ids_of(const std::vector<std::vector<int64_t>>& lengths) {
  std::vector<int64_t> ids;
  int64_t T = 0;
  for (size_t b = 0; b < lengths.size(); ++b) {
    T = 0;
    for (size_t d = 0; d < lengths[b].size(); ++d)
      for (int64_t i = 0; i < lengths[b][d]; ++i, ++T) ids.push_back(static_cast<int64_t>(10 * b + d));
  }
  return ops::from_vector(ids, {static_cast<int64_t>(lengths.size()), T});
}

/// Each document of packed rows run alone: for batch row b and its documents' lengths lengths[b] (in order),
/// `forward` of the document's ids (1, len) gives logits (1, len, V) equal (to 1e-10) to those rows of
/// `packed`, and the backward of sum(logits ⊙ R's rows) adds each document's gradients to the parameters
/// (test_llama.cpp's and test_gpt.cpp's packed models then compare the sum with the packed run's).
inline void check_documents_alone(const std::function<Variable(const Tensor&)>& forward, const Tensor& idx,
                                  const std::vector<std::vector<int64_t>>& lengths, const Tensor& packed,
                                  const Tensor& R) {
  for (int64_t b = 0; b < static_cast<int64_t>(lengths.size()); ++b) {
    int64_t a = 0;
    for (int64_t len : lengths[static_cast<size_t>(b)]) {
      INFO("row " << b << ", document [" << a << ", " << a + len << ")");
      auto doc = [&](const Tensor& x) { return x.slice(0, b, b + 1).slice(1, a, a + len).contiguous(); };
      const Variable alone = forward(doc(idx));
      CHECK(allclose(doc(packed), alone.data(), 1e-10, 1e-10));
      sum(mul(alone, Variable(doc(R)))).backward();
      a += len;
    }
  }
}

/// q, k, v through nn::scaled_dot_product_attention under `mask`, fused (need_weights false) or composed,
/// dropout p from Generator(7), then backward of sum(out ⊙ R) with R = seeded_randn(seed 1234).
inline AttentionRun run_attention(bool fused, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const ops::AttentionMask& mask, double p, bool enable_gqa = true) {
  Variable vq(q, true), vk(k, true), vv(v, true);
  Generator gen(7);
  auto r = nn::scaled_dot_product_attention(
      vq, vk, vv, mask, {.dropout_p = p, .generator = &gen, .enable_gqa = enable_gqa, .need_weights = !fused},
      "scaled_dot_product_attention");
  r.output.backward(seeded_randn(r.output.shape(), q.dtype(), 1234));
  return {r.output.data(), vq.grad(), vk.grad(), vv.grad()};
}

/// float64 gradcheck and gradgradcheck of q, k, v through the fused op (flash_attention, scale 0.7) and the
/// composed path (nn::scaled_dot_product_attention with need_weights and enable_gqa), under `mask`, without
/// and with dropout (0.3; a fresh Generator(5) per evaluation, so every evaluation draws the same mask).
inline void check_attention_derivatives(const Variable& q, const Variable& k, const Variable& v,
                                        const ops::AttentionMask& mask) {
  for (double p : {0.0, 0.3}) {
    INFO("dropout " << p);
    auto fused = [&](const std::vector<Variable>& x) {
      Generator g(5);
      return flash_attention(x[0], x[1], x[2], mask, 0.7, p, true, &g);
    };
    auto composed = [&](const std::vector<Variable>& x) {
      Generator g(5);
      return nn::scaled_dot_product_attention(
                 x[0], x[1], x[2], mask,
                 {.dropout_p = p, .generator = &g, .scale = 0.7, .enable_gqa = true, .need_weights = true},
                 "scaled_dot_product_attention")
          .output;
    };
    REQUIRE(gradcheck(fused, {q, k, v}));
    REQUIRE(gradcheck(composed, {q, k, v}));
    REQUIRE(gradgradcheck(fused, {q, k, v}));
    REQUIRE(gradgradcheck(composed, {q, k, v}));
  }
}

}  // namespace saccade::testing
