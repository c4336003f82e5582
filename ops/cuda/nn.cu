// CUDA kernels of the nn primitives: softmax / log-softmax, layer norm and RMSNorm, forward and backward.
// Every tensor is contiguous and row-major; a "row" is the last (normalised) axis. One block per row
// (grid-strided over rows): each thread folds a strided slice of the row, block_reduce (loop.cuh) combines
// the partials. Sums accumulate in double for float32 rows, as on the CPU (ops/cpu/nn.cpp).
//
// Shapes: softmax: x, out, y, gy, gx (rows, n); layer_norm: x, out, gy, gx (rows, n), weight, bias, gweight,
// gbias (n) or undefined, mean, rstd (rows) float; rms_norm: as layer_norm without bias, gbias and mean.
// Layer norm and RMSNorm share their device code (mean null: RMSNorm). RMSNorm's kernels also take
// bfloat16 / float16 rows (layer norm's are widened, Kernel16): loaded into float32 (compute_t), statistics
// float32 and summed in double as float32 rows are, each result rounded once on the store.
#include <cmath>

#include "ops/cuda/backend.h"
#include "ops/cuda/loop.cuh"

namespace saccade::cuda {

namespace {

template <class T>
struct Max {  // NaN wins, as in the CPU's row max
  __device__ T operator()(T a, T b) const { return (b > a || b != b) ? b : a; }
};

// x, y: (rows, n). softmax_i = exp(x_i - m) / Σ exp(x_j - m), m = max x; log: x_i - m - log Σ.
// A row all -inf gives zeros; a NaN anywhere gives a NaN row.
template <class T>
__global__ void softmax_kernel(const T* x, T* y, int64_t rows, int64_t n, bool log, T neg_inf) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    T m = neg_inf;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = Max<T>{}(m, xr[i]);
    m = block_reduce(m, Max<T>{}, neg_inf);
    if (m == neg_inf) {  // fully masked row: zeros (and a zero gradient)
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = T(0);
      continue;
    }
    acc_t<T> s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += exp(xr[i] - m);
    s = block_reduce(s, Plus<acc_t<T>>{}, acc_t<T>(0));
    if (log) {
      const T shift = m + static_cast<T>(::log(s));
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] - shift;
    } else {
      const T inv = static_cast<T>(acc_t<T>(1) / s);
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = exp(xr[i] - m) * inv;
    }
  }
}

//   softmax:      gx = y ⊙ (gy - Σ_j gy_j y_j)
//   log-softmax:  gx = gy - exp(y) Σ_j gy_j
template <class T>
__global__ void softmax_backward_kernel(const T* y, const T* gy, T* gx, int64_t rows, int64_t n, bool log) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* yr = y + r * n;
    const T* gr = gy + r * n;
    T* out = gx + r * n;
    acc_t<T> dot = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      dot += log ? acc_t<T>(gr[i]) : acc_t<T>(gr[i]) * yr[i];
    const T d = static_cast<T>(block_reduce(dot, Plus<acc_t<T>>{}, acc_t<T>(0)));
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      out[i] = log ? gr[i] - exp(yr[i]) * d : yr[i] * (gr[i] - d);
  }
}

//   y = (x - μ) · rstd · w + b,   μ = mean(x),  rstd = 1 / sqrt(var(x) + eps)   (biased variance; two passes)
// mean null: RMSNorm, μ = 0
// T: the stored element type; C = compute_t<T>: the arithmetic and the statistics (T itself for float32 and
// float64, float for 16-bit T); A = acc_t<C>: the row sums.
template <class T>
__global__ void layer_norm_kernel(const T* x, const T* w, const T* b, double eps, T* y, compute_t<T>* mean,
                                  compute_t<T>* rstd, int64_t rows, int64_t n) {
  using C = compute_t<T>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    double s = 0;
    if (mean) {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<C>(xr[i]);
      s = block_reduce(s, Plus<double>{}, 0.0);
    }
    const double mu = n > 0 ? s / static_cast<double>(n) : 0.0;
    double ss = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const C xi = static_cast<C>(xr[i]);
      ss += (xi - mu) * (xi - mu);
    }
    ss = block_reduce(ss, Plus<double>{}, 0.0);
    const double var = n > 0 ? ss / static_cast<double>(n) : 0.0;
    const C m = static_cast<C>(mu), rs = static_cast<C>(1.0 / ::sqrt(var + eps));
    if (threadIdx.x == 0) {
      if (mean) mean[r] = m;
      rstd[r] = rs;
    }
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      C v = (static_cast<C>(xr[i]) - m) * rs;
      if (w) v *= static_cast<C>(w[i]);
      if (b) v += static_cast<C>(b[i]);
      yr[i] = static_cast<T>(v);
    }
  }
}

//   x̂ = (x - μ) rstd,  ĝ = gy ⊙ w:   gx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ ⊙ x̂))
// mean null: RMSNorm, μ = 0 and no mean(ĝ) term
template <class T>
__global__ void layer_norm_backward_gx_kernel(const T* gy, const T* x, const T* w, const compute_t<T>* mean,
                                              const compute_t<T>* rstd, T* gx, int64_t rows, int64_t n) {
  using C = compute_t<T>;
  using A = acc_t<C>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* gr = gy + r * n;
    const T* xr = x + r * n;
    T* out = gx + r * n;
    const C m = mean ? mean[r] : C(0), rs = rstd[r];
    A sg = 0, sgx = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const C gh = w ? static_cast<C>(gr[i]) * static_cast<C>(w[i]) : static_cast<C>(gr[i]);
      sg += gh;
      sgx += A(gh) * ((static_cast<C>(xr[i]) - m) * rs);
    }
    sg = block_reduce(sg, Plus<A>{}, A(0));
    sgx = block_reduce(sgx, Plus<A>{}, A(0));
    const C mg = mean ? static_cast<C>(sg / static_cast<A>(n)) : C(0),
            mgx = static_cast<C>(sgx / static_cast<A>(n));
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const C gh = w ? static_cast<C>(gr[i]) * static_cast<C>(w[i]) : static_cast<C>(gr[i]);
      out[i] = static_cast<T>(rs * (gh - mg - (static_cast<C>(xr[i]) - m) * rs * mgx));
    }
  }
}

//   gw = Σ_rows gy ⊙ x̂,   gb = Σ_rows gy, in two stages (one thread per column over all rows would leave
// the GPU idle: a GPT's (4096 rows, 128 columns) is one block walking 4096 rows). Stage 1: block (kColTile,
// kRowLanes) of grid (column tiles, row chunks) sums a chunk of kChunkRows rows of kColTile columns, each
// thread every kRowLanes-th row, then the lanes in shared memory, into partial[chunk][column]. Stage 2: one
// thread per column adds the chunks' partials in chunk order. No atomics: the same sums on every run.
constexpr int kColTile = 32, kRowLanes = 8;
constexpr int64_t kChunkRows = 128;

template <class T>
__global__ void layer_norm_backward_gwb_partial_kernel(const T* gy, const T* x, const compute_t<T>* mean,
                                                       const compute_t<T>* rstd, acc_t<compute_t<T>>* pw,
                                                       acc_t<compute_t<T>>* pb, int64_t rows, int64_t n) {
  using C = compute_t<T>;
  using A = acc_t<C>;
  __shared__ A sw[kRowLanes][kColTile], sb[kRowLanes][kColTile];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kChunkRows;
  const int64_t r1 = r0 + kChunkRows < rows ? r0 + kChunkRows : rows;
  A aw = 0, ab = 0;
  if (c < n) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
      const C g = static_cast<C>(gy[r * n + c]);
      aw += A(g) * ((static_cast<C>(x[r * n + c]) - (mean ? mean[r] : C(0))) * rstd[r]);
      ab += g;
    }
  }
  sw[threadIdx.y][threadIdx.x] = aw, sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && c < n) {
    for (int k = 1; k < kRowLanes; ++k) aw += sw[k][threadIdx.x], ab += sb[k][threadIdx.x];
    pw[blockIdx.y * n + c] = aw, pb[blockIdx.y * n + c] = ab;
  }
}

template <class T>
__global__ void layer_norm_backward_gwb_sum_kernel(const acc_t<compute_t<T>>* pw,
                                                   const acc_t<compute_t<T>>* pb, T* gw, T* gb,
                                                   int64_t chunks, int64_t n) {
  for (int64_t c = first_index(); c < n; c += grid_stride()) {
    acc_t<compute_t<T>> aw = 0, ab = 0;
    for (int64_t k = 0; k < chunks; ++k) aw += pw[k * n + c], ab += pb[k * n + c];
    if (gw) gw[c] = static_cast<T>(aw);
    if (gb) gb[c] = static_cast<T>(ab);
  }
}

template <class T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <class T>
T* mut_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace

void CudaBackend::softmax(const Tensor& x, const Tensor& out, bool log) {
  const int64_t rows = x.shape()[0], n = x.shape()[1];
  if (rows * n == 0) return;
  dispatch_floating(x.dtype(), "softmax", [&]<class T>() {
    softmax_kernel<T><<<blocks_for(rows, 1), kThreads, 0, stream()>>>(
        x.data<T>(), out.data<T>(), rows, n, log, -std::numeric_limits<T>::infinity());
    SACCADE_CUDA_CHECK_LAUNCH(log ? "log_softmax" : "softmax");
  });
}

void CudaBackend::softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& gx, bool log) {
  const int64_t rows = y.shape()[0], n = y.shape()[1];
  if (rows * n == 0) return;
  dispatch_floating(y.dtype(), "softmax_backward", [&]<class T>() {
    softmax_backward_kernel<T><<<blocks_for(rows, 1), kThreads, 0, stream()>>>(y.data<T>(), gy.data<T>(),
                                                                               gx.data<T>(), rows, n, log);
    SACCADE_CUDA_CHECK_LAUNCH("softmax_backward");
  });
}

namespace {

// Layer norm's or RMSNorm's forward, on `backend`'s stream: mean and bias undefined for RMSNorm (a run-time
// switch, as on the CPU: ops/cpu/nn.cpp's norm_rows says why).
void norm_rows(CudaBackend& backend, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
               const Tensor& out, const Tensor& mean, const Tensor& rstd, const char* op) {
  const int64_t rows = rstd.numel(), n = x.shape().back();
  if (rows == 0) return;
  dispatch_floating_and_half(x.dtype(), op, [&]<class T>() {
    using C = compute_t<T>;  // mean and rstd: float32 for 16-bit x
    layer_norm_kernel<T><<<blocks_for(rows, 1), kThreads, 0, backend.stream()>>>(
        x.data<T>(), ptr_or_null<T>(weight), ptr_or_null<T>(bias), eps, out.data<T>(), mut_or_null<C>(mean),
        rstd.data<C>(), rows, n);
    SACCADE_CUDA_CHECK_LAUNCH(op);
  });
}

// Layer norm's or RMSNorm's backward: mean and gbias undefined for RMSNorm.
void norm_backward_rows(CudaBackend& backend, const Tensor& gy, const Tensor& x, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd, const Tensor& gx, const Tensor& gweight,
                        const Tensor& gbias, const char* op) {
  const int64_t rows = rstd.numel(), n = x.shape().back();
  dispatch_floating_and_half(x.dtype(), op, [&]<class T>() {
    using C = compute_t<T>;  // mean and rstd: float32 for 16-bit x
    if (gx.defined() && rows * n > 0) {
      layer_norm_backward_gx_kernel<T><<<blocks_for(rows, 1), kThreads, 0, backend.stream()>>>(
          gy.data<T>(), x.data<T>(), ptr_or_null<T>(weight), ptr_or_null<C>(mean), rstd.data<C>(),
          gx.data<T>(), rows, n);
      SACCADE_CUDA_CHECK_LAUNCH(op);
    }
    if ((gweight.defined() || gbias.defined()) && n > 0) {
      using A = acc_t<C>;
      const int64_t chunks = rows == 0 ? 1 : (rows + kChunkRows - 1) / kChunkRows;
      const size_t bytes = 2 * static_cast<size_t>(chunks * n) * sizeof(A);
      A* partial = static_cast<A*>(backend.allocate(bytes));
      if (rows == 0) {
        SACCADE_CUDA_CHECK(op, cudaMemsetAsync(partial, 0, bytes, backend.stream()));
      } else {
        const dim3 grid(static_cast<unsigned>((n + kColTile - 1) / kColTile), static_cast<unsigned>(chunks));
        layer_norm_backward_gwb_partial_kernel<T><<<grid, dim3(kColTile, kRowLanes), 0, backend.stream()>>>(
            gy.data<T>(), x.data<T>(), ptr_or_null<C>(mean), rstd.data<C>(), partial, partial + chunks * n,
            rows, n);
        SACCADE_CUDA_CHECK_LAUNCH(op);
      }
      layer_norm_backward_gwb_sum_kernel<T><<<blocks_for(n), kThreads, 0, backend.stream()>>>(
          partial, partial + chunks * n, mut_or_null<T>(gweight), mut_or_null<T>(gbias), chunks, n);
      SACCADE_CUDA_CHECK_LAUNCH(op);
      backend.deallocate(partial, bytes);  // stream-ordered: reused only by later work on this stream
    }
  });
}

}  // namespace

void CudaBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                             const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  norm_rows(*this, x, weight, bias, eps, out, mean, rstd, "layer_norm");
}

void CudaBackend::layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& weight,
                                      const Tensor& mean, const Tensor& rstd, const Tensor& gx,
                                      const Tensor& gweight, const Tensor& gbias) {
  norm_backward_rows(*this, gy, x, weight, mean, rstd, gx, gweight, gbias, "layer_norm_backward");
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& out,
                           const Tensor& rstd) {
  norm_rows(*this, x, weight, Tensor(), eps, out, Tensor(), rstd, "rms_norm");
}

void CudaBackend::rms_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& weight,
                                    const Tensor& rstd, const Tensor& gx, const Tensor& gweight) {
  norm_backward_rows(*this, gy, x, weight, Tensor(), rstd, gx, gweight, Tensor(), "rms_norm_backward");
}

}  // namespace saccade::cuda
