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
// Beside it, the tiled kernels (below): a forward with key/value tiles in shared memory and a backward after
// FlashAttention-2's Algorithm 2 (Dao 2023), one block per key tile. They are the default for float64 and
// for head dims past 128; float32 with head dims <= 128 takes the register-tiled kernels of attention_fast.cu
// (cuda::set_fast_attention(false) brings it back here). cuda::set_readable_attention(true) selects the
// readable ones, which the tests compare all of them with.
//
// Shapes: q (B, H, Tq, D), k (B, H_kv, Tk, D), v (B, H_kv, Tk, Dv) with H = G·H_kv (grouped-query attention;
// query head h reads key/value head h / G), out (B, H, Tq, Dv), gq/gk/gv like q/k/v, gout like out: any
// strides with unit last stride; lse (B, H, Tq) contiguous; valid_lens int64 (B) or (B, Tq); keep Bool
// (B, H, Tq, Tk) view. A sliding window (Masking::window) starts each row's key walk at its first key, and
// each tiled kernel visits only the tiles the plan of attention_plan.h gives it.
#include <cmath>
#include <cstdint>

#include "ops/cuda/api.h"
#include "ops/cuda/attention.cuh"
#include "ops/cuda/backend.h"
#include "ops/cuda/loop.cuh"
#include "ops/philox.h"

namespace saccade::cuda {

namespace {

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
    const int64_t hk = mk.kv_head(h);
    const T* qi = q.row(b, h, i);
    T* o = out.row(b, h, i);
    for (int64_t d = 0; d < Dv; ++d) o[d] = T(0);
    T m = neg_inf, l = 0;
    const int64_t end = mk.end(b, i);
    for (int64_t j = mk.plan().first_key(i); j < end; ++j) {
      if (!mk.kept(b, h, i, j)) continue;
      const T s = scale * dot(qi, k.row(b, hk, j), D);
      const T m_new = max(m, s);
      const T c = exp(m - m_new), e = exp(s - m_new);  // c = 0 while m = -inf
      l = l * c + e;
      const T ze = mk.dropout(b, h, i, j) * e;
      const T* vj = v.row(b, hk, j);
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
// thread runs the online softmax of the readable kernel over the tile, kChunk keys per rescale of o and l
// (FlashAttention-2 rescales once per tile; a chunk keeps the scores in registers), its q and output rows
// held in registers (kD of each: head dims are padded to kD = 64 or 128 with zeros, which add nothing). Key
// tiles past the last key any row of the block may see (causal, valid_lens) are never loaded. Shared memory:
// 2 · kBc · kD · sizeof(T) = 32 KiB (kBc = 16384 / (kD sizeof(T))). Not yet: tensor-core tile products
// (FlashAttention-2's warp-level MMA).
constexpr int kBr = 64;
constexpr int kChunk = 8;  // keys per online-softmax rescale; divides every kBc (16 to 128)

template <class T, int kD>
__global__ void attention_forward_tiled(Rows<const T> q, Rows<const T> k, Rows<const T> v, Rows<T> out,
                                        T* lse, Masking<T> mk, int64_t tiles, int64_t D, int64_t Dv,
                                        T scale) {
  constexpr int kBc = 16384 / (kD * static_cast<int>(sizeof(T)));
  static_assert(kBc % kChunk == 0, "a chunk never reaches past the tile");
  __shared__ T ks[kBc][kD];
  __shared__ T vs[kBc][kD];
  const int64_t bh = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * kBr;
  const int64_t b = bh / mk.H, h = bh % mk.H, hk = mk.kv_head(h), i = i0 + threadIdx.x;
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
  const int64_t block_end =
      block_reduce(end, Larger<int64_t>{}, int64_t{0});  // keys past this: no row sees them
  // key tiles before the first key of row i0 (the window) no row of the block sees either
  const RowSpan key_span = mk.plan().key_tiles(i0, block_end, kBc);
  for (int64_t j0 = key_span.begin; j0 < key_span.end; j0 += kBc) {
    __syncthreads();  // the previous tile is no longer read
    for (int idx = threadIdx.x; idx < kBc * kD; idx += blockDim.x) {
      const int r = idx / kD, d = idx % kD;
      const bool in = j0 + r < mk.Tk;
      ks[r][d] = in && d < D ? k.row(b, hk, j0 + r)[d] : T(0);
      vs[r][d] = in && d < Dv ? v.row(b, hk, j0 + r)[d] : T(0);
    }
    __syncthreads();
    const int64_t n = end - j0 < kBc ? end - j0 : kBc;  // this row's keys in the tile (may be <= 0)
    // kChunk keys at a time: their scores first, then one rescale of o and l by the chunk's new max (not
    // one per key), then o += e^(s - m) z v for each of them
    for (int c0 = 0; c0 < n; c0 += kChunk) {
      T s[kChunk];
      T m_new = m;
#pragma unroll
      for (int u = 0; u < kChunk; ++u) {
        s[u] = neg_inf;  // masked, or past this row's end
        if (c0 + u < n && mk.kept(b, h, i, j0 + c0 + u)) {
          T acc = 0;
#pragma unroll
          for (int d = 0; d < kD; ++d) acc += qr[d] * ks[c0 + u][d];
          s[u] = acc;
        }
        m_new = max(m_new, s[u]);
      }
      if (m_new == neg_inf) continue;  // nothing seen yet: o and l stay 0
      const T cor = exp(m - m_new);    // 0 while m = -inf
      l *= cor;
#pragma unroll
      for (int d = 0; d < kD; ++d) o[d] *= cor;
#pragma unroll
      for (int u = 0; u < kChunk; ++u) {
        if (s[u] == neg_inf) continue;
        const T e = exp(s[u] - m_new);
        l += e;
        const T ze = mk.dropout(b, h, i, j0 + c0 + u) * e;
#pragma unroll
        for (int d = 0; d < kD; ++d) o[d] += ze * vs[c0 + u][d];
      }
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
    const int64_t i = t % mk.Tq, h = (t / mk.Tq) % mk.H, b = t / (mk.Tq * mk.H), hk = mk.kv_head(h);
    const T* qi = q.row(b, h, i);
    const T* gi = gout.row(b, h, i);
    T* gqi = gq.row(b, h, i);
    for (int64_t d = 0; d < D; ++d) gqi[d] = T(0);
    const T li = lse[t];
    if (li == -static_cast<T>(INFINITY)) continue;  // the row saw nothing: zero gradients
    const T delta = dot(gi, out.row(b, h, i), Dv);
    const int64_t end = mk.end(b, i);
    for (int64_t j = mk.plan().first_key(i); j < end; ++j) {
      if (!mk.kept(b, h, i, j)) continue;
      const T* kj = k.row(b, hk, j);
      const T* vj = v.row(b, hk, j);
      const T p = exp(scale * dot(qi, kj, D) - li), z = mk.dropout(b, h, i, j);
      const T ds = p * (z * dot(gi, vj, Dv) - delta);
      T* gkj = gk.row(b, hk, j);  // the G query heads of a group add into one key/value head
      T* gvj = gv.row(b, hk, j);
      for (int64_t d = 0; d < Dv; ++d) atomicAdd(gvj + d, z * p * gi[d]);
      for (int64_t d = 0; d < D; ++d) {
        gqi[d] += scale * ds * kj[d];
        atomicAdd(gkj + d, scale * ds * qi[d]);
      }
    }
  }
}

// ---- the tiled backward (FlashAttention-2, Dao 2023, Algorithm 2), on CUDA cores ----
//
// Pass 1, attention_backward_delta: Δ_i = dO_i · O_i, one warp per query row.
// Pass 2, attention_backward_tiled: one block of kBwdThreads threads per (b, key/value head, tile of N keys).
// The block keeps K_j and V_j in shared memory and its dK_j, dV_j in registers (each thread owns
// E = N kD / 256 elements of each), and walks, for each of the G query heads of its group, the query tiles
// of N rows that the plan gives it (attention_plan.h: causal and window limits). For each query tile Q_i
// that some row of which sees a key of this tile (the others are skipped: valid_lens, rows with lse = -inf):
//
//   load Q_i, dO_i (N, kD), lse_i, Δ_i and the rows' ends into shared memory
//   S = scale Q_i K_jᵀ,  P = exp(S - lse_i) (0 where masked),  dP = dO_i V_jᵀ    (N, N), an entry a thread
//   dS = P ⊙ (Z ⊙ dP - Δ_i),  Pz = Z ⊙ P                                        (N, N), in shared memory
//   dV_j += Pzᵀ dO_i,  dK_j += dSᵀ Q_i,  dQ_i += scale dS K_j                     (N, kD), E entries a thread
//
// and writes dK_j (times scale) and dV_j once at the end; Z is the dropout multiplier, regenerated from
// Philox as the readable kernel does. dQ_i gathers contributions from every key tile: each block adds its
// (N, D) product into gq (zeroed first) with atomicAdd, one atomic per element per (key tile, query tile).
// We chose this over a second pass (one block per query tile walking the key tiles: deterministic, no
// atomics) because that pass recomputes S and dP, a third more tile products; FlashAttention-2 makes the
// same choice. So dQ's float rounding order is not fixed (dK and dV's is: one block owns each key row).
// Head dims are padded with zeros to kD = 32, 64 or 128; larger ones take the readable kernel. Every shared
// row is kD + 1 long, so the threads of a warp reading K or V rows c = 0..31 at one column hit different
// banks. N is chosen so that shared memory stays below the 48 KiB a block may use without opting in:
// float: N = 32 (kD 32, 64), 16 (kD 128); double: 16 (kD 32, 64), 8 (kD 128).
constexpr int kBwdThreads = 256;

// N, the query and key rows of a tile, for head dims padded to kd and elements of `itemsize` bytes.
__host__ __device__ constexpr int bwd_tile(int kd, int itemsize) {
  const int n = 8192 / (kd * itemsize), cap = 128 / itemsize;
  return n < cap ? n : cap;
}

// The padded head dim kD of the tiled backward: 32, 64 or 128 (0: larger, the readable kernel's).
int bwd_head_dim(int64_t D, int64_t Dv) {
  const int64_t d = D > Dv ? D : Dv;
  return d <= 32 ? 32 : d <= 64 ? 64 : d <= 128 ? 128 : 0;
}

// One warp per query row t = (b, h, i): delta[t] = gout_t · out_t.
template <class T>
__global__ void attention_backward_delta(Rows<const T> out, Rows<const T> gout, T* delta, int64_t rows,
                                         int64_t H, int64_t Tq, int64_t Dv) {
  const int lane = threadIdx.x % 32;
  // t is the same for the 32 lanes of a warp (blockDim.x is a multiple of 32), so the shuffles see all lanes
  for (int64_t t = first_index() / 32; t < rows; t += grid_stride() / 32) {
    const int64_t i = t % Tq, h = (t / Tq) % H, b = t / (Tq * H);
    const T* o = out.row(b, h, i);
    const T* g = gout.row(b, h, i);
    T s = 0;
    for (int64_t d = lane; d < Dv; d += 32) s += g[d] * o[d];
    s = warp_reduce(s, Plus<T>{});
    if (lane == 0) delta[t] = s;
  }
}

template <class T, int kD>
__global__ void __launch_bounds__(kBwdThreads)
    attention_backward_tiled(Rows<const T> q, Rows<const T> k, Rows<const T> v, Rows<const T> gout,
                             const T* lse, const T* delta, Rows<T> gq, Rows<T> gk, Rows<T> gv, Masking<T> mk,
                             int64_t key_tiles, int64_t D, int64_t Dv, T scale) {
  constexpr int N = bwd_tile(kD, sizeof(T)), L = kD + 1, E = N * kD / kBwdThreads;
  static_assert(N * kD % kBwdThreads == 0, "every thread owns whole elements of dK_j and dV_j");
  static_assert(sizeof(T) * (4 * N * L + 2 * N * N + 2 * N) + sizeof(int64_t) * N <= 48 * 1024,
                "static shared memory is at most 48 KiB");
  __shared__ T ks[N][L], vs[N][L], qs[N][L], gos[N][L];  // K_j, V_j, Q_i, dO_i (zero-padded)
  __shared__ T pz[N][N], ds[N][N];                       // Z ⊙ P and dS of the pair (i, j)
  __shared__ T lse_s[N], delta_s[N];
  __shared__ int64_t end_s[N];  // one past the last key row i0 + r sees
  const T neg_inf = -static_cast<T>(INFINITY);
  const int64_t bhk = blockIdx.x / key_tiles, j0 = (blockIdx.x % key_tiles) * N;
  const int64_t b = bhk / mk.H_kv(), hk = bhk % mk.H_kv();
  const int tid = threadIdx.x;
  for (int idx = tid; idx < N * kD; idx += kBwdThreads) {
    const int c = idx / kD, d = idx % kD;
    const bool in = j0 + c < mk.Tk;
    ks[c][d] = in && d < D ? k.row(b, hk, j0 + c)[d] : T(0);
    vs[c][d] = in && d < Dv ? v.row(b, hk, j0 + c)[d] : T(0);
  }
  // element e < E of this thread in an (N, kD) tile: row (tid + e kBwdThreads) / kD, column tid % kD
  // (kBwdThreads is a multiple of kD), so a warp reads one row's consecutive columns
  const int col = tid % kD, row0 = tid / kD;
  constexpr int kRowStep = kBwdThreads / kD;
  T dk[E] = {}, dv[E] = {};
  // the query tiles of the group's query heads that see a key of this tile (attention_plan.h)
  const QueryWalk walk = mk.plan().query_walk(j0, min(int64_t{N}, mk.Tk - j0), N, mk.group, hk);
  for (int64_t t = 0; t < walk.steps(); ++t) {
    const int64_t h = walk.head(t), bh = b * mk.H + h, i0 = walk.row0(t);
    // NOTE: the previous tile's readers of end_s, lse_s, delta_s passed the barrier before its products
    const bool sees = stage_query_rows(mk, b, bh, i0, N, j0, lse, delta, end_s, lse_s, delta_s);
    if (!__syncthreads_or(sees)) continue;  // also the barrier after the previous tile's products
    for (int idx = tid; idx < N * kD; idx += kBwdThreads) {
      const int r = idx / kD, d = idx % kD;
      const bool in = i0 + r < mk.Tq;
      qs[r][d] = in && d < D ? q.row(b, h, i0 + r)[d] : T(0);
      gos[r][d] = in && d < Dv ? gout.row(b, h, i0 + r)[d] : T(0);
    }
    __syncthreads();
    for (int idx = tid; idx < N * N; idx += kBwdThreads) {
      const int r = idx / N, c = idx % N;
      const int64_t i = i0 + r, j = j0 + c;
      T p = 0, dsv = 0;
      if (j < end_s[r] && lse_s[r] != neg_inf && mk.kept(b, h, i, j)) {
        T s = 0, dp = 0;
#pragma unroll
        for (int d = 0; d < kD; ++d) {
          s += qs[r][d] * ks[c][d];
          dp += gos[r][d] * vs[c][d];
        }
        const T z = mk.dropout(b, h, i, j);
        p = exp(scale * s - lse_s[r]);
        dsv = p * (z * dp - delta_s[r]);
        p *= z;
      }
      pz[r][c] = p;
      ds[r][c] = dsv;
    }
    __syncthreads();
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int c = row0 + e * kRowStep;  // a key row of dK_j, dV_j
      T a = dv[e], g = dk[e];
      for (int r = 0; r < N; ++r) {
        a += pz[r][c] * gos[r][col];
        g += ds[r][c] * qs[r][col];
      }
      dv[e] = a, dk[e] = g;
    }
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int r = row0 + e * kRowStep;  // a query row of dQ_i
      if (i0 + r >= mk.Tq || col >= D) continue;
      T a = 0;
      for (int c = 0; c < N; ++c) a += ds[r][c] * ks[c][col];
      if (a != T(0)) atomicAdd(gq.row(b, h, i0 + r) + col, scale * a);
    }
  }
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int c = row0 + e * kRowStep;
    if (j0 + c >= mk.Tk) continue;
    if (col < D) gk.row(b, hk, j0 + c)[col] = scale * dk[e];
    if (col < Dv) gv.row(b, hk, j0 + c)[col] = dv[e];
  }
}

// Pass 2 of the tiled backward for one padded head dim kD (q.. gv as in flash_attention_backward).
template <class T, int kD>
void launch_backward_tiled(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gout,
                           const Tensor& lse, const Tensor& delta, const Tensor& gq, const Tensor& gk,
                           const Tensor& gv, const Masking<T>& mk, int64_t blocks, int64_t key_tiles,
                           T scale) {
  attention_backward_tiled<T, kD><<<static_cast<unsigned>(blocks), kBwdThreads, 0, current_stream()>>>(
      const_rows_of<T>(q), const_rows_of<T>(k), const_rows_of<T>(v), const_rows_of<T>(gout), lse.data<T>(),
      delta.data<T>(), rows_of<T>(gq), rows_of<T>(gk), rows_of<T>(gv), mk, key_tiles, q.size(3), v.size(3),
      scale);
}

}  // namespace

void CudaBackend::flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const ops::AttentionMask& mask, double scale,
                                          const ops::AttentionDropout& dropout, const Tensor& out,
                                          const Tensor& lse) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), D = q.size(3), Dv = v.size(3);
  const int64_t H_kv = k.size(1), rows = B * H * Tq;
  if (rows == 0) return;
  if (is_half(q.dtype())) {  // 16 bits: the tensor-core kernel while tensor_core_attention() is on
    if (flash_attention_forward_mma(q, k, v, masking_of<float>(mask, dropout, H, H_kv, Tq, Tk),
                                    static_cast<float>(scale), out, lse))
      return;
    // switched off, or where the tensor-core kernel does not apply: float32 copies, out rounded once
    widen({q, k, v}, {}, {out, lse}, [&](const std::vector<Tensor>& t) {
      flash_attention_forward(t[0], t[1], t[2], mask, scale, dropout, t[3], t[4]);
    });
    return;
  }
  const int64_t tiles = (Tq + kBr - 1) / kBr;
  const bool tiled = !readable_attention() && D <= 128 && Dv <= 128 && B * H * tiles <= INT32_MAX;
  dispatch_floating(q.dtype(), "flash_attention_forward", [&]<class T>() {
    const Masking<T> mk = masking_of<T>(mask, dropout, H, H_kv, Tq, Tk);
    if constexpr (std::is_same_v<T, float>) {  // the register-tiled kernel (attention_fast.cu)
      if (fast_attention() && !readable_attention() &&
          flash_attention_forward_fast(q, k, v, mk, static_cast<float>(scale), out, lse))
        return;
    }
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
  const int64_t H_kv = k.size(1), rows = B * H * Tq;
  if (is_half(q.dtype())) {  // 16 bits: the tensor-core kernels while tensor_core_attention() is on
    if (flash_attention_backward_mma(q, k, v, out, gout, lse,
                                     masking_of<float>(mask, dropout, H, H_kv, Tq, Tk),
                                     static_cast<float>(scale), gq, gk, gv))
      return;
    // switched off, or where the tensor-core kernels do not apply: float32 copies, each gradient rounded once
    widen({q, k, v, out, gout, lse}, {}, {gq, gk, gv}, [&](const std::vector<Tensor>& t) {
      flash_attention_backward(t[0], t[1], t[2], t[3], t[4], t[5], mask, scale, dropout, t[6], t[7], t[8]);
    });
    return;
  }
  const int kd = bwd_head_dim(D, Dv);
  const int64_t n = kd ? bwd_tile(kd, static_cast<int>(q.itemsize())) : 1;
  const int64_t key_tiles = (Tk + n - 1) / n, blocks = B * H_kv * key_tiles;  // a block per key/value head
  const bool tiled = !readable_attention() && kd > 0 && blocks <= INT32_MAX;
  if (rows == 0 || !tiled) {  // the readable kernel adds into gk, gv; no query rows: zero gradients
    fill(gk, 0.0);
    fill(gv, 0.0);
  }
  if (rows == 0) return;
  if (tiled) fill(gq, 0.0);          // dQ is added up over the key tiles
  if (tiled && blocks == 0) return;  // Tk = 0: gq stays zero, gk and gv are empty
  const Tensor delta =
      tiled ? Tensor::empty({rows}, q.dtype(), q.device(), "flash_attention_backward") : Tensor();
  dispatch_floating(q.dtype(), "flash_attention_backward", [&]<class T>() {
    const Masking<T> mk = masking_of<T>(mask, dropout, H, H_kv, Tq, Tk);
    if (!tiled) {
      attention_backward_rows<T><<<blocks_for(rows, 128), 128, 0, stream()>>>(
          const_rows_of<T>(q), const_rows_of<T>(k), const_rows_of<T>(v), const_rows_of<T>(out),
          const_rows_of<T>(gout), lse.data<T>(), rows_of<T>(gq), rows_of<T>(gk), rows_of<T>(gv), mk, B, D, Dv,
          static_cast<T>(scale));
      SACCADE_CUDA_CHECK_LAUNCH("flash_attention_backward");
      return;
    }
    attention_backward_delta<T><<<blocks_for(rows * 32, 256), 256, 0, stream()>>>(
        const_rows_of<T>(out), const_rows_of<T>(gout), delta.data<T>(), rows, H, Tq, Dv);
    SACCADE_CUDA_CHECK_LAUNCH("flash_attention_backward");
    if constexpr (std::is_same_v<T, float>) {  // the register-tiled kernel (attention_fast.cu)
      if (fast_attention() &&
          flash_attention_backward_fast(q, k, v, gout, lse, delta, mk, static_cast<float>(scale), gq, gk, gv))
        return;
    }
    if (kd == 32)
      launch_backward_tiled<T, 32>(q, k, v, gout, lse, delta, gq, gk, gv, mk, blocks, key_tiles, T(scale));
    else if (kd == 64)
      launch_backward_tiled<T, 64>(q, k, v, gout, lse, delta, gq, gk, gv, mk, blocks, key_tiles, T(scale));
    else
      launch_backward_tiled<T, 128>(q, k, v, gout, lse, delta, gq, gk, gv, mk, blocks, key_tiles, T(scale));
    SACCADE_CUDA_CHECK_LAUNCH("flash_attention_backward");
  });
}

}  // namespace saccade::cuda
