// The CUDA fused attention kernels (ops/cuda/attention.cu) against each other and against the CPU's fused
// kernel (ops/cpu/attention.cpp, attention_loop.h): the tiled backward (FlashAttention-2's Algorithm 2) and
// the readable one-thread-per-row backward, each from the same GPU forward, and the tiled and readable
// forwards, over every mask kind (valid_lens (B) and (B, Tq), Bool keep-masks, both causal alignments),
// dropout with one seed, Tq != Tk, sizes that do not divide the tiles, head dims 16 / 64 / 128, odd ones (40
// / 24, 100 / 72) and one past the tiled kernels' 128 (the readable fallback), float32 and float64, empty
// sizes and rows that see no key; grouped-query attention (H_kv = H / G key/value heads, G = 2 and
// multi-query G = H), sliding windows (with every causal alignment, valid_lens and dropout) and packed
// documents (key_starts: each query inside its own document).
// [attention_plan]: the tile plan of the window (ops/cuda/attention_plan.h) against brute force, on the CPU
// in every build. Without a GPU each case runs its CPU half (and checks what the CPU alone can: rows that see
// nothing give zeros), then warns "skipped: no CUDA GPU present" and passes.
#include <algorithm>
#include <vector>

#include "cuda_helpers.h"
#include "helpers.h"
#include "ops/attention.h"
#include "ops/cuda/api.h"
#include "ops/cuda/attention_mma.h"
#include "ops/cuda/attention_plan.h"

using namespace saccade;
using ops::CausalAlign;
using saccade::testing::allclose;

namespace {

using saccade::testing::kCpu;
using saccade::testing::kGpu;
using saccade::testing::no_gpu;

// Restores the default kernels (tiled; register-tiled for float32) when a test leaves, even by a failed
// REQUIRE. fast = false selects the first tiled kernels of attention.cu for float32 too.
struct ReadableGuard {
  explicit ReadableGuard(bool readable, bool fast = true) {
    cuda::set_readable_attention(readable);
    cuda::set_fast_attention(fast);
  }
  ~ReadableGuard() {
    cuda::set_readable_attention(false);
    cuda::set_fast_attention(true);
  }
};

// One attention problem: q (B, H, Tq, D), k (B, H_kv, Tk, D), v (B, H_kv, Tk, Dv), gout (B, H, Tq, Dv),
// float64 on the CPU (cast to the dtype under test), a mask in the user's form, a window and dropout.
struct Problem {
  int64_t B = 0, H = 0, H_kv = 0, Tq = 0, Tk = 0, D = 0, Dv = 0;
  Tensor mask;  // undefined, int64 valid_lens (B) / (B, Tq), or Bool broadcastable to (B, H, Tq, Tk)
  CausalAlign causal = CausalAlign::None;
  int64_t window = 0;  // 0: none (a window needs a causal alignment)
  double p = 0;        // dropout
  Tensor documents;    // undefined, or int64 (B, T) document ids (packed documents; Tq = Tk = T)
  Tensor q, k, v, gout;
};

// H_kv = 0: H (one key/value head per query head)
Problem make_problem(int64_t B, int64_t H, int64_t Tq, int64_t Tk, int64_t D, int64_t Dv, uint64_t seed,
                     int64_t H_kv = 0) {
  Generator g(seed);
  Problem pr;
  if (H_kv == 0) H_kv = H;
  pr.B = B, pr.H = H, pr.H_kv = H_kv, pr.Tq = Tq, pr.Tk = Tk, pr.D = D, pr.Dv = Dv;
  pr.q = ops::randn({B, H, Tq, D}, DType::Float64, kCpu, &g);
  pr.k = ops::randn({B, H_kv, Tk, D}, DType::Float64, kCpu, &g);
  pr.v = ops::randn({B, H_kv, Tk, Dv}, DType::Float64, kCpu, &g);
  pr.gout = ops::randn({B, H, Tq, Dv}, DType::Float64, kCpu, &g);
  return pr;
}

// out, lse, gq, gk, gv
struct Result {
  Tensor out, lse, gq, gk, gv;
};

ops::AttentionMask mask_on(const Problem& pr, Device d) {
  const Shape s{pr.B, pr.H, pr.Tq, pr.Tk};
  return ops::with_documents(
      ops::attention_mask(pr.mask.defined() ? pr.mask.to(d) : Tensor(), s, pr.causal, d, "test", pr.window),
      pr.documents.defined() ? pr.documents.to(d) : Tensor(), s, d, "test");
}

ops::AttentionDropout dropout_of(const Problem& pr) { return {pr.p, 1234, 77, Tensor()}; }

// Forward and backward on device d in dtype dt, scale 1/sqrt(D).
Result run(const Problem& pr, Device d, DType dt) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(pr.D > 0 ? pr.D : 1));
  Tensor q = pr.q.to(dt).to(d), k = pr.k.to(dt).to(d), v = pr.v.to(dt).to(d), g = pr.gout.to(dt).to(d);
  const ops::AttentionMask m = mask_on(pr, d);
  auto f = ops::flash_attention_forward(q, k, v, m, scale, dropout_of(pr));
  auto gr = ops::flash_attention_backward(g, q, k, v, f.out, f.lse, m, scale, dropout_of(pr));
  return {f.out, f.lse, gr.gq, gr.gk, gr.gv};
}

// The backward on the GPU from a given forward (out, lse on the GPU), with the readable or the tiled kernel.
ops::FlashAttentionGrads gpu_backward(const Problem& pr, DType dt, const Result& fwd, bool readable) {
  ReadableGuard guard(readable);
  const double scale = 1.0 / std::sqrt(static_cast<double>(pr.D > 0 ? pr.D : 1));
  Tensor q = pr.q.to(dt).to(kGpu), k = pr.k.to(dt).to(kGpu), v = pr.v.to(dt).to(kGpu);
  return ops::flash_attention_backward(pr.gout.to(dt).to(kGpu), q, k, v, fwd.out, fwd.lse, mask_on(pr, kGpu),
                                       scale, dropout_of(pr));
}

bool close(const Tensor& gpu, const Tensor& cpu, DType dt) {
  const double tol = dt == DType::Float32 ? 1e-4 : 1e-10;
  return gpu.device() == kGpu && allclose(gpu.to(kCpu), cpu, tol, tol);
}

// The whole comparison for one problem and dtype: the CPU kernel, then (with a GPU) the tiled forward and
// backward, the readable backward from the same forward, and the readable forward, all against the CPU.
void check_problem(const Problem& pr, DType dt) {
  INFO("B " << pr.B << " H " << pr.H << " H_kv " << pr.H_kv << " Tq " << pr.Tq << " Tk " << pr.Tk << " D "
            << pr.D << " Dv " << pr.Dv << " causal " << int(pr.causal) << " window " << pr.window
            << " dropout " << pr.p << " dtype " << dtype_name(dt));
  const Result c = run(pr, kCpu, dt);
  REQUIRE(c.gq.shape() == pr.q.shape());
  REQUIRE(c.gk.shape() == pr.k.shape());
  REQUIRE(c.gv.shape() == pr.v.shape());
  if (!cuda_is_available()) return;
  // forward and backward on the GPU with the kernels a guard selects, every result against the CPU's
  auto run_checked = [&](bool fast) {
    Result g;
    {
      ReadableGuard guard(false, fast);
      g = run(pr, kGpu, dt);
    }
    CHECK(close(g.out, c.out, dt));
    CHECK(close(g.lse, c.lse, dt));
    CHECK(close(g.gq, c.gq, dt));
    CHECK(close(g.gk, c.gk, dt));
    CHECK(close(g.gv, c.gv, dt));
    return g;
  };
  const Result t = run_checked(true);
  // the readable backward from the tiled forward's out and lse, against the tiled one and the CPU
  const auto r = gpu_backward(pr, dt, t, true);
  CHECK(close(r.gq, c.gq, dt));
  CHECK(close(r.gk, c.gk, dt));
  CHECK(close(r.gv, c.gv, dt));
  const double tol = dt == DType::Float32 ? 1e-4 : 1e-10;
  CHECK(allclose(t.gq.to(kCpu), r.gq.to(kCpu), tol, tol));
  CHECK(allclose(t.gk.to(kCpu), r.gk.to(kCpu), tol, tol));
  CHECK(allclose(t.gv.to(kCpu), r.gv.to(kCpu), tol, tol));
  // float32: the default ran the register-tiled kernels (attention_fast.cu); the first tiled ones too
  if (dt == DType::Float32) run_checked(false);
  // the readable forward
  Result rf;
  {
    ReadableGuard guard(true);
    rf = run(pr, kGpu, dt);
  }
  CHECK(close(rf.out, c.out, dt));
  CHECK(close(rf.lse, c.lse, dt));
}

// The mask cases of one (B = 2, H, Tq, Tk): every kind, each causal alignment, dropout with and without a
// mask. Batch row 1 of the valid_lens cases sees nothing; the keep-mask hides every key of query 3.
std::vector<Problem> mask_cases(const Problem& base) {
  const int64_t Tq = base.Tq, Tk = base.Tk;
  Generator g(7);
  Tensor lens = ops::tensor({static_cast<double>(Tk) - 3, 0.0}, DType::Int64);
  Tensor lens_q = ops::randint(0, Tk + 1, {2, Tq}, kCpu, &g);
  // query 3 (every batch row and head) sees no key
  Tensor keep = ops::logical_and(ops::gt(ops::randn({2, 1, Tq, Tk}, DType::Float32, kCpu, &g), -0.5),
                                 ops::ne(ops::arange(static_cast<double>(Tq)), 3.0).view({1, 1, Tq, 1}));
  std::vector<Problem> cases;
  auto add = [&](Tensor mask, CausalAlign causal, double p) {
    Problem pr = base;
    pr.mask = mask, pr.causal = causal, pr.p = p;
    cases.push_back(pr);
  };
  add(Tensor(), CausalAlign::None, 0);
  add(lens, CausalAlign::None, 0);
  add(lens_q, CausalAlign::None, 0);
  add(keep, CausalAlign::None, 0);
  add(Tensor(), CausalAlign::TopLeft, 0);
  add(Tensor(), CausalAlign::BottomRight, 0);
  add(lens_q, CausalAlign::BottomRight, 0);
  add(Tensor(), CausalAlign::None, 0.3);
  add(keep, CausalAlign::TopLeft, 0.2);
  add(lens, CausalAlign::BottomRight, 0.5);
  return cases;
}

}  // namespace

TEST_CASE("cuda attention: tiled backward = readable backward = CPU, every mask kind, dropout, Tq != Tk",
          "[cuda][flash]") {
  // Tq and Tk divide no tile (32, 16 or 8 rows); Tq < Tk and Tq > Tk (bottom-right causal: the first rows
  // of the latter see nothing)
  for (auto [Tq, Tk] : {std::pair<int64_t, int64_t>{37, 45}, {45, 37}}) {
    for (auto [D, Dv] : {std::pair<int64_t, int64_t>{40, 24}, {64, 64}}) {
      for (const Problem& pr : mask_cases(make_problem(2, 3, Tq, Tk, D, Dv, 100 + Tq + D)))
        for (DType dt : {DType::Float32, DType::Float64}) check_problem(pr, dt);
    }
  }
  if (no_gpu()) return;
}

TEST_CASE("cuda attention: tiled backward at head dims 16, 64, 128, odd ones and past 128", "[cuda][flash]") {
  // (16, 16) -> kD 32, (100, 72) and (128, 128) -> kD 128, (160, 96): the readable fallback
  for (auto [D, Dv] : {std::pair<int64_t, int64_t>{16, 16}, {16, 40}, {100, 72}, {128, 128}, {160, 96}}) {
    Problem pr = make_problem(2, 2, 33, 50, D, Dv, 200 + D + Dv);
    for (CausalAlign causal : {CausalAlign::None, CausalAlign::BottomRight}) {
      pr.causal = causal;
      pr.p = causal == CausalAlign::None ? 0.1 : 0.0;
      for (DType dt : {DType::Float32, DType::Float64}) check_problem(pr, dt);
    }
  }
  if (no_gpu()) return;
}

TEST_CASE("cuda attention: longer sequences, several key and query tiles, causal skipping", "[cuda][flash]") {
  Problem pr = make_problem(1, 2, 300, 300, 64, 64, 300);
  pr.causal = CausalAlign::TopLeft;
  check_problem(pr, DType::Float32);
  // the register-tiled kernels' 64-row tiles: several of each, the last partial, Tq != Tk, bottom-right
  Problem pr3 = make_problem(2, 3, 200, 333, 64, 48, 302);
  pr3.causal = CausalAlign::BottomRight;
  pr3.p = 0.1;
  check_problem(pr3, DType::Float32);
  Problem pr2 = make_problem(2, 2, 129, 257, 128, 128, 301);  // kD 128: 16-row tiles (float), 8 (double)
  pr2.mask = ops::tensor({200.0, 17.0}, DType::Int64);
  pr2.p = 0.25;
  for (DType dt : {DType::Float32, DType::Float64}) check_problem(pr2, dt);
  if (no_gpu()) return;
}

TEST_CASE("cuda attention: rows that see nothing give zeros and zero gradients on both devices",
          "[cuda][flash]") {
  // batch row 1: valid_len 0; batch row 0 with bottom-right causal and Tq > Tk: queries 0..3 see no key
  Problem pr = make_problem(2, 2, 20, 16, 32, 32, 400);
  pr.mask = ops::tensor({16.0, 0.0}, DType::Int64);
  pr.causal = CausalAlign::BottomRight;
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (Device d : {kCpu, kGpu}) {
      if (d == kGpu && !cuda_is_available()) continue;
      for (bool readable : {false, true}) {
        ReadableGuard guard(readable && d == kGpu);
        const Result r = run(pr, d, dt);
        const Tensor zq = ops::zeros({2, 20, 32}, DType::Float64),
                     zk = ops::zeros({2, 16, 32}, DType::Float64);
        // batch row 1 entirely: out, gq, gk, gv zero (gk, gv: its keys are seen by no query)
        CHECK(allclose(r.out.select(0, 1).to(kCpu).to(DType::Float64), zq, 0, 0));
        CHECK(allclose(r.gq.select(0, 1).to(kCpu).to(DType::Float64), zq, 0, 0));
        CHECK(allclose(r.gk.select(0, 1).to(kCpu).to(DType::Float64), zk, 0, 0));
        CHECK(allclose(r.gv.select(0, 1).to(kCpu).to(DType::Float64), zk, 0, 0));
        // batch row 0, queries 0..3 (end = i + 1 + Tk - Tq <= 0): zero output and gradient, lse = -inf
        const Tensor first = r.gq.select(0, 0).narrow(1, 0, 4).to(kCpu).to(DType::Float64);
        CHECK(allclose(first, ops::zeros({2, 4, 32}, DType::Float64), 0, 0));
        const std::vector<double> lse = r.lse.select(0, 0).narrow(1, 0, 4).to(kCpu).to_vector<double>();
        for (double x : lse) CHECK((std::isinf(x) && x < 0));
      }
    }
  }
  if (no_gpu()) return;
}

TEST_CASE("cuda attention: empty sizes give empty or zero results on both devices", "[cuda][flash]") {
  // B = 0, Tq = 0, Tk = 0 (every row sees nothing: zeros, lse -inf, zero gq)
  for (auto [B, Tq, Tk] : {std::tuple<int64_t, int64_t, int64_t>{0, 5, 7}, {2, 0, 7}, {2, 5, 0}}) {
    const Problem pr = make_problem(B, 2, Tq, Tk, 16, 8, 500);
    for (DType dt : {DType::Float32, DType::Float64}) {
      INFO("B " << B << " Tq " << Tq << " Tk " << Tk);
      const Result c = run(pr, kCpu, dt);
      CHECK(c.gq.shape() == pr.q.shape());
      CHECK(c.gk.shape() == pr.k.shape());
      CHECK(c.gv.shape() == pr.v.shape());
      if (!cuda_is_available()) continue;
      for (bool readable : {false, true}) {
        ReadableGuard guard(readable);
        const Result g = run(pr, kGpu, dt);
        CHECK(close(g.out, c.out, dt));
        CHECK(close(g.lse, c.lse, dt));
        CHECK(close(g.gq, c.gq, dt));
        CHECK(close(g.gk, c.gk, dt));
        CHECK(close(g.gv, c.gv, dt));
      }
    }
  }
  if (no_gpu()) return;
}

namespace {

// The tensor-core 16-bit kernels (attention_mma.cu, the default; both of cuda::MmaAttentionVariant: the
// pipelined one and the readable one) and the float32 copies that replace them when
// cuda::set_tensor_core_attention(false), on each problem against the CPU on the same 16-bit inputs, in
// bfloat16 and float16; without a GPU only the CPU half runs.
void check_tensor_core(const std::vector<Problem>& problems) {
  // cuda::set_tensor_core_attention(on) for one run; the setting before it restored when it leaves
  struct TensorCoreGuard {
    bool before = cuda::tensor_core_attention();
    explicit TensorCoreGuard(bool on) { cuda::set_tensor_core_attention(on); }
    ~TensorCoreGuard() { cuda::set_tensor_core_attention(before); }
  };
  // cuda::set_mma_attention_variant(v) for one run, likewise
  struct VariantGuard {
    cuda::MmaAttentionVariant before = cuda::mma_attention_variant();
    explicit VariantGuard(cuda::MmaAttentionVariant v) { cuda::set_mma_attention_variant(v); }
    ~VariantGuard() { cuda::set_mma_attention_variant(before); }
  };
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    // P is rounded to 16 bits before P V (as FlashAttention-2 does): out within a few 16-bit ulps of the CPU,
    // which rounds out once; lse (float32 sums of exact products) within float32 accumulation error
    const double tol = dt == DType::BFloat16 ? 3e-2 : 5e-3;
    for (const Problem& pr : problems) {
      INFO("H " << pr.H << " H_kv " << pr.H_kv << " Tq " << pr.Tq << " Tk " << pr.Tk << " D " << pr.D
                << " Dv " << pr.Dv << " causal " << int(pr.causal) << " window " << pr.window << " dropout "
                << pr.p << " dtype " << dtype_name(dt));
      const Result c = run(pr, kCpu, dt);
      REQUIRE(c.out.dtype() == dt);
      if (!cuda_is_available()) continue;
      // the tensor cores with each kernel (cuda/attention_mma.h), then the float32 copies
      for (int variant : {0, 1, 2}) {
        const bool tensor_cores = variant < 2;
        const auto kernel =
            variant == 0 ? cuda::MmaAttentionVariant::Pipelined : cuda::MmaAttentionVariant::Readable;
        INFO("tensor cores " << tensor_cores << " kernel " << (variant == 0 ? "pipelined" : "readable"));
        Result g;
        {
          TensorCoreGuard guard(tensor_cores);
          VariantGuard kernel_guard(kernel);
          g = run(pr, kGpu, dt);  // forward and backward on the tensor cores, or on float32 copies
        }
        REQUIRE(g.out.device() == kGpu);
        CHECK(allclose(g.out.to(kCpu).to(DType::Float64), c.out.to(DType::Float64), tol, tol));
        CHECK(allclose(g.lse.to(kCpu).to(DType::Float64), c.lse.to(DType::Float64), 1e-3, 1e-3));
        // the gradients: dS and P rounded to 16 bits before their products, as FlashAttention-2 does
        CHECK(allclose(g.gq.to(kCpu).to(DType::Float64), c.gq.to(DType::Float64), 4 * tol, 4 * tol));
        CHECK(allclose(g.gk.to(kCpu).to(DType::Float64), c.gk.to(DType::Float64), 4 * tol, 4 * tol));
        CHECK(allclose(g.gv.to(kCpu).to(DType::Float64), c.gv.to(DType::Float64), 4 * tol, 4 * tol));
      }
    }
  }
}

}  // namespace

TEST_CASE(
    "cuda attention: the tensor-core 16-bit kernels = the CPU on the same 16-bit inputs, every mask kind",
    "[cuda][flash][mma]") {
  // Head dims: 64 and 128 (kD exactly), 40 / 24 (padded, 16-byte rows), 36 / 20 (padded, element loads);
  // 70 query rows (two 64-row blocks, the second partial) and 45 or 130 keys (partial 64-key tiles).
  std::vector<Problem> problems;
  for (auto [D, Dv] : {std::pair<int64_t, int64_t>{64, 64}, {128, 128}, {40, 24}, {36, 20}})
    for (const Problem& pr : mask_cases(make_problem(2, 3, 70, D == 128 ? 130 : 45, D, Dv, 600 + D)))
      problems.push_back(pr);
  check_tensor_core(problems);
  if (no_gpu()) return;
}

// ---- grouped-query attention and sliding windows ----

TEST_CASE("cuda attention: grouped-query and multi-query heads = the CPU, every mask kind, every kernel",
          "[cuda][flash][gqa]") {
  // H = 4 query heads over H_kv = 2 (G = 2) and 1 (multi-query, G = 4): the backward blocks sum dK and dV
  // over the group; Tq, Tk divide no tile; head dims 40 / 24 (kD 64, padded)
  for (int64_t H_kv : {2, 1})
    for (const Problem& pr : mask_cases(make_problem(2, 4, 37, 70, 40, 24, 700 + H_kv, H_kv)))
      for (DType dt : {DType::Float32, DType::Float64}) check_problem(pr, dt);
  // several key tiles of every kernel (64 keys), head dim 128
  Problem pr = make_problem(1, 4, 130, 150, 128, 128, 710, 1);
  pr.causal = CausalAlign::BottomRight;
  for (DType dt : {DType::Float32, DType::Float64}) check_problem(pr, dt);
  if (no_gpu()) return;
}

TEST_CASE("cuda attention: sliding windows = the CPU, both causal alignments, with valid_lens and dropout",
          "[cuda][flash][window]") {
  // windows of 1 key, shorter than a tile, a tile, longer than a tile and longer than Tk; Tq = Tk, Tq < Tk
  // (bottom-right: the window ends at key i + Tk - Tq) and Tq > Tk (top-left: the last rows see nothing);
  // several query and key tiles of every kernel
  Generator g(9);
  for (auto [Tq, Tk] : {std::pair<int64_t, int64_t>{150, 150}, {100, 190}, {170, 90}})
    for (int64_t window : {1, 20, 64, 100, 1000})
      for (CausalAlign causal : {CausalAlign::TopLeft, CausalAlign::BottomRight}) {
        Problem pr = make_problem(1, 2, Tq, Tk, 64, 64, 800 + Tq + window);
        pr.causal = causal, pr.window = window;
        if (window == 20 || window == 100) {  // with valid_lens per query and dropout
          pr = make_problem(2, 2, Tq, Tk, 64, 64, 800 + Tq + window);
          pr.causal = causal, pr.window = window;
          pr.mask = ops::randint(0, Tk + 1, {2, Tq}, kCpu, &g);
          pr.p = 0.2;
        }
        check_problem(pr, DType::Float32);
      }
  // float64 (the tiled kernels of attention.cu only) and head dim 128
  Problem pr = make_problem(2, 2, 130, 130, 128, 128, 850);
  pr.causal = CausalAlign::TopLeft, pr.window = 20;
  for (DType dt : {DType::Float32, DType::Float64}) check_problem(pr, dt);
  if (no_gpu()) return;
}

TEST_CASE("cuda attention: grouped-query heads with a sliding window = the CPU",
          "[cuda][flash][gqa][window]") {
  Problem pr = make_problem(2, 6, 140, 140, 64, 64, 900, 2);  // G = 3
  pr.causal = CausalAlign::BottomRight, pr.window = 33;
  for (DType dt : {DType::Float32, DType::Float64}) check_problem(pr, dt);
  pr.p = 0.1;
  pr.mask = ops::tensor({120.0, 7.0}, DType::Int64);
  check_problem(pr, DType::Float32);
  if (no_gpu()) return;
}

TEST_CASE("cuda attention: packed documents = the CPU, causal or not, with grouped heads, a window, dropout",
          "[cuda][flash][packing]") {
  // documents of 1, 63, 70 and 16 tokens (inside a tile, across tiles) and a row that is one document
  std::vector<double> ids;
  for (auto [id, n] : {std::pair<double, int>{0, 1}, {1, 63}, {2, 70}, {3, 16}, {7, 150}})
    for (int i = 0; i < n; ++i) ids.push_back(id);
  std::vector<Problem> problems;
  for (CausalAlign causal : {CausalAlign::None, CausalAlign::TopLeft})
    for (int64_t H_kv : {2, 1}) {
      Problem pr = make_problem(2, 4, 150, 150, 64, 64, 980 + H_kv, H_kv);
      pr.causal = causal;
      pr.documents = ops::from_vector(ids, {2, 150}).to(DType::Int64);
      for (DType dt : {DType::Float32, DType::Float64}) check_problem(pr, dt);
      problems.push_back(pr);
    }
  Problem pr = problems.back();
  pr.window = 20, pr.p = 0.2, pr.mask = ops::tensor({140.0, 99.0}, DType::Int64);
  check_problem(pr, DType::Float32);
  problems.push_back(pr);
  check_tensor_core(problems);
  if (no_gpu()) return;
}

TEST_CASE("cuda attention: the tensor-core 16-bit kernels with grouped-query heads and sliding windows",
          "[cuda][flash][mma][gqa][window]") {
  std::vector<Problem> problems;
  for (int64_t H_kv : {2, 1})
    for (const Problem& pr : mask_cases(make_problem(2, 4, 70, 130, 64, 64, 950 + H_kv, H_kv)))
      problems.push_back(pr);
  for (int64_t window : {1, 40, 64, 100})
    for (CausalAlign causal : {CausalAlign::TopLeft, CausalAlign::BottomRight}) {
      Problem pr = make_problem(2, 4, 150, 200, 64, 64, 960 + window, 2);
      pr.causal = causal, pr.window = window;
      problems.push_back(pr);
    }
  check_tensor_core(problems);
  if (no_gpu()) return;
}

namespace {

// Whether query i may see key j under the causal rule and the window (the definition of ops/backend.h's
// AttentionMask, written out).
bool visible(const cuda::AttentionPlan& p, int64_t i, int64_t j) {
  const int64_t c = i + (p.causal == CausalAlign::BottomRight ? p.Tk - p.Tq : 0);  // the causal limit
  if (j < 0 || j >= p.Tk) return false;
  if (p.causal != CausalAlign::None && j > c) return false;
  return p.window == 0 || j > c - p.window;
}

}  // namespace

TEST_CASE("attention plan: a query's keys and the tiles each block visits, against brute force",
          "[attention_plan]") {
  int64_t checked = 0;
  for (CausalAlign causal : {CausalAlign::None, CausalAlign::TopLeft, CausalAlign::BottomRight})
    for (int64_t Tq : {1, 5, 64, 130})
      for (int64_t Tk : {1, 7, 64, 200})
        for (int64_t window : {0, 1, 3, 16, 64, 100, 1000}) {
          if (window > 0 && causal == CausalAlign::None) continue;  // a window needs a causal rule
          const cuda::AttentionPlan p{Tq, Tk, causal, window};
          INFO("causal " << int(causal) << " Tq " << Tq << " Tk " << Tk << " window " << window);
          // each query sees exactly [first_key, key_end)
          for (int64_t i = 0; i < Tq; ++i)
            for (int64_t j = 0; j < Tk; ++j)
              REQUIRE(visible(p, i, j) == (j >= p.first_key(i) && j < p.key_end(i)));
          for (int64_t tile : {16, 32, 64}) {
            // forward: a block of query rows [i0, i0 + tile) walks the key tiles of key_tiles(i0, end, tile),
            // end one past the last key its rows see
            for (int64_t i0 = 0; i0 < Tq; i0 += tile) {
              const int64_t i1 = std::min(Tq, i0 + tile);
              int64_t block_end = 0;
              for (int64_t i = i0; i < i1; ++i) block_end = std::max(block_end, p.key_end(i));
              for (int64_t j0 = 0; j0 < Tk; j0 += tile) {
                bool needed = false;
                for (int64_t i = i0; i < i1 && !needed; ++i)
                  for (int64_t j = j0; j < std::min(Tk, j0 + tile) && !needed; ++j) needed = visible(p, i, j);
                const cuda::RowSpan span = p.key_tiles(i0, block_end, tile);
                const bool visited = j0 >= span.begin && j0 < span.end;
                INFO("query tile " << i0 << " key tile " << j0 << " tile " << tile);
                CHECK(needed == visited);  // every needed tile, none wholly outside
                ++checked;
              }
            }
            // backward: a block of keys [j0, j0 + n) of key/value head 1 with G = 3 query heads walks, head
            // by head (3, 4, 5), the query tiles that see one of its keys
            for (int64_t qt : {8, 32, 64})
              for (int64_t j0 = 0; j0 < Tk; j0 += tile) {
                const int64_t n = std::min(tile, Tk - j0);
                std::vector<std::pair<int64_t, int64_t>> needed, walked;  // (query head, query tile start)
                for (int64_t h = 3; h < 6; ++h)
                  for (int64_t i0 = 0; i0 < Tq; i0 += qt) {
                    bool sees = false;
                    for (int64_t i = i0; i < std::min(Tq, i0 + qt) && !sees; ++i)
                      for (int64_t j = j0; j < j0 + n && !sees; ++j) sees = visible(p, i, j);
                    if (sees) needed.emplace_back(h, i0);
                  }
                const cuda::QueryWalk walk = p.query_walk(j0, n, qt, 3, 1);
                for (int64_t t = 0; t < walk.steps(); ++t) walked.emplace_back(walk.head(t), walk.row0(t));
                INFO("key tile " << j0 << " (" << n << " keys), query tiles of " << qt);
                CHECK(needed == walked);  // every needed tile, none wholly outside, in order
                ++checked;
              }
          }
        }
  CHECK(checked > 10000);
}
