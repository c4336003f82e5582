// The rotary position embedding (issue 40): the fused kernel against its composed reference in both
// conventions, partial rotary, positions by offset and by index, the relative-position property, gradcheck
// and gradgradcheck, the 16-bit path, the module's table cache, and bad input.
#include <cmath>

#include "helpers.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;

namespace {
Variable leaf(const Tensor& t) { return Variable(t, true); }
constexpr RotaryStyle kStyles[] = {RotaryStyle::Half, RotaryStyle::Interleaved};
}  // namespace

TEST_CASE("rotary_embedding: the kernel equals the composed reference, in both conventions",
          "[ops][rotary]") {
  // (B, H, T, D) with a transposed (non-contiguous) layout, full and partial rotary
  Tensor x = rand64({2, 5, 3, 8}, 1).permute({0, 2, 1, 3});  // (2, 3, 5, 8)
  for (int64_t R : {8, 4}) {
    ops::RotaryTables t = ops::rotary_tables(5, R, 10000.0, DType::Float64);
    for (RotaryStyle style : kStyles) {
      INFO("R " << R << ", style " << static_cast<int>(style));
      Tensor fused = ops::rotary_embedding(x, t.cos, t.sin, style);
      Tensor composed = rotary_embedding_composed(Variable(x), t.cos, t.sin, style).data();
      REQUIRE(allclose(fused, composed, 1e-15, 1e-15));
      // position 0 is the identity, the tail past R is copied, and the inverse undoes the rotation
      REQUIRE(allclose(fused.select(2, 0), x.select(2, 0), 0, 0));
      if (R < 8) REQUIRE(allclose(fused.narrow(3, R, 8 - R), x.narrow(3, R, 8 - R), 0, 0));
      REQUIRE(allclose(ops::rotary_embedding(fused, t.cos, t.sin, style, true), x, 1e-14, 1e-14));
      // a rotation keeps each pair's norm, so each row's norm
      REQUIRE(allclose(ops::sum(ops::mul(fused, fused), {3}), ops::sum(ops::mul(x, x), {3}), 1e-13, 1e-13));
    }
  }
  // the angles: Half pairs (i, i + R/2), Interleaved (2i, 2i + 1), angle p · theta^(-2i/R)
  ops::RotaryTables t = ops::rotary_tables(4, 4, 100.0, DType::Float64);
  CHECK(std::abs(t.cos.to_vector<double>()[3 * 2 + 1] - std::cos(3 * std::pow(100.0, -0.5))) < 1e-15);
  Tensor e = ops::zeros({1, 4, 4}, DType::Float64);  // e_0 at every position
  Tensor e0 = e.narrow(2, 0, 1);
  ops::fill_(e0, 1.0);
  Tensor half = ops::rotary_embedding(e, t.cos, t.sin, RotaryStyle::Half);
  Tensor inter = ops::rotary_embedding(e, t.cos, t.sin, RotaryStyle::Interleaved);
  CHECK(std::abs(half.to_vector<double>()[2 * 4 + 2] - std::sin(2.0)) < 1e-15);   // lands on dim R/2
  CHECK(std::abs(inter.to_vector<double>()[2 * 4 + 1] - std::sin(2.0)) < 1e-15);  // lands on dim 1
}

TEST_CASE("rotary_embedding: scores depend on the distance only, and offsets are positions",
          "[ops][rotary]") {
  nn::RotaryEmbedding rope(16, 10000.0);
  Tensor q = rand64({1, 1, 1, 16}, 2), k = rand64({1, 1, 1, 16}, 3);
  auto score = [&](int64_t m, int64_t n) {
    Tensor qm = rope.forward(Variable(q), m).data(), kn = rope.forward(Variable(k), n).data();
    return ops::sum(ops::mul(qm, kn)).item<double>();
  };
  CHECK(std::abs(score(7, 3) - score(4, 0)) < 1e-12);
  CHECK(std::abs(score(1000, 990) - score(10, 0)) < 1e-10);  // the tables grew past 64 rows
  CHECK(std::abs(score(5, 3) - score(4, 0)) > 1e-6);
  // rotating T tokens at an offset = the last T rows of rotating offset + T tokens; positions by index too
  Tensor x = rand64({2, 3, 9, 16}, 4);
  Tensor all = rope.forward(Variable(x)).data();
  CHECK(
      allclose(rope.forward(Variable(x.narrow(2, 6, 3).contiguous()), 6).data(), all.narrow(2, 6, 3), 0, 0));
  Tensor pos = ops::tensor({8, 0, 3}, DType::Int64);
  Tensor picked = rope.forward(Variable(ops::index_select(x, 2, pos)), pos).data();
  CHECK(allclose(picked, ops::index_select(all, 2, pos), 0, 0));
  CHECK(rope.state_dict().empty());
}

TEST_CASE("rotary_embedding: gradcheck and gradgradcheck, float32 gradients as the composed ones",
          "[autograd][rotary][gradcheck]") {
  for (RotaryStyle style : kStyles) {
    INFO("style " << static_cast<int>(style));
    ops::RotaryTables t = ops::rotary_tables(4, 4, 50.0, DType::Float64);
    auto f = [&](const std::vector<Variable>& v) { return rotary_embedding(v[0], t.cos, t.sin, style); };
    CHECK(gradcheck(f, {leaf(rand64({2, 4, 6}, 5))}));
    CHECK(gradgradcheck(f, {leaf(rand64({2, 4, 6}, 6))}));
    ops::RotaryTables t32 = ops::rotary_tables(7, 8, 10000.0);
    Tensor x0 = rand64({2, 3, 7, 8}, 7).to(DType::Float32);
    Variable x1(x0, true), x2(x0, true);
    Variable y1 = rotary_embedding(x1, t32.cos, t32.sin, style),
             y2 = rotary_embedding_composed(x2, t32.cos, t32.sin, style);
    CHECK(allclose(y1.data(), y2.data(), 1e-6, 1e-6));
    sum(mul(y1, y1)).backward();
    sum(mul(y2, y2)).backward();
    CHECK(allclose(x1.grad(), x2.grad(), 1e-5, 1e-5));
  }
}

TEST_CASE("rotary_embedding: 16-bit in and out, the float32 computation rounded once", "[half][rotary]") {
  ops::RotaryTables t = ops::rotary_tables(6, 8, 10000.0);
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(dt));
    Tensor x = rand64({2, 6, 10}, 8).to(dt);
    for (RotaryStyle style : kStyles) {
      Tensor y = ops::rotary_embedding(x, t.cos, t.sin, style);
      REQUIRE(y.dtype() == dt);
      CHECK(allclose(y, ops::rotary_embedding(x.to(DType::Float32), t.cos, t.sin, style).to(dt), 0, 0));
    }
    Variable v(x, true);
    sum(rotary_embedding(v, t.cos, t.sin, RotaryStyle::Half)).backward();
    CHECK(v.grad().dtype() == dt);
  }
}

TEST_CASE("rotary_embedding: bad input", "[ops][rotary][errors]") {
  ops::RotaryTables t = ops::rotary_tables(4, 4, 10000.0);
  Tensor x = rand64({2, 4, 6}, 9).to(DType::Float32);
  REQUIRE_THROWS_SACCADE(ops::rotary_embedding(x.narrow(1, 0, 3), t.cos, t.sin, RotaryStyle::Half),
                         "rotary_embedding: cos and sin must be (T, R/2) with T = 3");
  REQUIRE_THROWS_SACCADE(ops::rotary_embedding(x.narrow(2, 0, 3), t.cos, t.sin, RotaryStyle::Half),
                         "0 < R <= D = 3");
  REQUIRE_THROWS_SACCADE(ops::rotary_embedding(x.to(DType::Float64), t.cos, t.sin, RotaryStyle::Half),
                         "the tables must be float64 for a float64 x");
  REQUIRE_THROWS_SACCADE(
      ops::rotary_embedding(ops::ones({4, 6}, DType::Int64), t.cos, t.sin, RotaryStyle::Half),
      "x must be a floating tensor");
  REQUIRE_THROWS_SACCADE(ops::rotary_tables(4, 5, 10000.0), "rotary_tables: rotary_dim must be even");
  REQUIRE_THROWS_SACCADE(ops::rotary_tables(4, 4, 1.0), "theta must be finite and > 1");
  REQUIRE_THROWS_SACCADE(ops::rotary_tables(-1, 4, 10000.0), "num_positions must be >= 0");
  REQUIRE_THROWS_SACCADE(nn::RotaryEmbedding(7),
                         "RotaryEmbedding: the rotated dims must be even and positive");
  REQUIRE_THROWS_SACCADE(nn::RotaryEmbedding(8, 10000.0, RotaryStyle::Half, 0.0),
                         "rotary_fraction must be in (0, 1]");
  REQUIRE_THROWS_SACCADE(nn::RotaryEmbedding(8, 10000.0, RotaryStyle::Half, 1.5),
                         "rotary_fraction must be in (0, 1]");
  nn::RotaryEmbedding partial(8, 10000.0, RotaryStyle::Half, 0.25);  // GPT-NeoX's rotary_pct
  CHECK(partial.rotary_dim() == 2);
  CHECK(nn::RotaryEmbedding(7, 10000.0, RotaryStyle::Half, 0.5).rotary_dim() == 2);
  nn::RotaryEmbedding rope(6);
  REQUIRE_THROWS_SACCADE(rope.forward(Variable(x), -1), "RotaryEmbedding: offset must be >= 0");
  REQUIRE_THROWS_SACCADE(rope.forward(Variable(rand64({2, 4, 5}))),
                         "expected a floating x of shape (..., T, 6)");
  REQUIRE_THROWS_SACCADE(rope.forward(Variable(x), ops::tensor({0, 1, 2}, DType::Int64)),
                         "positions must be int64 (T) with T = 4");
  REQUIRE_THROWS_SACCADE(rope.forward(Variable(x), ops::tensor({0, 1, -2, 3}, DType::Int64)),
                         "positions must be >= 0, got -2");
}
