// CPU kernels of the nn primitives: softmax / log-softmax, layer norm and RMSNorm, the cross-entropy's rows,
// forward and backward.
// Every tensor is contiguous and row-major; a "row" is the last (normalised) axis; parallel over rows.
// softmax's float32 rows accumulate their sums in double; layer norm sums in its compute type (float32 for
// float32 and the 16-bit dtypes, which it takes natively) in 16 fixed lanes.
// Each row runs at the machine's vector width (with_isa, simd.h).
//
// Shapes: softmax: x, out, y, gy, gx (rows, n); layer_norm: x, out, gy, gx (rows, n), weight, bias, gweight,
// gbias (n) or undefined, mean, rstd (rows) float; rms_norm: as layer_norm without bias, gbias and mean.
// Layer norm and RMSNorm share their row code (norm_rows, norm_backward_rows), RMSNorm's without the
// centring.
#include <algorithm>
#include <array>
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
        m = simd_max_result(m, xr, n);
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

constexpr int64_t kSumLanes = 16;  // one AVX-512 float vector, two AVX2 ones, four SSE ones

// The K sums Σ_{i<n} f(i)[k] in T (float32 for float32 and the 16-bit dtypes, double for float64; f returns
// std::array<T, K>), each in kSumLanes accumulators that take every kSumLanes-th term, the accumulators then
// added as a tree: one order, so the same bits, at every vector width and for every storage dtype (a 16-bit
// row's terms are its float32 twin's), which `#pragma omp simd reduction` does not promise. Error: about
// n / 16 + 4 roundings at worst, against n in one accumulator (PyTorch's CPU kernels sum in float lanes
// likewise, their opmath type for 16 bits).
template <class T, size_t K, class F>
inline std::array<T, K> lane_sums(int64_t n, F f) {
  static_assert(K == 1 || K == 2, "lane_sums: one or two sums");
  // two named accumulator rows, not acc[K][..] under a loop over k: with that inner loop GCC 12 left the
  // block loop scalar
  T a0[kSumLanes] = {}, a1[kSumLanes] = {};
  auto add = [&](int64_t i, int64_t j) {
    const std::array<T, K> t = f(i + j);
    a0[j] += t[0];
    if constexpr (K == 2) a1[j] += t[K - 1];
  };
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
#pragma omp simd
    for (int64_t j = 0; j < kSumLanes; ++j) add(i, j);
  }
  for (int64_t j = 0; i + j < n; ++j) add(i, j);
  for (int64_t w = kSumLanes / 2; w > 0; w /= 2)
    for (int64_t j = 0; j < w; ++j) a0[j] += a0[j + w], a1[j] += a1[j + w];
  if constexpr (K == 1)
    return {a0[0]};
  else
    return {a0[0], a1[0]};
}

// Σ_{i<n} f(i) in T, as lane_sums.
template <class T, class F>
inline T lane_sum(int64_t n, F f) {
  return lane_sums<T, 1>(n, [=](int64_t i) { return std::array<T, 1>{f(i)}; })[0];
}

// x, out: (rows, n); weight, bias: (n) or undefined; mean, rstd: (rows), compute_t of x
//   y = (x - μ) · rstd · w + b,   μ = mean(x),  rstd = 1 / sqrt(var(x) + eps)   (biased variance)
// mean undefined: RMSNorm (bias undefined too), μ = 0. NOTE: a run-time switch, not a template parameter:
// with μ a compile-time 0 the compiler folds `- μ` away and fuses the products into FMAs differently, and
// the last bits of RMSNorm's gradients changed (measured).
// 16-bit x, weight, bias and out are loaded and stored as 16 bits inside the float32 row code (each element
// widened exactly where it is read, each result rounded once where it is written): the numbers of the
// float32 kernel on widened copies, in one pass over memory. The statistics are summed in T (lane_sums).
void norm_rows(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
               const Tensor& mean, const Tensor& rstd, const char* op) {
  const int64_t rows = rstd.numel(), n = x.shape().back();
  dispatch_floating_and_half(x.dtype(), op, [&]<class S>() {
    using T = compute_t<S>;
    std::vector<T> wk, bk;
    const T* w = affine_in<S>(weight, wk);
    const T* b = affine_in<S>(bias, bk);
    const S* px = x.data<S>();
    S* py = out.data<S>();
    T* pm = mean.defined() ? mean.data<T>() : nullptr;  // null: RMSNorm, μ = 0
    T* pr = rstd.data<T>();
    parallel_for(0, rows, (kGrain + n - 1) / (n > 0 ? n : 1), [&](int64_t begin, int64_t end) {
      // NOTE: the lambda copies its arguments: through captured references GCC 12 left the sums scalar
      with_isa([=] {
        for (int64_t r = begin; r < end; ++r) {
          const S* __restrict xr = px + r * n;
          S* __restrict yr = py + r * n;
          // two passes (the mean, then the centred squares), summed in T's lanes (lane_sum)
          const T m = pm && n > 0 ? lane_sum<T>(n, [=](int64_t i) { return lane_load(xr[i]); }) / T(n) : T(0);
          const T ss = lane_sum<T>(n, [=](int64_t i) {
            const T d = lane_load(xr[i]) - m;
            return d * d;
          });
          const double var = n > 0 ? static_cast<double>(ss) / static_cast<double>(n) : 0.0;
          const T rs = static_cast<T>(1.0 / std::sqrt(var + eps));
          if (pm) pm[r] = m;
          pr[r] = rs;
          if (w && b) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) yr[i] = lane_store<S>((lane_load(xr[i]) - m) * rs * w[i] + b[i]);
          } else if (w) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) yr[i] = lane_store<S>((lane_load(xr[i]) - m) * rs * w[i]);
          } else if (b) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) yr[i] = lane_store<S>((lane_load(xr[i]) - m) * rs + b[i]);
          } else {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) yr[i] = lane_store<S>((lane_load(xr[i]) - m) * rs);
          }
        }
      });
    });
  });
}

// gy, x, gx: (rows, n); weight, gweight, gbias: (n) or undefined; mean, rstd: (rows), compute_t of x
//   x̂ = (x - μ) rstd,  ĝ = gy ⊙ w:
//   gx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ ⊙ x̂)),   gw = Σ_rows gy ⊙ x̂,   gb = Σ_rows gy
// mean undefined: RMSNorm's backward (gbias undefined too), μ = 0 and no mean(ĝ) term (a run-time switch, as
// in norm_rows).
// One pass over memory: a task takes a chunk of rows, and each row, while it is in cache, gives its gx and
// its terms of the chunk's partial column sums (gw, gb); the chunks' partials are added in order, so the
// result does not depend on the thread count. 16-bit tensors are loaded and stored as 16 bits, as in
// norm_rows: the float32 kernel's numbers.
void norm_backward_rows(const Tensor& gy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& gx, const Tensor& gweight, const Tensor& gbias,
                        const char* op) {
  const int64_t rows = rstd.numel(), n = x.shape().back();
  const bool centred = mean.defined();  // false: RMSNorm (μ = 0, and no mean(ĝ) term)
  if (!gx.defined() && !gweight.defined() && !gbias.defined()) return;
  dispatch_floating_and_half(x.dtype(), op, [&]<class S>() {
    using T = compute_t<S>;
    using A = acc_t<T>;  // the chunks' partials added in A
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
    // rows); the chunk size depends on the shape only. A chunk's partial column sums are in T (at most 256
    // terms each), the chunks' sums in A.
    const int64_t chunk_rows = std::clamp<int64_t>((rows + 15) / 16, 1, 256);
    const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
    std::vector<T> pw(pgw ? chunks * n : 0, T(0)), pb(pgb ? chunks * n : 0, T(0));
    parallel_rows(chunks, chunk_rows * n, [&](int64_t ch) {
      // NOTE: the lambda copies its arguments: through captured references GCC 12 left the sums scalar
      // (a dependent double add per element; bench/RESULTS.md, "figures moved out of code comments")
      with_isa([=, aw = pgw ? pw.data() + ch * n : nullptr, ab = pgb ? pb.data() + ch * n : nullptr] {
        for (int64_t r = ch * chunk_rows; r < std::min(rows, (ch + 1) * chunk_rows); ++r) {
          const S* __restrict g = pg + r * n;
          const S* __restrict xx = px + r * n;
          const T m = pm ? pm[r] : T(0), rs = pr[r];
          T* __restrict cw = aw;
          T* __restrict cb = ab;
          if (pgx) {
            // ĝ = gy ⊙ w (w = 1 when undefined), with the weight's branch outside the loops: the row's two
            // means (one pass, lane_sums), then its gradient and its terms of the column partials (a second)
            // (through unqualified pointers GCC kept the partials' loops scalar: an element a cycle and a
            // half)
            auto row_grad = [&](auto ghat) {
              const std::array<T, 2> s = lane_sums<T, 2>(n, [=](int64_t i) {
                const T gh = ghat(i);
                return std::array<T, 2>{gh, gh * ((lane_load(xx[i]) - m) * rs)};
              });
              const T mg = centred ? s[0] / T(n) : T(0), mgx = s[1] / T(n);
              S* __restrict o = pgx + r * n;
              T* __restrict pw_ = cw;
              T* __restrict pb_ = cb;
              auto gx_at = [=](int64_t i, T xh) { return lane_store<S>(rs * (ghat(i) - mg - xh * mgx)); };
              if (pw_ && pb_) {
#pragma omp simd
                for (int64_t i = 0; i < n; ++i) {
                  const T gi = lane_load(g[i]), xh = (lane_load(xx[i]) - m) * rs;
                  o[i] = gx_at(i, xh);
                  pw_[i] += gi * xh;
                  pb_[i] += gi;
                }
              } else if (pw_) {
#pragma omp simd
                for (int64_t i = 0; i < n; ++i) {
                  const T xh = (lane_load(xx[i]) - m) * rs;
                  o[i] = gx_at(i, xh);
                  pw_[i] += lane_load(g[i]) * xh;
                }
              } else if (pb_) {
#pragma omp simd
                for (int64_t i = 0; i < n; ++i) {
                  o[i] = gx_at(i, (lane_load(xx[i]) - m) * rs);
                  pb_[i] += lane_load(g[i]);
                }
              } else {
#pragma omp simd
                for (int64_t i = 0; i < n; ++i) o[i] = gx_at(i, (lane_load(xx[i]) - m) * rs);
              }
            };
            if (w) {
              const T* __restrict wv = w;
              row_grad([=](int64_t i) { return lane_load(g[i]) * wv[i]; });
            } else {
              row_grad([=](int64_t i) { return lane_load(g[i]); });
            }
            continue;
          }
          // no gx: the column partials alone
          if (cw && cb) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) {
              const T gi = lane_load(g[i]);
              cw[i] += gi * ((lane_load(xx[i]) - m) * rs);
              cb[i] += gi;
            }
          } else if (cw) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) cw[i] += lane_load(g[i]) * ((lane_load(xx[i]) - m) * rs);
          } else if (cb) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) cb[i] += lane_load(g[i]);
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

}  // namespace

void CpuBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                            const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  norm_rows(x, weight, bias, eps, out, mean, rstd, "layer_norm");
}

void CpuBackend::layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& weight,
                                     const Tensor& mean, const Tensor& rstd, const Tensor& gx,
                                     const Tensor& gweight, const Tensor& gbias) {
  norm_backward_rows(gy, x, weight, mean, rstd, gx, gweight, gbias, "layer_norm_backward");
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& out,
                          const Tensor& rstd) {
  norm_rows(x, weight, Tensor(), eps, out, Tensor(), rstd, "rms_norm");
}

void CpuBackend::rms_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& weight,
                                   const Tensor& rstd, const Tensor& gx, const Tensor& gweight) {
  norm_backward_rows(gy, x, weight, Tensor(), rstd, gx, gweight, Tensor(), "rms_norm_backward");
}

// logits (rows, n); target (rows); lse, picked (rows), compute_t of logits
//   lse_r = m + log Σ_i e^(x_ri - m),  m = max_i x_ri;   picked_r = x_r[t_r] (0 when ignored)
// 16-bit logits are read as they are (each element widened where it is read): at a language model's
// vocabulary the logits are the largest tensor of a step, and this reads them twice without writing any
// (N, C) result. The sum runs in T's lanes (lane_sum). A row holding NaN gives NaN; one that is all -inf
// gives -inf.
void CpuBackend::cross_entropy_rows(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                    const Tensor& lse, const Tensor& picked) {
  const int64_t rows = logits.shape()[0], n = logits.shape()[1];
  const int64_t* pt = target.data<int64_t>();
  dispatch_floating_and_half(logits.dtype(), "cross_entropy", [&]<class S>() {
    using T = compute_t<S>;
    const S* px = logits.data<S>();
    T* pl = lse.data<T>();
    T* pp = picked.data<T>();
    parallel_for(0, rows, (kGrain + n - 1) / (n > 0 ? n : 1), [&](int64_t begin, int64_t end) {
      with_isa([=] {
        for (int64_t r = begin; r < end; ++r) {
          const S* __restrict xr = px + r * n;
          T m = -std::numeric_limits<T>::infinity();
          int nans = 0;
#pragma omp simd reduction(max : m) reduction(+ : nans)
          for (int64_t i = 0; i < n; ++i) {
            const T v = lane_load(xr[i]);
            m = v > m ? v : m;
            nans += v != v;
          }
          if (m == std::numeric_limits<T>::lowest()) {  // clang's simd max starts there (simd_max_result)
            bool real = false;
            for (int64_t i = 0; i < n && !real; ++i) real = lane_load(xr[i]) == m;
            if (!real) m = -std::numeric_limits<T>::infinity();
          }
          T l;
          if (nans > 0)
            l = std::numeric_limits<T>::quiet_NaN();
          else if (m == -std::numeric_limits<T>::infinity())
            l = m;
          else
            l = m + static_cast<T>(std::log(lane_sum<acc_t<T>>(
                        n, [=](int64_t i) { return acc_t<T>(exp_nonpositive(lane_load(xr[i]) - m)); })));
          pl[r] = l;
          pp[r] = pt[r] == ignore_index ? T(0) : lane_load(xr[pt[r]]);
        }
      });
    });
  });
}

// logits, gx (rows, n); target, lse, scale (rows)
//   gx_ri = scale_r (e^(x_ri - lse_r) - [i = t_r]),   0 on a row whose target is ignore_index
// one pass: each element read, its softmax formed and written once in the logits' dtype (rounded once)
void CpuBackend::cross_entropy_rows_backward(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                             const Tensor& lse, const Tensor& scale, const Tensor& gx) {
  const int64_t rows = logits.shape()[0], n = logits.shape()[1];
  const int64_t* pt = target.data<int64_t>();
  dispatch_floating_and_half(logits.dtype(), "cross_entropy_backward", [&]<class S>() {
    using T = compute_t<S>;
    const S* px = logits.data<S>();
    const T* pl = lse.data<T>();
    const T* ps = scale.data<T>();
    S* pg = gx.data<S>();
    parallel_for(0, rows, (kGrain + n - 1) / (n > 0 ? n : 1), [&](int64_t begin, int64_t end) {
      with_isa([=] {
        for (int64_t r = begin; r < end; ++r) {
          const S* __restrict xr = px + r * n;
          S* __restrict gr = pg + r * n;
          const int64_t t = pt[r];
          if (t == ignore_index) {
            std::fill(gr, gr + n, lane_store<S>(T(0)));
            continue;
          }
          const T l = pl[r], s = ps[r];
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) gr[i] = lane_store<S>(s * exp_nonpositive(lane_load(xr[i]) - l));
          gr[t] = lane_store<S>(s * (exp_nonpositive(lane_load(xr[t]) - l) - T(1)));
        }
      });
    });
  });
}

}  // namespace saccade::cpu
