// CUDA fused attention, the readable version: one thread per query row (b, h, i), the twin of the CPU's
// per-row reference (ops/cpu/attention_ladder/). It never forms the (Tq, Tk) scores: each thread walks the
// keys its row may see with an online softmax (running max m and sum l), accumulating the output row in
// place, and saves lse = m + log l for the backward, which recomputes P = exp(S - lse) key by key
// (FlashAttention, Dao et al. 2022, Algorithms 1-2, one row at a time):
//
//   forward, per key j:  s = scale q_i·k_j;  m' = max(m, s);  c = e^(m - m');  l = l c + e^(s - m');
//                        o = o c + z_ij e^(s - m') v_j;  m = m'             then o /= l, lse = m + log l
//   backward, per key j: p = e^(s - lse_i);  dp = z_ij dO_i·v_j;  ds = p (dp - Δ_i),  Δ_i = dO_i·O_i
//                        dV_j += z_ij p dO_i;  dQ_i += scale ds k_j;  dK_j += scale ds q_i
// z_ij is the dropout multiplier (0 or 1/(1-p)), drawn from the Philox counter ops::dropout would use for
// element (b, h, i, j) of the (B, H, Tq, Tk) weights, so the backward regenerates it and the CPU gets the
// same mask. Keys past a row's end (valid_lens, causal) are never visited; keep[b, h, i, j] masks the rest.
// A row that sees nothing gives zeros and lse = -inf, and zero gradients. dK and dV gather contributions from
// every query row: atomicAdd (so their float rounding order is not fixed).
//
// NOT YET: the fast version (query and key tiles in shared memory, tensor-core products, causal tiles
// skipped per tile); this one reads q_i·k_j from global memory, O(Tq·Tk·D) work per (b, h) as the fast one,
// but without data reuse.
//
// Shapes: q (B, H, Tq, D), k (B, H, Tk, D), v (B, H, Tk, Dv), out (B, H, Tq, Dv), gq/gk/gv like q/k/v, gout
// like out: any strides with unit last stride; lse (B, H, Tq) contiguous; valid_lens int64 (B) or (B, Tq);
// keep Bool (B, H, Tq, Tk) view.
#include <cmath>
#include <cstdint>

#include "ops/cuda/api.h"
#include "ops/cuda/backend.h"
#include "ops/cuda/loop.cuh"
#include "ops/philox.h"

namespace saccade::cuda {

namespace {

// A (B, H, T, D) tensor with unit last stride: row (b, h, t) starts at p + b sb + h sh + t st.
template <class T>
struct Rows {
  T* p;
  int64_t sb, sh, st;
  __device__ T* row(int64_t b, int64_t h, int64_t t) const { return p + b * sb + h * sh + t * st; }
};

template <class T>
Rows<T> rows_of(const Tensor& t) {
  return {t.data<T>(), t.stride(0), t.stride(1), t.stride(2)};
}
template <class T>
Rows<const T> const_rows_of(const Tensor& t) {
  return {t.data<T>(), t.stride(0), t.stride(1), t.stride(2)};
}

// Everything the mask and dropout decide about element (b, h, i, j) of the (B, H, Tq, Tk) weights.
template <class T>
struct Masking {
  const int64_t* valid_lens;  // nullptr, (B) or (B, Tq)
  bool per_query;
  ops::CausalAlign causal;
  const uint8_t* keep;  // nullptr or Bool (B, H, Tq, Tk) with strides ks[4]
  int64_t ks[4];
  int64_t H, Tq, Tk;
  double p;  // dropout probability (0: none)
  uint64_t seed, offset;
  T drop_scale;  // 1 / (1 - p)

  /// One past the last key query i of batch row b may see.
  __device__ int64_t end(int64_t b, int64_t i) const {
    int64_t e = Tk;
    if (valid_lens) e = min(e, max(int64_t{0}, valid_lens[per_query ? b * Tq + i : b]));
    if (causal != ops::CausalAlign::None)
      e = min(e, i + 1 + (causal == ops::CausalAlign::BottomRight ? Tk - Tq : 0));
    return max(e, int64_t{0});
  }
  __device__ bool kept(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return !keep || keep[b * ks[0] + h * ks[1] + i * ks[2] + j * ks[3]];
  }
  /// The dropout multiplier: 0 or 1/(1-p), as ops::dropout draws element (b, h, i, j); 1 without dropout.
  __device__ T dropout(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (p <= 0) return T(1);
    const uint64_t counter = offset + static_cast<uint64_t>(((b * H + h) * Tq + i) * Tk + j);
    const uint32_t w = philox4x32_10(seed, counter).w[0];
    const T u = static_cast<T>(std::is_same_v<T, float> ? uniform_float(w) : uniform_double(w));
    return u >= static_cast<T>(p) ? drop_scale : T(0);
  }
};

template <class T>
Masking<T> masking_of(const ops::AttentionMask& m, const ops::AttentionDropout& d, int64_t H, int64_t Tq,
                      int64_t Tk) {
  Masking<T> r{};
  r.valid_lens = m.valid_lens.defined() ? m.valid_lens.data<int64_t>() : nullptr;
  r.per_query = m.valid_lens.defined() && m.valid_lens.dim() == 2;
  r.causal = m.causal;
  if (m.keep.defined()) {
    r.keep = static_cast<const uint8_t*>(m.keep.raw_data());
    for (int k = 0; k < 4; ++k) r.ks[k] = m.keep.stride(k);
  }
  r.H = H, r.Tq = Tq, r.Tk = Tk;
  r.p = d.p, r.seed = d.seed, r.offset = d.offset;
  r.drop_scale = static_cast<T>(d.p > 0 ? 1.0 / (1.0 - d.p) : 1.0);
  return r;
}

template <class T>
__device__ T dot(const T* a, const T* b, int64_t n) {
  T s = 0;
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// One thread per query row t = (b, h, i).
template <class T>
__global__ void attention_forward_rows(Rows<const T> q, Rows<const T> k, Rows<const T> v, Rows<T> out, T* lse,
                                       Masking<T> mk, int64_t B, int64_t D, int64_t Dv, T scale) {
  const T neg_inf = -static_cast<T>(INFINITY);
  for (int64_t t = first_index(); t < B * mk.H * mk.Tq; t += grid_stride()) {
    const int64_t i = t % mk.Tq, h = (t / mk.Tq) % mk.H, b = t / (mk.Tq * mk.H);
    const T* qi = q.row(b, h, i);
    T* o = out.row(b, h, i);
    for (int64_t d = 0; d < Dv; ++d) o[d] = T(0);
    T m = neg_inf, l = 0;
    const int64_t end = mk.end(b, i);
    for (int64_t j = 0; j < end; ++j) {
      if (!mk.kept(b, h, i, j)) continue;
      const T s = scale * dot(qi, k.row(b, h, j), D);
      const T m_new = max(m, s);
      const T c = exp(m - m_new), e = exp(s - m_new);  // c = 0 while m = -inf
      l = l * c + e;
      const T ze = mk.dropout(b, h, i, j) * e;
      const T* vj = v.row(b, h, j);
      for (int64_t d = 0; d < Dv; ++d) o[d] = o[d] * c + ze * vj[d];
      m = m_new;
    }
    // NOTE: a row with nothing to attend (l = 0) gives zeros and lse = -inf, not NaN
    if (l > 0) {
      for (int64_t d = 0; d < Dv; ++d) o[d] /= l;
      lse[t] = m + log(l);
    } else {
      lse[t] = neg_inf;
    }
  }
}

// ---- the tiled forward: key/value tiles in shared memory, one query row per thread in registers ----
//
// Block: kBr = 64 threads, the query rows [i0, i0 + 64) of one (b, h). The block walks key tiles of kBc rows:
// all threads copy the tile of K and V into shared memory (zero-padded to kD columns and past Tk), then each
// thread runs the per-key online softmax of the readable kernel over the tile, its q row and output row held
// in registers (kD of each: head dims are padded to kD = 64 or 128 with zeros, which add nothing). Key tiles
// past the last key any row of the block may see (causal, valid_lens) are never loaded. Shared memory:
// 2 · kBc · kD · sizeof(T) = 32 KiB (kBc = 16384 / (kD sizeof(T))). Not yet: tensor-core tile products
// (FlashAttention-2's warp-level MMA) and a tiled backward.
constexpr int kBr = 64;

template <class T>
struct MaxI64 {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a > b ? a : b; }
};

template <class T, int kD>
__global__ void attention_forward_tiled(Rows<const T> q, Rows<const T> k, Rows<const T> v, Rows<T> out,
                                        T* lse, Masking<T> mk, int64_t tiles, int64_t D, int64_t Dv,
                                        T scale) {
  constexpr int kBc = 16384 / (kD * static_cast<int>(sizeof(T)));
  __shared__ T ks[kBc][kD];
  __shared__ T vs[kBc][kD];
  const int64_t bh = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * kBr;
  const int64_t b = bh / mk.H, h = bh % mk.H, i = i0 + threadIdx.x;
  const bool row = i < mk.Tq;
  T qr[kD], o[kD];
  const T* qi = row ? q.row(b, h, i) : nullptr;
#pragma unroll
  for (int d = 0; d < kD; ++d) {
    qr[d] = row && d < D ? qi[d] * scale : T(0);
    o[d] = 0;
  }
  const T neg_inf = -static_cast<T>(INFINITY);
  T m = neg_inf, l = 0;
  const int64_t end = row ? mk.end(b, i) : 0;
  const int64_t block_end = block_reduce(end, MaxI64<T>{}, int64_t{0});  // keys past this: no row sees them
  for (int64_t j0 = 0; j0 < block_end; j0 += kBc) {
    __syncthreads();  // the previous tile is no longer read
    for (int idx = threadIdx.x; idx < kBc * kD; idx += blockDim.x) {
      const int r = idx / kD, d = idx % kD;
      const bool in = j0 + r < mk.Tk;
      ks[r][d] = in && d < D ? k.row(b, h, j0 + r)[d] : T(0);
      vs[r][d] = in && d < Dv ? v.row(b, h, j0 + r)[d] : T(0);
    }
    __syncthreads();
    const int64_t n = end - j0 < kBc ? end - j0 : kBc;  // this row's keys in the tile (may be <= 0)
    for (int c = 0; c < n; ++c) {
      const int64_t j = j0 + c;
      if (!mk.kept(b, h, i, j)) continue;
      T s = 0;
#pragma unroll
      for (int d = 0; d < kD; ++d) s += qr[d] * ks[c][d];
      const T m_new = max(m, s);
      const T cor = exp(m - m_new), e = exp(s - m_new);
      l = l * cor + e;
      const T ze = mk.dropout(b, h, i, j) * e;
#pragma unroll
      for (int d = 0; d < kD; ++d) o[d] = o[d] * cor + ze * vs[c][d];
      m = m_new;
    }
  }
  if (!row) return;
  T* oi = out.row(b, h, i);
  const T inv = l > 0 ? T(1) / l : T(0);
#pragma unroll
  for (int d = 0; d < kD; ++d)
    if (d < Dv) oi[d] = o[d] * inv;
  lse[(bh)*mk.Tq + i] = l > 0 ? m + log(l) : neg_inf;
}

// One thread per query row t = (b, h, i); gk and gv were zeroed by the caller.
template <class T>
__global__ void attention_backward_rows(Rows<const T> q, Rows<const T> k, Rows<const T> v, Rows<const T> out,
                                        Rows<const T> gout, const T* lse, Rows<T> gq, Rows<T> gk, Rows<T> gv,
                                        Masking<T> mk, int64_t B, int64_t D, int64_t Dv, T scale) {
  for (int64_t t = first_index(); t < B * mk.H * mk.Tq; t += grid_stride()) {
    const int64_t i = t % mk.Tq, h = (t / mk.Tq) % mk.H, b = t / (mk.Tq * mk.H);
    const T* qi = q.row(b, h, i);
    const T* gi = gout.row(b, h, i);
    T* gqi = gq.row(b, h, i);
    for (int64_t d = 0; d < D; ++d) gqi[d] = T(0);
    const T li = lse[t];
    if (li == -static_cast<T>(INFINITY)) continue;  // the row saw nothing: zero gradients
    const T delta = dot(gi, out.row(b, h, i), Dv);
    const int64_t end = mk.end(b, i);
    for (int64_t j = 0; j < end; ++j) {
      if (!mk.kept(b, h, i, j)) continue;
      const T* kj = k.row(b, h, j);
      const T* vj = v.row(b, h, j);
      const T p = exp(scale * dot(qi, kj, D) - li), z = mk.dropout(b, h, i, j);
      const T ds = p * (z * dot(gi, vj, Dv) - delta);
      T* gkj = gk.row(b, h, j);
      T* gvj = gv.row(b, h, j);
      for (int64_t d = 0; d < Dv; ++d) atomicAdd(gvj + d, z * p * gi[d]);
      for (int64_t d = 0; d < D; ++d) {
        gqi[d] += scale * ds * kj[d];
        atomicAdd(gkj + d, scale * ds * qi[d]);
      }
    }
  }
}

}  // namespace

void CudaBackend::flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const ops::AttentionMask& mask, double scale,
                                          const ops::AttentionDropout& dropout, const Tensor& out,
                                          const Tensor& lse) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), D = q.size(3), Dv = v.size(3);
  const int64_t rows = B * H * Tq;
  if (rows == 0) return;
  const int64_t tiles = (Tq + kBr - 1) / kBr;
  const bool tiled = !readable_attention() && D <= 128 && Dv <= 128 && B * H * tiles <= INT32_MAX;
  dispatch_floating(q.dtype(), "flash_attention_forward", [&]<class T>() {
    const Masking<T> mk = masking_of<T>(mask, dropout, H, Tq, Tk);
    if (tiled && D <= 64 && Dv <= 64)
      attention_forward_tiled<T, 64><<<static_cast<unsigned>(B * H * tiles), kBr, 0, stream()>>>(
          const_rows_of<T>(q), const_rows_of<T>(k), const_rows_of<T>(v), rows_of<T>(out), lse.data<T>(), mk,
          tiles, D, Dv, static_cast<T>(scale));
    else if (tiled)
      attention_forward_tiled<T, 128><<<static_cast<unsigned>(B * H * tiles), kBr, 0, stream()>>>(
          const_rows_of<T>(q), const_rows_of<T>(k), const_rows_of<T>(v), rows_of<T>(out), lse.data<T>(), mk,
          tiles, D, Dv, static_cast<T>(scale));
    else
      attention_forward_rows<T><<<blocks_for(rows, 128), 128, 0, stream()>>>(
          const_rows_of<T>(q), const_rows_of<T>(k), const_rows_of<T>(v), rows_of<T>(out), lse.data<T>(), mk,
          B, D, Dv, static_cast<T>(scale));
    SACCADE_CUDA_CHECK_LAUNCH("flash_attention_forward");
  });
}

void CudaBackend::flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                           const Tensor& out, const Tensor& gout, const Tensor& lse,
                                           const ops::AttentionMask& mask, double scale,
                                           const ops::AttentionDropout& dropout, const Tensor& gq,
                                           const Tensor& gk, const Tensor& gv) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), D = q.size(3), Dv = v.size(3);
  fill(gk, 0.0);
  fill(gv, 0.0);
  const int64_t rows = B * H * Tq;
  if (rows == 0) return;
  dispatch_floating(q.dtype(), "flash_attention_backward", [&]<class T>() {
    attention_backward_rows<T><<<blocks_for(rows, 128), 128, 0, stream()>>>(
        const_rows_of<T>(q), const_rows_of<T>(k), const_rows_of<T>(v), const_rows_of<T>(out),
        const_rows_of<T>(gout), lse.data<T>(), rows_of<T>(gq), rows_of<T>(gk), rows_of<T>(gv),
        masking_of<T>(mask, dropout, H, Tq, Tk), B, D, Dv, static_cast<T>(scale));
    SACCADE_CUDA_CHECK_LAUNCH("flash_attention_backward");
  });
}

}  // namespace saccade::cuda
