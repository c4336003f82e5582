// CPU reductions. a: contiguous, viewed as (outer, k, inner); out: (outer, inner); arg_reduce's values and
// int64 indices: (outer, inner).
//
// As in ops/cpu/elementwise.cpp, the switch on the op sits outside the loops: each op is a lambda, so each
// loop is compiled for one op and vectorises. A row reduction (inner == 1) keeps kLanes independent partial
// results (an order of summation the compiler may vectorise, and no more rounding than a serial loop); a
// column reduction (inner > 1) updates a block of partial results across the columns.
#include <cmath>
#include <limits>

#include "ops/cpu/backend.h"
#include "ops/cpu/loop.h"
#include "ops/cpu/simd.h"

namespace saccade::cpu {

namespace {

constexpr int kLanes = 8;
constexpr int64_t kBlock = 256;  // partial results of a column reduction kept on the stack

// y[o, i] = f-fold over j of x[o, j, i], starting from `init`, accumulated in Acc.
template <class T, class Acc, class F>
void reduce_loop(const T* x, T* y, int64_t outer, int64_t k, int64_t inner, Acc init, F f) {
  if (inner == 1) {
    parallel_rows(outer, k, [&](int64_t o) {
      const T* row = x + o * k;
      Acc acc[kLanes];
      for (int l = 0; l < kLanes; ++l) acc[l] = init;
      int64_t j = 0;
      for (; j + kLanes <= k; j += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[l] = f(acc[l], static_cast<Acc>(row[j + l]));
      for (; j < k; ++j) acc[0] = f(acc[0], static_cast<Acc>(row[j]));
      Acc r = acc[0];
      for (int l = 1; l < kLanes; ++l) r = f(r, acc[l]);
      y[o] = static_cast<T>(r);
    });
    return;
  }
  // the columns' accumulators at the machine's vector width (the bias gradients of linear layers, Σ over
  // rows)
  parallel_rows(outer, k * inner, [&](int64_t o) {
    with_isa([&] {
      const T* src = x + o * k * inner;
      T* dst = y + o * inner;
      for (int64_t i0 = 0; i0 < inner; i0 += kBlock) {
        const int64_t m = std::min(kBlock, inner - i0);
        Acc acc[kBlock];
        for (int64_t i = 0; i < m; ++i) acc[i] = init;
        for (int64_t j = 0; j < k; ++j) {
          const T* r = src + j * inner + i0;
          for (int64_t i = 0; i < m; ++i) acc[i] = f(acc[i], static_cast<Acc>(r[i]));
        }
        for (int64_t i = 0; i < m; ++i) dst[i0 + i] = static_cast<T>(acc[i]);
      }
    });
  });
}

template <class T>
void reduce_typed(ReduceOp op, const Tensor& a, const Tensor& out, int64_t outer, int64_t k, int64_t inner) {
  // float32 sums and products accumulate in double: long rows stay accurate; 16-bit ones in float (acc_t),
  // rounded to 16 bits once, on the store. max / min are exact in compute_t<T> (T itself, or float).
  using Acc = acc_t<T>;
  using C = compute_t<T>;
  using Lim = std::numeric_limits<C>;
  const T* x = a.data<T>();
  T* y = out.data<T>();
  switch (op) {
    case ReduceOp::Sum:
      return reduce_loop<T, Acc>(x, y, outer, k, inner, Acc(0), [](Acc s, Acc v) { return s + v; });
    case ReduceOp::Prod:
      return reduce_loop<T, Acc>(x, y, outer, k, inner, Acc(1), [](Acc s, Acc v) { return s * v; });
    // NaN propagates: once the running max is NaN it stays (v > NaN is false), and a NaN v replaces it.
    // (| rather than ||: a branch-free select vectorises)
    case ReduceOp::Max:
      return reduce_loop<T, C>(x, y, outer, k, inner, Lim::has_infinity ? -Lim::infinity() : Lim::lowest(),
                               [](C m, C v) { return ((v > m) | (v != v)) ? v : m; });
    case ReduceOp::Min:
      return reduce_loop<T, C>(x, y, outer, k, inner, Lim::has_infinity ? Lim::infinity() : Lim::max(),
                               [](C m, C v) { return ((v < m) | (v != v)) ? v : m; });
  }
}

}  // namespace

void CpuBackend::reduce(ReduceOp op, const Tensor& a, const Tensor& out, int64_t outer, int64_t k,
                        int64_t inner) {
  dispatch_all_and_half(a.dtype(), "reduce",
                        [&]<class T>() { reduce_typed<T>(op, a, out, outer, k, inner); });
}

void CpuBackend::arg_reduce(ReduceOp op, const Tensor& a, const Tensor& values, const Tensor& indices,
                            int64_t outer, int64_t k, int64_t inner) {
  dispatch_all_and_half(a.dtype(), "arg_reduce", [&]<class T>() {
    const T* x = a.data<T>();
    T* v = values.data<T>();
    int64_t* ix = indices.data<int64_t>();
    const bool is_max = op == ReduceOp::Max;
    parallel_rows(outer * inner, k, [&](int64_t oi) {
      int64_t o = oi / inner, i = oi % inner;
      const T* src = x + o * k * inner + i;
      compute_t<T> best = src[0];
      int64_t arg = 0;
      for (int64_t j = 1; j < k && best == best; ++j) {
        const compute_t<T> c = src[j * inner];
        if (c != c || (is_max ? c > best : c < best)) best = c, arg = j;
      }
      v[oi] = static_cast<T>(best);
      ix[oi] = arg;
    });
  });
}

}  // namespace saccade::cpu
