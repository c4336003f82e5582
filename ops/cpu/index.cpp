// CPU index kernels. All operands contiguous; indices already bounds-checked by the op (ops/index.cpp).
// Shapes follow ops/backend.h: the indexed dim sits between `outer` and `inner`.
//   index_select: a (outer, n, inner), index (m) -> out (outer, m, inner)
//   index_add:    out (outer, n, inner) += src (outer, m, inner) at index (m)
//   gather:       a (outer, n, inner), index (outer, m, inner) -> out (outer, m, inner)
//   scatter_add:  out (outer, n, inner) += src (outer, m, inner) at index (outer, m, inner)
//
// The accumulating kernels (index_add, scatter_add) are parallelised over (outer, blocks of inner) with the
// loop over the index inside, so two threads never add into the same element (no races, no atomics) and the
// order of the additions into each element is fixed (deterministic results).
#include "ops/cpu/backend.h"
#include "ops/cpu/loop.h"

namespace saccade::cpu {

namespace {

constexpr int64_t kInnerBlock = 1024;

// Calls f(o, i0, i1) for every o in [0, outer) and every block [i0, i1) of [0, inner), in parallel.
template <class F>
void for_outer_inner_blocks(int64_t outer, int64_t inner, int64_t cost_per_element, F&& f) {
  const int64_t blocks = (inner + kInnerBlock - 1) / kInnerBlock;
  const int64_t cost = std::min(inner, kInnerBlock) * cost_per_element;
  parallel_rows(outer * blocks, cost, [&](int64_t t) {
    int64_t o = t / blocks, b = t % blocks;
    f(o, b * kInnerBlock, std::min(inner, (b + 1) * kInnerBlock));
  });
}

}  // namespace

// a: (outer, n, inner), index: (m), out: (outer, m, inner)
void CpuBackend::index_select(const Tensor& a, const Tensor& index, const Tensor& out, int64_t outer,
                              int64_t inner) {
  const int64_t m = index.numel();
  const int64_t n = outer * inner > 0 ? a.numel() / (outer * inner) : 0;
  const int64_t* ix = index.data<int64_t>();
  dispatch_all_and_half(a.dtype(), "index_select", [&]<class T>() {
    const T* x = a.data<T>();
    T* y = out.data<T>();
    // each (o, j) writes its own output row: safe to parallelise
    parallel_rows(outer * m, inner, [&](int64_t oj) {
      int64_t o = oj / m, j = oj % m;
      const T* src = x + (o * n + ix[j]) * inner;
      T* dst = y + oj * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] = src[i];
    });
  });
}

// out: (outer, n, inner), index: (m), src: (outer, m, inner)
void CpuBackend::index_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t outer,
                           int64_t inner) {
  const int64_t m = index.numel();
  const int64_t n = outer * inner > 0 ? out.numel() / (outer * inner) : 0;
  const int64_t* ix = index.data<int64_t>();
  dispatch_numeric(out.dtype(), "index_add", [&]<class T>() {
    T* y = out.data<T>();
    const T* x = src.data<T>();
    for_outer_inner_blocks(outer, inner, m, [&](int64_t o, int64_t i0, int64_t i1) {
      for (int64_t j = 0; j < m; ++j) {
        T* dst = y + (o * n + ix[j]) * inner;
        const T* s = x + (o * m + j) * inner;
        for (int64_t i = i0; i < i1; ++i) dst[i] += s[i];
      }
    });
  });
}

// a: (outer, n, inner), index and out: (outer, m, inner)
void CpuBackend::gather(const Tensor& a, const Tensor& index, const Tensor& out, int64_t outer,
                        int64_t inner) {
  const int64_t m = outer * inner > 0 ? out.numel() / (outer * inner) : 0;
  const int64_t n = outer * inner > 0 ? a.numel() / (outer * inner) : 0;
  const int64_t* ix = index.data<int64_t>();
  dispatch_all_and_half(a.dtype(), "gather", [&]<class T>() {
    const T* x = a.data<T>();
    T* y = out.data<T>();
    parallel_rows(outer * m, inner, [&](int64_t oj) {
      int64_t o = oj / m;
      const T* base = x + o * n * inner;
      const int64_t* row = ix + oj * inner;
      T* dst = y + oj * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] = base[row[i] * inner + i];
    });
  });
}

// out: (outer, n, inner), index and src: (outer, m, inner)
void CpuBackend::scatter_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t outer,
                             int64_t inner) {
  const int64_t m = outer * inner > 0 ? src.numel() / (outer * inner) : 0;
  const int64_t n = outer * inner > 0 ? out.numel() / (outer * inner) : 0;
  const int64_t* ix = index.data<int64_t>();
  dispatch_numeric(out.dtype(), "scatter_add", [&]<class T>() {
    T* y = out.data<T>();
    const T* x = src.data<T>();
    for_outer_inner_blocks(outer, inner, m, [&](int64_t o, int64_t i0, int64_t i1) {
      T* base = y + o * n * inner;
      for (int64_t j = 0; j < m; ++j) {
        const int64_t* row = ix + (o * m + j) * inner;
        const T* s = x + (o * m + j) * inner;
        for (int64_t i = i0; i < i1; ++i) base[row[i] * inner + i] += s[i];
      }
    });
  });
}

}  // namespace saccade::cpu
