// CUDA fused attention, the fast float32 kernels: FlashAttention-2 (Dao 2023, Algorithms 1 and 2) with the
// tile products register-tiled as in a SIMT GEMM. The tiled kernels of attention.cu give each thread one
// query row (forward) or one score (backward), so every multiply-add waits on a shared-memory load; here a
// thread owns a small block of every product (4 x 4 scores, 4 x kD/16 outputs) and reads its operands as
// 16-byte vectors, so one load feeds four to sixteen multiply-adds. The maths, the masks, the dropout
// (Philox, as ops::dropout draws it) and the outputs are those of the readable kernel (attention.cu's
// header); the tests compare all three.
//
// Shapes: q (B, H, Tq, D), k (B, H_kv, Tk, D), v (B, H_kv, Tk, Dv) (H = G·H_kv: query head h reads key/value
// head h / G), out / gout (B, H, Tq, Dv), lse / delta (B, H, Tq) contiguous; any strides with unit last
// stride. float32 only, D, Dv <= 128, padded with zeros to kD = 64 or 128 in shared memory.
//
// Forward, one block of 256 threads per (b, h, 64 query rows); thread (ty, tx) = (tid / 16, tid % 16) owns
// query rows 4 ty .. 4 ty + 3 and, of each 64-key tile, the key columns tx + 16 j (j < 4: strided, so the 16
// threads of a half-warp read 16 different K rows from 16 bank groups), and of the output the columns
// 4 tx + 64 g .. + 3 (g < kD / 64). Per key tile:
//   S = (scale Q) Kᵀ                  4 x 4 per thread, float4 loads along d of Q and K rows
//   m' = max(m, rowmax S)            across the half-warp that shares the rows (shuffles)
//   P = exp(S - m'),  l = l e^(m-m') + rowsum P,  O = O e^(m-m')
//   O += (Z ⊙ P) V                    Pᵀ through shared memory (float4 of 4 rows), V rows as float4
// Backward pass 2, one block of 256 threads per (b, key/value head, 64-key tile), walking, for each query
// head of the group, the query tiles of 32 rows that see it (attention_plan.h; forward blocks likewise start
// at the first key tile their rows' window reaches): S and dP (32 x 64: 2 rows x 4 strided keys a thread), P
// = exp(S - lse), dS = P (Z dP - Δ); then dV += (Z P)ᵀ dO and dK += dSᵀ Q (64 x kD: 4 keys x kD/16 columns a
// thread, kept in registers for the whole walk) and dQ += dS K (32 x kD: 2 rows x kD/16 columns, added to gq
// with atomicAdd as FlashAttention-2 does). Shared memory is dynamic (68-128 KiB: more than a block may use
// without opting in).
#include <cmath>
#include <cstdint>

#include "ops/cuda/attention.cuh"
#include "ops/cuda/backend.h"
#include "ops/cuda/error.h"

namespace saccade::cuda {

namespace {

constexpr int kThreadsFast = 256;
constexpr int kTile = 64;     // query rows of a forward block; key rows of a backward block
constexpr int kBwdRows = 32;  // query rows of a backward step

__device__ inline float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ inline void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ inline float dot4(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }
__device__ inline float get(float4 v, int e) { return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w; }

// Copies rows [r0, r0 + n) of one (b, h) into a (n, kD) shared tile with row stride ld, times `mul`, with
// zeros past `rows` (the tensor's T) and past `cols` (its D).
template <int kD>
__device__ void load_tile(float* dst, int ld, const Rows<const float>& src, int64_t b, int64_t h, int64_t r0,
                          int n, int64_t rows, int64_t cols, float mul) {
  constexpr int kV = kD / 4;  // float4 a row
  for (int idx = threadIdx.x; idx < n * kV; idx += blockDim.x) {
    const int r = idx / kV, d = (idx % kV) * 4;
    float x[4] = {0, 0, 0, 0};
    if (r0 + r < rows) {
      const float* p = src.row(b, h, r0 + r);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (d + e < cols) x[e] = p[d + e] * mul;
    }
    store4(dst + r * ld + d, make_float4(x[0], x[1], x[2], x[3]));
  }
}

template <int kD>
constexpr int fwd_smem_bytes() {
  return static_cast<int>(sizeof(float)) * (3 * kTile * (kD + 4) + kTile * (kTile + 4));
}

template <int kD>
__global__ void __launch_bounds__(kThreadsFast, kD == 64 ? 2 : 1)
    attention_forward_fast(Rows<const float> q, Rows<const float> k, Rows<const float> v, Rows<float> out,
                           float* lse, Masking<float> mk, int64_t tiles, int64_t D, int64_t Dv, float scale) {
  constexpr int L = kD + 4, LP = kTile + 4, G = kD / 64;  // row strides; output float4 groups a thread
  extern __shared__ float4 smem4[];
  float* qs = reinterpret_cast<float*>(smem4);  // (64 rows, kD), scaled
  float* ks = qs + kTile * L;                   // (64 keys, kD)
  float* vs = ks + kTile * L;                   // (64 keys, kD)
  float* pt = vs + kTile * L;                   // (64 keys, 64 rows): (Z ⊙ P)ᵀ
  const float neg_inf = -INFINITY;
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  const int64_t bh = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * kTile;
  const int64_t b = bh / mk.H, h = bh % mk.H, hk = mk.kv_head(h);
  load_tile<kD>(qs, L, q, b, h, i0, kTile, mk.Tq, D, scale);
  int64_t end[4];  // one past the last key each of my rows sees
  float m[4], l[4], o[4][4 * G];
  int64_t my_end = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = i0 + 4 * ty + i;
    end[i] = r < mk.Tq ? mk.end(b, r) : 0;
    my_end = max(my_end, end[i]);
    m[i] = neg_inf, l[i] = 0;
#pragma unroll
    for (int c = 0; c < 4 * G; ++c) o[i][c] = 0;
  }
  const int64_t block_end = block_reduce(my_end, Larger<int64_t>{}, int64_t{0});  // no row sees a key past it
  const RowSpan key_span = mk.plan().key_tiles(i0, block_end, kTile);
  for (int64_t j0 = key_span.begin; j0 < key_span.end; j0 += kTile) {
    __syncthreads();  // the previous tile's K, V, Pᵀ are no longer read (and Q is written, first time)
    load_tile<kD>(ks, L, k, b, hk, j0, kTile, mk.Tk, D, 1.0f);
    load_tile<kD>(vs, L, v, b, hk, j0, kTile, mk.Tk, Dv, 1.0f);
    __syncthreads();
    float s[4][4] = {};
#pragma unroll 2
    for (int d = 0; d < kD; d += 4) {
      float4 a[4], c[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = load4(qs + (4 * ty + i) * L + d);
#pragma unroll
      for (int j = 0; j < 4; ++j) c[j] = load4(ks + (tx + 16 * j) * L + d);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) s[i][j] += dot4(a[i], c[j]);
    }
    float pz[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t r = i0 + 4 * ty + i;
      float mx = neg_inf;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t c = j0 + tx + 16 * j;
        if (c >= end[i] || !mk.kept(b, h, r, c)) s[i][j] = neg_inf;  // masked, or past this row's end
        mx = max(mx, s[i][j]);
      }
      const float m_new = max(m[i], warp_reduce(mx, Larger<float>{}, 16));
      // NOTE: a row that has seen nothing yet (m_new = -inf) keeps o = 0, l = 0: no exp(-inf - -inf)
      const float cor = m_new == neg_inf ? 1.0f : expf(m[i] - m_new);
      float sum = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float p = s[i][j] == neg_inf ? 0.0f : expf(s[i][j] - m_new);
        sum += p;
        pz[i][j] = p > 0 && mk.p > 0 ? p * mk.dropout(b, h, r, j0 + tx + 16 * j) : p;
      }
      l[i] = l[i] * cor + warp_reduce(sum, Plus<float>{}, 16);
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < 4 * G; ++c) o[i][c] *= cor;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
      store4(pt + (tx + 16 * j) * LP + 4 * ty, make_float4(pz[0][j], pz[1][j], pz[2][j], pz[3][j]));
    __syncthreads();
    const int n = block_end - j0 < kTile ? static_cast<int>(block_end - j0) : kTile;  // keys past n: p = 0
    for (int c = 0; c < n; ++c) {
      const float4 p4 = load4(pt + c * LP + 4 * ty);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float4 v4 = load4(vs + c * L + 64 * g + 4 * tx);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float p = get(p4, i);
          o[i][4 * g + 0] += p * v4.x;
          o[i][4 * g + 1] += p * v4.y;
          o[i][4 * g + 2] += p * v4.z;
          o[i][4 * g + 3] += p * v4.w;
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = i0 + 4 * ty + i;
    if (r >= mk.Tq) continue;
    // NOTE: a row with nothing to attend (l = 0) gives zeros and lse = -inf, not NaN
    const float inv = l[i] > 0 ? 1.0f / l[i] : 0.0f;
    float* orow = out.row(b, h, r);
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t col = 64 * g + 4 * tx + e;
        if (col < Dv) orow[col] = o[i][4 * g + e] * inv;
      }
    if (tx == 0) lse[bh * mk.Tq + r] = l[i] > 0 ? m[i] + logf(l[i]) : neg_inf;
  }
}

template <int kD>
constexpr int bwd_smem_bytes() {
  constexpr int L = kD + 4;
  return static_cast<int>(sizeof(float)) * (2 * kTile * L + 2 * kBwdRows * L + 2 * kBwdRows * (kTile + 4) +
                                            kTile * (kBwdRows + 4) + 2 * kBwdRows) +
         static_cast<int>(sizeof(int64_t)) * kBwdRows;
}

template <int kD>
__global__ void __launch_bounds__(kThreadsFast, kD == 64 ? 2 : 1)
    attention_backward_fast(Rows<const float> q, Rows<const float> k, Rows<const float> v,
                            Rows<const float> gout, const float* lse, const float* delta, Rows<float> gq,
                            Rows<float> gk, Rows<float> gv, Masking<float> mk, int64_t key_tiles, int64_t D,
                            int64_t Dv, float scale) {
  constexpr int L = kD + 4, LS = kTile + 4, LT = kBwdRows + 4, G = kD / 64;
  extern __shared__ float4 smem4[];
  float* ks = reinterpret_cast<float*>(smem4);                      // (64 keys, kD)
  float* vs = ks + kTile * L;                                       // (64 keys, kD)
  float* qs = vs + kTile * L;                                       // (32 rows, kD)
  float* gos = qs + kBwdRows * L;                                   // (32 rows, kD): dO
  float* ps = gos + kBwdRows * L;                                   // (32 rows, 64 keys): Z ⊙ P
  float* dss = ps + kBwdRows * LS;                                  // (32 rows, 64 keys): dS
  float* dst = dss + kBwdRows * LS;                                 // (64 keys, 32 rows): dSᵀ
  float* lse_s = dst + kTile * LT;                                  // (32)
  float* delta_s = lse_s + kBwdRows;                                // (32)
  int64_t* end_s = reinterpret_cast<int64_t*>(delta_s + kBwdRows);  // (32), 8-byte aligned: 32 floats before
  const float neg_inf = -INFINITY;
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  const int64_t bhk = blockIdx.x / key_tiles, j0 = (blockIdx.x % key_tiles) * kTile;
  const int64_t b = bhk / mk.H_kv(), hk = bhk % mk.H_kv();
  load_tile<kD>(ks, L, k, b, hk, j0, kTile, mk.Tk, D, 1.0f);
  load_tile<kD>(vs, L, v, b, hk, j0, kTile, mk.Tk, Dv, 1.0f);
  // dK, dV: keys 4 ty + i, columns 64 g + 4 tx + e, summed over the query heads of the group
  float dk[4][4 * G] = {}, dv[4][4 * G] = {};
  // the query tiles of the group's query heads that see a key of this tile (attention_plan.h)
  const QueryWalk walk = mk.plan().query_walk(j0, min(int64_t{kTile}, mk.Tk - j0), kBwdRows, mk.group, hk);
  for (int64_t t = 0; t < walk.steps(); ++t) {
    const int64_t h = walk.head(t), bh = b * mk.H + h, i0 = walk.row0(t);
    const bool sees = stage_query_rows(mk, b, bh, i0, kBwdRows, j0, lse, delta, end_s, lse_s, delta_s);
    // NOTE: also the barrier after the previous step's products (they read qs, gos, ps, dss, dst, *_s)
    if (!__syncthreads_or(sees)) continue;
    load_tile<kD>(qs, L, q, b, h, i0, kBwdRows, mk.Tq, D, 1.0f);
    load_tile<kD>(gos, L, gout, b, h, i0, kBwdRows, mk.Tq, Dv, 1.0f);
    __syncthreads();
    // S and dP: rows 2 ty + i, keys tx + 16 j
    float s[2][4] = {}, dp[2][4] = {};
#pragma unroll 2
    for (int d = 0; d < kD; d += 4) {
      float4 a[2], g[2], kk[4], vv[4];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        a[i] = load4(qs + (2 * ty + i) * L + d);
        g[i] = load4(gos + (2 * ty + i) * L + d);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        kk[j] = load4(ks + (tx + 16 * j) * L + d);
        vv[j] = load4(vs + (tx + 16 * j) * L + d);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          s[i][j] += dot4(a[i], kk[j]);
          dp[i][j] += dot4(g[i], vv[j]);
        }
    }
    float dsv[2][4];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = 2 * ty + i;
      const int64_t qi = i0 + r;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = tx + 16 * j;
        const int64_t kj = j0 + c;
        float p = 0, ds = 0;
        if (kj < end_s[r] && lse_s[r] != neg_inf && mk.kept(b, h, qi, kj)) {
          const float z = mk.p > 0 ? mk.dropout(b, h, qi, kj) : 1.0f;
          p = expf(scale * s[i][j] - lse_s[r]);
          ds = p * (z * dp[i][j] - delta_s[r]);
          p *= z;
        }
        ps[r * LS + c] = p;
        dss[r * LS + c] = ds;
        dsv[i][j] = ds;
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
      *reinterpret_cast<float2*>(dst + (tx + 16 * j) * LT + 2 * ty) = make_float2(dsv[0][j], dsv[1][j]);
    __syncthreads();
    // dV += (Z ⊙ P)ᵀ dO, dK += dSᵀ Q: keys 4 ty + i, columns 64 g + 4 tx + e
    for (int r = 0; r < kBwdRows; ++r) {
      const float4 p4 = load4(ps + r * LS + 4 * ty), d4 = load4(dss + r * LS + 4 * ty);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float4 go4 = load4(gos + r * L + 64 * g + 4 * tx), q4 = load4(qs + r * L + 64 * g + 4 * tx);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float p = get(p4, i), ds = get(d4, i);
          dv[i][4 * g + 0] += p * go4.x, dv[i][4 * g + 1] += p * go4.y;
          dv[i][4 * g + 2] += p * go4.z, dv[i][4 * g + 3] += p * go4.w;
          dk[i][4 * g + 0] += ds * q4.x, dk[i][4 * g + 1] += ds * q4.y;
          dk[i][4 * g + 2] += ds * q4.z, dk[i][4 * g + 3] += ds * q4.w;
        }
      }
    }
    // dQ += scale dS K: rows 2 ty + i, columns 64 g + 4 tx + e
    float dq[2][4 * G] = {};
    for (int c = 0; c < kTile; ++c) {
      const float2 d2 = *reinterpret_cast<const float2*>(dst + c * LT + 2 * ty);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float4 k4 = load4(ks + c * L + 64 * g + 4 * tx);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          dq[0][4 * g + e] += d2.x * get(k4, e);
          dq[1][4 * g + e] += d2.y * get(k4, e);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int64_t qi = i0 + 2 * ty + i;
      if (qi >= mk.Tq) continue;
      float* row = gq.row(b, h, qi);
#pragma unroll
      for (int g = 0; g < G; ++g)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t col = 64 * g + 4 * tx + e;
          if (col < D && dq[i][4 * g + e] != 0.0f) atomicAdd(row + col, scale * dq[i][4 * g + e]);
        }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t kj = j0 + 4 * ty + i;
    if (kj >= mk.Tk) continue;
    float* gkr = gk.row(b, hk, kj);
    float* gvr = gv.row(b, hk, kj);
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t col = 64 * g + 4 * tx + e;
        if (col < D) gkr[col] = scale * dk[i][4 * g + e];
        if (col < Dv) gvr[col] = dv[i][4 * g + e];
      }
  }
}

// The padded head dim of the fast kernels: 64 or 128 (0: they do not apply).
int fast_head_dim(const Tensor& q, const Tensor& v) {
  const int64_t d = q.size(3) > v.size(3) ? q.size(3) : v.size(3);
  if (q.dtype() != DType::Float32) return 0;
  return d <= 64 ? 64 : d <= 128 ? 128 : 0;
}

// Opts a kernel in to `bytes` of dynamic shared memory (once per kernel and process).
template <class Kernel>
void allow_smem(Kernel kernel, int bytes, const char* op) {
  SACCADE_CUDA_CHECK(op, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

template <int kD>
void launch_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Masking<float>& mk, float scale,
                    const Tensor& out, const Tensor& lse, int64_t blocks, int64_t tiles) {
  constexpr int bytes = fwd_smem_bytes<kD>();
  static const bool once = (allow_smem(attention_forward_fast<kD>, bytes, "flash_attention_forward"), true);
  (void)once;
  attention_forward_fast<kD><<<static_cast<unsigned>(blocks), kThreadsFast, bytes, current_stream()>>>(
      const_rows_of<float>(q), const_rows_of<float>(k), const_rows_of<float>(v), rows_of<float>(out),
      lse.data<float>(), mk, tiles, q.size(3), v.size(3), scale);
  SACCADE_CUDA_CHECK_LAUNCH("flash_attention_forward");
}

template <int kD>
void launch_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gout, const Tensor& lse,
                     const Tensor& delta, const Masking<float>& mk, float scale, const Tensor& gq,
                     const Tensor& gk, const Tensor& gv, int64_t blocks, int64_t key_tiles) {
  constexpr int bytes = bwd_smem_bytes<kD>();
  static const bool once = (allow_smem(attention_backward_fast<kD>, bytes, "flash_attention_backward"), true);
  (void)once;
  attention_backward_fast<kD><<<static_cast<unsigned>(blocks), kThreadsFast, bytes, current_stream()>>>(
      const_rows_of<float>(q), const_rows_of<float>(k), const_rows_of<float>(v), const_rows_of<float>(gout),
      lse.data<float>(), delta.data<float>(), rows_of<float>(gq), rows_of<float>(gk), rows_of<float>(gv), mk,
      key_tiles, q.size(3), v.size(3), scale);
  SACCADE_CUDA_CHECK_LAUNCH("flash_attention_backward");
}

}  // namespace

bool flash_attention_forward_fast(const Tensor& q, const Tensor& k, const Tensor& v, const Masking<float>& mk,
                                  float scale, const Tensor& out, const Tensor& lse) {
  const int kd = fast_head_dim(q, v);
  const int64_t tiles = (mk.Tq + kTile - 1) / kTile, blocks = q.size(0) * mk.H * tiles;
  if (kd == 0 || blocks > INT32_MAX) return false;
  if (kd == 64)
    launch_forward<64>(q, k, v, mk, scale, out, lse, blocks, tiles);
  else
    launch_forward<128>(q, k, v, mk, scale, out, lse, blocks, tiles);
  return true;
}

bool flash_attention_backward_fast(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gout,
                                   const Tensor& lse, const Tensor& delta, const Masking<float>& mk,
                                   float scale, const Tensor& gq, const Tensor& gk, const Tensor& gv) {
  const int kd = fast_head_dim(q, v);
  const int64_t key_tiles = (mk.Tk + kTile - 1) / kTile, blocks = q.size(0) * mk.H_kv() * key_tiles;
  if (kd == 0 || blocks > INT32_MAX) return false;
  if (kd == 64)
    launch_backward<64>(q, k, v, gout, lse, delta, mk, scale, gq, gk, gv, blocks, key_tiles);
  else
    launch_backward<128>(q, k, v, gout, lse, delta, mk, scale, gq, gk, gv, blocks, key_tiles);
  return true;
}

}  // namespace saccade::cuda
