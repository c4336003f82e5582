// saccade's bfloat16 GEMM with float32 accumulation (gemm_bf16.h says what and how; gemm_ladder/ why).
#include "ops/cpu/gemm_bf16.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "ops/cpu/bf16_lanes.h"
#include "ops/cpu/gemm_ladder/amx.h"          // the AMX micro-kernel's parts: ladder::amx_accumulate
#include "ops/cpu/gemm_ladder/microkernel.h"  // the micro-kernel: ladder::dot_tile
#include "ops/cpu/simd.h"
#include "ops/cpu/thread_pool.h"

namespace saccade::cpu {

namespace {

constexpr int64_t kMR = 12, kNR = 32;  // register tile: 12 rows × 2 zmm of 16 floats (24 of 32 zmm)
// k per packed block: a B panel (kKC × kNR bf16, 32 KB) in L1. 512, not 256: the GPT's k = 512 products then
// take one block (and round a bf16 C from the registers), which bench/matmul --dtype bf16 measured faster.
constexpr int64_t kKC = 512;
constexpr int64_t kMC = 144;                  // rows per packed A block (kMC × kKC bf16, 144 KB) in L2
constexpr int64_t kGrain = 4 * 64 * 64 * 64;  // multiply-adds worth a thread's wake-up (as linalg.cpp)
constexpr int64_t kInPlaceMaxN = 512;         // widest C whose A is read in place (compute_block)
// AMX (amx_tile): 32 × 32 blocks of C; rows per packed A block (kMCAmx × kKC bf16, 128 KB) in L2; B's pairs
// padded to multiples of 16 (a tile's rows), A's rows to 32 and its k to 32 with zeros
constexpr int64_t kMRAmx = 32, kMCAmx = 128, kPairsAmx = 16;
static_assert(kMCAmx <= kMC && kKC % 32 == 0, "the bf16 C scratch of compute_block, whole tiles of k");
static_assert(kMR == 12 && kNR == 32, "the tile of ladder::dot_tile");

// A matrix read as "rows × k": element (i, p) of op(A), or of op(B)ᵀ, so both operands pack alike.
struct Rows {
  const uint16_t* p;
  int64_t ld;
  bool k_major;  // element (i, p) at p[p * ld + i] (else at p[i * ld + p])
  uint16_t at(int64_t i, int64_t q) const { return k_major ? p[q * ld + i] : p[i * ld + q]; }
};

// Packs rows [r0, r0 + rows) × k [k0, k0 + kc) of x into one panel of W rows: word (q, r) holds the pair
// (x(r, k0 + 2q), x(r, k0 + 2q + 1)), low half first, rows past `rows` and the k past kc zero.
template <int64_t W>
inline void pack_panel(const Rows& x, int64_t r0, int64_t rows, int64_t k0, int64_t kc, uint32_t* dst) {
  const int64_t pairs = (kc + 1) / 2;
  if (rows == W && kc % 2 == 0 && !x.k_major) {  // each pair is 32 contiguous bits of a row
    for (int64_t r = 0; r < W; ++r) {
      const uint16_t* src = x.p + (r0 + r) * x.ld + k0;
      for (int64_t q = 0; q < pairs; ++q) std::memcpy(dst + q * W + r, src + 2 * q, 4);
    }
  } else if (rows == W && kc % 2 == 0) {  // two rows of memory, interleaved (vectorised: W words at once)
    for (int64_t q = 0; q < pairs; ++q) {
      const uint16_t* __restrict s0 = x.p + (k0 + 2 * q) * x.ld + r0;
      const uint16_t* __restrict s1 = s0 + x.ld;
      uint32_t* __restrict d = dst + q * W;
#pragma omp simd
      for (int64_t r = 0; r < W; ++r)
        d[r] = static_cast<uint32_t>(s0[r]) | static_cast<uint32_t>(s1[r]) << 16;
    }
  } else {  // edges
    for (int64_t q = 0; q < pairs; ++q)
      for (int64_t r = 0; r < W; ++r) {
        const int64_t p = k0 + 2 * q;
        const uint32_t lo = r < rows ? x.at(r0 + r, p) : 0;
        const uint32_t hi = r < rows && 2 * q + 1 < kc ? x.at(r0 + r, p + 1) : 0;
        dst[q * W + r] = lo | hi << 16;
      }
  }
}

// C tile (mr, nr) from a float accumulator (row stride lda): C = alpha acc + beta C on the first k block,
// C += alpha acc after.
inline void store_tile(const float* acc, int64_t lda, float* c, int64_t ldc, int64_t mr, int64_t nr,
                       float alpha, float beta, bool first) {
  for (int64_t r = 0; r < mr; ++r) {
    float* cr = c + r * ldc;
    const float* ar = acc + r * lda;
    if (!first)
      for (int64_t j = 0; j < nr; ++j) cr[j] += alpha * ar[j];
    else if (beta == 0)
      for (int64_t j = 0; j < nr; ++j) cr[j] = alpha * ar[j];
    else
      for (int64_t j = 0; j < nr; ++j) cr[j] = alpha * ar[j] + beta * cr[j];
  }
}

// The micro-kernel without AVX512-BF16: the packed pairs widened to float, two FMAs per pair (odd k
// first, as VDPBF16PS). Inlined into each width of with_isa.
inline void kernel_float(int64_t pairs, const uint32_t* ap, const uint32_t* bp, float (&acc)[kMR][kNR]) {
  for (int64_t r = 0; r < kMR; ++r)
    for (int64_t j = 0; j < kNR; ++j) acc[r][j] = 0;
  for (int64_t q = 0; q < pairs; ++q, ap += kMR, bp += kNR) {
    float blo[kNR], bhi[kNR];
    for (int64_t j = 0; j < kNR; ++j) {
      blo[j] = bf16_bits_to_float(static_cast<uint16_t>(bp[j]));
      bhi[j] = bf16_bits_to_float(static_cast<uint16_t>(bp[j] >> 16));
    }
    for (int64_t r = 0; r < kMR; ++r) {
      const float alo = bf16_bits_to_float(static_cast<uint16_t>(ap[r])),
                  ahi = bf16_bits_to_float(static_cast<uint16_t>(ap[r] >> 16));
      for (int64_t j = 0; j < kNR; ++j) acc[r][j] = acc[r][j] + ahi * bhi[j] + alo * blo[j];
    }
  }
}

#ifdef SACCADE_LADDER_MICROKERNEL
// dot_tile reading A where it lies instead of from a packed panel: row r's pair q is the 32 bits at
// a + r · lda + 2q (op(A) not transposed, so a row's pairs are contiguous; any alignment). It skips packing
// A, which for the GPT's shapes (k = 128 or 512, n = 128 or 512) cost a third as much as the products.
[[gnu::target("avx512f,avx512bf16"), gnu::always_inline]] inline void dot_tile_rows(
    int64_t pairs, const uint16_t* a, int64_t lda, const uint32_t* pb, __m512 (&acc)[kMR][2]) {
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
  const uint16_t* rows[kMR];
  for (int64_t r = 0; r < kMR; ++r) rows[r] = a + r * lda;
  for (int64_t q = 0; q < pairs; ++q, pb += kNR) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(pb), b1 = (__m512bh)_mm512_loadu_si512(pb + 16);
#pragma GCC unroll 12
    for (int r = 0; r < kMR; ++r) {
      uint32_t pair;
      std::memcpy(&pair, rows[r] + 2 * q, 4);
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
    }
  }
}

// NOTE: GCC 12's avx512fintrin.h warns maybe-uninitialized inside its own shift and extract intrinsics (their
// `__Y = __Y` undefined pass-through operand), a false positive (as in random.cpp)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The micro-kernel with VDPBF16PS (ladder step 4's dot_tile: a 12 × 32 float tile in 24 zmm; per pair of
// k, two vectors of the B panel and a broadcast pair per row), then the tile's store with alpha and beta.
// A comes from its packed panel `ap`, or, when `a` is set, from the matrix itself (dot_tile_rows).
[[gnu::target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma"), gnu::noinline]] void kernel_dot(
    int64_t pairs, const uint32_t* ap, const uint16_t* a, int64_t lda, const uint32_t* bp, float* c,
    int64_t ldc, int64_t mr, int64_t nr, float alpha, float beta, bool first, bfloat16* c16 = nullptr,
    int64_t ldc16 = 0) {
  __m512 acc[kMR][2];
  if (a)
    dot_tile_rows(pairs, a, lda, bp, acc);
  else
    ladder::dot_tile(pairs, ap, bp, acc);
  if (c16) {  // the only k block of a bf16 C (beta 0): alpha · acc rounded once, straight into C
    if (mr == kMR && nr == kNR) {
      const __m512 va = _mm512_set1_ps(alpha);
      const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
      const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
      const __m512i quiet = _mm512_set1_epi32(0x40);
#pragma GCC unroll 12
      for (int r = 0; r < kMR; ++r)
        for (int h = 0; h < 2; ++h) {
          // bf16_lanes.h's bf16_round, 16 lanes at a time
          const __m512i u = _mm512_castps_si512(_mm512_mul_ps(va, acc[r][h]));
          const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
          __m512i b = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, half), odd), 16);
          const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
          b = _mm512_mask_or_epi32(b, nan, _mm512_srli_epi32(u, 16), quiet);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(c16 + r * ldc16 + 16 * h), _mm512_cvtepi32_epi16(b));
        }
      return;
    }
    float tile[kMR][kNR];
    for (int r = 0; r < kMR; ++r) {
      _mm512_storeu_ps(tile[r], acc[r][0]);
      _mm512_storeu_ps(tile[r] + 16, acc[r][1]);
    }
    for (int64_t r = 0; r < mr; ++r)
      for (int64_t j = 0; j < nr; ++j) c16[r * ldc16 + j] = bfloat16(alpha * tile[r][j]);
    return;
  }
  if (mr == kMR && nr == kNR) {
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
    for (int r = 0; r < kMR; ++r)
      for (int h = 0; h < 2; ++h) {
        float* cr = c + r * ldc + 16 * h;
        __m512 v = _mm512_mul_ps(va, acc[r][h]);
        if (!first)
          v = _mm512_add_ps(_mm512_loadu_ps(cr), v);
        else if (beta != 0)
          v = _mm512_fmadd_ps(vb, _mm512_loadu_ps(cr), v);
        _mm512_storeu_ps(cr, v);
      }
    return;
  }
  float tile[kMR][kNR];
  for (int r = 0; r < kMR; ++r) {
    _mm512_storeu_ps(tile[r], acc[r][0]);
    _mm512_storeu_ps(tile[r] + 16, acc[r][1]);
  }
  store_tile(&tile[0][0], kNR, c, ldc, mr, nr, alpha, beta, first);
}

// gemv_bf16 (gemm_bf16.h) for R rows of w at once: per 32 k, one load of x and one VDPBF16PS per row (16
// float lanes, two products each), the last k % 32 under a mask (masked lanes load as zero and never fault).
template <int R>
[[gnu::target("avx512f,avx512bw,avx512bf16"), gnu::always_inline]] inline void dot_rows(
    int64_t k, const uint16_t* x, const uint16_t* w, int64_t ldw, float* y) {
  __m512 acc[R];
  for (auto& a : acc) a = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 32 <= k; p += 32) {
    const __m512bh xv = (__m512bh)_mm512_loadu_si512(x + p);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)_mm512_loadu_si512(w + r * ldw + p), xv);
  }
  if (p < k) {
    const __mmask32 m = _cvtu32_mask32((1u << (k - p)) - 1u);  // k - p in [1, 31]
    const __m512bh xv = (__m512bh)_mm512_maskz_loadu_epi16(m, x + p);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)_mm512_maskz_loadu_epi16(m, w + r * ldw + p), xv);
  }
  for (int r = 0; r < R; ++r) y[r] = _mm512_reduce_add_ps(acc[r]);
}

constexpr int kGemvRows = 4;  // rows of w in flight

[[gnu::target("avx512f,avx512bw,avx512bf16"), gnu::noinline]] void gemv_dot(int64_t n, int64_t k,
                                                                            const uint16_t* x,
                                                                            const uint16_t* w, int64_t ldw,
                                                                            float* y) {
  int64_t j = 0;
  for (; j + kGemvRows <= n; j += kGemvRows) dot_rows<kGemvRows>(k, x, w + j * ldw, ldw, y + j);
  for (; j < n; ++j) dot_rows<1>(k, x, w + j * ldw, ldw, y + j);
}
#pragma GCC diagnostic pop  // (also _mm512_reduce_add_ps's extracts, in dot_rows)
#endif

// A grow-only buffer of 32-bit words, one per thread (the pool's threads keep theirs between calls).
uint32_t* scratch(std::unique_ptr<uint32_t[]>& buf, int64_t& cap, int64_t words) {
  if (words > cap) {
    buf.reset(new uint32_t[static_cast<size_t>(words)]);
    cap = words;
  }
  return buf.get();
}

struct Problem {
  Rows a, bt;  // op(A) (m × k) and op(B)ᵀ (n × k), both read as rows × k
  int64_t m, n, k;
  float alpha, beta;
  float* c;
  int64_t ldc;
  int64_t panels;  // column panels of kNR
  const uint32_t* bp;
  bool dot;                 // VDPBF16PS
  bfloat16* c16 = nullptr;  // a bf16 C (beta 0): each block is summed in a float32 scratch, then rounded
  int64_t ldc16 = 0;
  bool amx = false;  // AMX tiles (compute_block_amx): B's pairs padded to kPairsAmx
  // The packed B panel `jr` of k block `kb` (pairs of that block: pairs_in(kb)).
  const uint32_t* b_panel(int64_t kb, int64_t jr) const {
    return bp + kb * (kKC / 2) * panels * kNR + jr * pairs_in(kb) * kNR;
  }
  int64_t pairs_in(int64_t kb) const {
    const int64_t pairs = (std::min(kKC, k - kb * kKC) + 1) / 2;
    return amx ? (pairs + kPairsAmx - 1) / kPairsAmx * kPairsAmx : pairs;
  }
};

// Packs B's panel `jr` of k block `kb` into its place in P.bp (under with_isa).
void pack_b_panel(const Problem& P, int64_t kb, int64_t jr) {
  const int64_t kc = std::min(kKC, P.k - kb * kKC);
  uint32_t* panel = const_cast<uint32_t*>(P.b_panel(kb, jr));
  pack_panel<kNR>(P.bt, jr * kNR, std::min(kNR, P.n - jr * kNR), kb * kKC, kc, panel);
  const int64_t packed = (kc + 1) / 2;  // AMX: the pairs up to a whole tile are zero
  std::fill(panel + packed * kNR, panel + P.pairs_in(kb) * kNR, 0u);
}

// Where a block of rows × column panels [j0, j1) puts its tiles: C itself, or, for a bf16 C, a per-thread
// float32 scratch (kMC rows × the block's panels, hot in cache) whose sums are rounded into C once the last k
// block of a row block is in, instead of a whole m × n float32 C. Both compute_block and compute_block_amx.
struct BlockOut {
  const Problem& P;
  int64_t j0, j1;
  float* cbase = nullptr;  // a bf16 C: column jr*kNR of row r at cbase + r*ldc
  int64_t ldc;
  BlockOut(const Problem& p, int64_t first, int64_t last) : P(p), j0(first), j1(last), ldc(p.ldc) {
    if (!P.c16) return;
    thread_local std::unique_ptr<uint32_t[]> cbuf;
    thread_local int64_t ccap = 0;
    ldc = (j1 - j0) * kNR;
    cbase = reinterpret_cast<float*>(scratch(cbuf, ccap, kMC * ldc)) - j0 * kNR;
  }
  // The tile at row ir of the row block starting at ib, column panel jr.
  float* tile(int64_t ib, int64_t ir, int64_t jr) const {
    return P.c16 ? cbase + ir * ldc + jr * kNR : P.c + (ib + ir) * P.ldc + jr * kNR;
  }
  // A bf16 C: the row block's sums rounded into C (bf16_lanes.h: vectorised, same bits).
  void round_into_c(int64_t ib, int64_t mc) const {
    const int64_t c0 = j0 * kNR, w = std::min(P.n, j1 * kNR) - c0;
    round_rows(cbase + c0, ldc, &P.c16[ib * P.ldc16 + c0].bits, P.ldc16, mc, w);
  }
};

#ifdef SACCADE_LADDER_AMX
// Rows [r0, r0 + rows) × every k of op(A), as rows of kp bf16 (k contiguous; row stride kp, the k of block kb
// from kb · kKC on, each block's k padded with zeros to 2 · pairs_in(kb)), and zero rows up to rows_padded:
// what amx_accumulate reads as A's tiles. A row-major op(A) is copied row by row; a transposed one (A stored
// (k, m): dW = dYᵀ X) is read two rows of memory at a time, their elements paired into 32-bit words (as
// pack_panel's) and each word written to its row: reads contiguous, writes into this L2-sized buffer.
void pack_rows_amx(const Problem& P, int64_t r0, int64_t rows, int64_t rows_padded, int64_t kp,
                   uint16_t* dst) {
  for (int64_t r = rows; r < rows_padded; ++r) std::fill(dst + r * kp, dst + (r + 1) * kp, uint16_t{0});
  for (int64_t kb = 0; kb * kKC < P.k; ++kb) {
    const int64_t k0 = kb * kKC, kc = std::min(kKC, P.k - k0), kpad = 2 * P.pairs_in(kb);
    if (!P.a.k_major) {
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(dst + r * kp + k0, P.a.p + (r0 + r) * P.a.ld + k0, static_cast<size_t>(kc) * 2);
        std::fill(dst + r * kp + k0 + kc, dst + r * kp + k0 + kpad, uint16_t{0});
      }
      continue;
    }
    uint32_t* d32 = reinterpret_cast<uint32_t*>(dst);  // kp and k0 are even: a row's pairs are words
    const int64_t row_words = kp / 2;
    for (int64_t q = 0; 2 * q < kpad; ++q) {
      const int64_t p = k0 + 2 * q;
      const uint16_t* lo = 2 * q < kc ? P.a.p + p * P.a.ld + r0 : nullptr;
      const uint16_t* hi = 2 * q + 1 < kc ? P.a.p + (p + 1) * P.a.ld + r0 : nullptr;
      uint32_t* out = d32 + k0 / 2 + q;
      for (int64_t r = 0; r < rows; ++r)
        out[r * row_words] = (lo ? lo[r] : 0u) | (hi ? static_cast<uint32_t>(hi[r]) << 16 : 0u);
    }
  }
}

// compute_block with AMX tiles (ladder/amx.h): per block of rows, A packed once over all of k (at most 512
// KB, in L2); per 32 × 32 block of C, the tiles sum every k block (amx_accumulate over each packed B panel)
// and are stored once, then C = alpha sum + beta C (or, for a bf16 C, the sums go to the float32 scratch,
// rounded at the end as compute_block's).
void compute_block_amx(const Problem& P, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  const int64_t kblocks = (P.k + kKC - 1) / kKC;
  const int64_t kp = (kblocks - 1) * kKC + 2 * P.pairs_in(kblocks - 1);  // a packed row's bf16
  const int64_t mc_max = std::clamp<int64_t>((int64_t{1} << 19) / (2 * kp) / kMRAmx * kMRAmx, kMRAmx, kMCAmx);
  thread_local std::unique_ptr<uint32_t[]> abuf;
  thread_local int64_t acap = 0;
  uint16_t* ap = reinterpret_cast<uint16_t*>(scratch(abuf, acap, mc_max * kp / 2 + 1));
  const BlockOut out(P, j0, j1);
  alignas(64) float tile[kMRAmx * kNR];
  ladder::configure_tiles();
  for (int64_t ib = i0; ib < i1; ib += mc_max) {
    const int64_t mc = std::min(mc_max, i1 - ib);
    pack_rows_amx(P, ib, mc, (mc + kMRAmx - 1) / kMRAmx * kMRAmx, kp, ap);
    for (int64_t jr = j0; jr < j1; ++jr) {
      const int64_t nr = std::min(kNR, P.n - jr * kNR);
      for (int64_t ir = 0; ir < mc; ir += kMRAmx) {
        ladder::amx_zero();
        for (int64_t kb = 0; kb < kblocks; ++kb)
          ladder::amx_accumulate(P.pairs_in(kb), ap + ir * kp + kb * kKC, kp, P.b_panel(kb, jr));
        ladder::amx_store(tile, kNR);
        float* c = out.tile(ib, ir, jr);
        const int64_t mr = std::min(kMRAmx, mc - ir);
        with_isa([&] { store_tile(tile, kNR, c, out.ldc, mr, nr, P.alpha, P.beta, true); });
      }
    }
    if (P.c16) out.round_into_c(ib, mc);
  }
  ladder::release_tiles();
}
#endif

// Rows [i0, i1) × column panels [j0, j1) of C, every k block: pack A a block at a time, then the tiles.
void compute_block(const Problem& P, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
#ifdef SACCADE_LADDER_AMX
  if (P.amx) return compute_block_amx(P, i0, i1, j0, j1);
#endif
  thread_local std::unique_ptr<uint32_t[]> abuf;
  thread_local int64_t acap = 0;
  uint32_t* ap = scratch(abuf, acap, kMC * kKC / 2);
  const BlockOut out(P, j0, j1);
  const int64_t ldc = out.ldc;
  // one k block and VDPBF16PS: each tile rounds into a bf16 C from its registers (no float32 pass)
  const bool direct16 = P.c16 && P.dot && P.k <= kKC;
  with_isa([&] {
    for (int64_t ib = i0; ib < i1; ib += kMC) {
      const int64_t mc = std::min(kMC, i1 - ib);
      for (int64_t kb = 0; kb * kKC < P.k; ++kb) {
        const int64_t k0 = kb * kKC, kc = std::min(kKC, P.k - k0), pairs = P.pairs_in(kb);
        // VDPBF16PS reads full panels of a row-major op(A) in place (dot_tile_rows): only the edge panel
        // (and every panel otherwise) is packed. Only for narrow C: each of the n / kNR column panels reads
        // the block's rows again, and with a wide C (a long row stride, 4 KB at n = k = 2048) those reads
        // conflict in cache where the packed panel is contiguous (bench/matmul --dtype bf16 measured in
        // place slower at n = 2048), while packing costs 1/n of the products.
        const bool in_place = P.dot && !P.a.k_major && kc % 2 == 0 && P.n <= kInPlaceMaxN;
        for (int64_t ir = 0; ir < mc; ir += kMR)
          if (!in_place || mc - ir < kMR)
            pack_panel<kMR>(P.a, ib + ir, std::min(kMR, mc - ir), k0, kc, ap + ir * pairs);
        for (int64_t jr = j0; jr < j1; ++jr) {
          const uint32_t* bpanel = P.b_panel(kb, jr);
          const int64_t nr = std::min(kNR, P.n - jr * kNR);
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            float* c = out.tile(ib, ir, jr);
            const int64_t mr = std::min(kMR, mc - ir);
#ifdef SACCADE_LADDER_MICROKERNEL
            if (P.dot) {
              const uint16_t* a = in_place && mr == kMR ? P.a.p + (ib + ir) * P.a.ld + k0 : nullptr;
              bfloat16* c16 = direct16 ? P.c16 + (ib + ir) * P.ldc16 + jr * kNR : nullptr;
              kernel_dot(pairs, ap + ir * pairs, a, P.a.ld, bpanel, c, ldc, mr, nr, P.alpha, P.beta, kb == 0,
                         c16, P.ldc16);
              continue;
            }
#endif
            float acc[kMR][kNR];
            kernel_float(pairs, ap + ir * pairs, bpanel, acc);
            store_tile(&acc[0][0], kNR, c, ldc, mr, nr, P.alpha, P.beta, kb == 0);
          }
        }
      }
      if (P.c16 && !direct16) out.round_into_c(ib, mc);
    }
  });
}

void check_args(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  SACCADE_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm_bf16: negative sizes m {}, n {}, k {}", m, n, k);
  const int64_t min_lda = std::max<int64_t>(1, ta ? m : k), min_ldb = std::max<int64_t>(1, tb ? k : n);
  SACCADE_CHECK(lda >= min_lda && ldb >= min_ldb && ldc >= std::max<int64_t>(1, n),
                "gemm_bf16: leading dimensions lda {}, ldb {}, ldc {} below {}, {}, {} (m {}, n {}, k {}, "
                "trans_a {}, trans_b {})",
                lda, ldb, ldc, min_lda, min_ldb, std::max<int64_t>(1, n), m, n, k, ta, tb);
}

}  // namespace

namespace {

// C = alpha op(A) op(B) + beta C into a float32 C (c) or, with c16 set (beta 0), a bfloat16 one.
void run_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a16,
              int64_t lda, const bfloat16* b16, int64_t ldb, float beta, float* c, bfloat16* c16,
              int64_t ldc) {
  const uint16_t* a = &a16->bits;  // the packs move bits
  const uint16_t* b = &b16->bits;
  check_args(trans_a, trans_b, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // no products: C = beta C
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        if (c16)
          c16[i * ldc + j] = bfloat16(0.0f);
        else
          c[i * ldc + j] = beta == 0 ? 0.0f : beta * c[i * ldc + j];
      }
    return;
  }
#ifdef SACCADE_LADDER_MICROKERNEL
  const bool dot = kernel_avx512_bf16();
#else
  const bool dot = false;  // VDPBF16PS's kernel is compiled by GCC only (microkernel.h): widen to float
#endif
  Problem P{
      {a, lda, trans_a}, {b, ldb, !trans_b}, m, n, k, alpha, beta, c, ldc, (n + kNR - 1) / kNR, nullptr, dot};
  P.c16 = c16, P.ldc16 = ldc;
#ifdef SACCADE_LADDER_AMX
  // AMX for a C of at least one 32 × 32 block
  P.amx = kernel_amx_bf16() && m >= kMRAmx && n >= kNR && k >= 32;
#endif
  // Pack op(B) once, every (k block, panel) a piece of work.
  const int64_t kblocks = (k + kKC - 1) / kKC;
  thread_local std::unique_ptr<uint32_t[]> bbuf;
  thread_local int64_t bcap = 0;
  uint32_t* bp = scratch(bbuf, bcap, kblocks * (kKC / 2) * P.panels * kNR);
  P.bp = bp;
  const int64_t threads = pool_size();
  if (threads > 1 && m >= kMC && P.panels >= 4 * threads) {
    // A C of at least one row block and four column panels a thread: each thread owns one range of column
    // panels, packs that range of B itself and computes every row of it. B's packed panels then never move
    // between cores. The pieces below (B packed by all threads, then row blocks that each read all of B)
    // make every thread read what the others packed, which is slow when their cores sit far apart, as a
    // VM's vCPUs may (bench/RESULTS.md, "the bf16 GEMM's two speeds explained", measures both placements).
    // Fewer panels a thread (the GPT's dW = dYᵀ X, n = 128) measured slower this way on near cores.
    const int64_t per_thread = (P.panels + threads - 1) / threads;
    parallel_for(0, threads, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t j0 = t * per_thread, j1 = std::min(P.panels, j0 + per_thread);
        with_isa([&] {
          for (int64_t kb = 0; kb < kblocks; ++kb)
            for (int64_t jr = j0; jr < j1; ++jr) pack_b_panel(P, kb, jr);
        });
        compute_block(P, 0, m, j0, j1);
      }
    });
    return;
  }
  parallel_for(0, kblocks * P.panels, std::max<int64_t>(1, kGrain / (64 * kKC * kNR)),
               [&](int64_t t0, int64_t t1) {
                 with_isa([&] {
                   for (int64_t t = t0; t < t1; ++t) pack_b_panel(P, t / P.panels, t % P.panels);
                 });
               });
  // Blocks of kMC rows; when there are fewer than two a thread, smaller blocks (whole register tiles), and
  // only when even those are fewer, column groups. Rows first: a task packs only its own rows of A, where
  // column groups each pack the block's whole A (for dW = gᵀ x of the GPT, A is gᵀ: 128 × 4096, packed
  // four times over at 2 threads).
  const int64_t tile_rows = P.amx ? kMRAmx : kMR, block_rows = P.amx ? kMCAmx : kMC;
  int64_t mc = block_rows;
  if (threads > 1 && (m + block_rows - 1) / block_rows < 2 * threads)
    mc = std::min(block_rows, std::max(tile_rows, (m + 2 * threads - 1) / (2 * threads) + tile_rows - 1) /
                                  tile_rows * tile_rows);
  const int64_t row_blocks = (m + mc - 1) / mc;
  const int64_t groups = threads > 1 && row_blocks < 2 * threads
                             ? std::min(P.panels, (2 * threads + row_blocks - 1) / row_blocks)
                             : 1;
  const int64_t task_cost = std::max<int64_t>(1, std::min(mc, m) * (n / groups + 1) * k);
  parallel_for(0, row_blocks * groups, (kGrain + task_cost - 1) / task_cost, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t ib = t / groups, g = t % groups;
      compute_block(P, ib * mc, std::min(m, (ib + 1) * mc), g * P.panels / groups,
                    (g + 1) * P.panels / groups);
    }
  });
}

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a,
               int64_t lda, const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  run_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, nullptr, ldc);
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a,
               int64_t lda, const bfloat16* b, int64_t ldb, float beta, bfloat16* c, int64_t ldc) {
  if (beta == 0) return run_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, 0.0f, nullptr, c, ldc);
  // beta != 0 reads C: float32 sums of the whole product first, then C = sum + beta C, rounded once
  check_args(trans_a, trans_b, m, n, k, lda, ldb, ldc);
  std::vector<float> sum(static_cast<size_t>(m * n));
  run_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, 0.0f, sum.data(), nullptr, n);
  parallel_for(0, m, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n)), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = bfloat16(sum[i * n + j] + beta * float(c[i * ldc + j]));
  });
}

bool gemv_bf16(int64_t n, int64_t k, const bfloat16* x, const bfloat16* w, int64_t ldw, float* y) {
  SACCADE_CHECK(n >= 0 && k >= 0 && ldw >= std::max<int64_t>(1, k),
                "gemv_bf16: need n, k >= 0 and ldw >= k, got n {}, k {}, ldw {}", n, k, ldw);
#ifdef SACCADE_LADDER_MICROKERNEL
  if (!kernel_avx512_bf16()) return false;
  gemv_dot(n, k, &x->bits, &w->bits, ldw, y);
  return true;
#else
  (void)n, (void)k, (void)x, (void)w, (void)ldw, (void)y;
  return false;
#endif
}

}  // namespace saccade::cpu
