#pragma once
// The one strided iterator every CPU elementwise kernel uses. Broadcasting was already resolved by the op
// (inputs are expanded views, stride 0 on broadcast dims); this walks N operands of one shape together.
//
//   for_each<N>(shape, {ptr0, ptr1, ...}, {tensor0, tensor1, ...}, body)
//
// It coalesces dims that are contiguous in every operand, then calls body(ptrs, inner_strides, n) once per
// innermost run: ptrs[k] points at run start of operand k, inner_strides[k] is its byte stride in the run.
// A body checks `inner_strides[k] == sizeof(T)` to take a contiguous (vectorisable) fast path.
// Runs are split across OpenMP threads when there are at least `kGrain` elements.
#include <omp.h>

#include <array>
#include <cstdint>

#include "ops/tensor.h"

namespace saccade::cpu {

constexpr int64_t kGrain = 32768;

template <int N, class Body>
void for_each(const Shape& shape, std::array<const Tensor*, N> ts, Body&& body) {
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
      for (int k = 0; k < N; ++k) st[k][nd - 1] = ts[k]->strides()[d] * static_cast<int64_t>(ts[k]->itemsize());
    } else {
      size[nd] = shape[d];
      for (int k = 0; k < N; ++k) st[k][nd] = ts[k]->strides()[d] * static_cast<int64_t>(ts[k]->itemsize());
      ++nd;
    }
  }
  int64_t numel = shape.numel();
  if (numel == 0) return;
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

  if (numel < kGrain || omp_get_max_threads() == 1 || omp_in_parallel()) {
    run(0, outer);
  } else if (outer == 1) {  // one long run: split it
#pragma omp parallel
    {
      int nt = omp_get_num_threads(), t = omp_get_thread_num();
      int64_t b = inner * t / nt, e = inner * (t + 1) / nt;
      std::array<char*, N> p;
      for (int k = 0; k < N; ++k) p[k] = base[k] + b * inner_st[k];
      if (e > b) body(p.data(), inner_st.data(), e - b);
    }
  } else {
#pragma omp parallel
    {
      int nt = omp_get_num_threads(), t = omp_get_thread_num();
      int64_t b = outer * t / nt, e = outer * (t + 1) / nt;
      if (e > b) run(b, e);
    }
  }
}

/// Parallel loop over [0, n) in chunks, serial below `grain` iterations' worth of `cost_per_item` elements.
template <class F>
void parallel_for(int64_t n, int64_t cost_per_item, F&& f) {
  if (n * cost_per_item < kGrain || n == 1 || omp_in_parallel()) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) f(i);
}

}  // namespace saccade::cpu
