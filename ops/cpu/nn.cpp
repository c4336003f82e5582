// CPU kernels of the nn primitives: softmax / log-softmax and layer norm, forward and backward.
// Every tensor is contiguous and row-major; a "row" is the last (normalised) axis; parallel over rows.
// float32 rows accumulate their sums in double; layer norm takes 16-bit tensors natively (float32 inside).
// Each row runs at the machine's vector width (with_isa, simd.h).
//
// Shapes: softmax: x, out, y, gy, gx (rows, n); layer_norm: x, out, gy, gx (rows, n), weight, bias, gweight,
// gbias (n) or undefined, mean, rstd (rows) float. RMSNorm is layer_norm with mean undefined: no centring.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/backend.h"
#include "ops/cpu/bf16_lanes.h"
#include "ops/cpu/loop.h"
#include "ops/cpu/simd.h"
#include "ops/elementwise_math.h"

namespace saccade::cpu {

// e^x for x <= 0 (x - max of a row, a log-probability; NaN gives 0, and the row's sum then NaN): float takes
// the vectorisable math::exp_nonpositive (libm's expf is a call per element), double libm's exp.
template <class T>
inline T exp_nonpositive(T x) {
  if constexpr (std::is_same_v<T, float>)
    return math::exp_nonpositive(x);
  else
    return std::exp(x);
}

// x, out: (rows, n)
void CpuBackend::softmax(const Tensor& x, const Tensor& out, bool log) {
  const int64_t rows = x.shape()[0], n = x.shape()[1];
  dispatch_floating(x.dtype(), "softmax", [&]<class T>() {
    const T* px = x.data<T>();
    T* py = out.data<T>();
    parallel_rows(rows, n, [&](int64_t r) {
      with_isa([&] {
        const T* xr = px + r * n;
        T* yr = py + r * n;
        T m = -std::numeric_limits<T>::infinity();
        int nans = 0;  // (an int sum and a max reduction vectorise; the bool || chain stayed scalar)
#pragma omp simd reduction(max : m) reduction(+ : nans)
        for (int64_t i = 0; i < n; ++i) {
          m = xr[i] > m ? xr[i] : m;
          nans += xr[i] != xr[i];
        }
        const bool nan = nans > 0;
        if (m == -std::numeric_limits<T>::infinity() && !nan) {
          // NOTE: a fully masked row (all -inf) gives zeros, not NaN (its gradient is then zero too).
          for (int64_t i = 0; i < n; ++i) yr[i] = T(0);
          return;
        }
        if (nan) m = std::numeric_limits<T>::quiet_NaN();  // NaN propagates to the whole row, as in PyTorch
        acc_t<T> s = 0;
        if (log) {
#pragma omp simd reduction(+ : s)
          for (int64_t i = 0; i < n; ++i) s += exp_nonpositive(xr[i] - m);
        } else {
#pragma omp simd reduction(+ : s)
          for (int64_t i = 0; i < n; ++i) s += yr[i] = exp_nonpositive(xr[i] - m);
        }
        if (log) {
          const T shift = m + static_cast<T>(std::log(s));
          for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] - shift;
        } else {
          const T inv = static_cast<T>(acc_t<T>(1) / s);
          for (int64_t i = 0; i < n; ++i) yr[i] *= inv;
        }
      });
    });
  });
}

// y, gy, gx: (rows, n)
//   softmax:      gx = y ⊙ (gy - Σ_j gy_j y_j)
//   log-softmax:  gx = gy - exp(y) Σ_j gy_j
void CpuBackend::softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& gx, bool log) {
  const int64_t rows = y.shape()[0], n = y.shape()[1];
  dispatch_floating(y.dtype(), "softmax_backward", [&]<class T>() {
    const T* py = y.data<T>();
    const T* pg = gy.data<T>();
    T* pgx = gx.data<T>();
    parallel_rows(rows, n, [&](int64_t r) {
      with_isa([&] {
        const T* yr = py + r * n;
        const T* gr = pg + r * n;
        T* out = pgx + r * n;
        acc_t<T> dot = 0;
        if (log) {
#pragma omp simd reduction(+ : dot)
          for (int64_t i = 0; i < n; ++i) dot += gr[i];
          const T d = static_cast<T>(dot);
          for (int64_t i = 0; i < n; ++i) out[i] = gr[i] - exp_nonpositive(yr[i]) * d;
        } else {
#pragma omp simd reduction(+ : dot)
          for (int64_t i = 0; i < n; ++i) dot += acc_t<T>(gr[i]) * yr[i];
          const T d = static_cast<T>(dot);
          for (int64_t i = 0; i < n; ++i) out[i] = yr[i] * (gr[i] - d);
        }
      });
    });
  });
}

namespace {

// The (n) affine vector of a layer norm in its compute type: its own data for float32 / float64, a widened
// copy in `keep` for 16 bits, null when undefined.
template <class S>
const compute_t<S>* affine_in(const Tensor& t, std::vector<compute_t<S>>& keep) {
  if (!t.defined()) return nullptr;
  if constexpr (std::is_same_v<S, compute_t<S>>) {
    return t.data<S>();
  } else {
    const S* p = t.data<S>();
    keep.resize(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = lane_load(p[i]);
    return keep.data();
  }
}

// `to` (n) = the compute-type row `from` of storage type S, or `from` itself when S is the compute type.
template <class S>
inline const compute_t<S>* widened(const S* from, compute_t<S>* to, int64_t n) {
  if constexpr (std::is_same_v<S, compute_t<S>>) {
    return from;
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) to[i] = lane_load(from[i]);
    return to;
  }
}

// `to` (n) of storage type S = the compute-type row `from`, each element rounded once (nothing to do when S
// is the compute type: the row was computed in place).
template <class S>
inline void rounded(const compute_t<S>* from, S* to, int64_t n) {
  if constexpr (!std::is_same_v<S, compute_t<S>>) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) to[i] = lane_store<S>(from[i]);
  }
}

}  // namespace

// x, out: (rows, n); weight, bias: (n) or undefined; mean, rstd: (rows), compute_t of x
//   y = (x - μ) · rstd · w + b,   μ = mean(x),  rstd = 1 / sqrt(var(x) + eps)   (biased variance)
// 16-bit x, weight, bias and out are loaded and stored as 16 bits (a row widened into a float32 buffer, the
// float32 row code, the row rounded once): the numbers of the float32 kernel on widened copies, in one pass
// over memory.
void CpuBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                            const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  const int64_t rows = rstd.numel(), n = x.shape().back();
  dispatch_floating_and_half(x.dtype(), "layer_norm", [&]<class S>() {
    using T = compute_t<S>;
    constexpr bool narrow = !std::is_same_v<S, T>;
    std::vector<T> wk, bk;
    const T* w = affine_in<S>(weight, wk);
    const T* b = affine_in<S>(bias, bk);
    const S* px = x.data<S>();
    S* py = out.data<S>();
    T* pm = mean.defined() ? mean.data<T>() : nullptr;  // null: RMSNorm, μ = 0
    T* pr = rstd.data<T>();
    parallel_for(0, rows, (kGrain + n - 1) / (n > 0 ? n : 1), [&](int64_t begin, int64_t end) {
      std::vector<T> buf(narrow ? 2 * static_cast<size_t>(n) : 0);  // a row of x, a row of out
      // NOTE: the lambda copies its arguments: through captured references GCC 12 left the sums scalar
      with_isa([=, xbuf = buf.data(), ybuf = buf.data() + (narrow ? n : 0)] {
        for (int64_t r = begin; r < end; ++r) {
          const T* __restrict xr = widened(px + r * n, xbuf, n);
          T* __restrict yr = narrow ? ybuf : reinterpret_cast<T*>(py + r * n);
          // two passes in double: exact enough for float32 rows of any length; the sums in vector lanes
          // (without the pragma each was a serial chain of dependent adds: 4 cycles an element)
          double s = 0;
          if (pm) {
#pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < n; ++i) s += xr[i];
          }
          const double mu = n > 0 ? s / static_cast<double>(n) : 0.0;
          double ss = 0;
#pragma omp simd reduction(+ : ss)
          for (int64_t i = 0; i < n; ++i) {
            const double d = xr[i] - mu;
            ss += d * d;
          }
          const double var = n > 0 ? ss / static_cast<double>(n) : 0.0;
          const T m = static_cast<T>(mu), rs = static_cast<T>(1.0 / std::sqrt(var + eps));
          if (pm) pm[r] = m;
          pr[r] = rs;
          if (w && b) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
          } else if (w) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * rs * w[i];
          } else if (b) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * rs + b[i];
          } else {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * rs;
          }
          rounded<S>(yr, py + r * n, n);
        }
      });
    });
  });
}

// gy, x, gx: (rows, n); weight, gweight, gbias: (n) or undefined; mean, rstd: (rows), compute_t of x
//   x̂ = (x - μ) rstd,  ĝ = gy ⊙ w:
//   gx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ ⊙ x̂)),   gw = Σ_rows gy ⊙ x̂,   gb = Σ_rows gy
// One pass over memory: a task takes a chunk of rows, and each row, while it is in cache, gives its gx and
// its terms of the chunk's partial column sums (gw, gb); the chunks' partials are added in order, so the
// result does not depend on the thread count. 16-bit tensors are loaded and stored as 16 bits, as in
// layer_norm: the float32 kernel's numbers.
void CpuBackend::layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& weight,
                                     const Tensor& mean, const Tensor& rstd, const Tensor& gx,
                                     const Tensor& gweight, const Tensor& gbias) {
  const int64_t rows = rstd.numel(), n = x.shape().back();
  const bool centred = mean.defined();  // false: RMSNorm (μ = 0, and no mean(ĝ) term)
  if (!gx.defined() && !gweight.defined() && !gbias.defined()) return;
  dispatch_floating_and_half(x.dtype(), "layer_norm_backward", [&]<class S>() {
    using T = compute_t<S>;
    using A = acc_t<T>;
    constexpr bool narrow = !std::is_same_v<S, T>;
    std::vector<T> wk;
    const T* w = affine_in<S>(weight, wk);
    const S* pg = gy.data<S>();
    const S* px = x.data<S>();
    S* pgx = gx.defined() ? gx.data<S>() : nullptr;
    const T* pm = centred ? mean.data<T>() : nullptr;  // null: μ = 0
    const T* pr = rstd.data<T>();
    S* pgw = gweight.defined() ? gweight.data<S>() : nullptr;
    S* pgb = gbias.defined() ? gbias.data<S>() : nullptr;
    // Chunks of up to 256 rows, at least 16 of them when there are 16 rows (the threads' share of the gx
    // rows); the chunk size depends on the shape only.
    const int64_t chunk_rows = std::clamp<int64_t>((rows + 15) / 16, 1, 256);
    const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
    std::vector<A> pw(pgw ? chunks * n : 0, A(0)), pb(pgb ? chunks * n : 0, A(0));
    parallel_rows(chunks, chunk_rows * n, [&](int64_t ch) {
      std::vector<T> buf(narrow ? 3 * static_cast<size_t>(n) : 0);  // rows of gy, x and gx
      // NOTE: the lambda copies its arguments: through captured references GCC 12 left the sums scalar
      // (a dependent double add per element, 2.3 % of the GPT's bf16 step)
      with_isa([=, aw = pgw ? pw.data() + ch * n : nullptr, ab = pgb ? pb.data() + ch * n : nullptr,
                gbuf = buf.data(), xbuf = buf.data() + (narrow ? n : 0),
                obuf = buf.data() + (narrow ? 2 * n : 0)] {
        for (int64_t r = ch * chunk_rows; r < std::min(rows, (ch + 1) * chunk_rows); ++r) {
          const T* __restrict g = widened(pg + r * n, gbuf, n);
          const T* __restrict xx = widened(px + r * n, xbuf, n);
          const T m = pm ? pm[r] : T(0), rs = pr[r];
          if (pgx) {
            T* __restrict o = narrow ? obuf : reinterpret_cast<T*>(pgx + r * n);
            // ĝ = gy ⊙ w (w = 1 when undefined), with the weight's branch outside the loops: the row's two
            // means, then its gradient
            auto row_grad = [&](auto ghat) {
              A sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
              for (int64_t i = 0; i < n; ++i) {
                const T gh = ghat(i);
                sg += gh;
                sgx += A(gh) * ((xx[i] - m) * rs);
              }
              const T mg = centred ? static_cast<T>(sg / static_cast<A>(n)) : T(0),
                      mgx = static_cast<T>(sgx / static_cast<A>(n));
#pragma omp simd
              for (int64_t i = 0; i < n; ++i) o[i] = rs * (ghat(i) - mg - (xx[i] - m) * rs * mgx);
            };
            if (w) {
              const T* __restrict wv = w;
              row_grad([=](int64_t i) { return g[i] * wv[i]; });
            } else {
              row_grad([=](int64_t i) { return g[i]; });
            }
            rounded<S>(o, pgx + r * n, n);
          }
          if (aw) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) aw[i] += A(g[i]) * ((xx[i] - m) * rs);
          }
          if (ab) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) ab[i] += g[i];
          }
        }
      });
    });
    for (int64_t i = 0; i < n; ++i) {
      A sw = 0, sb = 0;
      for (int64_t ch = 0; ch < chunks; ++ch) {
        if (pgw) sw += pw[ch * n + i];
        if (pgb) sb += pb[ch * n + i];
      }
      if (pgw) pgw[i] = lane_store<S>(static_cast<T>(sw));
      if (pgb) pgb[i] = lane_store<S>(static_cast<T>(sb));
    }
  });
}

}  // namespace saccade::cpu
