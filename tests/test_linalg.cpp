// matmul / bmm / mm / linear, all of their tests in one file (ops/linalg.h, autograd/functions/linalg.h; the
// kernels ops/cpu/linalg.cpp and ops/cuda/linalg.cpp): hand values, a broadcast-multiply-sum reference,
// strided operands, threads, gradchecks, bad input; cuBLAS against the CPU ([cuda]: without a GPU they warn
// and pass); bfloat16 and float16 products ([half]); the one-row products at every vector width ([isa]).
// The 16-bit GEMMs under matmul have their own tests (test_gemm_bf16.cpp, test_cuda_half.cpp).
#include "cuda_helpers.h"
#include "kernel_checks.h"
#include "ops/cuda/api.h"

using namespace saccade;
using namespace saccade::testing;  // the suite's helpers: helpers.h, cuda_helpers.h, kernel_checks.h

namespace {

// Reference product of a (*, M, K) and b (*, K, N) with no GEMM: broadcast a[..., m, k, 1] * b[..., 1, k, n]
// and sum over k.
Tensor ref_matmul(const Tensor& a, const Tensor& b) {
  return ops::sum(ops::mul(a.unsqueeze(-1), b.unsqueeze(-3)), {-2});
}

Variable leaf(const Tensor& t) { return Variable(t, true); }

bool check(const std::function<Variable(const std::vector<Variable>&)>& f, const std::vector<Variable>& in) {
  return gradcheck(f, in);
}

}  // namespace

TEST_CASE("matmul: hand-computed values for each rank rule", "[ops][linalg]") {
  Tensor a = ops::tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = ops::tensor({7, 8, 9, 10, 11, 12}, {3, 2});
  // [1 2 3; 4 5 6] @ [7 8; 9 10; 11 12] = [58 64; 139 154]
  REQUIRE(allclose(ops::matmul(a, b), ops::tensor({58, 64, 139, 154}, {2, 2})));
  REQUIRE(allclose(ops::mm(a, b), ops::tensor({58, 64, 139, 154}, {2, 2})));
  // (3)·(3): 1*4 + 2*5 + 3*6 = 32, a 0-d result
  Tensor d = ops::matmul(ops::tensor({1, 2, 3}), ops::tensor({4, 5, 6}));
  REQUIRE(d.dim() == 0);
  REQUIRE(d.item() == 32);
  // (2, 3) @ (3) = [1+4+9, 4+10+18] with v = [1, 2, 3]
  REQUIRE(allclose(ops::matmul(a, ops::tensor({1, 2, 3})), ops::tensor({14, 32})));
  // (2) @ (2, 3) = [1 + 8, 2 + 10, 3 + 12] with v = [1, 2]
  REQUIRE(allclose(ops::matmul(ops::tensor({1, 2}), a), ops::tensor({9, 12, 15})));
  // batched with a broadcast (3, 2): [[1 0; 0 1] a-rows ...]: identity batch entries return b itself
  Tensor eye2 = ops::eye(2).unsqueeze(0).expand({3, 2, 2});
  REQUIRE(allclose(ops::matmul(eye2, ops::tensor({1, 2, 3, 4}, {2, 2})),
                   ops::tensor({1, 2, 3, 4}, {2, 2}).unsqueeze(0).expand({3, 2, 2})));
  // bmm: batch 0 = a @ b, batch 1 = 2a @ b
  Tensor ab = ops::bmm(ops::tensor({1, 2, 3, 4, 5, 6, 2, 4, 6, 8, 10, 12}, {2, 2, 3}),
                       ops::tensor({7, 8, 9, 10, 11, 12, 7, 8, 9, 10, 11, 12}, {2, 3, 2}));
  REQUIRE(allclose(ab, ops::tensor({58, 64, 139, 154, 116, 128, 278, 308}, {2, 2, 2})));
}

TEST_CASE("matmul: agrees with a broadcast-multiply-sum reference", "[ops][linalg]") {
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {
      {{4, 3}, {3, 5}},       {{2, 4, 3}, {3, 5}},          {{4, 3}, {2, 3, 5}}, {{2, 1, 4, 3}, {3, 3, 5}},
      {{1, 4, 3}, {2, 3, 5}}, {{2, 3, 4, 3}, {2, 3, 3, 5}}, {{1, 1}, {1, 7}},    {{5, 2}, {2, 1}},
  };
  for (DType dt : {DType::Float64, DType::Float32}) {
    for (const Case& c : cases) {
      Tensor a = rand64(c.a, 3).to(dt), b = rand64(c.b, 4).to(dt);
      double tol = dt == DType::Float32 ? 1e-5 : 1e-12;
      INFO("shapes " << fmt::format("{} @ {}", c.a, c.b) << " dtype " << dtype_name(dt));
      REQUIRE(allclose(ops::matmul(a, b), ref_matmul(a, b), tol, tol));
    }
  }
}

TEST_CASE("matmul: strided operands are multiplied as given", "[ops][linalg]") {
  Tensor x = rand64({2, 5, 4}, 5), w = rand64({6, 4}, 6);
  // (B, T, K) @ w.t(): w.t() is column-major, passed as a transposed matrix
  REQUIRE(allclose(ops::matmul(x, w.t()), ref_matmul(x, w.t()), 1e-12, 1e-12));
  // transposed batched views on both sides
  Tensor at = rand64({3, 4, 5}, 7).transpose(1, 2), bt = rand64({3, 2, 4}, 8).transpose(1, 2);
  REQUIRE(allclose(ops::matmul(at, bt), ref_matmul(at, bt), 1e-12, 1e-12));
  REQUIRE(allclose(ops::bmm(at, bt), ref_matmul(at, bt), 1e-12, 1e-12));
  // unit stride in neither dim (every other column): copied
  Tensor s = rand64({4, 10}, 9).slice(1, 0, 10, 2);
  Tensor w5 = rand64({6, 5}, 17).t();
  REQUIRE(allclose(ops::matmul(s, w5), ref_matmul(s, w5), 1e-12, 1e-12));
  // a sliced row block (ld > cols) and a permuted batch that does not fold into rows
  Tensor rows = rand64({6, 8}, 10).narrow(1, 2, 3);
  REQUIRE(allclose(ops::matmul(rows, w.narrow(1, 0, 3).t()), ref_matmul(rows, w.narrow(1, 0, 3).t()), 1e-12,
                   1e-12));
  Tensor p = rand64({5, 2, 4}, 11).permute({1, 0, 2});  // (2, 5, 4) with batch stride 4
  REQUIRE(allclose(ops::matmul(p, w.t()), ref_matmul(p, w.t()), 1e-12, 1e-12));
  // stride-0 rows (an expanded vector) are copied, not misread
  Tensor e = rand64({1, 4}, 12).expand({3, 4});
  REQUIRE(allclose(ops::matmul(e, w.t()), ref_matmul(e, w.t()), 1e-12, 1e-12));
}

TEST_CASE("matmul: matrix_layout classifies strided matrices", "[ops][linalg]") {
  Tensor w = ops::zeros({6, 4});
  auto rm = matrix_layout(w);
  REQUIRE((rm.ok && !rm.trans && rm.ld == 4));
  auto tr = matrix_layout(w.t());
  REQUIRE((tr.ok && tr.trans && tr.ld == 4));
  auto blk = matrix_layout(ops::zeros({6, 8}).narrow(1, 2, 3));
  REQUIRE((blk.ok && !blk.trans && blk.ld == 8));
  REQUIRE_FALSE(matrix_layout(ops::zeros({4, 10}).slice(1, 0, 10, 2)).ok);
  REQUIRE_FALSE(matrix_layout(ops::zeros({1, 4}).expand({3, 4})).ok);
}

TEST_CASE("matmul: many small batched matrices and one large product", "[ops][linalg]") {
  // 64 products of 8x8 (whole matrices per thread) and 80x90 @ 90x70 (split into slabs of rows)
  Tensor a = rand64({64, 8, 8}, 13), b = rand64({64, 8, 8}, 14);
  REQUIRE(allclose(ops::bmm(a, b), ref_matmul(a, b), 1e-12, 1e-12));
  Tensor c = rand64({80, 90}, 15), d = rand64({90, 70}, 16);
  REQUIRE(allclose(ops::matmul(c, d), ref_matmul(c, d), 1e-10, 1e-10));
  Tensor cf = c.to(DType::Float32), df = d.to(DType::Float32);
  REQUIRE(allclose(ops::matmul(cf, df), ref_matmul(c, d), 1e-4, 1e-4));
}

TEST_CASE("matmul: GEMMs split into slabs of rows across threads agree with the reference", "[ops][linalg]") {
  // 2 threads: products above kGemmGrain multiply-adds are cut into row slabs, some crossing matrix
  // boundaries of a batch; op(a) transposed (a column-major view) and b broadcast over the batch.
  int previous = get_num_threads();
  set_num_threads(2);
  Tensor a = rand64({3, 90, 70}, 21), b = rand64({3, 90, 80}, 22);
  Tensor at = a.transpose(1, 2);  // (3, 70, 90), column-major matrices
  REQUIRE(allclose(ops::bmm(at, b), ref_matmul(at, b), 1e-10, 1e-10));
  Tensor w = rand64({90, 110}, 23);
  Tensor x = rand64({4, 70, 90}, 24);  // (4, 70, 90) @ (90, 110): one (280, 90) @ (90, 110) GEMM, split
  REQUIRE(allclose(ops::matmul(x, w), ref_matmul(x, w), 1e-10, 1e-10));
  Tensor bt = rand64({110, 90}, 25).t();  // b column-major
  REQUIRE(allclose(ops::matmul(x, bt), ref_matmul(x, bt), 1e-10, 1e-10));
  set_num_threads(previous);
}

TEST_CASE("matmul: a product with fewer rows than columns split into column blocks agrees with the reference",
          "[ops][linalg]") {
  // 2 threads: (60, 300) @ (300, 230) is one GEMM of 4.1M multiply-adds with rows < columns, cut into blocks
  // of 64 columns (the last one short), b row-major and column-major (w.t(), as linear passes it)
  int previous = get_num_threads();
  set_num_threads(2);
  Tensor x = rand64({60, 300}, 31), w = rand64({300, 230}, 32), wt = rand64({230, 300}, 33).t();
  REQUIRE(allclose(ops::matmul(x, w), ref_matmul(x, w), 1e-10, 1e-10));
  REQUIRE(allclose(ops::matmul(x, wt), ref_matmul(x, wt), 1e-10, 1e-10));
  Tensor xf = x.to(DType::Float32), wf = wt.to(DType::Float32);
  REQUIRE(allclose(ops::matmul(xf, wf), ref_matmul(x, wt).to(DType::Float32), 1e-4, 1e-4));
  set_num_threads(previous);
}

TEST_CASE("matmul: one output row goes through gemv and agrees with the reference", "[ops][linalg]") {
  // batch-1 decoding's products: (1, k) @ (k, n) with b row-major and column-major (linear's w.t()), a's row
  // contiguous or strided (a transposed view), n split into column blocks across 2 threads (the last short),
  // float64 and float32; and a (1, 1, k) batch of one
  int previous = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t n : {1, 5, 64, 700}) {
      CAPTURE(threads, n);
      Tensor x = rand64({1, 3000}, 41), w = rand64({3000, n}, 42), wt = rand64({n, 3000}, 43).t();
      Tensor xt = rand64({3000, 1}, 44).t();  // a row with stride 1 along its column-major storage
      Tensor xs = rand64({3000, 2}, 45).narrow(1, 0, 1).t();  // a row of stride 2
      for (const Tensor& a : {x, xt, xs}) {
        REQUIRE(allclose(ops::matmul(a, w), ref_matmul(a, w), 1e-10, 1e-10));
        REQUIRE(allclose(ops::matmul(a, wt), ref_matmul(a, wt), 1e-10, 1e-10));
        REQUIRE(allclose(ops::matmul(a.to(DType::Float32), wt.to(DType::Float32)),
                         ref_matmul(a, wt).to(DType::Float32), 1e-4, 1e-3));
      }
      REQUIRE(allclose(ops::matmul(x.unsqueeze(0), w), ref_matmul(x, w).unsqueeze(0), 1e-10, 1e-10));
      // 16 bits: float32 sums of the rounded operands, one rounding of each output (gemm_half's precision)
      for (DType half : {DType::BFloat16, DType::Float16}) {
        CAPTURE(dtype_name(half));
        const Tensor xh = x.to(half), wh = w.to(half), wth = wt.to(half);
        const double tol = half == DType::BFloat16 ? 1.0 / 128 : 1.0 / 1024;  // two units of the last place
        REQUIRE(allclose(ops::matmul(xh, wh).to(DType::Float64),
                         ref_matmul(xh.to(DType::Float64), wh.to(DType::Float64)), tol, 1e-3));
        REQUIRE(allclose(ops::matmul(xh, wth).to(DType::Float64),
                         ref_matmul(xh.to(DType::Float64), wth.to(DType::Float64)), tol, 1e-3));
      }
    }
  }
  set_num_threads(previous);
}

TEST_CASE("matmul: one output row of 16-bit weights widens every pattern as the GEMM does", "[ops][linalg]") {
  // The gemv path widens b in vector registers (f16_widen, bf16_widen); the two-row GEMM path through
  // gemm_half widens with half.h's structs. Weights over every exponent, subnormals included, in rows of
  // 4 (the gemv's row group) and a tail row; products of one nonzero term per output, so both paths give the
  // widened weight times a power of two exactly.
  const int64_t k = 37, n = 4 * 7 + 3;
  for (DType half : {DType::BFloat16, DType::Float16}) {
    CAPTURE(dtype_name(half));
    std::vector<double> wv(static_cast<size_t>(n * k), 0.0), xv(static_cast<size_t>(k), 0.0);
    for (int64_t j = 0; j < n; ++j)
      wv[static_cast<size_t>(j * k + j % k)] = std::ldexp(1.0 + 0.125 * (j % 8), static_cast<int>(j) - 24);
    wv[1 * k + 1] = INFINITY;  // an infinity and a NaN inside the first group of four rows
    wv[2 * k + 2] = NAN;
    for (int64_t i = 0; i < k; ++i) xv[static_cast<size_t>(i)] = 0.5;
    const Tensor w = ops::from_vector(wv, {n, k}).to(half), x = ops::from_vector(xv, {1, k}).to(half);
    const Tensor one = ops::matmul(x, w.t()), two = ops::matmul(ops::cat({x, x}, 0), w.t());
    REQUIRE(one.shape() == Shape{1, n});
    REQUIRE(allclose(one.to(DType::Float64), two.narrow(0, 0, 1).to(DType::Float64), 0, 0));
    // against the widened weights themselves: one product by 0.5 each
    REQUIRE(allclose(one.to(DType::Float64).reshape({n}),
                     ops::mul(ops::sum(w.to(DType::Float64), Shape{1}), 0.5).to(half).to(DType::Float64), 0,
                     0));
  }
}

TEST_CASE("matmul: empty dims", "[ops][linalg]") {
  Tensor z = ops::matmul(ops::ones({3, 0}), ops::ones({0, 2}));  // K = 0: a sum of nothing
  REQUIRE(allclose(z, ops::zeros({3, 2})));
  REQUIRE(ops::matmul(ops::ones({0, 3}), ops::ones({3, 2})).shape() == Shape{0, 2});
  REQUIRE(ops::bmm(ops::ones({0, 2, 3}), ops::ones({0, 3, 4})).shape() == Shape{0, 2, 4});
}

TEST_CASE("matmul: bad input throws naming the op", "[ops][linalg]") {
  Tensor a = ops::ones({2, 3}), b = ops::ones({4, 2});
  REQUIRE_THROWS_SACCADE(ops::matmul(a, b), "matmul: shapes [2, 3] and [4, 2]");
  REQUIRE_THROWS_SACCADE(ops::matmul(ops::ones({2, 2, 3}), ops::ones({3, 3, 4})), "matmul: batch dims");
  REQUIRE_THROWS_SACCADE(ops::matmul(ops::scalar_tensor(1), a), "matmul");
  REQUIRE_THROWS_SACCADE(ops::matmul(ops::ones({2, 3}, DType::Int64), ops::ones({3, 2}, DType::Int64)),
                         "matmul");
  REQUIRE_THROWS_SACCADE(ops::matmul(a, ops::ones({3, 2}, DType::Float64)), "matmul");
  REQUIRE_THROWS_SACCADE(ops::matmul(Tensor(), a), "matmul");
  REQUIRE_THROWS_SACCADE(ops::bmm(a, ops::ones({3, 2})), "bmm");
  REQUIRE_THROWS_SACCADE(ops::bmm(ops::ones({2, 2, 3}), ops::ones({3, 3, 2})),
                         "bmm: shapes [2, 2, 3] and [3, 3, 2]");
  REQUIRE_THROWS_SACCADE(ops::bmm(ops::ones({2, 2, 3}, DType::Int64), ops::ones({2, 3, 2}, DType::Int64)),
                         "bmm");
  REQUIRE_THROWS_SACCADE(ops::mm(ops::ones({2, 2, 3}), ops::ones({3, 2})), "mm");
  REQUIRE_THROWS_SACCADE(ops::mm(a, ops::ones({2, 2})), "mm: shapes [2, 3] and [2, 2]");
  REQUIRE_THROWS_SACCADE(ops::mm(ops::ones({2, 3}, DType::Bool), ops::ones({3, 2}, DType::Bool)), "mm");
  Variable x(ops::ones({5, 3})), w(ops::ones({4, 2}));
  REQUIRE_THROWS_SACCADE(linear(x, w), "linear: input of shape [5, 3]");
  REQUIRE_THROWS_SACCADE(linear(x, Variable(ops::ones({4, 3})), Variable(ops::ones({3}))), "linear: bias");
  REQUIRE_THROWS_SACCADE(linear(x, Variable(ops::ones({4, 3})), Variable(ops::ones({4}, DType::Float64))),
                         "linear: bias");
  REQUIRE_THROWS_SACCADE(linear(x, Variable(ops::ones({3}))), "linear");
}

TEST_CASE("matmul: gradcheck over rank rules and broadcast batch dims", "[autograd][linalg]") {
  auto f = [](const std::vector<Variable>& v) { return matmul(v[0], v[1]); };
  const std::pair<Shape, Shape> shapes[] = {
      {{3}, {3}},          {{2, 3}, {3}},          {{3}, {3, 2}},    {{2, 3}, {3, 4}},
      {{2, 2, 3}, {3, 4}}, {{3}, {2, 3, 2}},       {{2, 2, 3}, {3}}, {{2, 1, 2, 3}, {3, 3, 2}},
      {{2, 3}, {2, 3, 2}}, {{1, 2, 3}, {2, 3, 2}},
  };
  uint64_t seed = 20;
  for (const auto& [sa, sb] : shapes) {
    INFO(fmt::format("{} @ {}", sa, sb));
    REQUIRE(check(f, {leaf(rand64(sa, seed++)), leaf(rand64(sb, seed++))}));
  }
  // transposed and permuted (non-contiguous) operands
  REQUIRE(check(f, {leaf(rand64({3, 2}, 40).t()), leaf(rand64({4, 3}, 41).t())}));
  REQUIRE(check(f, {leaf(rand64({2, 3, 2}, 42).permute({1, 0, 2})), leaf(rand64({4, 2}, 43).t())}));
  REQUIRE(check(f, {leaf(rand64({2, 4, 3}, 44).transpose(1, 2)), leaf(rand64({2, 4, 2}, 45))}));
  // only one operand requires grad
  REQUIRE(check(f, {Variable(rand64({2, 3}, 46)), leaf(rand64({3, 2}, 47))}));
  REQUIRE(check(f, {leaf(rand64({2, 2, 3}, 48)), Variable(rand64({3, 2}, 49))}));
}

TEST_CASE("bmm and mm: gradcheck", "[autograd][linalg]") {
  auto fb = [](const std::vector<Variable>& v) { return bmm(v[0], v[1]); };
  REQUIRE(check(fb, {leaf(rand64({2, 3, 4}, 50)), leaf(rand64({2, 4, 2}, 51))}));
  REQUIRE(check(
      fb, {leaf(rand64({2, 4, 3}, 52).transpose(1, 2)), leaf(rand64({4, 2, 2}, 53).permute({1, 0, 2}))}));
  auto fm = [](const std::vector<Variable>& v) { return mm(v[0], v[1]); };
  REQUIRE(check(fm, {leaf(rand64({3, 4}, 54)), leaf(rand64({4, 2}, 55))}));
  REQUIRE(check(fm, {leaf(rand64({4, 3}, 56).t()), leaf(rand64({6, 4}, 57).slice(0, 0, 6, 3).t())}));
}

TEST_CASE("linear: values and gradcheck", "[autograd][linalg]") {
  // y = x W^T + b by hand: x = [1, 2], W = [[1, 0], [1, 1], [0, 2]], b = [1, 1, 1] -> [2, 4, 5]
  Variable y = linear(Variable(ops::tensor({1, 2})), Variable(ops::tensor({1, 0, 1, 1, 0, 2}, {3, 2})),
                      Variable(ops::tensor({1, 1, 1})));
  REQUIRE(allclose(y.data(), ops::tensor({2, 4, 5})));

  auto fb = [](const std::vector<Variable>& v) { return linear(v[0], v[1], v[2]); };
  auto fn = [](const std::vector<Variable>& v) { return linear(v[0], v[1]); };
  REQUIRE(check(fb, {leaf(rand64({4, 3}, 60)), leaf(rand64({2, 3}, 61)), leaf(rand64({2}, 62))}));
  REQUIRE(check(fb, {leaf(rand64({2, 3, 3}, 63)), leaf(rand64({2, 3}, 64)), leaf(rand64({2}, 65))}));
  REQUIRE(check(fb, {leaf(rand64({3}, 66)), leaf(rand64({2, 3}, 67)), leaf(rand64({2}, 68))}));
  REQUIRE(check(fn, {leaf(rand64({3, 4}, 69).t()), leaf(rand64({3, 2}, 70).t())}));
  REQUIRE(check(fn, {leaf(rand64({3, 2, 4}, 71).permute({1, 0, 2})), leaf(rand64({2, 4}, 72))}));
}

// ---- cuBLAS against the CPU ----

TEST_CASE("cuda: matmul and bmm through cuBLAS, transposed operands passed as flags", "[cuda]") {
  Tensor a = randn({4, 33, 17}, 10), b = randn({4, 17, 9}, 11), w = randn({9, 17}, 12), v = randn({17}, 13);
  both(
      [&](Device d) {
        Tensor A = a.to(d), B = b.to(d), W = w.to(d), V = v.to(d);
        return std::vector<Tensor>{
            ops::bmm(A, B),
            ops::matmul(A, W.t()),                           // broadcast batch, transposed b
            ops::bmm(B.transpose(1, 2), A.transpose(1, 2)),  // both transposed
            ops::matmul(A, V),                               // matrix-vector
            ops::matmul(A.select(0, 1), B.select(0, 2)),     // 2-d
            ops::mm(A.select(0, 0).to(DType::Float64), B.select(0, 0).to(DType::Float64)),
            ops::bmm(A.slice(2, 0, 0), B.slice(1, 0, 0)),  // K = 0: zeros
            ops::bmm(A.slice(1, 0, 0), B)};                // M = 0
      },
      1e-4);
  SKIP_WITHOUT_GPU();  // after the CPU half above ran
}

TEST_CASE("cuda: TF32 is off by default and only used when allowed", "[cuda]") {
  SKIP_WITHOUT_GPU();
  Tensor a = randn({256, 256}, 14), b = randn({256, 256}, 15);
  Tensor ref = ops::matmul(a.to(DType::Float64), b.to(DType::Float64));
  Tensor exact = ops::matmul(a.to(kGpu), b.to(kGpu)).to(kCpu).to(DType::Float64);
  CHECK(allclose(exact, ref, 1e-4, 1e-4));
  cuda::set_allow_tf32(true);
  Tensor fast = ops::matmul(a.to(kGpu), b.to(kGpu)).to(kCpu).to(DType::Float64);
  cuda::set_allow_tf32(false);
  CHECK(allclose(fast, ref, 2e-2, 2e-2));
}

// ---- 16-bit products ----

TEST_CASE("16-bit matmul and bmm through the widening GEMM", "[half]") {
  for (DType t : {DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(t));
    // 70 rows crosses gemm_half's 64-row block; k = 33 and n = 19 are odd
    Tensor a = randn16({2, 70, 33}, t, 8), b = randn16({2, 33, 19}, t, 9), w = randn16({19, 33}, t, 10);
    auto mag = [](const Tensor& x, const Tensor& y) {
      return ops::matmul(ops::abs(f32(x)), ops::abs(f32(y)));
    };
    check_close(ops::matmul(a, b), ops::matmul(f32(a), f32(b)), t, mag(a, b));
    check_close(ops::matmul(a, w.t()), ops::matmul(f32(a), f32(w).t()), t, mag(a, w.t()));  // transposed b
    Tensor at = a.transpose(1, 2).contiguous().transpose(1, 2);                             // column-major a
    check_close(ops::bmm(at, b), ops::bmm(f32(a), f32(b)), t, mag(a, b));
    check_close(ops::matmul(a, b.select(0, 0)), ops::matmul(f32(a), f32(b).select(0, 0)), t,
                mag(a, b.select(0, 0)));  // one b for the batch
  }
}

// ---- every vector width ----

TEST_CASE("isa dispatch: one-row 16-bit matmuls (the gemv) agree at every width", "[ops][isa]") {
  // The gemv widens each row of b at the machine's width (exactly, at every width) and sums with OpenBLAS,
  // whose kernel does not depend on the width saccade's loops run at: the same bits at every width. k = 1000
  // and n = 203 are not multiples of any vector; b both (n, k) (linear's w.t()) and (k, n).
  for (DType half : {DType::BFloat16, DType::Float16}) {
    CAPTURE(dtype_name(half));
    const Tensor x = randn({1, 1000}, 1, half), wt = randn({203, 1000}, 2, half).t(),
                 w = randn({1000, 203}, 3, half);
    const double ulp = half == DType::BFloat16 ? 1.0 / 128 : 1.0 / 1024;
    std::vector<Tensor> by_width;
    for (cpu::Isa isa : widths()) {
      cpu::IsaGuard guard(isa);
      by_width.push_back(ops::cat({ops::matmul(x, wt), ops::matmul(x, w)}, 0));
    }
    const Tensor want = ops::cat({ops::matmul(x.to(DType::Float64), wt.to(DType::Float64)),
                                  ops::matmul(x.to(DType::Float64), w.to(DType::Float64))},
                                 0);
    for (size_t i = 0; i < by_width.size(); ++i) {
      CAPTURE(i);
      REQUIRE(allclose(by_width[i].to(DType::Float64), want, ulp, 1e-2));
      REQUIRE(allclose(by_width[i], by_width.back(), 0, 0));
    }
  }
}
