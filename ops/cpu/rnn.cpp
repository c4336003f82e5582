// CPU kernels of the GRU gates (ops::gru_gates), forward and backward: one pass over each row instead of the
// dozen elementwise ops of the composed step (nn::gru_gates_composed), parallel over rows, each row at the
// machine's vector width (with_isa, simd.h).
//
// Shapes: gi, gh, saved, ggi, ggh (B, 3H) laid out [r | z | n]; h, out, gy, gx_h (B, H); all contiguous.
#include <cmath>
#include <cstdint>

#include "ops/cpu/backend.h"
#include "ops/cpu/loop.h"
#include "ops/cpu/simd.h"
#include "ops/elementwise_math.h"

namespace saccade::cpu {

namespace {

// The elementwise work of one row, in units of kGrain (an add is 1 per element; a gate row is about 8 per
// element of h).
constexpr int64_t kGateCost = 8;

// σ(x) = 1 / (1 + e^-x). float: e = e^-|x| by the vectorisable math::exp_nonpositive (within about 1e-7, as
// libm's expf, which would be a call per element), then 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0:
// the numerator and NaN are chosen on the bits as integers, since GCC will not if-convert a float compare
// (math::tanh_float's note). double: the formula with libm's exp.
template <class T>
inline T sigmoid(T x) {
  if constexpr (std::is_same_v<T, float>) {
    const uint32_t bits = math::float_bits(x);
    const float e = math::exp_nonpositive(math::bits_float(bits | 0x80000000u));
    const uint32_t neg = 0u - (bits >> 31),
                   nan = 0u - static_cast<uint32_t>((bits & 0x7fffffffu) > 0x7f800000u);
    const float num = math::bits_float((math::float_bits(e) & neg) | (math::float_bits(1.0f) & ~neg));
    return math::bits_float(math::float_bits(num / (1.0f + e)) | (nan & 0x7fc00000u));
  } else {
    return T(1) / (T(1) + std::exp(-x));
  }
}

}  // namespace

// r = σ(gi_r + gh_r), z = σ(gi_z + gh_z), n = tanh(gi_n + r ⊙ gh_n), h' = n + z ⊙ (h - n)
void CpuBackend::gru_gates(const Tensor& gi, const Tensor& gh, const Tensor& h, const Tensor& out,
                           const Tensor& saved) {
  const int64_t B = h.size(0), H = h.size(1);
  dispatch_floating(h.dtype(), "gru_gates", [&]<class T>() {
    const T *pi = gi.data<T>(), *pg = gh.data<T>(), *ph = h.data<T>();
    T *py = out.data<T>(), *ps = saved.data<T>();
    parallel_rows(B, kGateCost * H, [&](int64_t b) {
      with_isa([&] {
        const T *i = pi + b * 3 * H, *g = pg + b * 3 * H, *hb = ph + b * H;
        T *r = ps + b * 3 * H, *z = r + H, *n = z + H, *y = py + b * H;
        const math::Tanh<T> tanh;
#pragma omp simd
        for (int64_t k = 0; k < H; ++k) {
          r[k] = sigmoid(i[k] + g[k]);
          z[k] = sigmoid(i[H + k] + g[H + k]);
          n[k] = tanh(i[2 * H + k] + r[k] * g[2 * H + k]);
          y[k] = n[k] + z[k] * (hb[k] - n[k]);
        }
      });
    });
  });
}

// a_n = gy (1 - z)(1 - n²), a_r = a_n gh_n r (1 - r), a_z = gy (h - n) z (1 - z):
// ggi = [a_r, a_z, a_n], ggh = [a_r, a_z, a_n r], gx_h = gy z. In double (it vectorises as well): float's
// roundings here doubled the largest parameter-gradient error against PyTorch in tests/test_rnn.cpp.
void CpuBackend::gru_gates_backward(const Tensor& gy, const Tensor& gh, const Tensor& h, const Tensor& saved,
                                    const Tensor& ggi, const Tensor& ggh, const Tensor& gx_h) {
  const int64_t B = h.size(0), H = h.size(1);
  dispatch_floating(h.dtype(), "gru_gates_backward", [&]<class T>() {
    const T *pgy = gy.data<T>(), *pg = gh.data<T>(), *ph = h.data<T>(), *ps = saved.data<T>();
    T *pgi = ggi.data<T>(), *pgg = ggh.data<T>(), *pdh = gx_h.data<T>();
    parallel_rows(B, kGateCost * H, [&](int64_t b) {
      with_isa([&] {
        const T *dy = pgy + b * H, *hb = ph + b * H, *gn = pg + b * 3 * H + 2 * H;
        const T *r = ps + b * 3 * H, *z = r + H, *n = z + H;
        T *di = pgi + b * 3 * H, *dg = pgg + b * 3 * H, *dh = pdh + b * H;
#pragma omp simd
        for (int64_t k = 0; k < H; ++k) {
          const double g = dy[k], rk = r[k], zk = z[k], nk = n[k];
          const double a_n = g * (1 - zk) * (1 - nk * nk);
          const T a_r = T(a_n * gn[k] * (rk * (1 - rk)));
          const T a_z = T(g * (hb[k] - nk) * (zk * (1 - zk)));
          di[k] = dg[k] = a_r;
          di[H + k] = dg[H + k] = a_z;
          di[2 * H + k] = T(a_n);
          dg[2 * H + k] = T(a_n * rk);
          dh[k] = dy[k] * z[k];
        }
      });
    });
  });
}

}  // namespace saccade::cpu
