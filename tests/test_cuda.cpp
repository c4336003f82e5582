// The CUDA backend (ops/cuda/). [cuda]: every kernel on the GPU against the CPU on the same random inputs
// (broadcasting, non-contiguous and empty cases included), forward and, where the op is differentiable,
// backward through autograd; the same-seed dropout mask on both devices; device-mismatch errors; no
// cudaMalloc in a training loop's steady state. Without a GPU each prints one warning and passes; only the
// "no GPU" behaviour itself is checked. Softmax's [cuda] cases are in test_softmax.cpp and matmul's in
// test_linalg.cpp, beside the rest of those ops' tests.
#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "cuda_helpers.h"
#include "nn/conv.h"
#include "nn/multihead.h"
#include "nn/rnn.h"
#include "ops/cuda/api.h"

using namespace saccade;
using saccade::testing::allclose;

// ---- the GPU ----

using saccade::testing::both;
using saccade::testing::kCpu;
using saccade::testing::kGpu;
using saccade::testing::randn;

TEST_CASE("cuda: without a GPU the backend is absent and asking for it throws, never crashes", "[cuda]") {
  if (cuda_is_available()) {
    CHECK(std::string(backend(kGpu).name()) == "cuda");
    return;
  }
  CHECK_FALSE(cuda_is_available());
  // built with CUDA: "no CUDA GPU is present"; without: "built without CUDA"
  try {
    ops::zeros({2, 3}, DType::Float32, kGpu);
    FAIL("a tensor was made on a missing GPU");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK((m.find("no CUDA GPU is present") != std::string::npos ||
           m.find("built without CUDA") != std::string::npos));
  }
  REQUIRE_THROWS_AS(cuda::memory_stats(), Error);
  REQUIRE_THROWS_AS(cuda::empty_cache(), Error);
  REQUIRE_THROWS_AS(cuda::synchronize(), Error);
  REQUIRE_THROWS_SACCADE(ops::ones({2}).to(kGpu), "cuda:0");
  CHECK_FALSE(cuda::allow_tf32());
}

TEST_CASE("cuda: to() round trips every dtype, copies convert dtypes and follow strides", "[cuda]") {
  Tensor x = randn({3, 5, 4}, 1);
  both([&](Device d) {
    Tensor t = x.to(d);
    return std::vector<Tensor>{t.permute({2, 0, 1}).contiguous(),     // strided copy
                               t.transpose(0, 2).to(DType::Float64),  // dtype-converting strided copy
                               t.to(DType::Int64),
                               ops::gt(t, 0.0).to(DType::Float32),
                               t.select(1, 2).contiguous(),
                               ops::zeros({0, 3}, DType::Float32, d).contiguous()};
  });
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64, DType::Bool}) {
    Tensor c = ops::mul(x, 3.0).to(dt);
    Tensor g = c.to(kGpu);
    CHECK(g.device() == kGpu);
    CHECK(allclose(g.to(kCpu), c, 0, 0));
  }
  CHECK(ops::empty({0, 7}, DType::Float32, kGpu).to(kCpu).numel() == 0);
}

TEST_CASE("cuda: fill, arange, full, eye", "[cuda]") {
  both(
      [](Device d) {
        Tensor t = ops::zeros({4, 6}, DType::Float64, d);
        Tensor part = t.transpose(0, 1).slice(0, 1, 4);
        ops::fill_(part, 2.5);  // a strided fill
        return std::vector<Tensor>{t,
                                   ops::arange(0, 10, 0.5, DType::Float32, d),
                                   ops::arange(7, DType::Int64, d),
                                   ops::full({3, 2}, -1, DType::Int64, d),
                                   ops::eye(4, 3, DType::Float32, d),
                                   ops::ones({2, 2}, DType::Bool, d)};
      },
      0);
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
}

TEST_CASE("cuda: unary ops through the shared functors", "[cuda]") {
  Tensor x = randn({7, 33}, 2), xi = ops::mul(x, 10.0).to(DType::Int64);
  both(
      [&](Device d) {
        Tensor a = x.to(d), pos = ops::add(ops::abs(a), 0.1), ai = xi.to(d);
        Tensor at = a.t();  // non-contiguous
        return std::vector<Tensor>{ops::neg(at),
                                   ops::exp(a),
                                   ops::log(pos),
                                   ops::sqrt(pos),
                                   ops::rsqrt(pos),
                                   ops::abs(at),
                                   ops::sin(a),
                                   ops::cos(a),
                                   ops::tanh(ops::mul(a, 5.0)),
                                   ops::sigmoid(a),
                                   ops::relu(at),
                                   ops::gelu(a),
                                   ops::gelu_grad(a),
                                   ops::gelu_backward(at, a.t()),
                                   ops::sign(a),
                                   ops::pow(pos, 2.0),
                                   ops::pow(pos, 1.7),
                                   ops::neg(ai),
                                   ops::abs(ai),
                                   ops::relu(ai),
                                   ops::sign(ai),
                                   ops::pow(ai, 3.0),
                                   ops::logical_not(ops::gt(a, 0.0)),
                                   ops::exp(a.to(DType::Float64)),
                                   ops::clamp(a, -0.5, 0.5)};
      },
      2e-6);
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
}

TEST_CASE("cuda: binary ops with broadcasting, scalars, strided operands and every dtype", "[cuda]") {
  Tensor x = randn({4, 1, 5}, 3), y = randn({3, 5}, 4), z = randn({5, 3}, 5);
  both(
      [&](Device d) {
        Tensor a = x.to(d), b = y.to(d), bt = z.to(d).t();  // bt: (3, 5), transposed strides
        Tensor ai = ops::mul(a, 4.0).to(DType::Int64), bi = ops::add(ops::mul(b, 4.0), 9.0).to(DType::Int64);
        Tensor a64 = a.to(DType::Float64), b64 = bt.to(DType::Float64);
        std::vector<Tensor> r = {ops::add(a, b),           ops::sub(a, bt),
                                 ops::mul(a, b),           ops::div(a, ops::add(ops::abs(b), 1.0)),
                                 ops::pow(ops::abs(a), b), ops::maximum(a, bt),
                                 ops::minimum(a, b),       ops::add(a, 2.0),
                                 ops::rsub(a, 1.0),        ops::rdiv(ops::add(ops::abs(a), 1.0), 3.0),
                                 ops::add(ai, bi),         ops::mul(ai, bi),
                                 ops::sub(ai, 3.0),        ops::maximum(ai, bi),
                                 ops::add(a64, b64),       ops::div(a64, 3.0)};
        using Cmp = Tensor (*)(const Tensor&, const Tensor&);
        for (Cmp cmp : std::vector<Cmp>{ops::eq, ops::ne, ops::lt, ops::le, ops::gt, ops::ge}) {
          r.push_back(cmp(a, b));
          r.push_back(cmp(ai, bi));
        }
        Tensor pa = ops::gt(a, 0.0), pb = ops::lt(b, 0.5);
        r.push_back(ops::logical_and(pa, pb));
        r.push_back(ops::logical_or(pa, pb));
        r.push_back(ops::add(ops::zeros({0, 5}, DType::Float32, d), b.slice(0, 0, 1)));  // empty
        return r;
      },
      2e-6);
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
}

TEST_CASE("cuda: where and masked_fill", "[cuda]") {
  Tensor x = randn({3, 4}, 6), y = randn({4}, 7);
  both(
      [&](Device d) {
        Tensor a = x.to(d), b = y.to(d), c = ops::gt(a, 0.0);
        return std::vector<Tensor>{ops::where(c, a, b), ops::where(c.t().contiguous().t(), a, b),
                                   ops::masked_fill(a, ops::lt(b, 0.0), -1e9)};
      },
      0);
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
}

TEST_CASE("cuda: reductions along rows, columns and whole tensors, argmax/argmin, NaN propagates", "[cuda]") {
  Tensor x = randn({6, 37, 5}, 8), big = randn({3, 100000}, 9);
  both(
      [&](Device d) {
        Tensor a = x.to(d), b = big.to(d), ai = ops::mul(a, 5.0).to(DType::Int64);
        Tensor withnan = a.clone();
        Tensor hole = withnan.select(0, 2).select(0, 3);
        ops::fill_(hole, std::nan(""));
        return std::vector<Tensor>{ops::sum(a, {1}),
                                   ops::sum(a, {2}),
                                   ops::sum(a, {0}),
                                   ops::sum(a),
                                   ops::mean(a, {1, 2}),
                                   ops::prod(ops::add(ops::mul(a, 0.01), 1.0), {1}),
                                   ops::amax(a, {1}),
                                   ops::amin(a, {2}),
                                   ops::max(a),
                                   ops::min(a),
                                   ops::argmax(a, 1),
                                   ops::argmin(a, 2),
                                   ops::argmax(a),
                                   ops::sum(b, {1}),
                                   ops::amax(b, {1}),
                                   ops::sum(ai, {1}),
                                   ops::amax(ai, {0}),
                                   ops::var(a, Shape{1}),  // Shape: a bare {1} picks var(a, bool unbiased)
                                   ops::logsumexp(a, {1}),
                                   ops::amax(withnan, {1}),
                                   ops::argmax(withnan, 1),
                                   ops::sum(a.to(DType::Float64), {1}),
                                   ops::sum(ops::zeros({4, 0}, DType::Float32, d), {1})};
      },
      1e-5);
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
}

TEST_CASE("cuda: layer_norm and cross_entropy forward and backward", "[cuda]") {
  Tensor x = randn({5, 3, 700}, 16), r = randn({5, 3, 700}, 17), g = randn({700}, 18), bb = randn({700}, 19);
  Tensor target = ops::tensor({1, 0, 699, 5, -100}, DType::Int64);
  both(
      [&](Device d) {
        std::vector<Tensor> out;
        for (bool affine : {true, false}) {
          Variable vx(x.to(d), true), vw(g.to(d), true), vb(bb.to(d), true);
          Variable y = affine ? layer_norm(vx, {700}, vw, vb, 1e-5) : layer_norm(vx, {3, 700});
          y.backward(r.to(d));
          out.push_back(y.data());
          out.push_back(vx.grad());
          if (affine) out.push_back(vw.grad()), out.push_back(vb.grad());
        }
        Variable logits(x.to(d).select(1, 0), true);
        Variable loss = cross_entropy(logits, target.to(d));
        loss.backward();
        out.push_back(loss.data());
        out.push_back(logits.grad());
        return out;
      },
      2e-5);
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
}

TEST_CASE("cuda: index_select, index_add, gather, scatter_add, embedding (atomics) and their backward",
          "[cuda]") {
  Tensor x = randn({6, 5, 4}, 20), src = randn({6, 7, 4}, 21);
  Tensor idx = ops::tensor({4, 0, 0, 2, 4, 4, 1}, DType::Int64);  // repeats: the adds collide
  Generator gi(22);
  Tensor gidx = ops::randint(0, 5, {6, 7, 4}, kCpu, &gi);
  both(
      [&](Device d) {
        Variable a(x.to(d), true), s(src.to(d), true);
        Tensor I = idx.to(d), G = gidx.to(d);
        Variable sel = index_select(a, 1, I), gat = gather(a, 1, G);
        Variable iad = index_add(a, 1, I, s), sca = scatter_add(a, 1, G, s);
        Variable emb = embedding(reshape(a, {30, 4}), ops::tensor({3, 3, 29, 0}, {2, 2}, DType::Int64).to(d));
        add(add(sum(sel), sum(gat)), add(sum(iad), sum(sca))).backward();
        sum(emb).backward();
        return std::vector<Tensor>{
            sel.data(),
            gat.data(),
            iad.data(),
            sca.data(),
            emb.data(),
            a.grad(),
            s.grad(),
            ops::index_add(ops::zeros({3, 2}, DType::Int64, d), 0, ops::tensor({2, 2, 0}, DType::Int64).to(d),
                           ops::ones({3, 2}, DType::Int64, d))};
      },
      1e-5);
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
}

TEST_CASE("cuda: the same seed draws the same numbers and the same dropout mask on both devices", "[cuda]") {
  both(
      [](Device d) {
        Generator g1(42), g2(42), g3(42), g4(7);
        Tensor x = ops::ones({64, 33}, DType::Float32, d);
        auto drop = ops::dropout(x, 0.3, true, &g4);
        return std::vector<Tensor>{ops::rand({1000}, DType::Float32, d, &g1),
                                   ops::rand({77}, DType::Float64, d, &g2),
                                   ops::randn({513}, DType::Float64, d, &g3), drop.out, drop.mask};
      },
      1e-12);
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
  Generator a(5), b(5);
  Tensor mc = ops::dropout(ops::ones({1000}), 0.5, true, &a).mask;
  Tensor mg = ops::dropout(ops::ones({1000}, DType::Float32, kGpu), 0.5, true, &b).mask.to(kCpu);
  CHECK(allclose(mg, mc, 0, 0));  // bit for bit
}

TEST_CASE("cuda: conv2d, max_pool2d, avg_pool2d forward and backward (im2col + cuBLAS, col2im, atomics)",
          "[cuda]") {
  Tensor x = randn({2, 3, 11, 9}, 23), w = randn({4, 3, 3, 2}, 24), bias = randn({4}, 25);
  both(
      [&](Device d) {
        std::vector<Tensor> out;
        Variable vx(x.to(d), true), vw(w.to(d), true), vb(bias.to(d), true);
        Variable c = conv2d(vx, vw, vb, {2, 1}, {1, 1});
        Variable mp = max_pool2d(vx, {3, 3}, {2, 2}, {1, 1});
        Variable ap = avg_pool2d(vx, {2, 3}, {1, 2}, {1, 0});  // overlapping windows
        sum(add(add(sum(mul(c, c)), sum(mul(mp, mp))), sum(mul(ap, ap)))).backward();
        for (const Variable& v : {c, mp, ap}) out.push_back(v.data());
        for (const Variable& v : {vx, vw, vb}) out.push_back(v.grad());
        return out;
      },
      1e-4);
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
}

TEST_CASE("cuda: fused attention forward and backward against the CPU kernel, every mask kind, dropout",
          "[cuda]") {
  using ops::CausalAlign;
  Tensor q = randn({2, 3, 17, 8}, 26), k = randn({2, 3, 23, 8}, 27), v = randn({2, 3, 23, 5}, 28);
  Tensor r = randn({2, 3, 17, 5}, 29);
  Tensor lens = ops::tensor({23, 0}, DType::Int64);  // batch row 1 sees nothing: zeros, zero gradients
  Generator gl(30);
  Tensor lens_q = ops::randint(0, 24, {2, 17}, kCpu, &gl);
  Tensor keep = ops::gt(randn({2, 1, 17, 23}, 31), -0.5);
  struct Case {
    Tensor mask;
    CausalAlign causal;
    double p;
  };
  const std::vector<Case> cases = {
      {Tensor(), CausalAlign::None, 0},          {lens, CausalAlign::None, 0},
      {lens_q, CausalAlign::TopLeft, 0},         {keep, CausalAlign::BottomRight, 0},
      {Tensor(), CausalAlign::BottomRight, 0.2}, {keep, CausalAlign::None, 0.3}};
  // the tiled forward (the default) and the readable per-row one
  for (bool readable : {false, true}) {
    cuda::set_readable_attention(readable);
    INFO("readable forward: " << readable);
    for (size_t c = 0; c < cases.size(); ++c) {
      INFO("case " << c);
      for (DType dt : {DType::Float32, DType::Float64}) {
        both(
            [&](Device d) {
              // q as a transposed view of (B, Tq, H, D): non-contiguous heads, unit last stride. Made on
              // the device itself, since .to(d) of a strided view copies it into a contiguous tensor.
              Tensor qd = q.to(dt).to(d).permute({0, 2, 1, 3}).contiguous().permute({0, 2, 1, 3});
              REQUIRE_FALSE(qd.is_contiguous());
              Variable vq(qd, true);
              Variable vk(k.to(dt).to(d), true), vv(v.to(dt).to(d), true);
              Tensor m = cases[c].mask.defined() ? cases[c].mask.to(d) : Tensor();
              auto mask = ops::attention_mask(m, {2, 3, 17, 23}, cases[c].causal, d, "test");
              Generator gen(99);
              Variable out = flash_attention(vq, vk, vv, mask, 0.35, cases[c].p, cases[c].p > 0, &gen);
              out.backward(r.to(dt).to(d));
              return std::vector<Tensor>{out.data(), vq.grad(), vk.grad(), vv.grad()};
            },
            dt == DType::Float32 ? 2e-5 : 1e-10);
      }
    }
  }
  cuda::set_readable_attention(false);
  // a longer sequence, causal, against the CPU (several query tiles, the last one partial)
  // (head dims 96 and 128: the tiled kernel's 128-wide variant, zero-padded)
  Tensor lq = randn({1, 2, 300, 96}, 32), lk = randn({1, 2, 300, 96}, 33), lv = randn({1, 2, 300, 128}, 34);
  both(
      [&](Device d) {
        auto mask = ops::attention_mask(Tensor(), {1, 2, 300, 300}, CausalAlign::TopLeft, d, "test");
        auto f = ops::flash_attention_forward(lq.to(d), lk.to(d), lv.to(d), mask, 0.125);
        auto g =
            ops::flash_attention_backward(f.out, lq.to(d), lk.to(d), lv.to(d), f.out, f.lse, mask, 0.125);
        return std::vector<Tensor>{f.out, f.lse, g.gq, g.gk, g.gv};
      },
      1e-4);
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
}

TEST_CASE("cuda: modules (multi-head attention, GRU, Conv2d) agree with the CPU, forward and gradients",
          "[cuda]") {
  Tensor x = randn({3, 7, 16}, 40), r = randn({3, 7, 16}, 41), img = randn({2, 3, 9, 9}, 42);
  Tensor lens = ops::tensor({7, 3, 5}, DType::Int64);
  // out, then every parameter's gradient, of sum(f(model) ⊙ R) with the model built from seed 43 on `d`
  both(
      [&](Device d) {
        std::vector<Tensor> res;
        auto collect = [&](nn::Module& m, const Variable& out, const Tensor& weights) {
          sum(mul(out, Variable(weights))).backward();
          res.push_back(out.data());
          for (const Variable& p : m.parameters()) res.push_back(p.grad());
        };
        {
          Generator g(43);
          nn::MultiHeadAttention mha(16, 4, {.bias = true, .generator = &g});
          mha.to(d);
          Variable q(x.to(d));
          collect(mha, mha.forward(q, q, q, lens.to(d), /*causal=*/true), r.to(d));
        }
        {
          Generator g(43);
          nn::GRU gru(16, 8, {}, &g);
          gru.to(d);
          auto o = gru.forward(Variable(x.to(d)), Variable(), lens.to(d));  // batch-first, ragged lengths
          collect(gru, o.output, ops::ones(o.output.shape(), DType::Float32, d));
        }
        {
          Generator g(43);
          nn::Conv2d conv(3, 5, 3, 2, 1, true, &g);
          conv.to(d);
          Variable out = conv(Variable(img.to(d)));
          collect(conv, out, ops::ones(out.shape(), DType::Float32, d));
        }
        return res;
      },
      1e-4);
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
}

TEST_CASE("cuda: ops on tensors of different devices throw, nothing is copied silently", "[cuda]") {
  SKIP_WITHOUT_GPU();
  Tensor c = ops::ones({2, 3}), g = ops::ones({2, 3}, DType::Float32, kGpu);
  REQUIRE_THROWS_AS(ops::add(c, g), Error);
  REQUIRE_THROWS_AS(ops::matmul(c, g.t()), Error);
  REQUIRE_THROWS_AS(ops::where(ops::gt(c, 0.0), g, g), Error);
  REQUIRE_THROWS_AS(ops::index_select(g, 0, ops::tensor({0}, DType::Int64)), Error);
  Variable w(g, true);
  REQUIRE_THROWS_AS(mul(w, Variable(c)), Error);
}

TEST_CASE("cuda: a training loop's steady state makes no cudaMalloc calls", "[cuda]") {
  SKIP_WITHOUT_GPU();
  Variable w(ops::mul(randn({64, 32}, 35), 0.1).to(kGpu), true),
      b(ops::zeros({64}, DType::Float32, kGpu), true);
  Tensor x = randn({16, 32}, 36).to(kGpu), y = randn({16, 64}, 37).to(kGpu);
  auto step = [&] {
    Variable h = relu(linear(Variable(x), w, b));
    Variable loss = mse_loss(h, Variable(y));
    loss.backward();
    // SGD by hand; the gradients are released by zeroing
    Tensor wd = w.data(), bd = b.data();
    ops::sub_(wd, ops::mul(w.grad(), 0.01));
    ops::sub_(bd, ops::mul(b.grad(), 0.01));
    w.zero_grad();
    b.zero_grad();
    return loss.data().item<float>();
  };
  // Warm up to the fixed point: the cache hands out blocks up to 2x the request without splitting, so the
  // first steps may still allocate. The fixed point is a whole step that makes no cudaMalloc; it must come
  // within a few steps, and after it ten more steps must make none either.
  const float first = step();
  int warmup = 1;
  for (;; ++warmup) {
    const auto s0 = cuda::memory_stats();
    step();
    if (cuda::memory_stats().raw_alloc_count == s0.raw_alloc_count) break;
    REQUIRE(warmup < 20);
  }
  INFO("steps before the fixed point: " << warmup);
  const auto before = cuda::memory_stats();
  float last = 0;
  for (int i = 0; i < 10; ++i) last = step();
  const auto after = cuda::memory_stats();
  CHECK(after.raw_alloc_count == before.raw_alloc_count);
  CHECK(after.cache_hit_count > before.cache_hit_count);
  CHECK(last < first);  // it trained
  cuda::empty_cache();
  CHECK(cuda::memory_stats().bytes_cached == 0);
}
