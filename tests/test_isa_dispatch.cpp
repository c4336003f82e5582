// saccade's own kernels at each vector width this machine runs (ops/cpu/simd.h: with_isa, IsaGuard): every
// width agrees with a readable reference computed here in double or through the composed path: elementwise
// (tanh, exp, add, scalar multiply: what the optimizers' updates are made of; gelu and its derivative),
// layer norm, the GRU gates, the fused additive scores and flash attention with either kind of tile
// products, forward and backward, with and without dropout; the uniform draws against Philox computed here.
// Softmax's rows at every width are checked in test_softmax.cpp, the one-row matmuls in test_linalg.cpp.
#include <cmath>
#include <string>
#include <vector>

#include "kernel_checks.h"
#include "nn/attention.h"
#include "nn/rnn.h"
#include "ops/cpu/flash_tiles.h"
#include "ops/cpu/random.h"
#include "ops/cpu/simd.h"
#include "ops/nn.h"
#include "ops/philox.h"

using namespace saccade;
using cpu::Isa;
using saccade::testing::allclose;
using saccade::testing::max_err;
using saccade::testing::widths;

namespace {

Tensor randn(const Shape& s, DType dt, uint64_t seed) {
  Generator g(seed);
  return ops::randn(s, dt, Device::cpu(), &g);
}

struct Grads {
  Tensor out, g0, g1, g2;
};

Grads additive(bool fused, const Tensor& q, const Tensor& k, const Tensor& w) {
  Variable vq(q, true), vk(k, true), vw(w, true);
  Variable s = fused ? additive_attention_scores(vq, vk, vw) : nn::additive_scores_composed(vq, vk, vw);
  s.backward(randn(s.shape(), q.dtype(), 99));
  return {s.data(), vq.grad(), vk.grad(), vw.grad()};
}

// One GRU step's gates; gi is a step of a (B, T, 3H) projection (a strided view, as in nn::GRU).
Grads gru(bool fused, const Tensor& gi_all, const Tensor& gh, const Tensor& h) {
  Variable vi(gi_all, true), vg(gh, true), vh(h, true);
  Variable gi = select(vi, 1, 1);
  Variable y = fused ? gru_gates(gi, vg, vh) : nn::gru_gates_composed(gi, vg, vh);
  y.backward(randn(y.shape(), h.dtype(), 98));
  return {y.data(), vi.grad(), vg.grad(), vh.grad()};
}

// Causal attention, with dropout p drawn from a fresh generator (the same mask at every call).
Grads attention(bool fused, const Tensor& q, const Tensor& k, const Tensor& v, double p = 0) {
  Variable vq(q, true), vk(k, true), vv(v, true);
  auto mask = ops::attention_mask(Tensor(), {q.size(0), q.size(1), q.size(2), k.size(2)},
                                  ops::CausalAlign::TopLeft, Device::cpu(), "test");
  Generator gen(17);
  auto r = nn::scaled_dot_product_attention(vq, vk, vv, mask,
                                            {.dropout_p = p, .generator = &gen, .need_weights = !fused},
                                            "scaled_dot_product_attention");
  r.output.backward(randn(r.output.shape(), q.dtype(), 98));
  return {r.output.data(), vq.grad(), vk.grad(), vv.grad()};
}

void close(const Grads& a, const Grads& b, double tol) {
  CHECK(allclose(a.out, b.out, tol, tol));
  CHECK(allclose(a.g0, b.g0, tol, tol));
  CHECK(allclose(a.g1, b.g1, tol, tol));
  CHECK(allclose(a.g2, b.g2, tol, tol));
}

}  // namespace

TEST_CASE("isa dispatch: the machine's widths are named and a guard lowers and restores", "[ops][isa]") {
  const Isa top = cpu::kernel_isa();
  CHECK(top == cpu::cpu_isa());
  {
    cpu::IsaGuard g(Isa::Baseline);
    CHECK(cpu::kernel_isa() == Isa::Baseline);
  }
  CHECK(cpu::kernel_isa() == top);
  CHECK(std::string(cpu::vector_level_name(Isa::Avx512)) == "AVX-512");
}

TEST_CASE("isa dispatch: elementwise kernels agree with double arithmetic at every width", "[ops][isa]") {
  const int64_t n = 1037;  // not a multiple of any vector width: the loops' tails run too
  Tensor a = randn({n}, DType::Float32, 1), b = randn({n}, DType::Float32, 2);
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  std::vector<double> tanh_ref(n), exp_ref(n), add_ref(n), axpy_ref(n), gelu_ref(n), gelu_grad_ref(n);
  for (int64_t i = 0; i < n; ++i) {
    const double phi = 0.5 * (1 + std::erf(x[i] / std::sqrt(2.0)));
    gelu_ref[i] = x[i] * phi;
    gelu_grad_ref[i] = phi + x[i] * std::exp(-0.5 * x[i] * x[i]) / std::sqrt(2 * M_PI);
    tanh_ref[i] = std::tanh(x[i]);
    exp_ref[i] = std::exp(x[i]);
    add_ref[i] = static_cast<float>(x[i] + y[i]);
    axpy_ref[i] = static_cast<float>(x[i] + static_cast<float>(y[i] * -0.25f));  // Adam's add_(p, u, -lr)
  }
  for (Isa isa : widths()) {
    cpu::IsaGuard g(isa);
    INFO("width " << cpu::vector_level_name(isa));
    CHECK(max_err(ops::tanh(a).to_vector<double>(), tanh_ref) < 4e-7);
    CHECK(max_err(ops::exp(a).to_vector<double>(), exp_ref) < 2e-7);
    CHECK(max_err(ops::gelu(a).to_vector<double>(), gelu_ref) < 3e-7);
    CHECK(max_err(ops::gelu_grad(a).to_vector<double>(), gelu_grad_ref) < 3e-7);
    std::vector<double> gelu_back_ref(static_cast<size_t>(n));  // b · gelu'(a), GELU's fused backward
    for (size_t i = 0; i < gelu_back_ref.size(); ++i) gelu_back_ref[i] = y[i] * gelu_grad_ref[i];
    CHECK(max_err(ops::gelu_backward(b, a).to_vector<double>(), gelu_back_ref) < 3e-7 * 4.5);
    CHECK(max_err(ops::add(a, b).to_vector<double>(), add_ref) == 0);
    Tensor p = a.clone();
    ops::add_(p, b, -0.25);
    CHECK(max_err(p.to_vector<double>(), axpy_ref) == 0);
  }
}

TEST_CASE("isa dispatch: layer norm rows agree with double arithmetic at every width", "[ops][isa]") {
  const int64_t rows = 5, n = 333;
  Tensor x = randn({rows, n}, DType::Float32, 3);
  const std::vector<double> v = x.to_vector<double>();
  std::vector<double> ln(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mu += v[r * n + i] / n;
    for (int64_t i = 0; i < n; ++i) var += std::pow(v[r * n + i] - mu, 2) / n;
    for (int64_t i = 0; i < n; ++i) ln[r * n + i] = (v[r * n + i] - mu) / std::sqrt(var + 1e-5);
  }
  for (Isa isa : widths()) {
    cpu::IsaGuard g(isa);
    INFO("width " << cpu::vector_level_name(isa));
    CHECK(max_err(ops::layer_norm(x, Shape{n}).to_vector<double>(), ln) < 1e-5);
  }
}

TEST_CASE("isa dispatch: fused additive scores agree with the composed path at every width", "[ops][isa]") {
  Tensor q = randn({3, 4, 37}, DType::Float32, 4), k = randn({3, 11, 37}, DType::Float32, 5),
         w = randn({37}, DType::Float32, 6);
  const Grads ref = additive(false, q, k, w);
  for (Isa isa : widths()) {
    cpu::IsaGuard g(isa);
    INFO("width " << cpu::vector_level_name(isa));
    close(additive(true, q, k, w), ref, 1e-5);
  }
}

TEST_CASE("isa dispatch: fused GRU gates agree with the composed path at every width", "[ops][isa][rnn]") {
  // H = 37: every width has a remainder; gates beyond ±10 saturate σ and tanh
  Tensor gi = ops::mul(randn({5, 3, 111}, DType::Float32, 10), 4.0), gh = randn({5, 111}, DType::Float32, 11),
         h = randn({5, 37}, DType::Float32, 12);
  const Grads ref = gru(false, gi, gh, h);
  for (Isa isa : widths()) {
    cpu::IsaGuard g(isa);
    INFO("width " << cpu::vector_level_name(isa));
    close(gru(true, gi, gh, h), ref, 2e-6);
  }
}

TEST_CASE(
    "isa dispatch: flash attention with either tile products agrees with the composed path at every width",
    "[ops][isa][attention]") {
  Tensor q = randn({2, 2, 70, 24}, DType::Float32, 7), k = randn({2, 2, 70, 24}, DType::Float32, 8),
         v = randn({2, 2, 70, 24}, DType::Float32, 9);
  const Grads ref = attention(false, q, k, v);
  for (Isa isa : widths())
    for (cpu::TileProducts how :
         {cpu::TileProducts::Gemm, cpu::TileProducts::Loops, cpu::TileProducts::Avx512}) {
      cpu::IsaGuard g(isa);
      cpu::TileProductsGuard t(how);
      INFO("width " << cpu::vector_level_name(isa) << ", tile products " << static_cast<int>(how));
      close(attention(true, q, k, v), ref, 2e-5);
    }
}

TEST_CASE("isa dispatch: uniform draws and attention dropout are the same at every width", "[ops][isa]") {
  // rand: element i is uniform_float(word 0 of Philox block offset + i), exactly (ops/philox.h)
  const int64_t n = 1037;
  std::vector<float> want(n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = uniform_float(philox4x32_10(5, 3 + static_cast<uint64_t>(i)).w[0]);
  std::vector<double> want64(n);
  for (int64_t i = 0; i < n; ++i) want64[i] = uniform_double(philox4x32_10(5, static_cast<uint64_t>(i)).w[0]);
  // fused attention with dropout against the composed path, which draws its mask through ops::rand
  Tensor q = randn({2, 2, 70, 24}, DType::Float32, 7), k = randn({2, 2, 70, 24}, DType::Float32, 8),
         v = randn({2, 2, 70, 24}, DType::Float32, 9);
  const Grads ref = attention(false, q, k, v, 0.3);
  for (Isa isa : widths()) {
    cpu::IsaGuard g(isa);
    INFO("width " << cpu::vector_level_name(isa));
    Generator gen(5);
    gen.reserve(3);
    CHECK(ops::rand({n}, DType::Float32, Device::cpu(), &gen).to_vector<float>() == want);
    Generator gen64(5);
    CHECK(ops::rand({n}, DType::Float64, Device::cpu(), &gen64).to_vector<double>() == want64);
    // ops::dropout (the CPU's one pass) against the composed formula ge(rand, p) / (1 - p) it replaced
    for (DType dt : {DType::Float32, DType::Float64}) {
      Tensor x = randn({3, 347}, dt, 11).t();  // non-contiguous
      Generator gd(21), gr(21);
      ops::DropoutResult r = ops::dropout(x, 0.3, true, &gd);
      Tensor mask = ops::mul(ops::ge(ops::rand(x.shape(), dt, Device::cpu(), &gr), 0.3).to(dt), 1.0 / 0.7);
      CHECK(allclose(r.mask, mask, 0, 0));
      CHECK(allclose(r.out, ops::mul(x, mask), 0, 0));
      CHECK(gd.offset() == gr.offset());
    }
    // dropout multipliers of short runs (whole vectors and tails) across the carry into the counter's high
    // word
    for (int64_t len : {1, 15, 16, 17, 40}) {
      const uint64_t first = (uint64_t(1) << 32) - 20;
      std::vector<float> got(static_cast<size_t>(len));
      cpu::dropout_multipliers<float>(9, first, len, 0.4f, 2.5f, got.data());
      for (int64_t c = 0; c < len; ++c)
        CHECK(got[static_cast<size_t>(c)] ==
              (uniform_float(philox4x32_10(9, first + static_cast<uint64_t>(c)).w[0]) >= 0.4f ? 2.5f : 0.0f));
    }
    close(attention(true, q, k, v, 0.3), ref, 2e-5);
  }
}

TEST_CASE(
    "isa dispatch: the 16-bit layer norm, RMSNorm, rotary and swiglu_backward kernels are their float32 "
    "twins rounded once, at every width",
    "[ops][isa][half]") {
  // threaded sizes: 300 rows (several row chunks of the weight gradient, one short), 1000 + 1 columns; the
  // rotary rows of 64 (partial rotary on 48), 2 * 3 * 300 of them
  const Tensor x = randn({300, 1001}, DType::Float32, 31), gy = randn({300, 1001}, DType::Float32, 32),
               w = randn({1001}, DType::Float32, 33), b = randn({1001}, DType::Float32, 34);
  const Tensor xr = randn({2, 3, 300, 64}, DType::Float32, 35);
  const ops::RotaryTables full = ops::rotary_tables(300, 64, 10000.0),
                          part = ops::rotary_tables(300, 48, 500.0);
  for (Isa isa : widths()) {
    cpu::IsaGuard g(isa);
    for (DType dt : {DType::BFloat16, DType::Float16}) {
      INFO("width " << cpu::vector_level_name(isa) << ", " << dtype_name(dt));
      // the 16-bit tensors and their float32 twins (the same values, widened exactly)
      const Tensor x16 = x.to(dt), g16 = gy.to(dt), w16 = w.to(dt), b16 = b.to(dt);
      const Tensor x32 = x16.to(DType::Float32), g32 = g16.to(DType::Float32), w32 = w16.to(DType::Float32),
                   b32 = b16.to(DType::Float32);
      auto same = [&](const Tensor& got, const Tensor& twin) { CHECK(allclose(got, twin.to(dt), 0, 0)); };
      ops::RmsNormForward rf = ops::rms_norm_forward(x16, {1001}, w16, 1e-6),
                          rf32 = ops::rms_norm_forward(x32, {1001}, w32, 1e-6);
      same(rf.out, rf32.out);
      CHECK(allclose(rf.rstd, rf32.rstd, 0, 0));
      ops::RmsNormGrads rg = ops::rms_norm_backward(g16, x16, {1001}, w16, rf.rstd, true),
                        rg32 = ops::rms_norm_backward(g32, x32, {1001}, w32, rf32.rstd, true);
      same(rg.gx, rg32.gx);
      same(rg.gweight, rg32.gweight);
      ops::LayerNormForward lf = ops::layer_norm_forward(x16, {1001}, w16, b16, 1e-5),
                            lf32 = ops::layer_norm_forward(x32, {1001}, w32, b32, 1e-5);
      same(lf.out, lf32.out);
      ops::LayerNormGrads lg = ops::layer_norm_backward(g16, x16, {1001}, w16, lf.mean, lf.rstd, true, true),
                          lg32 = ops::layer_norm_backward(g32, x32, {1001}, w32, lf32.mean, lf32.rstd, true,
                                                          true);
      same(lg.gx, lg32.gx);
      same(lg.gweight, lg32.gweight);
      same(lg.gbias, lg32.gbias);
      const Tensor xr16 = xr.to(dt), xr32 = xr16.to(DType::Float32);
      for (bool inverse : {false, true})
        for (RotaryStyle style : {RotaryStyle::Half, RotaryStyle::Interleaved})
          for (const ops::RotaryTables* t : {&full, &part})
            same(ops::rotary_embedding(xr16, t->cos, t->sin, style, inverse),
                 ops::rotary_embedding(xr32, t->cos, t->sin, style, inverse));
      ops::SwigluGrads sg = ops::swiglu_backward(g16, x16, w16.expand({300, 1001}));
      ops::SwigluGrads sg32 = ops::swiglu_backward(g32, x32, w32.expand({300, 1001}));
      same(sg.dgate, sg32.dgate);
      same(sg.dup, sg32.dup);
    }
  }
}
