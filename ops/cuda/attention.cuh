// What the CUDA attention kernels share (attention.cu: the readable and the first tiled kernels;
// attention_fast.cu: the register-tiled float32 kernels): strided row access to (B, H, T, D) tensors, the
// mask and dropout decisions for one element (b, h, i, j) of the (B, H, Tq, Tk) weights, and the fast
// kernels' launchers (attention_fast.cu: float32; attention_mma.cu: 16 bits on the tensor cores).
//
// Grouped-query attention (Ainslie et al. 2023): q has H heads, k and v H_kv = H / G; query head h reads
// key/value head h / G (Masking::kv_head). The forwards index K and V by it; the backwards run one block per
// (b, key/value head, key tile) that walks the G query heads of its group, so dK and dV are summed over the
// group in registers (no atomics, no copy of K and V per query head). The sliding window and the tile ranges
// come from attention_plan.h.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/backend.h"
#include "ops/cuda/attention_plan.h"
#include "ops/cuda/loop.cuh"
#include "ops/philox.h"
#include "ops/tensor.h"

namespace saccade::cuda {

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
  const int64_t* key_starts;  // nullptr or (B, Tq): the first key each query may see (packed documents)
  ops::CausalAlign causal;
  int64_t window;       // 0: none; else query i sees the last `window` keys up to its causal limit
  int64_t group;        // G = H / H_kv: query heads per key/value head (1 without grouped-query attention)
  const uint8_t* keep;  // nullptr or Bool (B, H, Tq, Tk) with strides ks[4]
  int64_t ks[4];
  int64_t H, Tq, Tk;
  double p;  // dropout probability (0: none)
  uint64_t seed, offset;
  T drop_scale;  // 1 / (1 - p)

  /// The positions-only part of the mask (causal rule, window): attention_plan.h.
  __host__ __device__ AttentionPlan plan() const { return {Tq, Tk, causal, window}; }
  /// Key/value heads; the key/value head of query head h.
  __host__ __device__ int64_t H_kv() const { return H / group; }
  __device__ int64_t kv_head(int64_t h) const { return h / group; }
  /// One past the last key query i of batch row b may see.
  __device__ int64_t end(int64_t b, int64_t i) const {
    int64_t e = plan().key_end(i);
    if (valid_lens) e = min(e, max(int64_t{0}, valid_lens[per_query ? b * Tq + i : b]));
    return e;
  }
  /// Whether key j (< end(b, i)) is attended by query i of head h: inside the window, in the query's
  /// document (key_starts) and kept by the keep-mask. Every kernel asks this of every score it computes, so
  /// a tile that the plan visits only partly is masked exactly (the tiles before a document's start are
  /// visited and masked: the plan knows positions only).
  __device__ bool kept(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return j >= plan().first_key(i) && (!key_starts || j >= key_starts[b * Tq + i]) &&
           (!keep || keep[b * ks[0] + h * ks[1] + i * ks[2] + j * ks[3]]);
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

/// The backward kernels' per-query-tile staging: thread t < n writes query row i0 + t's end, lse and Δ into
/// the block's shared arrays (a row past Tq: end 0, lse -inf, Δ 0) and returns whether that row sees a key of
/// the key tile starting at j0 (end > j0 and lse != -inf: a row that saw nothing gets zero gradients); the
/// other threads return false. The block skips the query tile when __syncthreads_or of it is false.
template <class T>
__device__ bool stage_query_rows(const Masking<T>& mk, int64_t b, int64_t bh, int64_t i0, int n, int64_t j0,
                                 const T* lse, const T* delta, int64_t* end_s, T* lse_s, T* delta_s) {
  const int tid = threadIdx.x;
  if (tid >= n) return false;
  const int64_t i = i0 + tid;
  const bool in = i < mk.Tq;
  end_s[tid] = in ? mk.end(b, i) : 0;
  lse_s[tid] = in ? lse[bh * mk.Tq + i] : -static_cast<T>(INFINITY);
  delta_s[tid] = in ? delta[bh * mk.Tq + i] : T(0);
  return end_s[tid] > j0 && lse_s[tid] != -static_cast<T>(INFINITY);
}

/// The Masking of a mask for q (B, H, Tq, D) and k (B, H_kv, Tk, D), H a multiple of H_kv (ops/attention.cpp
/// checked it).
template <class T>
Masking<T> masking_of(const ops::AttentionMask& m, const ops::AttentionDropout& d, int64_t H, int64_t H_kv,
                      int64_t Tq, int64_t Tk) {
  Masking<T> r{};
  r.window = m.window;
  r.group = H_kv > 0 ? H / H_kv : 1;
  r.valid_lens = m.valid_lens.defined() ? m.valid_lens.data<int64_t>() : nullptr;
  r.per_query = m.valid_lens.defined() && m.valid_lens.dim() == 2;
  r.key_starts = m.key_starts.defined() ? m.key_starts.data<int64_t>() : nullptr;
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

/// The register-tiled float32 forward (attention_fast.cu) for head dims D, Dv <= 128; false (nothing
/// launched) when it does not apply (another dtype, larger head dims, too many blocks). Arguments as
/// CudaBackend::flash_attention_forward.
bool flash_attention_forward_fast(const Tensor& q, const Tensor& k, const Tensor& v, const Masking<float>& mk,
                                  float scale, const Tensor& out, const Tensor& lse);

/// The register-tiled float32 backward pass 2 (attention_fast.cu), after delta = rowsum(dO ⊙ O) and with gq
/// zeroed; false (nothing launched) when it does not apply. Arguments as
/// CudaBackend::flash_attention_backward.
bool flash_attention_backward_fast(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gout,
                                   const Tensor& lse, const Tensor& delta, const Masking<float>& mk,
                                   float scale, const Tensor& gq, const Tensor& gk, const Tensor& gv);

/// The tensor-core 16-bit forward (attention_mma.cu: bf16 / f16 q, k, v and out, float32 lse) for head dims
/// D, Dv <= 128 on a GPU of compute capability 8.0 or later; false (nothing launched) when it does not apply
/// or tensor_core_attention() is off. Arguments as CudaBackend::flash_attention_forward.
bool flash_attention_forward_mma(const Tensor& q, const Tensor& k, const Tensor& v, const Masking<float>& mk,
                                 float scale, const Tensor& out, const Tensor& lse);

/// The tensor-core 16-bit backward (attention_mma.cu: Δ in float32, dK and dV per key tile, dQ added into a
/// float32 buffer then rounded into gq) under the same conditions as the forward; false (nothing launched)
/// when it does not apply. Arguments as CudaBackend::flash_attention_backward.
bool flash_attention_backward_mma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                  const Tensor& gout, const Tensor& lse, const Masking<float>& mk,
                                  float scale, const Tensor& gq, const Tensor& gk, const Tensor& gv);

}  // namespace saccade::cuda
