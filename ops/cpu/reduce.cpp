// CPU reductions. a: contiguous, viewed as (outer, k, inner); out: (outer, inner).
#include <cmath>
#include <limits>

#include "ops/cpu/backend.h"
#include "ops/cpu/loop.h"

namespace saccade::cpu {

namespace {

template <class T>
T combine(ReduceOp op, T acc, T x) {
  switch (op) {
    case ReduceOp::Sum: return acc + x;
    case ReduceOp::Prod: return acc * x;
    case ReduceOp::Max: return (acc != acc || acc >= x) ? acc : x;  // NaN propagates
    case ReduceOp::Min: return (acc != acc || acc <= x) ? acc : x;
  }
  return acc;
}

template <class T>
T identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return T(0);
    case ReduceOp::Prod: return T(1);
    case ReduceOp::Max: return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                                    : std::numeric_limits<T>::lowest();
    case ReduceOp::Min: return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                                    : std::numeric_limits<T>::max();
  }
  return T(0);
}

}  // namespace

void CpuBackend::reduce(ReduceOp op, const Tensor& a, const Tensor& out, int64_t outer, int64_t k,
                        int64_t inner) {
  dispatch_all(a.dtype(), "reduce", [&]<class T>() {
    const T* x = a.data<T>();
    T* y = out.data<T>();
    // float32 sums accumulate in double: long rows stay accurate.
    using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
    if (inner == 1) {
      parallel_for(outer, k, [&](int64_t o) {
        const T* row = x + o * k;
        Acc acc = identity<Acc>(op);
        if (op == ReduceOp::Sum) {
          for (int64_t j = 0; j < k; ++j) acc += row[j];
        } else {
          for (int64_t j = 0; j < k; ++j) acc = combine<Acc>(op, acc, row[j]);
        }
        y[o] = static_cast<T>(acc);
      });
      return;
    }
    parallel_for(outer, k * inner, [&](int64_t o) {
      T* dst = y + o * inner;
      const T* src = x + o * k * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] = identity<T>(op);
      for (int64_t j = 0; j < k; ++j) {
        const T* r = src + j * inner;
        if (op == ReduceOp::Sum) {
          for (int64_t i = 0; i < inner; ++i) dst[i] += r[i];
        } else {
          for (int64_t i = 0; i < inner; ++i) dst[i] = combine<T>(op, dst[i], r[i]);
        }
      }
    });
  });
}

void CpuBackend::arg_reduce(ReduceOp op, const Tensor& a, const Tensor& values, const Tensor& indices,
                            int64_t outer, int64_t k, int64_t inner) {
  dispatch_all(a.dtype(), "arg_reduce", [&]<class T>() {
    const T* x = a.data<T>();
    T* v = values.data<T>();
    int64_t* ix = indices.data<int64_t>();
    const bool is_max = op == ReduceOp::Max;
    parallel_for(outer * inner, k, [&](int64_t oi) {
      int64_t o = oi / inner, i = oi % inner;
      const T* src = x + o * k * inner + i;
      T best = src[0];
      int64_t arg = 0;
      for (int64_t j = 1; j < k && best == best; ++j) {
        T c = src[j * inner];
        if (c != c || (is_max ? c > best : c < best)) best = c, arg = j;
      }
      v[oi] = best;
      ix[oi] = arg;
    });
  });
}

}  // namespace saccade::cpu
