// CUDA fused attention on the tensor cores, bfloat16 and float16: FlashAttention-2's forward and backward
// (Dao 2023, "FlashAttention-2", Algorithms 1 and 2; the backward below the forward) with the products on
// mma.sync.m16n8k16 (16-bit inputs, float32
// accumulators), the way the paper's section 3.3 partitions the work: each warp owns 16 query rows, so the
// running maximum m and sum l of a row stay in the registers of one group of four lanes, and the 64-key tiles
// of K and V are shared by the block's four warps. The index math is in ops/cuda/mma.h (tested on the CPU).
//
// Shapes: q (B, H, Tq, D), k (B, H_kv, Tk, D), v (B, H_kv, Tk, Dv) (H = G·H_kv: query head h reads key/value
// head h / G), out (B, H, Tq, Dv) in one 16-bit dtype, any strides with unit last stride; lse (B, H, Tq)
// float32 contiguous. D, Dv <= 128, padded with zeros to kD = 64 or 128 in shared memory. Masks (valid_lens,
// keep-masks, causal) and dropout (Philox, as ops::dropout draws each element) as the float32 kernels:
// attention.cuh's Masking.
//
// One block of 4 warps (128 threads) per (b, h, 64 query rows). Warp w, rows i0 + 16 w .. + 15:
//   Q fragments (16 x kD) loaded once from shared memory into registers (kD / 16 k-steps x 4 registers)
//   per key tile j0 (64 keys; the block's K and V tiles in shared memory, rows padded by 8 elements):
//     S = Q Kᵀ             8 key tiles x kD / 16 k-steps of mma; scaled and masked in float32
//     m' = max(m, rowmax S) within the lane and across its group of four (two shuffles)
//     P = exp(S - m'), l = l e^(m - m') + rowsum P, O = O e^(m - m')
//     O += (Z ⊙ P) V        P rounded to 16 bits straight from the S accumulators (mma.h, p_register)
//   out = O / l (rounded once to 16 bits), lse = m + log l (float32; -inf and zeros for a row that sees
//   nothing).
// Written without a GPU (2026-11-25); its tests passed on an H200 (2026-11-28), and it is the default for
// 16-bit attention (cuda::set_tensor_core_attention). It is written to be read, not to match
// FlashAttention-2: K and V come in by plain synchronous 16-byte copies (no ldmatrix, no cp.async pipelining)
// and the backward adds dQ with float32 atomicAdd, so it stays well behind torch SDPA's flash backend
// (figures: bench/RESULTS.md, "2026-11-28 — on a GPU, third visit"). That kernel is
// MmaAttentionVariant::Readable (ops/cuda/attention_mma.h), the reference and the default.
// MmaAttentionVariant::Pipelined (kFast below; written 2026-11-28 without a GPU, issue 39; chosen by
// set_mma_attention_variant until it has run on one) is the same algorithm with FlashAttention-2's loads:
// ldmatrix.x4 for every fragment (.trans for the (K, N) operands V, dO, Q, K; mma.h's a_ldmatrix,
// b_nk_ldmatrix, b_kn_ldmatrix_trans), cp.async double buffering of the forward's K and V tiles (tile j + 1
// copied while tile j computes; one barrier per tile), no per-score mask on key tiles that every row of the
// block sees whole, and exp2f on scores scaled by scale·log2(e) (lse still in natural log).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "ops/cuda/api.h"
#include "ops/cuda/attention.cuh"
#include "ops/cuda/attention_mma.h"
#include "ops/cuda/backend.h"
#include "ops/cuda/error.h"
#include "ops/cuda/mma.h"
#include "ops/half.h"

namespace saccade::cuda {

namespace {

constexpr int kWarps = 4, kThreadsMma = 32 * kWarps;
constexpr int kQueryRows = 16 * kWarps;  // query rows of a block
constexpr int kKeyTile = 64;             // keys of a shared K / V tile
constexpr int kPad = 8;  // elements of padding per shared row (16 bytes: ldmatrix's 8 rows hit 8 bank groups)
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// The smaller of a and b, for block_reduce: the first row end of a block.
template <class T>
struct Smaller {
  __device__ T operator()(T a, T b) const { return a < b ? a : b; }
};

// float -> the 16 bits of T (round to nearest even).
template <class T>
__device__ inline uint16_t narrow(float x) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return float_to_bf16_bits(x);
  else
    return float_to_f16_bits(x);
}
__device__ inline uint32_t pack2(uint16_t lo, uint16_t hi) { return uint32_t(lo) | (uint32_t(hi) << 16); }
// Two neighbouring 16-bit elements (p even: 4-byte aligned) as one register, the first in its low half.
__device__ inline uint32_t load32(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
// A B register from a row-major (K, N) tile with row stride ld: elements 2 r and 2 r + 1 (two rows).
__device__ inline uint32_t load_kn(const uint16_t* tile, int ld, int lane, int r, int nd, int kk) {
  const mma::Coord lo = mma::b_source_kn(lane, 2 * r, nd, kk), hi = mma::b_source_kn(lane, 2 * r + 1, nd, kk);
  return pack2(tile[lo.row * ld + lo.col], tile[hi.row * ld + hi.col]);
}

// The shared-memory address of p, for ldmatrix and cp.async.
__device__ inline uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16: four 8 x 8 matrices, lane's row address p (16-byte
// aligned), into r[0..3] (ops/cuda/mma.h: ldmatrix_element, a_ldmatrix, b_nk_ldmatrix, b_kn_ldmatrix_trans).
template <bool kTrans>
__device__ inline void ldmatrix_x4(uint32_t r[4], const uint16_t* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
#endif
}
// 16 bytes global -> shared without the registers (cp.async.cg, sm_80): complete after cp_async_wait_all.
__device__ inline void cp_async16(uint16_t* dst, const uint16_t* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(dst)), "l"(src));
#endif
}
// Closes this thread's cp.async group, then waits for all of its groups (the block still needs a barrier).
__device__ inline void cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
#endif
}
// Closes this thread's cp.async group (the copies issued since the last one).
__device__ inline void cp_async_commit() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// c += a b on the tensor cores: one m16n8k16 product, fragments as ops/cuda/mma.h lays them out.
template <class T>
__device__ inline void mma_16816(float c[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // bf16 / f16 mma with float32 accumulators needs sm_80; the launcher checks the device first
#else
  if constexpr (std::is_same_v<T, bfloat16>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// Copies rows [r0, r0 + n) of one (b, h) into a shared (n, kD + kPad) tile, zeros past `rows` and `cols`.
// vec: every row starts 16-byte aligned and cols is a multiple of 8, so 8 elements move as one uint4, with
// cp.async when kAsync (then complete after cp_async_wait_all and a barrier; the zeros are plain stores).
template <int kD, bool kAsync = false>
__device__ void load_tile(uint16_t* dst, const Rows<const uint16_t>& src, int64_t b, int64_t h, int64_t r0,
                          int n, int64_t rows, int64_t cols, bool vec) {
  constexpr int L = kD + kPad;
  if (vec) {
    constexpr int kV = kD / 8;
    for (int idx = threadIdx.x; idx < n * kV; idx += blockDim.x) {
      const int r = idx / kV, d = (idx % kV) * 8;
      const bool in = r0 + r < rows && d < cols;
      if constexpr (kAsync) {
        if (in) {
          cp_async16(dst + r * L + d, src.row(b, h, r0 + r) + d);
          continue;
        }
      }
      uint4 x = make_uint4(0, 0, 0, 0);
      if (in) x = *reinterpret_cast<const uint4*>(src.row(b, h, r0 + r) + d);
      *reinterpret_cast<uint4*>(dst + r * L + d) = x;
    }
    return;
  }
  for (int idx = threadIdx.x; idx < n * kD; idx += blockDim.x) {
    const int r = idx / kD, d = idx % kD;
    dst[r * L + d] = (r0 + r < rows && d < cols) ? src.row(b, h, r0 + r)[d] : uint16_t{0};
  }
}

// Q, and one K and V tile (two of each, double-buffered, when kFast).
template <int kD, bool kFast>
constexpr int mma_smem_bytes() {
  return static_cast<int>(sizeof(uint16_t)) * (kQueryRows + (kFast ? 4 : 2) * kKeyTile) * (kD + kPad);
}

// kFast: MmaAttentionVariant::Pipelined (ldmatrix, cp.async double buffering, mask-free full tiles, exp2f);
// else the readable kernel. Scores and m are in units of log2 when kFast (scale·log2 e folded in).
template <class T, int kD, bool kFast>
__global__ void __launch_bounds__(kThreadsMma)
    attention_forward_mma(Rows<const uint16_t> q, Rows<const uint16_t> k, Rows<const uint16_t> v,
                          Rows<uint16_t> out, float* lse, Masking<float> mk, int64_t tiles, int64_t D,
                          int64_t Dv, float scale, bool vec) {
  constexpr int L = kD + kPad;
  constexpr int KS = kD / mma::kK;        // k-steps of S = Q Kᵀ
  constexpr int NT = kKeyTile / mma::kN;  // 8-key tiles of S
  constexpr int ND = kD / mma::kN;        // 8-column tiles of O
  constexpr unsigned kAll = 0xffffffffu;
  extern __shared__ uint4 smem_mma[];
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem_mma);  // (64 query rows, L)
  uint16_t* ks = qs + kQueryRows * L;                    // (64 keys, L)
  uint16_t* vs = ks + kKeyTile * L;                      // (64 keys, L)
  constexpr int kBuffer = 2 * kKeyTile * L;              // kFast: the second K, V pair at ks, vs + kBuffer
  const float neg_inf = -INFINITY;
  const int warp = threadIdx.x / mma::kWarp, lane = threadIdx.x % mma::kWarp;
  const int64_t bh = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * kQueryRows;
  const int64_t b = bh / mk.H, h = bh % mk.H, hk = mk.kv_head(h);
  load_tile<kD, kFast>(qs, q, b, h, i0, kQueryRows, mk.Tq, D, vec);

  // this lane's two rows: accumulator elements 0, 1 are row[0], elements 2, 3 row[1] = row[0] + 8
  int64_t row[2], end[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row[r] = i0 + 16 * warp + mma::c_coord(lane, 2 * r).row;
    end[r] = row[r] < mk.Tq ? mk.end(b, row[r]) : 0;
  }
  // no row of the block sees a key past block_end (block_reduce synchronises: qs is complete after it)
  const int64_t block_end = block_reduce(end[0] > end[1] ? end[0] : end[1], Larger<int64_t>{}, int64_t{0});
  // the key tiles from row i0's window on (attention_plan.h)
  const RowSpan key_span = mk.plan().key_tiles(i0, block_end, kKeyTile);
  // kFast: every row of the block sees every key of [full_begin, full_end) (no keep-mask, no dropout, no
  // packed documents):
  // a key tile inside it skips the per-score mask (the plan's first_key grows with the row)
  int64_t full_begin = 0, full_end = 0;
  if constexpr (kFast) {
    if (!mk.keep && !(mk.p > 0) && !mk.key_starts) {
      const int64_t last = min(i0 + kQueryRows, mk.Tq) - 1;
      full_begin = mk.plan().first_key(last);
      int64_t e = mk.Tk;  // rows past Tq are never written: they do not limit the span
#pragma unroll
      for (int r = 0; r < 2; ++r)
        if (row[r] < mk.Tq) e = min(e, end[r]);
      full_end = block_reduce(e, Smaller<int64_t>{}, mk.Tk);
    }
    if (key_span.begin < key_span.end) {  // the first K, V tile, with Q
      load_tile<kD, true>(ks, k, b, hk, key_span.begin, kKeyTile, mk.Tk, D, vec);
      load_tile<kD, true>(vs, v, b, hk, key_span.begin, kKeyTile, mk.Tk, Dv, vec);
    }
    cp_async_wait_all();
  }
  __syncthreads();
  uint32_t qa[KS][4];
#pragma unroll
  for (int s = 0; s < KS; ++s) {
    if constexpr (kFast) {
      const mma::Coord a = mma::a_ldmatrix(lane, s);
      ldmatrix_x4<false>(qa[s], qs + (16 * warp + a.row) * L + a.col);
    } else {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const mma::Coord a = mma::a_source(lane, 2 * r, s);
        qa[s][r] = load32(qs + (16 * warp + a.row) * L + a.col);
      }
    }
  }

  float m[2] = {neg_inf, neg_inf}, l[2] = {0, 0};  // l: this lane's part of the row sum
  float o[ND][4];
#pragma unroll
  for (int nd = 0; nd < ND; ++nd)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[nd][e] = 0;

  const float score_scale = kFast ? scale * kLog2e : scale;
  int buffer = 0;  // kFast: the K, V pair of this tile
  for (int64_t j0 = key_span.begin; j0 < key_span.end; j0 += kKeyTile) {
    const uint16_t *kt = ks, *vt = vs;
    if constexpr (kFast) {  // tile j0 is in place (barrier at the end of the last step); prefetch the next
      kt = ks + buffer * kBuffer, vt = vs + buffer * kBuffer;
      if (j0 + kKeyTile < key_span.end) {
        load_tile<kD, true>(ks + (buffer ^ 1) * kBuffer, k, b, hk, j0 + kKeyTile, kKeyTile, mk.Tk, D, vec);
        load_tile<kD, true>(vs + (buffer ^ 1) * kBuffer, v, b, hk, j0 + kKeyTile, kKeyTile, mk.Tk, Dv, vec);
      }
      cp_async_commit();
    } else {
      __syncthreads();  // the previous tile's K and V are no longer read
      load_tile<kD>(ks, k, b, hk, j0, kKeyTile, mk.Tk, D, vec);
      load_tile<kD>(vs, v, b, hk, j0, kKeyTile, mk.Tk, Dv, vec);
      __syncthreads();
    }
    // S = Q Kᵀ
    float s[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = 0;
#pragma unroll
    for (int kstep = 0; kstep < KS; ++kstep)
#pragma unroll
      for (int nt = 0; nt < NT; nt += kFast ? 2 : 1) {
        if constexpr (kFast) {  // tiles nt and nt + 1 from one ldmatrix
          uint32_t bf[4];
          const mma::Coord src = mma::b_nk_ldmatrix(lane, nt, kstep);
          ldmatrix_x4<false>(bf, kt + src.row * L + src.col);
          mma_16816<T>(s[nt], qa[kstep], bf);
          mma_16816<T>(s[nt + 1], qa[kstep], bf + 2);
        } else {
          uint32_t bf[2];
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const mma::Coord src = mma::b_source_nk(lane, 2 * r, nt, kstep);
            bf[r] = load32(kt + src.row * L + src.col);
          }
          mma_16816<T>(s[nt], qa[kstep], bf);
        }
      }
    // scale, mask, the new row maxima
    const bool full = kFast && j0 >= full_begin && j0 + kKeyTile <= full_end;
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        const int64_t col = j0 + mma::acc_coord(lane, e, nt).col;
        float x = s[nt][e] * score_scale;
        if (!full && (col >= end[r] || !mk.kept(b, h, row[r], col))) x = neg_inf;
        s[nt][e] = x;
        mx[r] = fmaxf(mx[r], x);
      }
    float ref[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(kAll, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(kAll, mx[r], 2));
      ref[r] = mx[r] == neg_inf ? 0.0f : mx[r];  // a row that has seen nothing yet: exp(-inf - 0) = 0
      const float alpha = kFast ? exp2f(m[r] - ref[r]) : expf(m[r] - ref[r]);
      m[r] = mx[r];
      l[r] *= alpha;
#pragma unroll
      for (int nd = 0; nd < ND; ++nd) o[nd][2 * r] *= alpha, o[nd][2 * r + 1] *= alpha;
    }
    // P = exp(S - m'), its row sums before dropout, then Z ⊙ P rounded to 16 bits as the A fragments of P V
    uint32_t pa[NT / 2][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      float p[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        float x = kFast ? exp2f(s[nt][e] - ref[r]) : expf(s[nt][e] - ref[r]);
        l[r] += x;
        if (mk.p > 0 && x != 0) x *= mk.dropout(b, h, row[r], j0 + mma::acc_coord(lane, e, nt).col);
        p[e] = x;
      }
      pa[nt / 2][mma::p_register(nt, 0)] = pack2(narrow<T>(p[0]), narrow<T>(p[1]));
      pa[nt / 2][mma::p_register(nt, 2)] = pack2(narrow<T>(p[2]), narrow<T>(p[3]));
    }
    // O += P V
#pragma unroll
    for (int kk = 0; kk < NT / 2; ++kk)
#pragma unroll
      for (int nd = 0; nd < ND; nd += kFast ? 2 : 1) {
        if constexpr (kFast) {  // tiles nd and nd + 1 from one ldmatrix.trans
          uint32_t bf[4];
          const mma::Coord src = mma::b_kn_ldmatrix_trans(lane, nd, kk);
          ldmatrix_x4<true>(bf, vt + src.row * L + src.col);
          mma_16816<T>(o[nd], pa[kk], bf);
          mma_16816<T>(o[nd + 1], pa[kk], bf + 2);
        } else {
          const uint32_t bf[2] = {load_kn(vt, L, lane, 0, nd, kk), load_kn(vt, L, lane, 1, nd, kk)};
          mma_16816<T>(o[nd], pa[kk], bf);
        }
      }
    if constexpr (kFast) {  // the next tile in place, and this one no longer read, for every thread
      cp_async_wait_all();
      __syncthreads();
      buffer ^= 1;
    }
  }

  // out = O / l, lse = m + log l (the row sums gathered over the group of four lanes)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(kAll, l[r], 1);
    l[r] += __shfl_xor_sync(kAll, l[r], 2);
    if (row[r] >= mk.Tq) continue;
    const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
    uint16_t* orow = out.row(b, h, row[r]);
#pragma unroll
    for (int nd = 0; nd < ND; ++nd)
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        const int col = mma::acc_coord(lane, e, nd).col;
        if (col < Dv) orow[col] = narrow<T>(o[nd][e] * inv);
      }
    if ((lane & 3) == 0)
      lse[bh * mk.Tq + row[r]] = l[r] > 0 ? (kFast ? m[r] * kLn2 : m[r]) + logf(l[r]) : neg_inf;
  }
}

// ---- backward (FlashAttention-2, Algorithm 2) ----
// Pass 1, attention_delta_mma: Δ_i = dO_i · O_i in float32, one warp per query row.
// Pass 2, attention_backward_mma: one block of 4 warps per (b, key/value head, 64-key tile j0); warp w owns
// keys j0 + 16 w .. + 15 and keeps their dK, dV (16 x kD, float32) in registers, summed over the G query
// heads of the group. K_j and V_j stay in shared memory; for each query head of the group the block walks
// the 64-row query tiles of the plan (attention_plan.h: causal and window limits) that see one of its keys
// (the others are skipped: valid_lens, rows with lse = -inf). Per query tile i0, each warp for its 16 keys:
//   Sᵀ = K_w Q_iᵀ,  dPᵀ = V_w dO_iᵀ                 (16 x 64), A from K / V rows, B from Q / dO (b_source_nk)
//   Pᵀ = exp(scale Sᵀ - lse), dSᵀ = Pᵀ ⊙ (Z ⊙ dPᵀ - Δ), Pzᵀ = Z ⊙ Pᵀ   (0 where masked)
//   dV_w += Pzᵀ dO_i,  dK_w += dSᵀ Q_i             A straight from the accumulators (p_register)
//   dS (rounded to 16 bits) into shared memory; then warp w computes rows 16 w .. + 15 of dQ_i = dS K_j
//   (A from dS, B from K) and adds scale dQ_i into a float32 buffer with atomicAdd.
// Pass 3 (the launcher): the float32 dQ buffer rounded into gq. dK (times scale) and dV are written once.
__global__ void attention_delta_mma_kernel(Rows<const uint16_t> out, Rows<const uint16_t> gout, float* delta,
                                           int64_t rows, int64_t H, int64_t Tq, int64_t Dv, bool bf16) {
  const int lane = threadIdx.x % 32;
  // t is the same for the 32 lanes of a warp (blockDim.x is a multiple of 32), so the shuffles see all lanes
  for (int64_t t = first_index() / 32; t < rows; t += grid_stride() / 32) {
    const int64_t i = t % Tq, h = (t / Tq) % H, b = t / (Tq * H);
    const uint16_t *o = out.row(b, h, i), *g = gout.row(b, h, i);
    float acc = 0;
    for (int64_t d = lane; d < Dv; d += 32)
      acc += bf16 ? bf16_bits_to_float(o[d]) * bf16_bits_to_float(g[d])
                  : f16_bits_to_float(o[d]) * f16_bits_to_float(g[d]);
    acc = warp_reduce(acc, Plus<float>{});
    if (lane == 0) delta[t] = acc;
  }
}

template <int kD>
constexpr int mma_bwd_smem_bytes() {
  return static_cast<int>(sizeof(uint16_t)) * (4 * kKeyTile * (kD + kPad) + kQueryRows * (kKeyTile + kPad)) +
         kQueryRows * static_cast<int>(2 * sizeof(float) + sizeof(int64_t));
}

// kFast: MmaAttentionVariant::Pipelined (every fragment by ldmatrix, exp2f); else the readable kernel.
template <class T, int kD, bool kFast>
__global__ void __launch_bounds__(kThreadsMma)
    attention_backward_mma(Rows<const uint16_t> q, Rows<const uint16_t> k, Rows<const uint16_t> v,
                           Rows<const uint16_t> gout, const float* lse, const float* delta, float* gq32,
                           Rows<uint16_t> gk, Rows<uint16_t> gv, Masking<float> mk, int64_t key_tiles,
                           int64_t D, int64_t Dv, float scale, bool vec) {
  constexpr int L = kD + kPad, LS = kKeyTile + kPad;
  constexpr int KS = kD / mma::kK;          // k-steps over the head dim
  constexpr int NQ = kQueryRows / mma::kN;  // 8-query tiles of Sᵀ, dPᵀ
  constexpr int ND = kD / mma::kN;          // 8-column tiles of dK, dV, dQ
  constexpr int KK = kQueryRows / mma::kK;  // k-steps over the query tile (dV, dK)
  constexpr int KJ = kKeyTile / mma::kK;    // k-steps over the key tile (dQ)
  extern __shared__ uint4 smem_mma[];
  uint16_t* ks = reinterpret_cast<uint16_t*>(smem_mma);  // (64 keys, L)
  uint16_t* vs = ks + kKeyTile * L;                      // (64 keys, L)
  uint16_t* qs = vs + kKeyTile * L;                      // (64 queries, L)
  uint16_t* gos = qs + kQueryRows * L;                   // (64 queries, L)
  uint16_t* dss = gos + kQueryRows * L;                  // dS (64 queries, LS), 16 bits
  float* lse_s = reinterpret_cast<float*>(dss + kQueryRows * LS);
  float* delta_s = lse_s + kQueryRows;
  int64_t* end_s = reinterpret_cast<int64_t*>(delta_s + kQueryRows);
  const int tid = threadIdx.x, warp = tid / mma::kWarp, lane = tid % mma::kWarp, kw = 16 * warp;
  const float score_scale = scale * kLog2e;  // kFast: exp(scale s - lse) = 2^(scale log2(e) s - lse log2(e))
  const int64_t bhk = blockIdx.x / key_tiles, j0 = (blockIdx.x % key_tiles) * kKeyTile;
  const int64_t b = bhk / mk.H_kv(), hk = bhk % mk.H_kv();
  load_tile<kD>(ks, k, b, hk, j0, kKeyTile, mk.Tk, D, vec);
  load_tile<kD>(vs, v, b, hk, j0, kKeyTile, mk.Tk, Dv, vec);
  float dk[ND][4], dv[ND][4];
#pragma unroll
  for (int nd = 0; nd < ND; ++nd)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[nd][e] = 0, dv[nd][e] = 0;

  // the query tiles of the group's query heads that see a key of this tile (attention_plan.h)
  const QueryWalk walk =
      mk.plan().query_walk(j0, min(int64_t{kKeyTile}, mk.Tk - j0), kQueryRows, mk.group, hk);
  for (int64_t t = 0; t < walk.steps(); ++t) {
    const int64_t h = walk.head(t), bh = b * mk.H + h, i0 = walk.row0(t);
    // the previous tile's readers of end_s, lse_s, delta_s, qs, gos and dss passed the barrier below
    const bool sees = stage_query_rows(mk, b, bh, i0, kQueryRows, j0, lse, delta, end_s, lse_s, delta_s);
    if (!__syncthreads_or(sees)) continue;
    load_tile<kD>(qs, q, b, h, i0, kQueryRows, mk.Tq, D, vec);
    load_tile<kD>(gos, gout, b, h, i0, kQueryRows, mk.Tq, Dv, vec);
    __syncthreads();
    // Sᵀ = K_w Q_iᵀ and dPᵀ = V_w dO_iᵀ, (16 keys x 64 queries) each
    float st[NQ][4], dpt[NQ][4];
#pragma unroll
    for (int nt = 0; nt < NQ; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[nt][e] = 0, dpt[nt][e] = 0;
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      uint32_t ka[4], va[4];
      if constexpr (kFast) {
        const mma::Coord a = mma::a_ldmatrix(lane, s);
        ldmatrix_x4<false>(ka, ks + (kw + a.row) * L + a.col);
        ldmatrix_x4<false>(va, vs + (kw + a.row) * L + a.col);
      } else {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const mma::Coord a = mma::a_source(lane, 2 * r, s);
          ka[r] = load32(ks + (kw + a.row) * L + a.col);
          va[r] = load32(vs + (kw + a.row) * L + a.col);
        }
      }
#pragma unroll
      for (int nt = 0; nt < NQ; nt += kFast ? 2 : 1) {
        if constexpr (kFast) {  // query tiles nt and nt + 1 from one ldmatrix each
          uint32_t qb[4], ob[4];
          const mma::Coord src = mma::b_nk_ldmatrix(lane, nt, s);
          ldmatrix_x4<false>(qb, qs + src.row * L + src.col);
          ldmatrix_x4<false>(ob, gos + src.row * L + src.col);
          mma_16816<T>(st[nt], ka, qb);
          mma_16816<T>(dpt[nt], va, ob);
          mma_16816<T>(st[nt + 1], ka, qb + 2);
          mma_16816<T>(dpt[nt + 1], va, ob + 2);
        } else {
          uint32_t qb[2], ob[2];
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const mma::Coord src = mma::b_source_nk(lane, 2 * r, nt, s);
            qb[r] = load32(qs + src.row * L + src.col);
            ob[r] = load32(gos + src.row * L + src.col);
          }
          mma_16816<T>(st[nt], ka, qb);
          mma_16816<T>(dpt[nt], va, ob);
        }
      }
    }
    // Pzᵀ and dSᵀ: as A fragments for dV and dK, and dS into shared memory for dQ
    uint32_t pa[KK][4], dsa[KK][4];
#pragma unroll
    for (int nt = 0; nt < NQ; ++nt) {
      float p[4], ds[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const mma::Coord c = mma::acc_coord(lane, e, nt);  // (key kw + row, query column)
        const int64_t i = i0 + c.col, j = j0 + kw + c.row;
        float pz = 0, d = 0;
        if (j < end_s[c.col] && lse_s[c.col] != -INFINITY && mk.kept(b, h, i, j)) {  // end_s > 0: i < Tq
          const float z = mk.dropout(b, h, i, j);
          const float pr = kFast ? exp2f(score_scale * st[nt][e] - lse_s[c.col] * kLog2e)
                                 : expf(scale * st[nt][e] - lse_s[c.col]);
          d = pr * (z * dpt[nt][e] - delta_s[c.col]);
          pz = pr * z;
        }
        p[e] = pz, ds[e] = d;
        dss[c.col * LS + kw + c.row] = narrow<T>(d);
      }
      pa[nt / 2][mma::p_register(nt, 0)] = pack2(narrow<T>(p[0]), narrow<T>(p[1]));
      pa[nt / 2][mma::p_register(nt, 2)] = pack2(narrow<T>(p[2]), narrow<T>(p[3]));
      dsa[nt / 2][mma::p_register(nt, 0)] = pack2(narrow<T>(ds[0]), narrow<T>(ds[1]));
      dsa[nt / 2][mma::p_register(nt, 2)] = pack2(narrow<T>(ds[2]), narrow<T>(ds[3]));
    }
    // dV_w += Pzᵀ dO_i, dK_w += dSᵀ Q_i
#pragma unroll
    for (int kk = 0; kk < KK; ++kk)
#pragma unroll
      for (int nd = 0; nd < ND; nd += kFast ? 2 : 1) {
        if constexpr (kFast) {  // columns nd and nd + 1 from one ldmatrix.trans each
          uint32_t ob[4], qb[4];
          const mma::Coord src = mma::b_kn_ldmatrix_trans(lane, nd, kk);
          ldmatrix_x4<true>(ob, gos + src.row * L + src.col);
          ldmatrix_x4<true>(qb, qs + src.row * L + src.col);
          mma_16816<T>(dv[nd], pa[kk], ob);
          mma_16816<T>(dk[nd], dsa[kk], qb);
          mma_16816<T>(dv[nd + 1], pa[kk], ob + 2);
          mma_16816<T>(dk[nd + 1], dsa[kk], qb + 2);
        } else {
          const uint32_t ob[2] = {load_kn(gos, L, lane, 0, nd, kk), load_kn(gos, L, lane, 1, nd, kk)};
          const uint32_t qb[2] = {load_kn(qs, L, lane, 0, nd, kk), load_kn(qs, L, lane, 1, nd, kk)};
          mma_16816<T>(dv[nd], pa[kk], ob);
          mma_16816<T>(dk[nd], dsa[kk], qb);
        }
      }
    __syncthreads();  // dS complete
    // dQ_i rows 16 w .. + 15 = dS K_j, added (times scale) into the float32 buffer: add_dq(nd, acc) for the
    // accumulators of its 8-column tile nd
    auto add_dq = [&](int nd, const float acc[4]) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const mma::Coord c = mma::acc_coord(lane, e, nd);
        const int64_t i = i0 + 16 * warp + c.row;
        if (i < mk.Tq && c.col < D && acc[e] != 0.0f)
          atomicAdd(gq32 + (bh * mk.Tq + i) * D + c.col, scale * acc[e]);
      }
    };
    if constexpr (kFast) {
      // two 8-column tiles at a time (8 accumulators live, not 4 ND: the kernel is at 255 registers), dS's A
      // fragments reloaded for each pair
#pragma unroll
      for (int nd = 0; nd < ND; nd += 2) {
        float dq[2][4] = {};
#pragma unroll
        for (int kk = 0; kk < KJ; ++kk) {
          uint32_t sa[4], kb[4];
          const mma::Coord a = mma::a_ldmatrix(lane, kk), src = mma::b_kn_ldmatrix_trans(lane, nd, kk);
          ldmatrix_x4<false>(sa, dss + (16 * warp + a.row) * LS + a.col);
          ldmatrix_x4<true>(kb, ks + src.row * L + src.col);
          mma_16816<T>(dq[0], sa, kb);
          mma_16816<T>(dq[1], sa, kb + 2);
        }
        add_dq(nd, dq[0]);
        add_dq(nd + 1, dq[1]);
      }
    } else {
      float dq[ND][4];
#pragma unroll
      for (int nd = 0; nd < ND; ++nd)
#pragma unroll
        for (int e = 0; e < 4; ++e) dq[nd][e] = 0;
#pragma unroll
      for (int kk = 0; kk < KJ; ++kk) {
        uint32_t sa[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const mma::Coord a = mma::a_source(lane, 2 * r, kk);
          sa[r] = load32(dss + (16 * warp + a.row) * LS + a.col);
        }
#pragma unroll
        for (int nd = 0; nd < ND; ++nd) {
          const uint32_t kb[2] = {load_kn(ks, L, lane, 0, nd, kk), load_kn(ks, L, lane, 1, nd, kk)};
          mma_16816<T>(dq[nd], sa, kb);
        }
      }
#pragma unroll
      for (int nd = 0; nd < ND; ++nd) add_dq(nd, dq[nd]);
    }
  }
  // dK (times scale) and dV of the warp's keys, rounded once
#pragma unroll
  for (int nd = 0; nd < ND; ++nd)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const mma::Coord c = mma::acc_coord(lane, e, nd);
      const int64_t j = j0 + kw + c.row;
      if (j >= mk.Tk) continue;
      if (c.col < D) gk.row(b, hk, j)[c.col] = narrow<T>(scale * dk[nd][e]);
      if (c.col < Dv) gv.row(b, hk, j)[c.col] = narrow<T>(dv[nd][e]);
    }
}

// A 16-bit (B, H, T, D) tensor's rows as raw bits.
Rows<const uint16_t> rows16(const Tensor& t) {
  return {static_cast<const uint16_t*>(t.raw_data()), t.stride(0), t.stride(1), t.stride(2)};
}
Rows<uint16_t> rows16_mut(const Tensor& t) {
  return {static_cast<uint16_t*>(t.raw_data()), t.stride(0), t.stride(1), t.stride(2)};
}

// Whether 8 elements of every row of t can move as one 16-byte load: aligned base, strides and width.
bool rows_vectorizable(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0 && t.size(3) % 8 == 0 && t.stride(0) % 8 == 0 &&
         t.stride(1) % 8 == 0 && t.stride(2) % 8 == 0;
}

// Whether the current device has the bf16 / f16 mma with float32 accumulators (compute capability 8.0+).
bool device_has_mma() {
  static const bool yes = [] {
    int dev = 0, major = 0;
    return cudaGetDevice(&dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
           major >= 8;
  }();
  return yes;
}

template <class T, int kD, bool kFast>
void launch_mma(const Tensor& q, const Tensor& k, const Tensor& v, const Masking<float>& mk, float scale,
                const Tensor& out, const Tensor& lse, int64_t blocks, int64_t tiles, bool vec) {
  constexpr int bytes = mma_smem_bytes<kD, kFast>();
  static const bool once = [] {
    SACCADE_CUDA_CHECK("flash_attention_forward",
                       cudaFuncSetAttribute(attention_forward_mma<T, kD, kFast>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    return true;
  }();
  (void)once;
  attention_forward_mma<T, kD, kFast>
      <<<static_cast<unsigned>(blocks), kThreadsMma, bytes, current_stream()>>>(
          rows16(q), rows16(k), rows16(v), rows16_mut(out), lse.data<float>(), mk, tiles, q.size(3),
          v.size(3), scale, vec);
  SACCADE_CUDA_CHECK_LAUNCH("flash_attention_forward");
}

template <class T, int kD, bool kFast>
void launch_backward_mma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gout,
                         const Tensor& lse, const Tensor& delta, const Tensor& gq32, const Masking<float>& mk,
                         float scale, const Tensor& gk, const Tensor& gv, int64_t blocks, int64_t key_tiles,
                         bool vec) {
  constexpr int bytes = mma_bwd_smem_bytes<kD>();
  static const bool once = [] {
    SACCADE_CUDA_CHECK("flash_attention_backward",
                       cudaFuncSetAttribute(attention_backward_mma<T, kD, kFast>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    return true;
  }();
  (void)once;
  attention_backward_mma<T, kD, kFast>
      <<<static_cast<unsigned>(blocks), kThreadsMma, bytes, current_stream()>>>(
          rows16(q), rows16(k), rows16(v), rows16(gout), lse.data<float>(), delta.data<float>(),
          gq32.data<float>(), rows16_mut(gk), rows16_mut(gv), mk, key_tiles, q.size(3), v.size(3), scale,
          vec);
  SACCADE_CUDA_CHECK_LAUNCH("flash_attention_backward");
}

// The padded head dim of the tensor-core kernels for these tensors (all of q's 16-bit dtype, lse float32):
// 64 or 128, or 0 when they do not apply (switched off, another dtype, head dims past 128, an older GPU).
int mma_head_dim(const Tensor& q, const Tensor& v, std::initializer_list<const Tensor*> same_dtype,
                 const Tensor& lse) {
  const DType dt = q.dtype();
  if (!tensor_core_attention() || readable_attention() || !is_half(dt) || lse.dtype() != DType::Float32)
    return 0;
  for (const Tensor* t : same_dtype)
    if (t->dtype() != dt) return 0;
  const int64_t d = q.size(3) > v.size(3) ? q.size(3) : v.size(3);
  if (d > 128 || !device_has_mma()) return 0;
  return d <= 64 ? 64 : 128;
}

// f.template operator()<T, kD, kFast>() for the element type of `dtype` (bfloat16 or float16), the padded
// head dimension kd (64 or 128) and mma_attention_variant() (kFast: Pipelined): the eight kernel
// instantiations, chosen in one place for both passes.
template <class F>
void with_mma_kernel(DType dtype, int kd, F&& f) {
  const bool bf16 = dtype == DType::BFloat16;
  auto pick = [&]<bool kFast>() {
    if (kd == 64)
      bf16 ? f.template operator()<bfloat16, 64, kFast>() : f.template operator()<float16, 64, kFast>();
    else
      bf16 ? f.template operator()<bfloat16, 128, kFast>() : f.template operator()<float16, 128, kFast>();
  };
  if (mma_attention_variant() == MmaAttentionVariant::Pipelined)
    pick.template operator()<true>();
  else
    pick.template operator()<false>();
}

}  // namespace

bool flash_attention_forward_mma(const Tensor& q, const Tensor& k, const Tensor& v, const Masking<float>& mk,
                                 float scale, const Tensor& out, const Tensor& lse) {
  const int kd = mma_head_dim(q, v, {&k, &v, &out}, lse);
  const int64_t tiles = (mk.Tq + kQueryRows - 1) / kQueryRows, blocks = q.size(0) * mk.H * tiles;
  if (kd == 0 || blocks == 0 || blocks > INT32_MAX) return false;
  const bool vec = rows_vectorizable(q) && rows_vectorizable(k) && rows_vectorizable(v);
  with_mma_kernel(q.dtype(), kd, [&]<class T, int kD, bool kFast>() {
    launch_mma<T, kD, kFast>(q, k, v, mk, scale, out, lse, blocks, tiles, vec);
  });
  return true;
}

bool flash_attention_backward_mma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                  const Tensor& gout, const Tensor& lse, const Masking<float>& mk,
                                  float scale, const Tensor& gq, const Tensor& gk, const Tensor& gv) {
  const int kd = mma_head_dim(q, v, {&k, &v, &out, &gout, &gq, &gk, &gv}, lse);
  const int64_t B = q.size(0), rows = B * mk.H * mk.Tq, key_tiles = (mk.Tk + kKeyTile - 1) / kKeyTile,
                blocks = B * mk.H_kv() * key_tiles;  // a block per key/value head
  if (kd == 0 || rows == 0 || blocks == 0 || blocks > INT32_MAX || rows > INT32_MAX) return false;
  const char* op = "flash_attention_backward";
  // pass 1: Δ = rowsum(dO ⊙ O) in float32
  const Tensor delta = Tensor::empty({rows}, DType::Float32, q.device(), op);
  const unsigned delta_blocks = static_cast<unsigned>(std::min<int64_t>((rows + 7) / 8, 65535));
  attention_delta_mma_kernel<<<delta_blocks, 256, 0, current_stream()>>>(
      rows16(out), rows16(gout), delta.data<float>(), rows, mk.H, mk.Tq, v.size(3),
      q.dtype() == DType::BFloat16);
  SACCADE_CUDA_CHECK_LAUNCH(op);
  // pass 2 into a zeroed float32 dQ (B, H, Tq, D), then pass 3: dQ rounded into gq
  const Tensor gq32 = Tensor::empty({B, mk.H, mk.Tq, q.size(3)}, DType::Float32, q.device(), op);
  SACCADE_CUDA_CHECK(op, cudaMemsetAsync(gq32.raw_data(), 0, gq32.numel() * sizeof(float), current_stream()));
  const bool vec =
      rows_vectorizable(q) && rows_vectorizable(k) && rows_vectorizable(v) && rows_vectorizable(gout);
  with_mma_kernel(q.dtype(), kd, [&]<class T, int kD, bool kFast>() {
    launch_backward_mma<T, kD, kFast>(q, k, v, gout, lse, delta, gq32, mk, scale, gk, gv, blocks, key_tiles,
                                      vec);
  });
  the_backend().copy(gq32, gq);
  return true;
}

}  // namespace saccade::cuda
