// CPU im2col / col2im and 2-d pooling. All tensors contiguous NCHW; each (n, c) plane is independent, so
// every kernel is one parallel_rows over N*C planes (no two iterations write the same memory).
// Window of output (oh, ow): input rows oh*sh - ph + [0, kh), columns ow*sw - pw + [0, kw).
//
// Shapes: x, gx: (N, C, H, W); cols: (N, C*kh*kw, OH*OW); out, gy, indices: (N, C, OH, OW), indices int64
// holding the flat h*W + w of each max.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/backend.h"
#include "ops/cpu/loop.h"

namespace saccade::cpu {

namespace {

int64_t out_size(int64_t in, int k, int s, int p) { return (in + 2 * p - k) / s + 1; }

// One (H, W) plane <-> its kh*kw rows of cols (each OH*OW long). Gather copies plane -> rows (zeros where the
// window is in the padding); scatter adds rows -> plane.
template <class T, bool kScatter>
void plane_cols(T* plane, T* rows, int64_t H, int64_t W, int64_t OH, int64_t OW, int kh, int kw, int sh,
                int sw, int ph, int pw) {
  for (int i = 0; i < kh; ++i) {
    for (int j = 0; j < kw; ++j) {
      T* row = rows + (static_cast<int64_t>(i) * kw + j) * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h = oh * sh - ph + i;
        T* r = row + oh * OW;
        if (h < 0 || h >= H) {
          if constexpr (!kScatter) std::fill(r, r + OW, T(0));
          continue;
        }
        T* src = plane + h * W;
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w = ow * sw - pw + j;
          if constexpr (kScatter) {
            if (w >= 0 && w < W) src[w] += r[ow];
          } else {
            r[ow] = (w >= 0 && w < W) ? src[w] : T(0);
          }
        }
      }
    }
  }
}

// The common 2x2 window, stride 2, no padding, without the general loop's bounds and branches: the four
// values in the general loop's order (row by row), each taken with a select where it is larger or NaN, so
// the result and its index are the general loop's (the first maximum; a NaN wins, the last NaN).
// src: one (H, W) plane; out, idx: its (OH, OW) outputs, OH <= H / 2, OW <= W / 2.
template <class T>
void max_pool_2x2(const T* src, T* out, int64_t* idx, int64_t W, int64_t OH, int64_t OW) {
  for (int64_t oh = 0; oh < OH; ++oh) {
    const T* r0 = src + 2 * oh * W;
    const T* r1 = r0 + W;
    T* o = out + oh * OW;
    int64_t* ix = idx + oh * OW;
    for (int64_t ow = 0; ow < OW; ++ow) {
      const T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
      T best = a;
      int64_t k = 2 * oh * W + 2 * ow;  // a's flat index; b = k + 1, c = k + W, d = k + W + 1
      const int64_t base = k;
      const bool tb = b > best || b != b;
      best = tb ? b : best, k = tb ? base + 1 : k;
      const bool tc = c > best || c != c;
      best = tc ? c : best, k = tc ? base + W : k;
      const bool td = d > best || d != d;
      best = td ? d : best, k = td ? base + W + 1 : k;
      o[ow] = best;
      ix[ow] = k;
    }
  }
}

}  // namespace

void CpuBackend::im2col(const Tensor& x, const Tensor& cols, int kh, int kw, int sh, int sw, int ph, int pw) {
  // x: (N, C, H, W) -> cols: (N, C*kh*kw, OH*OW)
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = out_size(H, kh, sh, ph), OW = out_size(W, kw, sw, pw);
  dispatch_floating(x.dtype(), "im2col", [&]<class T>() {
    T* px = x.data<T>();
    T* pc = cols.data<T>();
    parallel_rows(planes, kh * kw * OH * OW, [&](int64_t p) {
      plane_cols<T, false>(px + p * H * W, pc + p * kh * kw * OH * OW, H, W, OH, OW, kh, kw, sh, sw, ph, pw);
    });
  });
}

void CpuBackend::col2im(const Tensor& cols, const Tensor& x, int kh, int kw, int sh, int sw, int ph, int pw) {
  // cols: (N, C*kh*kw, OH*OW) -> x: (N, C, H, W), overlapping windows summed
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = out_size(H, kh, sh, ph), OW = out_size(W, kw, sw, pw);
  dispatch_floating(x.dtype(), "col2im", [&]<class T>() {
    T* px = x.data<T>();
    T* pc = cols.data<T>();
    parallel_rows(planes, kh * kw * OH * OW, [&](int64_t p) {
      std::fill(px + p * H * W, px + (p + 1) * H * W, T(0));
      plane_cols<T, true>(px + p * H * W, pc + p * kh * kw * OH * OW, H, W, OH, OW, kh, kw, sh, sw, ph, pw);
    });
  });
}

void CpuBackend::max_pool2d(const Tensor& x, const Tensor& out, const Tensor& indices, int kh, int kw, int sh,
                            int sw, int ph, int pw) {
  // x: (N, C, H, W) -> out, indices: (N, C, OH, OW)
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3), OH = out.size(2),
                OW = out.size(3);
  dispatch_floating(x.dtype(), "max_pool2d", [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    int64_t* pi = indices.data<int64_t>();
    parallel_rows(planes, OH * OW * kh * kw, [&](int64_t p) {
      const T* src = px + p * H * W;
      if (kh == 2 && kw == 2 && sh == 2 && sw == 2 && ph == 0 && pw == 0) {
        max_pool_2x2(src, po + p * OH * OW, pi + p * OH * OW, W, OH, OW);
        return;
      }
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h0 = std::max<int64_t>(oh * sh - ph, 0), h1 = std::min<int64_t>(oh * sh - ph + kh, H);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = std::max<int64_t>(ow * sw - pw, 0), w1 = std::min<int64_t>(ow * sw - pw + kw, W);
          T best = -std::numeric_limits<T>::infinity();
          int64_t best_i = h0 * W + w0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) {
              const T v = src[h * W + w];
              if (v > best || std::isnan(v)) best = v, best_i = h * W + w;  // as PyTorch: NaN wins
            }
          po[(p * OH + oh) * OW + ow] = best;
          pi[(p * OH + oh) * OW + ow] = best_i;
        }
      }
    });
  });
}

void CpuBackend::max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx) {
  // gy, indices: (N, C, OH, OW) -> gx: (N, C, H, W)
  const int64_t planes = gx.size(0) * gx.size(1), HW = gx.size(2) * gx.size(3), OHW = gy.size(2) * gy.size(3);
  dispatch_floating(gx.dtype(), "max_pool2d_backward", [&]<class T>() {
    const T* pg = gy.data<T>();
    const int64_t* pi = indices.data<int64_t>();
    T* px = gx.data<T>();
    parallel_rows(planes, HW + OHW, [&](int64_t p) {
      T* dst = px + p * HW;
      std::fill(dst, dst + HW, T(0));
      for (int64_t o = p * OHW; o < (p + 1) * OHW; ++o) dst[pi[o]] += pg[o];
    });
  });
}

void CpuBackend::avg_pool2d(const Tensor& x, const Tensor& out, int kh, int kw, int sh, int sw, int ph,
                            int pw) {
  // x: (N, C, H, W) -> out: (N, C, OH, OW); divisor counts the padding (count_include_pad=True)
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3), OH = out.size(2),
                OW = out.size(3);
  dispatch_floating(x.dtype(), "avg_pool2d", [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    parallel_rows(planes, OH * OW * kh * kw, [&](int64_t p) {
      const T* src = px + p * H * W;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t hs = oh * sh - ph, he = std::min<int64_t>(hs + kh, H + ph);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t ws = ow * sw - pw, we = std::min<int64_t>(ws + kw, W + pw);
          const int64_t count = (he - hs) * (we - ws);
          T acc = 0;
          for (int64_t h = std::max<int64_t>(hs, 0); h < std::min(he, H); ++h)
            for (int64_t w = std::max<int64_t>(ws, 0); w < std::min(we, W); ++w) acc += src[h * W + w];
          po[(p * OH + oh) * OW + ow] = acc / static_cast<T>(count);
        }
      }
    });
  });
}

void CpuBackend::avg_pool2d_backward(const Tensor& gy, const Tensor& gx, int kh, int kw, int sh, int sw,
                                     int ph, int pw) {
  // gy: (N, C, OH, OW) -> gx: (N, C, H, W)
  const int64_t planes = gx.size(0) * gx.size(1), H = gx.size(2), W = gx.size(3), OH = gy.size(2),
                OW = gy.size(3);
  dispatch_floating(gx.dtype(), "avg_pool2d_backward", [&]<class T>() {
    const T* pg = gy.data<T>();
    T* px = gx.data<T>();
    parallel_rows(planes, H * W + OH * OW * kh * kw, [&](int64_t p) {
      T* dst = px + p * H * W;
      std::fill(dst, dst + H * W, T(0));
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t hs = oh * sh - ph, he = std::min<int64_t>(hs + kh, H + ph);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t ws = ow * sw - pw, we = std::min<int64_t>(ws + kw, W + pw);
          const T g = pg[(p * OH + oh) * OW + ow] / static_cast<T>((he - hs) * (we - ws));
          for (int64_t h = std::max<int64_t>(hs, 0); h < std::min(he, H); ++h)
            for (int64_t w = std::max<int64_t>(ws, 0); w < std::min(we, W); ++w) dst[h * W + w] += g;
        }
      }
    });
  });
}

}  // namespace saccade::cpu
