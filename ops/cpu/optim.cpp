// CPU kernels of the fused optimizer ops (ops/optim.h), twins of ops/cuda/optim.cu.
//
//   adam_step:   params, grads, exp_avgs, exp_avg_sqs: n contiguous tensors, entry t of one dtype
//   pow_sum:     tensors: contiguous float32/float64 -> out float64 ()
//   foreach_mul: tensors: contiguous floating, scale float64 (1)
//
// As ops/cpu/amp.cpp, each op walks the tensors laid end to end as one range of Σ numel elements that the
// pool splits (a model of many small parameters still uses every thread); each element is read and written
// once. pow_sum cuts the range into fixed blocks of kBlock elements and adds the blocks' float64 partials in
// block order, so its result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/backend.h"
#include "ops/cpu/simd.h"
#include "ops/cpu/thread_pool.h"
#include "ops/elementwise_math.h"

namespace saccade::cpu {

namespace {

constexpr int64_t kGrain = int64_t{1} << 15;  // elements worth a thread's wake-up
constexpr int64_t kBlock = int64_t{1} << 14;  // pow_sum's fixed blocks

// The end-to-end range of `ts`: tensor t covers [start[t], start[t + 1]).
std::vector<int64_t> starts(const std::vector<Tensor>& ts) {
  std::vector<int64_t> start(ts.size() + 1, 0);
  for (size_t t = 0; t < ts.size(); ++t) start[t + 1] = start[t] + ts[t].numel();
  return start;
}

// Calls span(t, off, len) for the pieces of [b, e) that fall in each tensor t, at offset off within it.
template <class F>
void for_spans(const std::vector<int64_t>& start, int64_t b, int64_t e, F&& span) {
  size_t t = std::upper_bound(start.begin(), start.end(), b) - start.begin() - 1;
  for (; b < e; ++t) {
    const int64_t stop = std::min(e, start[t + 1]);
    if (stop > b) span(t, b - start[t], stop - b);
    b = stop;
  }
}

// The update of ops::adam_foreach_step_ over one span (math::AdamUpdate: the element's arithmetic).
template <class T>
void adam_span(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, int64_t n,
               math::AdamUpdate<T> update) {
  // NOTE: the lambda copies its arguments: through captured references GCC 12 kept the loop scalar
  // (bench/RESULTS.md, "figures moved out of code comments")
  with_isa([=] {
    T* __restrict pp = p;
    const T* __restrict gg = g;
    T* __restrict mm = m;
    T* __restrict vv = v;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) update(pp[i], gg[i], mm[i], vv[i]);
  });
}

template <class T>
double pow_sum_span(const T* __restrict x, int64_t n, double p) {
  return with_isa([&] {
    double acc = 0;
    if (std::isinf(p)) {
      for (int64_t i = 0; i < n; ++i) {
        const double a = std::abs(static_cast<double>(x[i]));
        acc = (a > acc || a != a) ? a : acc;  // NaN wins, as ops::max
      }
    } else if (p == 2) {
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) acc += std::pow(std::abs(static_cast<double>(x[i])), p);
    }
    return acc;
  });
}

}  // namespace

void CpuBackend::adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                           const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                           const std::vector<double>& step_size, const std::vector<double>& bc2_sqrt,
                           const ops::AdamStepArgs& args) {
  const std::vector<int64_t> start = starts(params);
  parallel_for(0, start.back(), kGrain, [&](int64_t b, int64_t e) {
    for_spans(start, b, e, [&](size_t t, int64_t off, int64_t len) {
      dispatch_floating(params[t].dtype(), "adam_step", [&]<class T>() {
        math::AdamUpdate<T> update = math::AdamUpdate<T>::from(args);
        update.bc2 = static_cast<T>(bc2_sqrt[t]), update.neg_step = static_cast<T>(-step_size[t]);
        adam_span<T>(params[t].data<T>() + off, grads[t].data<T>() + off, exp_avgs[t].data<T>() + off,
                     exp_avg_sqs[t].data<T>() + off, len, update);
      });
    });
  });
}

void CpuBackend::pow_sum(const std::vector<Tensor>& tensors, double p, const Tensor& out) {
  const std::vector<int64_t> start = starts(tensors);
  const int64_t blocks = (start.back() + kBlock - 1) / kBlock;
  std::vector<double> partial(blocks, 0.0);
  parallel_for(0, blocks, std::max<int64_t>(1, kGrain / kBlock), [&](int64_t bb, int64_t be) {
    for (int64_t k = bb; k < be; ++k) {
      double acc = 0;
      for_spans(start, k * kBlock, std::min(start.back(), (k + 1) * kBlock),
                [&](size_t t, int64_t off, int64_t len) {
                  dispatch_floating(tensors[t].dtype(), "pow_sum", [&]<class T>() {
                    const double s = pow_sum_span(tensors[t].data<T>() + off, len, p);
                    acc = std::isinf(p) ? ((s > acc || s != s) ? s : acc) : acc + s;
                  });
                });
      partial[k] = acc;
    }
  });
  double total = 0;
  for (double s : partial) total = std::isinf(p) ? ((s > total || s != s) ? s : total) : total + s;
  *out.data<double>() = total;
}

void CpuBackend::foreach_mul(const std::vector<Tensor>& tensors, const Tensor& scale) {
  const double s = *scale.data<double>();
  const std::vector<int64_t> start = starts(tensors);
  parallel_for(0, start.back(), kGrain, [&](int64_t b, int64_t e) {
    for_spans(start, b, e, [&](size_t t, int64_t off, int64_t len) {
      dispatch_floating_and_half(tensors[t].dtype(), "foreach_mul", [&]<class T>() {
        T* x = tensors[t].data<T>() + off;
        if constexpr (std::is_floating_point_v<T>) {
          const T c = static_cast<T>(s);
          with_isa([&] {
#pragma omp simd
            for (int64_t i = 0; i < len; ++i) x[i] = x[i] * c;
          });
        } else {
          for (int64_t i = 0; i < len; ++i) x[i] = T(static_cast<float>(x[i]) * static_cast<float>(s));
        }
      });
    });
  });
}

}  // namespace saccade::cpu
