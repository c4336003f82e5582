#pragma once
// A check the attention tests share (test_gqa.cpp, test_window.cpp).
#include <vector>

#include "helpers.h"
#include "nn/attention.h"

namespace saccade::testing {

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
