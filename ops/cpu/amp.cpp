// CPU kernels of loss scaling (ops/amp.h), as PyTorch's CPU _amp_foreach_non_finite_check_and_unscale_ and
// _amp_update_scale_.
//
//   grads: n contiguous tensors g_t (any floating dtypes)   found_inf, inv_scale, scale: float32 (1)
//
// The check and the unscale are one pass over all gradients together: the tensors are laid end to end as one
// range of Σ numel(g_t) elements that the pool splits (so a model of many small parameters still uses every
// thread), and each element is read and written once. A non-finite element is found without a branch in
// the loop: v · 0 is 0 for finite v and NaN for ±inf and NaN, so `probe += v · 0` ends NaN iff some element
// was not finite, and the loop vectorises (omp simd reduction).
#include <algorithm>
#include <atomic>
#include <cmath>

#include "ops/cpu/backend.h"
#include "ops/cpu/simd.h"
#include "ops/cpu/thread_pool.h"

namespace saccade::cpu {

namespace {

constexpr int64_t kGrain = int64_t{1} << 15;  // elements worth a thread's wake-up

// p[0, n) *= inv; returns true when some element was NaN or ±inf.
template <class T>
bool unscale_span(T* __restrict p, int64_t n, T inv) {
  return with_isa([&] {
    T probe = 0;
#pragma omp simd reduction(+ : probe)
    for (int64_t i = 0; i < n; ++i) {
      const T v = p[i];
      probe += v * T(0);
      p[i] = v * inv;
    }
    return probe != probe;
  });
}

}  // namespace

void CpuBackend::amp_non_finite_check_and_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                                  const Tensor& inv_scale) {
  const float inv = *inv_scale.data<float>();
  std::vector<int64_t> start(grads.size() + 1, 0);  // g_t covers [start[t], start[t + 1]) of the range
  for (size_t t = 0; t < grads.size(); ++t) start[t + 1] = start[t] + grads[t].numel();
  std::atomic<bool> found{false};
  parallel_for(0, start.back(), kGrain, [&](int64_t b, int64_t e) {
    bool bad = false;
    size_t t = std::upper_bound(start.begin(), start.end(), b) - start.begin() - 1;
    for (; b < e; ++t) {
      const int64_t stop = std::min(e, start[t + 1]), off = b - start[t];
      dispatch_floating(grads[t].dtype(), "amp_non_finite_check_and_unscale", [&]<class T>() {
        bad |= unscale_span(grads[t].data<T>() + off, stop - b, static_cast<T>(inv));
      });
      b = stop;
    }
    if (bad) found.store(true, std::memory_order_relaxed);
  });
  if (found.load()) *found_inf.data<float>() = 1.0f;
}

void CpuBackend::amp_update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                  double growth_factor, double backoff_factor, int64_t growth_interval) {
  float& s = *scale.data<float>();
  int64_t& tracker = *growth_tracker.data<int64_t>();
  if (*found_inf.data<float>() != 0.0f) {
    s *= static_cast<float>(backoff_factor);
    tracker = 0;
    return;
  }
  const int64_t successful = tracker + 1;
  if (successful == growth_interval) {
    const float grown = s * static_cast<float>(growth_factor);
    if (std::isfinite(grown)) s = grown;  // never grow into inf
    tracker = 0;
  } else {
    tracker = successful;
  }
}

}  // namespace saccade::cpu
