// CUDA im2col / col2im and 2-d pooling. All tensors contiguous NCHW. Window of output (oh, ow): input rows
// oh*sh - ph + [0, kh), columns ow*sw - pw + [0, kw). One thread per element of what is written:
//  - im2col: per element of cols;  col2im: per element of x, gathering every (window, offset) that reads it
//    (no atomics: the Caffe formulation);
//  - max/avg pool: per output;  their backwards: gx zeroed, then one thread per gy element adding into its
//    window (atomicAdd: windows overlap when stride < kernel).
//
// Shapes: x, gx: (N, C, H, W); cols: (N, C*kh*kw, OH*OW); out, gy, indices: (N, C, OH, OW), indices int64
// holding the flat h*W + w of each max.
#include "ops/cuda/backend.h"
#include "ops/cuda/loop.cuh"

namespace saccade::cuda {

namespace {

struct Window {
  int64_t H, W, OH, OW;
  int kh, kw, sh, sw, ph, pw;
};

int64_t out_size(int64_t in, int k, int s, int p) { return (in + 2 * p - k) / s + 1; }

// cols[p, (i*kw + j), oh*OW + ow] = x[p, oh*sh - ph + i, ow*sw - pw + j] (0 in the padding); p = n*C + c.
template <class T>
__global__ void im2col_kernel(const T* x, T* cols, int64_t total, Window g) {
  for (int64_t t = first_index(); t < total; t += grid_stride()) {
    const int64_t ow = t % g.OW, oh = (t / g.OW) % g.OH, ij = (t / (g.OW * g.OH)) % (g.kh * g.kw),
                  p = t / (g.OW * g.OH * g.kh * g.kw);
    const int64_t h = oh * g.sh - g.ph + ij / g.kw, w = ow * g.sw - g.pw + ij % g.kw;
    cols[t] = (h >= 0 && h < g.H && w >= 0 && w < g.W) ? x[(p * g.H + h) * g.W + w] : T(0);
  }
}

// x[p, h, w] = Σ over kernel offsets (i, j) with oh = (h + ph - i) / sh, ow = (w + pw - j) / sw exact and in
// range of cols[p, i*kw + j, oh*OW + ow].
template <class T>
__global__ void col2im_kernel(const T* cols, T* x, int64_t total, Window g) {
  for (int64_t t = first_index(); t < total; t += grid_stride()) {
    const int64_t w = t % g.W, h = (t / g.W) % g.H, p = t / (g.W * g.H);
    T acc = 0;
    for (int i = 0; i < g.kh; ++i) {
      const int64_t hh = h + g.ph - i;
      if (hh < 0 || hh % g.sh != 0 || hh / g.sh >= g.OH) continue;
      for (int j = 0; j < g.kw; ++j) {
        const int64_t ww = w + g.pw - j;
        if (ww < 0 || ww % g.sw != 0 || ww / g.sw >= g.OW) continue;
        acc += cols[((p * g.kh * g.kw) + i * g.kw + j) * g.OH * g.OW + (hh / g.sh) * g.OW + ww / g.sw];
      }
    }
    x[t] = acc;
  }
}

template <class T>
__global__ void max_pool_kernel(const T* x, T* out, int64_t* indices, int64_t total, Window g, T neg_inf) {
  for (int64_t t = first_index(); t < total; t += grid_stride()) {
    const int64_t ow = t % g.OW, oh = (t / g.OW) % g.OH, p = t / (g.OW * g.OH);
    const int64_t h0 = max(oh * g.sh - g.ph, int64_t{0}), h1 = min(oh * g.sh - g.ph + g.kh, g.H);
    const int64_t w0 = max(ow * g.sw - g.pw, int64_t{0}), w1 = min(ow * g.sw - g.pw + g.kw, g.W);
    const T* src = x + p * g.H * g.W;
    T best = neg_inf;
    int64_t best_i = h0 * g.W + w0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) {
        const T v = src[h * g.W + w];
        if (v > best || v != v) best = v, best_i = h * g.W + w;  // as PyTorch: NaN wins
      }
    out[t] = best;
    indices[t] = best_i;
  }
}

template <class T>
__global__ void max_pool_backward_kernel(const T* gy, const int64_t* indices, T* gx, int64_t total,
                                         int64_t ohw, int64_t hw) {
  for (int64_t t = first_index(); t < total; t += grid_stride())
    atomicAdd(gx + (t / ohw) * hw + indices[t], gy[t]);
}

// The window of output (oh, ow) clipped to the padded input, and its divisor (padding counted).
struct AvgWindow {
  int64_t hs, he, ws, we, count;
  __device__ AvgWindow(const Window& g, int64_t oh, int64_t ow) {
    hs = oh * g.sh - g.ph, he = min(hs + g.kh, g.H + g.ph);
    ws = ow * g.sw - g.pw, we = min(ws + g.kw, g.W + g.pw);
    count = (he - hs) * (we - ws);
  }
};

template <class T>
__global__ void avg_pool_kernel(const T* x, T* out, int64_t total, Window g) {
  for (int64_t t = first_index(); t < total; t += grid_stride()) {
    const int64_t ow = t % g.OW, oh = (t / g.OW) % g.OH, p = t / (g.OW * g.OH);
    const AvgWindow a(g, oh, ow);
    const T* src = x + p * g.H * g.W;
    T acc = 0;
    for (int64_t h = max(a.hs, int64_t{0}); h < min(a.he, g.H); ++h)
      for (int64_t w = max(a.ws, int64_t{0}); w < min(a.we, g.W); ++w) acc += src[h * g.W + w];
    out[t] = acc / static_cast<T>(a.count);
  }
}

template <class T>
__global__ void avg_pool_backward_kernel(const T* gy, T* gx, int64_t total, Window g) {
  for (int64_t t = first_index(); t < total; t += grid_stride()) {
    const int64_t ow = t % g.OW, oh = (t / g.OW) % g.OH, p = t / (g.OW * g.OH);
    const AvgWindow a(g, oh, ow);
    const T v = gy[t] / static_cast<T>(a.count);
    T* dst = gx + p * g.H * g.W;
    for (int64_t h = max(a.hs, int64_t{0}); h < min(a.he, g.H); ++h)
      for (int64_t w = max(a.ws, int64_t{0}); w < min(a.we, g.W); ++w) atomicAdd(dst + h * g.W + w, v);
  }
}

void zero(const Tensor& t, cudaStream_t s, const char* op) {
  if (t.numel() > 0) SACCADE_CUDA_CHECK(op, cudaMemsetAsync(t.raw_data(), 0, t.numel() * t.itemsize(), s));
}

}  // namespace

void CudaBackend::im2col(const Tensor& x, const Tensor& cols, int kh, int kw, int sh, int sw, int ph,
                         int pw) {
  const int64_t H = x.size(2), W = x.size(3);
  const Window g{H, W, out_size(H, kh, sh, ph), out_size(W, kw, sw, pw), kh, kw, sh, sw, ph, pw};
  const int64_t total = cols.numel();
  if (total == 0) return;
  dispatch_floating(x.dtype(), "im2col", [&]<class T>() {
    im2col_kernel<T><<<blocks_for(total), kThreads, 0, stream()>>>(x.data<T>(), cols.data<T>(), total, g);
    SACCADE_CUDA_CHECK_LAUNCH("im2col");
  });
}

void CudaBackend::col2im(const Tensor& cols, const Tensor& x, int kh, int kw, int sh, int sw, int ph,
                         int pw) {
  const int64_t H = x.size(2), W = x.size(3);
  const Window g{H, W, out_size(H, kh, sh, ph), out_size(W, kw, sw, pw), kh, kw, sh, sw, ph, pw};
  const int64_t total = x.numel();
  if (total == 0) return;
  dispatch_floating(x.dtype(), "col2im", [&]<class T>() {
    col2im_kernel<T><<<blocks_for(total), kThreads, 0, stream()>>>(cols.data<T>(), x.data<T>(), total, g);
    SACCADE_CUDA_CHECK_LAUNCH("col2im");
  });
}

void CudaBackend::max_pool2d(const Tensor& x, const Tensor& out, const Tensor& indices, int kh, int kw,
                             int sh, int sw, int ph, int pw) {
  const Window g{x.size(2), x.size(3), out.size(2), out.size(3), kh, kw, sh, sw, ph, pw};
  const int64_t total = out.numel();
  if (total == 0) return;
  dispatch_floating(x.dtype(), "max_pool2d", [&]<class T>() {
    max_pool_kernel<T><<<blocks_for(total), kThreads, 0, stream()>>>(
        x.data<T>(), out.data<T>(), indices.data<int64_t>(), total, g, -std::numeric_limits<T>::infinity());
    SACCADE_CUDA_CHECK_LAUNCH("max_pool2d");
  });
}

void CudaBackend::max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx) {
  zero(gx, stream(), "max_pool2d_backward");
  const int64_t total = gy.numel();
  if (total == 0) return;
  dispatch_floating(gx.dtype(), "max_pool2d_backward", [&]<class T>() {
    max_pool_backward_kernel<T><<<blocks_for(total), kThreads, 0, stream()>>>(
        gy.data<T>(), indices.data<int64_t>(), gx.data<T>(), total, gy.size(2) * gy.size(3),
        gx.size(2) * gx.size(3));
    SACCADE_CUDA_CHECK_LAUNCH("max_pool2d_backward");
  });
}

void CudaBackend::avg_pool2d(const Tensor& x, const Tensor& out, int kh, int kw, int sh, int sw, int ph,
                             int pw) {
  const Window g{x.size(2), x.size(3), out.size(2), out.size(3), kh, kw, sh, sw, ph, pw};
  const int64_t total = out.numel();
  if (total == 0) return;
  dispatch_floating(x.dtype(), "avg_pool2d", [&]<class T>() {
    avg_pool_kernel<T><<<blocks_for(total), kThreads, 0, stream()>>>(x.data<T>(), out.data<T>(), total, g);
    SACCADE_CUDA_CHECK_LAUNCH("avg_pool2d");
  });
}

void CudaBackend::avg_pool2d_backward(const Tensor& gy, const Tensor& gx, int kh, int kw, int sh, int sw,
                                      int ph, int pw) {
  zero(gx, stream(), "avg_pool2d_backward");
  const Window g{gx.size(2), gx.size(3), gy.size(2), gy.size(3), kh, kw, sh, sw, ph, pw};
  const int64_t total = gy.numel();
  if (total == 0) return;
  dispatch_floating(gx.dtype(), "avg_pool2d_backward", [&]<class T>() {
    avg_pool_backward_kernel<T>
        <<<blocks_for(total), kThreads, 0, stream()>>>(gy.data<T>(), gx.data<T>(), total, g);
    SACCADE_CUDA_CHECK_LAUNCH("avg_pool2d_backward");
  });
}

}  // namespace saccade::cuda
