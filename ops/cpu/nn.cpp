// CPU kernels of the nn primitives: softmax / log-softmax and layer norm, forward and backward.
// Every tensor is contiguous and row-major; a "row" is the last (normalised) axis; parallel over rows.
// float32 rows accumulate their sums in double. Each row runs at the machine's vector width (with_isa,
// simd.h).
//
// Shapes: softmax: x, out, y, gy, gx (rows, n); layer_norm: x, out, gy, gx (rows, n), weight, bias, gweight,
// gbias (n) or undefined, mean, rstd (rows) float. RMSNorm is layer_norm with mean undefined: no centring.
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/backend.h"
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

// x, out: (rows, n); weight, bias: (n) or undefined; mean, rstd: (rows)
//   y = (x - μ) · rstd · w + b,   μ = mean(x),  rstd = 1 / sqrt(var(x) + eps)   (biased variance)
void CpuBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                            const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  const int64_t rows = rstd.numel(), n = x.shape().back();
  dispatch_floating(x.dtype(), "layer_norm", [&]<class T>() {
    const T* px = x.data<T>();
    const T* w = weight.defined() ? weight.data<T>() : nullptr;
    const T* b = bias.defined() ? bias.data<T>() : nullptr;
    T* py = out.data<T>();
    T* pm = mean.defined() ? mean.data<T>() : nullptr;  // null: RMSNorm, μ = 0
    T* pr = rstd.data<T>();
    parallel_rows(rows, n, [&](int64_t r) {
      with_isa([&] {
        const T* xr = px + r * n;
        T* yr = py + r * n;
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
          for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
        } else if (w) {
          for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * rs * w[i];
        } else if (b) {
          for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * rs + b[i];
        } else {
          for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * rs;
        }
      });
    });
  });
}

// gy, x, gx: (rows, n); weight, gweight, gbias: (n) or undefined; mean, rstd: (rows)
//   x̂ = (x - μ) rstd,  ĝ = gy ⊙ w:
//   gx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ ⊙ x̂)),   gw = Σ_rows gy ⊙ x̂,   gb = Σ_rows gy
void CpuBackend::layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& weight,
                                     const Tensor& mean, const Tensor& rstd, const Tensor& gx,
                                     const Tensor& gweight, const Tensor& gbias) {
  const int64_t rows = rstd.numel(), n = x.shape().back();
  const bool centred = mean.defined();  // false: RMSNorm (μ = 0, and no mean(ĝ) term)
  dispatch_floating(x.dtype(), "layer_norm_backward", [&]<class T>() {
    const T* pg = gy.data<T>();
    const T* px = x.data<T>();
    const T* w = weight.defined() ? weight.data<T>() : nullptr;
    const T* pm = centred ? mean.data<T>() : nullptr;  // null: μ = 0
    const T* pr = rstd.data<T>();
    if (gx.defined()) {
      T* pgx = gx.data<T>();
      parallel_rows(rows, n, [&](int64_t r) {
        // NOTE: the lambda copies its arguments: through captured references GCC 12 left the sums scalar
        // (a dependent double add per element, 2.3 % of the GPT's bf16 step)
        with_isa([=, gr = pg + r * n, xr = px + r * n, out = pgx + r * n, m = pm ? pm[r] : T(0), rs = pr[r]] {
          const T* __restrict g = gr;
          const T* __restrict xx = xr;
          T* __restrict o = out;
          // ĝ = gy ⊙ w (w = 1 when undefined), with the weight's branch outside the loops: the row's two
          // means, then its gradient
          auto row_grad = [&](auto ghat) {
            acc_t<T> sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
            for (int64_t i = 0; i < n; ++i) {
              const T gh = ghat(i);
              sg += gh;
              sgx += acc_t<T>(gh) * ((xx[i] - m) * rs);
            }
            const T mg = centred ? static_cast<T>(sg / static_cast<acc_t<T>>(n)) : T(0),
                    mgx = static_cast<T>(sgx / static_cast<acc_t<T>>(n));
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) o[i] = rs * (ghat(i) - mg - (xx[i] - m) * rs * mgx);
          };
          if (w) {
            const T* __restrict wv = w;
            row_grad([=](int64_t i) { return g[i] * wv[i]; });
          } else {
            row_grad([=](int64_t i) { return g[i]; });
          }
        });
      });
    }
    if (!gweight.defined() && !gbias.defined()) return;
    // column sums over rows: partial sums of fixed chunks of kRows rows (one task per chunk), then the
    // chunks added in order, so that the result does not depend on the thread count. (One task per block of
    // columns ran the GPT's n = 128 on one thread.)
    T* pgw = gweight.defined() ? gweight.data<T>() : nullptr;
    T* pgb = gbias.defined() ? gbias.data<T>() : nullptr;
    using A = acc_t<T>;
    constexpr int64_t kRows = 256;
    const int64_t chunks = (rows + kRows - 1) / kRows;
    std::vector<A> pw(pgw ? chunks * n : 0, A(0)), pb(pgb ? chunks * n : 0, A(0));
    parallel_rows(chunks, kRows * n, [&](int64_t ch) {
      with_isa([&] {
        A* __restrict aw = pgw ? pw.data() + ch * n : nullptr;
        A* __restrict ab = pgb ? pb.data() + ch * n : nullptr;
        for (int64_t r = ch * kRows; r < std::min(rows, (ch + 1) * kRows); ++r) {
          const T* __restrict gr = pg + r * n;
          const T* __restrict xr = px + r * n;
          const T m = pm ? pm[r] : T(0), rs = pr[r];
          if (aw) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) aw[i] += A(gr[i]) * ((xr[i] - m) * rs);
          }
          if (ab) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) ab[i] += gr[i];
          }
        }
      });
    });
    for (int64_t i = 0; i < n; ++i) {
      A w = 0, b = 0;
      for (int64_t ch = 0; ch < chunks; ++ch) {
        if (pgw) w += pw[ch * n + i];
        if (pgb) b += pb[ch * n + i];
      }
      if (pgw) pgw[i] = static_cast<T>(w);
      if (pgb) pgb[i] = static_cast<T>(b);
    }
  });
}

}  // namespace saccade::cpu
