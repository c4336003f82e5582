// The CUDA kernels added after the first backend: the fused additive-attention scores
// (ops/cuda/additive_attention.cu), the block-per-row arg_reduce and the two-pass (split-k) reduce
// (ops/cuda/reduce.cu). Two kinds of tests:
//  - [reduce_plan]: how reduce.cu splits its work (ops/cuda/reduce_plan.h) and the readable-kernel switch.
//    Plain C++: they run in every build, GPU or not.
//  - [cuda]: each kernel on the GPU against the CPU kernel and the readable reference (the composed
//    additive scores; the one-pass reduce; the one-thread-per-output arg_reduce) on the same inputs. The CPU
//    half of each runs everywhere; without a GPU the test then prints one warning and returns.
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "cuda_helpers.h"
#include "helpers.h"
#include "nn/attention.h"
#include "nn/bahdanau.h"
#include "ops/cuda/api.h"
#include "ops/cuda/reduce_plan.h"

using namespace saccade;
using saccade::testing::allclose;

// ---- the split plan (CPU) ----

TEST_CASE("reduce plan: one pass when the outputs fill the GPU or the rows are short", "[reduce_plan]") {
  using cuda::plan_reduce;
  const int sms = 132;                                       // an H100
  CHECK(plan_reduce(100000, 50000, 1, sms).splits == 1);     // many rows
  CHECK(plan_reduce(1, 8000, 1, sms).splits == 1);           // < 2 chunks of kRowMinChunk
  CHECK(plan_reduce(1, 0, 1, sms).splits == 1);              // empty rows
  CHECK(plan_reduce(0, 1000000, 1, sms).splits == 1);        // no outputs
  CHECK(plan_reduce(1000, 1000000, 1000, sms).splits == 1);  // 10⁶ columns: one thread each
  CHECK(plan_reduce(7, 400, 3, sms).splits == 1);            // short columns
  const cuda::SplitPlan one = plan_reduce(5, 1234, 1, sms);
  CHECK(one.chunk == 1234);
}

TEST_CASE("reduce plan: a long row with few outputs is split into non-empty chunks that cover it",
          "[reduce_plan]") {
  using cuda::plan_reduce;
  for (int sms : {1, 108, 132}) {
    for (int64_t outer : {1, 3, 17}) {
      for (int64_t k : {int64_t{8192}, int64_t{1000000}, int64_t{1000003}, int64_t{1} << 31}) {
        for (int64_t inner : {1, 3}) {
          INFO("sms " << sms << ", outer " << outer << ", k " << k << ", inner " << inner);
          const cuda::SplitPlan p = plan_reduce(outer, k, inner, sms);
          const int64_t outputs = outer * inner;
          const int64_t wanted = inner == 1 ? cuda::kRowBlocksPerSm * sms : cuda::kColThreadsPerSm * sms;
          const int64_t min_chunk = inner == 1 ? cuda::kRowMinChunk : cuda::kColMinChunk;
          CHECK(p.splits >= 1);
          CHECK(p.splits * p.chunk >= k);       // every element in some chunk
          CHECK((p.splits - 1) * p.chunk < k);  // the last chunk is not empty
          if (p.splits > 1) {
            CHECK(p.chunk >= min_chunk);               // each worker has enough to do
            CHECK(outputs * (p.splits - 1) < wanted);  // no more workers than needed to fill the GPU
          } else {
            CHECK(p.chunk == k);
          }
          // splitting whenever the GPU is not full and k is long enough for two chunks
          if (outputs < wanted && k >= 2 * min_chunk && (wanted + outputs - 1) / outputs >= 2)
            CHECK(p.splits >= 2);
        }
      }
    }
  }
  // a 10⁶-element row on an H100: split over the blocks that fill it (4 per SM), or by chunk size
  const cuda::SplitPlan p = plan_reduce(1, 1000000, 1, 132);
  CHECK(p.splits == (1000000 + p.chunk - 1) / p.chunk);
  CHECK(p.splits == std::min<int64_t>(4 * 132, 1000000 / cuda::kRowMinChunk));
}

TEST_CASE("arg_reduce takes the block-per-row kernel for long last-dim rows only", "[reduce_plan]") {
  CHECK(cuda::arg_reduce_by_rows(cuda::kArgRowMinK, 1));
  CHECK(cuda::arg_reduce_by_rows(50000, 1));
  CHECK_FALSE(cuda::arg_reduce_by_rows(cuda::kArgRowMinK - 1, 1));
  CHECK_FALSE(cuda::arg_reduce_by_rows(50000, 2));  // columns: one thread per output
  CHECK_FALSE(cuda::readable_reductions());         // the fast kernels by default
  cuda::set_readable_reductions(true);
  CHECK(cuda::readable_reductions());
  cuda::set_readable_reductions(false);
  CHECK_FALSE(cuda::readable_reductions());
}

// ---- the GPU ----

namespace {

using saccade::testing::kCpu;
using saccade::testing::kGpu;
using saccade::testing::no_gpu;
using saccade::testing::randn;

// x·scale truncated to integers, as float32: a few distinct values, so many ties.
Tensor small_ints(const Tensor& x, double scale) {
  return ops::mul(x, scale).to(DType::Int64).to(DType::Float32);
}

// Every tensor of `got` (any device) agrees with `want` (CPU) within tol (tol 0: equal, NaN equal to NaN).
void agree(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double tol, const char* what) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(fmt::format("{}: result {}, shape {}", what, i, want[i].shape()));
    REQUIRE(got[i].defined());
    CHECK(got[i].dtype() == want[i].dtype());
    CHECK(allclose(got[i].to(kCpu), want[i].to(kCpu), tol, tol));
  }
}

// Runs f with the readable reductions (true) or the fast ones (false), restoring the default.
std::vector<Tensor> with_readable(bool readable, const std::function<std::vector<Tensor>()>& f) {
  cuda::set_readable_reductions(readable);
  std::vector<Tensor> r;
  try {
    r = f();
  } catch (...) {
    cuda::set_readable_reductions(false);
    throw;
  }
  cuda::set_readable_reductions(false);
  return r;
}

// The scores and the gradients of sum(scores ⊙ R) through the fused op or the composed reference, on the
// device of the inputs (which keep their strides).
std::vector<Tensor> additive_of(bool fused, const Tensor& q, const Tensor& k, const Tensor& w) {
  Variable vq(q, true), vk(k, true), vw(w, true);
  Variable s = fused ? additive_attention_scores(vq, vk, vw) : nn::additive_scores_composed(vq, vk, vw);
  s.backward(randn(s.shape(), 99, q.dtype()).to(q.device()));
  return {s.data(), vq.grad(), vk.grad(), vw.grad()};
}

}  // namespace

TEST_CASE("cuda: fused additive scores on the GPU equal the CPU kernel and the composed path",
          "[cuda][additive]") {
  for (DType dt : {DType::Float64, DType::Float32}) {
    const double tol = dt == DType::Float64 ? 1e-10 : 2e-5;
    // (B, Tq, L, A): a decoder step of the captioner, several queries, L past the 8 warps of a block, A past
    // one warp and one block, single elements, and empty sizes (B, Tq, L, A = 0)
    for (Shape s :
         {Shape{64, 1, 49, 128}, Shape{2, 5, 9, 13}, Shape{3, 2, 300, 37}, Shape{2, 3, 7, 300},
          Shape{1, 1, 1, 1}, Shape{0, 2, 3, 4}, Shape{2, 0, 3, 4}, Shape{2, 3, 0, 4}, Shape{2, 3, 4, 0}}) {
      INFO(fmt::format("dtype {}, (B, Tq, L, A) {}", dtype_name(dt), s));
      const int64_t B = s[0], Tq = s[1], L = s[2], A = s[3];
      Tensor q = randn({B, Tq, A}, 1, dt), k = randn({B, L, A}, 2, dt), w = randn({A}, 3, dt);
      const std::vector<Tensor> cpu_fused = additive_of(true, q, k, w);
      agree(additive_of(false, q, k, w), cpu_fused, tol, "CPU composed");
      if (!cuda_is_available()) continue;
      agree(additive_of(true, q.to(kGpu), k.to(kGpu), w.to(kGpu)), cpu_fused, tol, "GPU fused");
      agree(additive_of(false, q.to(kGpu), k.to(kGpu), w.to(kGpu)), cpu_fused, tol, "GPU composed");
    }
    {  // strided inputs (a plain block: a SECTION in a loop would run once)
      // q a transposed view, k a slice of a wider tensor, w with stride 2; the op copies them to contiguous
      Tensor q = randn({2, 6, 3}, 4, dt).transpose(1, 2);  // (2, 3, 6)
      Tensor k = randn({2, 5, 9}, 5, dt).narrow(2, 1, 6);  // (2, 5, 6)
      Tensor w = randn({12}, 6, dt).view({6, 2}).select(1, 0);
      const std::vector<Tensor> cpu_fused = additive_of(true, q, k, w);
      if (cuda_is_available()) {
        Tensor gq = randn({2, 6, 3}, 4, dt).to(kGpu).transpose(1, 2);
        Tensor gk = randn({2, 5, 9}, 5, dt).to(kGpu).narrow(2, 1, 6);
        Tensor gw = randn({12}, 6, dt).to(kGpu).view({6, 2}).select(1, 0);
        REQUIRE_FALSE(gq.is_contiguous());
        REQUIRE_FALSE(gk.is_contiguous());
        REQUIRE_FALSE(gw.is_contiguous());
        agree(additive_of(true, gq, gk, gw), cpu_fused, tol, "GPU fused, strided");
      }
    }
  }
  if (no_gpu()) return;
  // the backward has no atomics: two runs give the same bits
  Tensor q = randn({4, 3, 64}, 7).to(kGpu), k = randn({4, 49, 64}, 8).to(kGpu), w = randn({64}, 9).to(kGpu);
  agree(additive_of(true, q, k, w), additive_of(true, q, k, w), 0, "GPU fused twice");
}

TEST_CASE(
    "cuda: AdditiveAttention and BahdanauDecoderCell take the fused scores on the GPU and agree with "
    "the CPU",
    "[cuda][additive]") {
  const int64_t B = 2, L = 7;
  Tensor keep = ops::gt(randn({B, 4, L}, 25), -0.3);
  Generator lg(27);
  Tensor lens_q = ops::randint(0, L + 2, {B, 4}, kCpu, &lg);  // (B, Tq): some rows see no key
  Tensor lens = ops::tensor({5, 0}, {2}, DType::Int64);
  // output, weights, then the inputs' and parameters' gradients of sum(output ⊙ R)
  auto attention = [&](Device d, const Tensor& mask) {
    Generator g(21);
    nn::AdditiveAttention att(3, 5, 6, 0.0, &g);
    att.to(d);
    REQUIRE(att.use_fused);
    Variable vq(randn({B, 4, 5}, 22).to(d), true), vk(randn({B, L, 3}, 23).to(d), true),
        vv(randn({B, L, 2}, 24).to(d), true);
    nn::AttentionOutput r = att.forward_with_weights(vq, vk, vv, mask.defined() ? mask.to(d) : mask);
    r.output.backward(randn(r.output.shape(), 26).to(d));
    return std::vector<Tensor>{r.output.data(),
                               r.weights.data(),
                               vq.grad(),
                               vk.grad(),
                               vv.grad(),
                               att.W_q->weight.grad(),
                               att.W_k->weight.grad(),
                               att.w_v->weight.grad()};
  };
  // three decoder steps, then the gradients of every parameter and of the encoder states
  auto decoder = [&](Device d) {
    Generator g(31);
    nn::BahdanauDecoderCell cell(4, 6, 5, 0.0, &g);
    cell.to(d);
    Variable enc(randn({B, L, 5}, 32).to(d), true), h(ops::zeros({B, 6}, DType::Float32, d));
    Variable keys = cell.project_keys(enc);
    std::vector<Tensor> res;
    for (int t = 0; t < 3; ++t) {
      nn::BahdanauStep st = cell.step(Variable(randn({B, 4}, 33 + t).to(d)), h, enc, keys, lens.to(d));
      h = st.hidden;
      res.push_back(st.weights.data());
    }
    sum(mul(h, Variable(randn({B, 6}, 40).to(d)))).backward();
    res.push_back(h.data());
    res.push_back(enc.grad());
    for (const Variable& p : cell.parameters()) res.push_back(p.grad());
    return res;
  };
  for (Tensor mask : {Tensor(), lens, lens_q, keep}) {
    const std::vector<Tensor> cpu = attention(kCpu, mask);
    if (cuda_is_available()) agree(attention(kGpu, mask), cpu, 1e-5, "AdditiveAttention");
  }
  const std::vector<Tensor> cpu = decoder(kCpu);
  if (no_gpu()) return;
  agree(decoder(kGpu), cpu, 1e-5, "BahdanauDecoderCell");
}

TEST_CASE(
    "cuda: arg_reduce, block per row against one thread per output and the CPU: ties, NaN, long and "
    "strided rows",
    "[cuda][reduce]") {
  // rows of k: a block's worth (256), past it (257, 1000), a vocabulary (50000); ties from rounding
  std::vector<Tensor> inputs;
  for (int64_t k : {256, 257, 1000, 50000}) {
    inputs.push_back(randn({5, k}, 50 + k));
    inputs.push_back(small_ints(randn({6, k}, 60 + k), 0.7));  // values in a few integers: ties
  }
  {
    Tensor nan_rows = randn({6, 3000}, 70);
    auto set = [&](int64_t r, int64_t j, double v) {
      Tensor e = nan_rows.select(0, r).narrow(0, j, 1);
      ops::fill_(e, v);
    };
    set(0, 2999, std::nan(""));  // the last element
    set(1, 5, std::nan(""));     // two NaNs: the first wins
    set(1, 2000, std::nan(""));
    set(2, 300, std::nan(""));  // a NaN and +inf
    set(2, 7, std::numeric_limits<double>::infinity());
    Tensor all_nan = nan_rows.select(0, 3), all_ninf = nan_rows.select(0, 4),
           all_zero = nan_rows.select(0, 5);
    ops::fill_(all_nan, std::nan(""));                               // every element NaN: index 0
    ops::fill_(all_ninf, -std::numeric_limits<double>::infinity());  // every element -inf
    ops::fill_(all_zero, 0.0);                                       // all equal: index 0
    set(5, 1000, -0.0);                                              // -0 == 0: still 0
    inputs.push_back(nan_rows);
  }
  inputs.push_back(randn({3, 700}, 80, DType::Float64));
  inputs.push_back(small_ints(randn({3, 700}, 81), 3.0).to(DType::Int64));
  // argmax, argmin and max/min with values over the last dim, of the tensor and of a transposed copy's view
  auto run = [&](Device d) {
    std::vector<Tensor> r;
    for (const Tensor& x : inputs) {
      Tensor a = x.to(d), t = x.t().contiguous().to(d).t();  // t: the same values, not contiguous
      REQUIRE_FALSE(t.is_contiguous());
      for (const Tensor& v : {a, t}) {
        r.push_back(ops::argmax(v, 1));
        r.push_back(ops::argmin(v, -1));
        ops::ValuesIndices m = ops::max(v, 1), n = ops::min(v, 1);
        r.insert(r.end(), {m.values, m.indices, n.values, n.indices});
      }
      r.push_back(ops::argmax(a, 0));  // columns: one thread per output either way
    }
    r.push_back(ops::argmax(inputs[0].to(d)));  // the flattened tensor: one row
    r.push_back(ops::argmax(inputs[7].to(d)));  // 300000 elements with ties
    return r;
  };
  const std::vector<Tensor> cpu = run(kCpu);
  if (no_gpu()) return;
  // indices and values exactly (an argmax is a choice, not a sum)
  agree(with_readable(false, [&] { return run(kGpu); }), cpu, 0, "block per row");
  agree(with_readable(true, [&] { return run(kGpu); }), cpu, 0, "one thread per output");
}

TEST_CASE("cuda: two-pass reductions of long rows with few outputs equal the one-pass result and the CPU",
          "[cuda][reduce]") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    INFO("dtype " << dtype_name(dt));
    // a 10⁶-element row, three of them, a long column reduction (inner > 1), the whole tensor
    Tensor row = randn({1, 1000000}, 90, dt), rows = randn({3, 1000003}, 91, dt),
           cols = randn({200000, 3}, 92, dt);
    Tensor near1 = ops::add(ops::mul(row, 1e-3), 1.0);  // a product that stays finite
    Tensor with_nan = rows.clone();
    Tensor hole = with_nan.select(0, 1).narrow(0, 777777, 1);
    ops::fill_(hole, std::nan(""));
    auto run = [&](Device d) {
      Tensor r = row.to(d), rs = rows.to(d), c = cols.to(d), p = near1.to(d), n = with_nan.to(d);
      return std::vector<Tensor>{
          ops::sum(r, {1}),   ops::sum(rs, {1}),  ops::sum(c, {0}),
          ops::sum(rs),       ops::prod(p, {1}),  ops::amax(rs, {1}),
          ops::amin(rs, {1}), ops::amax(c, {0}),  ops::amin(c, {0}),
          ops::max(r),        ops::min(r),        ops::amax(n, {1}),
          ops::amin(n, {1}),  ops::mean(rs, {1}), ops::prod(ops::add(ops::mul(c, 1e-3), 1.0), {0})};
    };
    const std::vector<Tensor> cpu = run(kCpu);
    if (!cuda_is_available()) continue;
    // sums in a different order: float32 accumulates in double (as on the CPU), so only the final rounding
    // differs; max/min exactly
    const double tol = dt == DType::Float32 ? 1e-5 : 1e-10;
    const std::vector<Tensor> two = with_readable(false, [&] { return run(kGpu); });
    const std::vector<Tensor> one = with_readable(true, [&] { return run(kGpu); });
    agree(two, cpu, tol, "two-pass vs CPU");
    agree(one, cpu, tol, "one-pass vs CPU");
    agree(two, one, tol, "two-pass vs one-pass");
    for (size_t i : {5, 6, 7, 8, 9, 10, 11, 12}) CHECK(allclose(two[i].to(kCpu), cpu[i], 0, 0));
  }
  if (no_gpu()) return;
}
