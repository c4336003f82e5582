#pragma once
// The one strided iterator every CPU elementwise kernel uses. Broadcasting was already resolved by the op
// (inputs are expanded views, stride 0 on broadcast dims); this walks N operands of one shape together.
//
//   for_each<N>(shape, {ptr0, ptr1, ...}, {tensor0, tensor1, ...}, body)
//
// It coalesces dims that are contiguous in every operand, then calls body(ptrs, inner_strides, n) once per
// innermost run: ptrs[k] points at run start of operand k, inner_strides[k] is its byte stride in the run.
// A body checks `inner_strides[k] == sizeof(T)` to take a contiguous (vectorisable) fast path.
// Runs are split across the pool's threads (ops/cpu/thread_pool.h), one thread per `kGrain` elements.
#include <array>
#include <cstdint>

#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace saccade::cpu {

/// Elements worth waking one more thread for: enough work for a simple kernel to outweigh a wake-up and a
/// sleeping sibling's scheduling delay (a smaller grain made 2 threads slower than 1 on bench/caption_step;
/// bench/RESULTS.md, "2026-11-23 — attention, caption_step, ddp", has the figures).
constexpr int64_t kGrain = 131072;

template <int N, class Body>
void for_each(const Shape& shape, std::array<const Tensor*, N> ts, Body&& body) {
  // NOTE: an empty tensor returns before any byte stride is formed: its other dims may be huge (a (0, 2^62)
  // int64 tensor is valid) and stride * itemsize would overflow.
  const int64_t numel = shape.numel();
  if (numel == 0) return;
  // Byte strides per operand, dropping size-1 dims and merging dims contiguous in every operand.
  int nd = 0;
  int64_t size[kMaxDims];
  int64_t st[N][kMaxDims];
  std::array<char*, N> base;
  for (int k = 0; k < N; ++k) base[k] = static_cast<char*>(ts[k]->raw_data());
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = nd > 0;
    for (int k = 0; k < N && merge; ++k)
      merge = st[k][nd - 1] == ts[k]->strides()[d] * shape[d] * static_cast<int64_t>(ts[k]->itemsize());
    if (merge) {
      size[nd - 1] *= shape[d];
      for (int k = 0; k < N; ++k)
        st[k][nd - 1] = ts[k]->strides()[d] * static_cast<int64_t>(ts[k]->itemsize());
    } else {
      size[nd] = shape[d];
      for (int k = 0; k < N; ++k) st[k][nd] = ts[k]->strides()[d] * static_cast<int64_t>(ts[k]->itemsize());
      ++nd;
    }
  }
  if (nd == 0) {  // a single element
    std::array<int64_t, N> s{};
    body(base.data(), s.data(), int64_t{1});
    return;
  }
  const int64_t inner = size[nd - 1];
  std::array<int64_t, N> inner_st;
  for (int k = 0; k < N; ++k) inner_st[k] = st[k][nd - 1];
  const int64_t outer = numel / inner;

  auto run = [&](int64_t begin, int64_t end) {
    // multi-index of outer position `begin` over dims [0, nd-1)
    int64_t idx[kMaxDims] = {};
    int64_t rem = begin;
    for (int d = nd - 2; d >= 0; --d) idx[d] = rem % size[d], rem /= size[d];
    std::array<char*, N> p;
    for (int k = 0; k < N; ++k) {
      p[k] = base[k];
      for (int d = 0; d < nd - 1; ++d) p[k] += idx[d] * st[k][d];
    }
    for (int64_t o = begin; o < end; ++o) {
      body(p.data(), inner_st.data(), inner);
      for (int d = nd - 2; d >= 0; --d) {  // odometer increment
        for (int k = 0; k < N; ++k) p[k] += st[k][d];
        if (++idx[d] < size[d]) break;
        for (int k = 0; k < N; ++k) p[k] -= st[k][d] * size[d];
        idx[d] = 0;
      }
    }
  };

  if (outer == 1) {  // one long run: split it
    parallel_for(0, inner, kGrain, [&](int64_t b, int64_t e) {
      std::array<char*, N> p;
      for (int k = 0; k < N; ++k) p[k] = base[k] + b * inner_st[k];
      body(p.data(), inner_st.data(), e - b);
    });
  } else {
    parallel_for(0, outer, (kGrain + inner - 1) / inner, run);
  }
}

/// Parallel loop over rows (or planes, or any independent items) [0, rows): f(r) for each row r; serial below
/// kGrain elements' worth of rows costing `cost_per_row` elements each, else one thread per kGrain elements.
/// It splits rows; parallel_for of ops/cpu/thread_pool.h splits a range into [b, e) chunks, on which this is
/// built.
template <class F>
void parallel_rows(int64_t rows, int64_t cost_per_row, F&& f) {
  const int64_t n = rows, cost = cost_per_row < 1 ? 1 : cost_per_row;
  parallel_for(0, n, (kGrain + cost - 1) / cost, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

}  // namespace saccade::cpu
