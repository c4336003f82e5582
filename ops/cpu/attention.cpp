// CPU kernels of fused attention (FlashAttention, Dao et al. 2022, Algorithms 1-2; the work split of
// FlashAttention-2, Dao 2023). The steps that led here, each simpler and slower, are in attention_ladder/.
//
//   q: (B, H, Tq, D)   k: (B, H, Tk, D)   v: (B, H, Tk, Dv)   out: (B, H, Tq, Dv)   lse: (B, H, Tq)
//   (any strides on B, H, T; unit stride on D)
//
// Forward, per (b, h, tile of Br queries): for each tile of Bc keys that some query of the tile may see,
//   S = Q Kᵀ · scale;  masked entries -> -inf;  m' = max(m, rowmax S);  P = exp(S - m');
//   l = l e^(m - m') + rowsum P;   O = O e^(m - m') + dropout(P) V;  m = m'
// and at the end O /= l, lse = m + log l. Key tiles past the last key any query of the tile may see (causal,
// valid_lens) are never computed.
// Backward, per (b, h): for each key tile, for each query tile that sees it, P = exp(S - lse) is recomputed
// and
//   dV += dropout(P)ᵀ dO,  dP = dropout(dO Vᵀ),  dS = P ⊙ (dP - Δ),  dQ += scale dS K,  dK += scale dSᵀ Q
// with Δ_i = dO_i · O_i (FlashAttention-2's D). dK, dV of a key tile stay in a local buffer; dQ of the head
// is owned by the task, so no two threads write the same memory.
//
// The tile products are small GEMMs (cblas_sgemm / cblas_dgemm on one thread: Br·Bc·D <= 64³ keeps OpenBLAS
// from starting its own threads inside ours); loop_gemm, the same products in plain vectorised loops, is the
// measured alternative (flash_tiles.h, bench/flash_tiles). 16-bit heads: the float32 kernel on widened rows
// (statistics, scores and accumulators float32). bfloat16 heads on a CPU with AVX512-BF16 run every tile
// product on VDPBF16PS instead: S = Q Kᵀ and dP = dO Vᵀ from the heads themselves (flash_tiles_bf16.h; exact
// products, float32 sums), and P V, Pᵀ dO, dSᵀ Q, dS K (gemm_bf16.h) with P and dS rounded to bfloat16 first,
// as PyTorch's CPU flash attention does for reduced types (its attn_reduced / grad_attn_reduced buffers):
// each probability and score gradient then carries a relative error of at most 2⁻⁹, the sums stay float32,
// and no head is widened.
#include <cblas.h>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/cpu/backend.h"
#include "ops/cpu/bf16_lanes.h"
#include "ops/cpu/blas_check.h"
#include "ops/cpu/flash_tiles.h"
#include "ops/cpu/flash_tiles_bf16.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/random.h"
#include "ops/cpu/simd.h"
#include "ops/cpu/thread_pool.h"
#include "ops/elementwise_math.h"
#include "ops/philox.h"

namespace saccade::cpu {

namespace {

using ops::CausalAlign;

// C (m, n) = alpha op(A) op(B) + beta C, row-major, op = transpose when ta / tb (beta is 0 or 1 here).
void blas_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
               int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, c, ldc);
}
void blas_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
               int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, c, ldc);
}

// The same product with loops the compiler vectorises: each row of C is built W columns at a time in a
// fixed-size accumulator (W = 64 floats or 32 doubles), as a sum over p of a[i, p] times row p of B. op(B) =
// Bᵀ (tb) is first copied transposed into `bt` (k·n; tiles are small) so that the inner loop always reads B
// with unit stride. NOTE: GCC 12 keeps `acc` in L1 (a load, a multiply-add and a store per vector), not in
// registers; a variant vectorising over j with four rows' sums per lane (the register-blocked form of a
// GEMM micro-kernel) came out 2-3x slower still, as GCC vectorised the sum over p with gathers instead.
template <class T>
[[gnu::always_inline]] inline void loop_gemm_body(bool ta, bool tb, int m, int n, int k, T alpha, const T* a,
                                                  int lda, const T* b, int ldb, T beta, T* c, int ldc,
                                                  T* bt) {
  constexpr int W = 256 / sizeof(T);
  if (tb) {  // b is (n, k): bt = bᵀ (k, n)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) bt[p * n + j] = b[j * ldb + p];
    b = bt;
    ldb = n;
  }
  for (int i = 0; i < m; ++i) {
    T* ci = c + static_cast<int64_t>(i) * ldc;
    for (int j0 = 0; j0 < n; j0 += W) {
      const int w = std::min(W, n - j0);
      T acc[W] = {};
      for (int p = 0; p < k; ++p) {
        const T aip = ta ? a[static_cast<int64_t>(p) * lda + i] : a[static_cast<int64_t>(i) * lda + p];
        const T* bp = b + static_cast<int64_t>(p) * ldb + j0;
        if (w == W) {
#pragma omp simd
          for (int j = 0; j < W; ++j) acc[j] += aip * bp[j];
        } else {
          for (int j = 0; j < w; ++j) acc[j] += aip * bp[j];
        }
      }
      // NOTE: beta = 0 ignores C (it may be uninitialised), as BLAS does
      for (int j = 0; j < w; ++j) ci[j0 + j] = alpha * acc[j] + (beta == T(0) ? T(0) : beta * ci[j0 + j]);
    }
  }
}
// loop_gemm_body at the machine's vector width (simd.h).
template <class T>
void loop_gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb,
               T beta, T* c, int ldc, T* bt) {
  with_isa([&] { loop_gemm_body(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bt); });
}

// The tile products of one task, through OpenBLAS or through loop_gemm (flash_tiles.h), with the scratch
// that loop_gemm's transposed operand needs.
template <class T>
struct TileGemm {
  bool loops;
  std::vector<T> bt;
  TileGemm(TileProducts how, int64_t scratch) : loops(how == TileProducts::Loops) {
    if (loops) bt.resize(static_cast<size_t>(scratch));
  }
  void operator()(bool ta, bool tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb,
                  T beta, T* c, int ldc) {
    if (loops)
      loop_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bt.data());
    else
      blas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
};

thread_local TileProducts t_tile_products = TileProducts::Auto;

// x[c] = e^(x[c] - m) for c < n; returns Σ x[c] (summed in vector lanes: a serial sum of each row was a
// chain of dependent adds, 12 % of the kernels' time at T = 128).
float exp_shifted(float* __restrict x, int64_t n, float m) {
  // NOTE: the lambda copies its arguments: loads through captured references keep GCC from vectorising
  return with_isa([=] {
    float* __restrict y = x;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < n; ++c) sum += y[c] = math::exp_nonpositive(y[c] - m);
    return sum;
  });
}
double exp_shifted(double* __restrict x, int64_t n, double m) {
  double sum = 0;
  for (int64_t c = 0; c < n; ++c) sum += x[c] = std::exp(x[c] - m);
  return sum;
}

// max(-inf, x[0], ..., x[n - 1]) (NaN entries may or may not win).
float row_max(const float* __restrict x, int64_t n) {
  return with_isa([=] {
    const float* __restrict y = x;
    float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
    for (int64_t c = 0; c < n; ++c) mx = y[c] > mx ? y[c] : mx;  // (std::max stayed scalar: GCC 12)
    return mx;
  });
}
double row_max(const double* x, int64_t n) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < n; ++c) mx = std::max(mx, x[c]);
  return mx;
}

constexpr int64_t kBr = 64;  // queries per tile

// Keys per tile: Br·Bc·max(D, Dv) <= 64³ (see the file comment), a multiple of 8, at least 8.
int64_t key_tile(int64_t d, int64_t dv) {
  const int64_t w = std::max<int64_t>(std::max(d, dv), 1);
  return std::clamp<int64_t>((64 * 64 / w) / 8 * 8, 8, 64);
}

// Everything about one (b, h) that the mask decides, without the per-element Bool mask.
struct RowLimits {
  const int64_t* valid_lens;  // nullptr, (B) or (B, Tq)
  bool per_query;
  CausalAlign causal;
  int64_t tq, tk;

  // One past the last key query i of batch row b may see.
  int64_t end(int64_t b, int64_t i) const {
    int64_t e = tk;
    if (valid_lens) e = std::min(e, std::max<int64_t>(0, valid_lens[per_query ? b * tq + i : b]));
    if (causal != CausalAlign::None)
      e = std::min(e, i + 1 + (causal == CausalAlign::BottomRight ? tk - tq : 0));
    return std::max<int64_t>(e, 0);
  }
};

RowLimits limits_of(const ops::AttentionMask& m, int64_t tq, int64_t tk) {
  const bool vl = m.valid_lens.defined();
  return {vl ? m.valid_lens.data<int64_t>() : nullptr, vl && m.valid_lens.dim() == 2, m.causal, tq, tk};
}

// The Bool keep-mask of one (b, h): keep(i, j), or true everywhere when undefined.
struct KeepView {
  const bool* p = nullptr;
  int64_t si = 0, sj = 0;
  bool operator()(int64_t i, int64_t j) const { return !p || p[i * si + j * sj]; }
};

KeepView keep_of(const ops::AttentionMask& m, int64_t b, int64_t h) {
  if (!m.keep.defined()) return {};
  const Tensor& k = m.keep;
  return {k.data<bool>() + b * k.stride(0) + h * k.stride(1), k.stride(2), k.stride(3)};
}

// Keep flags <-> multipliers: flag c of a run is bit c % 8 of bytes[c / 8]; a flag is set iff m[c] != 0, and
// reads back as `scale` (set) or 0. With AVX-512 a compare or a masked move does 16 at a time (the scalar
// loops cost as much as the Philox draws they save).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SACCADE_FLAGS16 1
[[gnu::target("avx512f")]] void record_flags_avx512(const float* m, int64_t n, uint8_t* bytes) {
  for (int64_t c = 0; c < n; c += 16) {
    const int64_t len = std::min<int64_t>(16, n - c);
    const __mmask16 valid = static_cast<__mmask16>(len == 16 ? 0xffffu : (1u << len) - 1);
    const uint16_t k =
        _mm512_mask_cmp_ps_mask(valid, _mm512_maskz_loadu_ps(valid, m + c), _mm512_setzero_ps(), _CMP_NEQ_UQ);
    std::memcpy(bytes + c / 8, &k, static_cast<size_t>((len + 7) / 8));  // little-endian: flag c first
  }
}
[[gnu::target("avx512f")]] void read_flags_avx512(const uint8_t* bytes, int64_t n, float scale, float* m) {
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t c = 0; c < n; c += 16) {
    const int64_t len = std::min<int64_t>(16, n - c);
    const __mmask16 valid = static_cast<__mmask16>(len == 16 ? 0xffffu : (1u << len) - 1);
    uint16_t k = 0;
    std::memcpy(&k, bytes + c / 8, static_cast<size_t>((len + 7) / 8));
    _mm512_mask_storeu_ps(m + c, valid, _mm512_maskz_mov_ps(static_cast<__mmask16>(k), s));
  }
}
#endif
template <class T>
void record_flags(const T* m, int64_t n, uint8_t* bytes) {
#if SACCADE_FLAGS16
  if constexpr (std::is_same_v<T, float>)
    if (kernel_isa() == Isa::Avx512) return record_flags_avx512(m, n, bytes);
#endif
  for (int64_t c0 = 0; c0 < n; c0 += 8) {
    uint8_t b = 0;
    for (int64_t c = c0; c < std::min(n, c0 + 8); ++c) b |= static_cast<uint8_t>((m[c] != T(0)) << (c - c0));
    bytes[c0 / 8] = b;
  }
}
template <class T>
void read_flags(const uint8_t* bytes, int64_t n, T scale, T* m) {
#if SACCADE_FLAGS16
  if constexpr (std::is_same_v<T, float>)
    if (kernel_isa() == Isa::Avx512) return read_flags_avx512(bytes, n, scale, m);
#endif
  for (int64_t c = 0; c < n; ++c) m[c] = (bytes[c / 8] >> (c % 8)) & 1 ? scale : T(0);
}

// Dropout of one (b, h): the multipliers 0 or 1/(1-p) of a run of keys of one query row, drawn as
// ops::dropout draws them (counter base + i·Tk + j, random.h). With keep flags (AttentionDropout::kept: one
// bit a weight, row i's bytes at kept + i · kept_ld) the forward records what it drew and the backward reads
// it back, instead of drawing every number twice (Philox was a third of the bf16 attention's time). Flag j of
// a row is bit j % 8 of byte j / 8, which on a little-endian CPU is bit j % 64 of word j / 64 of the int64
// tensor (the layout AttentionDropout documents). A row's flags past the last key it sees, and those of key
// tiles the forward skipped (nothing seen yet: P = 0 there), stay 0 from the zeroed tensor.
static_assert(std::endian::native == std::endian::little,
              "keep flags: bytes of the int64 words, low bit first");
template <class T>
struct DropoutView {
  double p;
  uint64_t seed, base;  // base: counter of element (b, h, 0, 0)
  int64_t tk;
  T scale;
  uint8_t* kept = nullptr;  // the head's keep flags, or nullptr
  int64_t kept_ld = 0;      // bytes a query row
  // m[c] = the multiplier of element (i, j0 + c) for c < n, drawn (and recorded, with flags). j0 is a
  // multiple of 8 (whole bytes of flags: key tiles are).
  void row(int64_t i, int64_t j0, int64_t n, T* m) const {
    dropout_multipliers<T>(seed, base + static_cast<uint64_t>(i * tk + j0), n, static_cast<T>(p), scale, m);
    if (kept) record_flags(m, n, kept + i * kept_ld + j0 / 8);
  }
  // The same multipliers again: read from the flags where the forward recorded them, else drawn again.
  void replay(int64_t i, int64_t j0, int64_t n, T* m) const {
    if (!kept) return row(i, j0, n, m);
    read_flags(kept + i * kept_ld + j0 / 8, n, scale, m);
  }
};

template <class T>
DropoutView<T> dropout_of(const ops::AttentionDropout& d, int64_t bh, int64_t tq, int64_t tk) {
  DropoutView<T> v{d.p, d.seed, d.offset + static_cast<uint64_t>(bh * tq * tk), tk,
                   static_cast<T>(1.0 / (1.0 - d.p))};
  if (d.kept.defined()) {
    v.kept_ld = d.kept.size(1) * 8;
    v.kept = reinterpret_cast<uint8_t*>(d.kept.data<int64_t>()) + bh * tq * v.kept_ld;
  }
  return v;
}

// The bfloat16 heads of one (b, h) for the tile products on VDPBF16PS (see the file comment) instead of sgemm
// on widened copies. Null members: not used.
struct Bf16Heads {
  const bfloat16 *q = nullptr, *k = nullptr, *v = nullptr, *go = nullptr;
  int64_t ldq = 0, ldk = 0, ldv = 0, ldgo = 0;
  uint32_t* scratch = nullptr;           // max(D, Dv) / 2 · 64 words
  bfloat16 *p = nullptr, *ds = nullptr;  // kBr · Bc each: P and dS of a tile, rounded (same row stride)
};

// rows × cols of a float32 tile (row stride ld) rounded to bfloat16 into dst (the same stride); nothing for
// double tiles (which never have bfloat16 heads).
template <class T>
void round_tile(const T* src, int64_t rows, int64_t cols, int64_t ld, bfloat16* dst) {
  if constexpr (std::is_same_v<T, float>) round_rows(src, ld, &dst->bits, ld, rows, cols);
}

// C (m, n) += alpha · op(A) B with A a rounded tile (h16->p or h16->ds: stored (m, k), or (k, m) when ta,
// row stride lda) and B bfloat16 rows (k, n) of a head, on VDPBF16PS; false (nothing done) without h16, and
// always for double tiles.
template <class T>
bool bf16_accumulate(const Bf16Heads* h16, bool ta, int64_t m, int64_t n, int64_t k, T alpha,
                     const bfloat16* a, int64_t lda, const bfloat16* b, int64_t ldb, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (!h16) return false;
    gemm_bf16(ta, false, m, n, k, alpha, a, lda, b, ldb, 1.0f, c, ldc);
    return true;
  } else {
    return false;
  }
}

// C (nr, nc) = scale · A Bᵀ on VDPBF16PS when h16 is set (A, B: bfloat16 rows of d); false (nothing done)
// otherwise, and always for double tiles.
template <class T>
bool bf16_product(const Bf16Heads* h16, const bfloat16* a, int64_t lda, const bfloat16* b, int64_t ldb,
                  int64_t nr, int64_t nc, int64_t d, T scale, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (!h16) return false;
    dot_rows_bf16(nr, nc, d, scale, a, lda, b, ldb, c, ldc, h16->scratch);
    return true;
  } else {
    return false;
  }
}

// ---- forward ----

// One tile of queries [i0, i0 + nr) of one (b, h): writes out rows and lse.
template <class T>
void forward_tile(const T* q, int64_t ldq, const T* k, int64_t ldk, const T* v, int64_t ldv, T* out,
                  int64_t ldo, T* lse, int64_t i0, int64_t nr, int64_t D, int64_t Dv, int64_t bc, T scale,
                  const int64_t* row_end, const KeepView& keep, const DropoutView<T>* drop, TileGemm<T>& gemm,
                  const Bf16Heads* h16 = nullptr) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  std::vector<T> s(static_cast<size_t>(kBr * bc)), o(static_cast<size_t>(kBr * Dv), T(0));
  std::vector<T> m(static_cast<size_t>(nr), kNegInf), l(static_cast<size_t>(nr), T(0));
  std::vector<T> z(drop ? static_cast<size_t>(bc) : 0);  // one row's dropout multipliers
  const int64_t tile_end = *std::max_element(row_end, row_end + nr);
  for (int64_t j0 = 0; j0 < tile_end; j0 += bc) {
    const int64_t nc = std::min(bc, tile_end - j0);
    // S = Q Kᵀ · scale   (nr, nc)
    if (!bf16_product(h16, h16 ? h16->q + i0 * h16->ldq : nullptr, h16 ? h16->ldq : 0,
                      h16 ? h16->k + j0 * h16->ldk : nullptr, h16 ? h16->ldk : 0, nr, nc, D, scale, s.data(),
                      bc))
      gemm(false, true, int(nr), int(nc), int(D), scale, q + i0 * ldq, int(ldq), k + j0 * ldk, int(ldk), T(0),
           s.data(), int(bc));
    for (int64_t r = 0; r < nr; ++r) {
      T* sr = s.data() + r * bc;
      const int64_t i = i0 + r, end = row_end[r] - j0;
      const int64_t seen = std::clamp<int64_t>(end, 0, nc);
      std::fill(sr + seen, sr + nc, kNegInf);
      if (keep.p)
        for (int64_t c = 0; c < seen; ++c)
          if (!keep(i, j0 + c)) sr[c] = kNegInf;
      // whole vectors: the entries past `seen` are -inf already (a scalar tail cost more than the lanes)
      const T mx = row_max(sr, std::min<int64_t>(nc, (seen + 15) / 16 * 16));
      const T mnew = std::max(m[r], mx);
      if (mnew == kNegInf) {  // nothing seen yet in this row: P = 0, O and l stay 0
        std::fill(sr, sr + nc, T(0));
        continue;
      }
      const T alpha = std::exp(m[r] - mnew);  // 0 when m = -inf
      l[r] = l[r] * alpha + exp_shifted(sr, nc, mnew);
      m[r] = mnew;
      if (drop) {  // P = 0 past the row's last key: only the seen keys need multipliers
        drop->row(i, j0, seen, z.data());
#pragma omp simd
        for (int64_t c = 0; c < seen; ++c) sr[c] *= z[static_cast<size_t>(c)];
      }
      if (alpha != T(1)) {
        T* orow = o.data() + r * Dv;
#pragma omp simd
        for (int64_t d = 0; d < Dv; ++d) orow[d] *= alpha;
      }
    }
    // O += P V   (nr, Dv)
    if (h16) round_tile(s.data(), nr, nc, bc, h16->p);
    if (!bf16_accumulate(h16, false, nr, Dv, nc, T(1), h16 ? h16->p : nullptr, bc,
                         h16 ? h16->v + j0 * h16->ldv : nullptr, h16 ? h16->ldv : 0, o.data(), Dv))
      gemm(false, false, int(nr), int(Dv), int(nc), T(1), s.data(), int(bc), v + j0 * ldv, int(ldv), T(1),
           o.data(), int(Dv));
  }
  for (int64_t r = 0; r < nr; ++r) {
    // NOTE: a row with nothing to attend (l = 0) gives zeros and lse = -inf, not NaN
    const T inv = l[r] > 0 ? T(1) / l[r] : T(0);
    T* dst = out + (i0 + r) * ldo;
    const T* src = o.data() + r * Dv;
#pragma omp simd
    for (int64_t d = 0; d < Dv; ++d) dst[d] = src[d] * inv;
    lse[i0 + r] = l[r] > 0 ? m[r] + std::log(l[r]) : kNegInf;
  }
}

// ---- backward ----

// One (b, h): writes gq, gk, gv of the head.
template <class T>
void backward_head(const T* q, int64_t ldq, const T* k, int64_t ldk, const T* v, int64_t ldv, const T* o,
                   int64_t ldo, const T* go, int64_t ldgo, const T* lse, T* gq, int64_t ldgq, T* gk,
                   int64_t ldgk, T* gv, int64_t ldgv, int64_t Tq, int64_t Tk, int64_t D, int64_t Dv,
                   int64_t bc, T scale, const std::vector<int64_t>& row_end, const KeepView& keep,
                   const DropoutView<T>* drop, TileGemm<T>& gemm, const Bf16Heads* h16 = nullptr) {
  // Δ_i = dO_i · O_i;  dQ = 0
  std::vector<T> delta(static_cast<size_t>(Tq));
  for (int64_t i = 0; i < Tq; ++i) {
    T acc = 0;
    const T *gi = go + i * ldgo, *oi = o + i * ldo;
#pragma omp simd reduction(+ : acc)
    for (int64_t d = 0; d < Dv; ++d) acc += gi[d] * oi[d];
    delta[static_cast<size_t>(i)] = acc;
    std::fill(gq + i * ldgq, gq + i * ldgq + D, T(0));
  }
  std::vector<T> p(static_cast<size_t>(kBr * bc)), dp(static_cast<size_t>(kBr * bc));
  std::vector<T> dk(static_cast<size_t>(bc * D)), dv(static_cast<size_t>(bc * Dv));
  std::vector<T> z(drop ? static_cast<size_t>(bc) : 0);  // one row's dropout multipliers
  for (int64_t j0 = 0; j0 < Tk; j0 += bc) {
    const int64_t nc = std::min(bc, Tk - j0);
    std::fill(dk.begin(), dk.end(), T(0));
    std::fill(dv.begin(), dv.end(), T(0));
    for (int64_t i0 = 0; i0 < Tq; i0 += kBr) {
      const int64_t nr = std::min(kBr, Tq - i0);
      if (*std::max_element(row_end.begin() + i0, row_end.begin() + i0 + nr) <= j0) continue;  // sees none
      // P = exp(Q Kᵀ · scale - lse), masked   (nr, nc)
      if (!bf16_product(h16, h16 ? h16->q + i0 * h16->ldq : nullptr, h16 ? h16->ldq : 0,
                        h16 ? h16->k + j0 * h16->ldk : nullptr, h16 ? h16->ldk : 0, nr, nc, D, scale,
                        p.data(), bc))
        gemm(false, true, int(nr), int(nc), int(D), scale, q + i0 * ldq, int(ldq), k + j0 * ldk, int(ldk),
             T(0), p.data(), int(bc));
      // dP = dO Vᵀ   (nr, nc)
      if (!bf16_product(h16, h16 ? h16->go + i0 * h16->ldgo : nullptr, h16 ? h16->ldgo : 0,
                        h16 ? h16->v + j0 * h16->ldv : nullptr, h16 ? h16->ldv : 0, nr, nc, Dv, T(1),
                        dp.data(), bc))
        gemm(false, true, int(nr), int(nc), int(Dv), T(1), go + i0 * ldgo, int(ldgo), v + j0 * ldv, int(ldv),
             T(0), dp.data(), int(bc));
      for (int64_t r = 0; r < nr; ++r) {
        const int64_t i = i0 + r, end = std::clamp<int64_t>(row_end[static_cast<size_t>(i)] - j0, 0, nc);
        const T li = lse[i], di = delta[static_cast<size_t>(i)];
        T *pr = p.data() + r * bc, *dpr = dp.data() + r * bc;
        // P = exp(S - lse) on the keys the row sees, 0 elsewhere (and on rows that see nothing: lse = -inf)
        if (li == -std::numeric_limits<T>::infinity()) {
          std::fill(pr, pr + nc, T(0));
        } else {
          // whole vectors (a tail left to the scalar epilogue costs more than the extra lanes; the scores
          // past `end` are finite, their values are overwritten)
          exp_shifted(pr, std::min<int64_t>(nc, (end + 15) / 16 * 16), li);
          std::fill(pr + end, pr + nc, T(0));
          if (keep.p)
            for (int64_t c = 0; c < end; ++c)
              if (!keep(i, j0 + c)) pr[c] = T(0);
        }
        // (at the machine's vector width: outside with_isa these loops ran on 128-bit SSE)
        if (drop) {
          drop->replay(i, j0, end, z.data());
          std::fill(z.begin() + end, z.begin() + nc, T(0));  // P = 0 there: dS = 0, dropout(P) = 0
          with_isa([=, zr = static_cast<const T*>(z.data())] {
            T* __restrict ps = pr;
            T* __restrict ds = dpr;
            const T* __restrict zz = zr;
#pragma omp simd
            for (int64_t c = 0; c < nc; ++c) {
              ds[c] = ps[c] * (ds[c] * zz[c] - di);  // dS
              ps[c] *= zz[c];                        // dropout(P), for dV
            }
          });
        } else {
          with_isa([=] {
            const T* __restrict ps = pr;
            T* __restrict ds = dpr;
#pragma omp simd
            for (int64_t c = 0; c < nc; ++c) ds[c] = ps[c] * (ds[c] - di);  // dS
          });
        }
      }
      // dV += dropout(P)ᵀ dO   (nc, Dv);  dK += scale dSᵀ Q   (nc, D);  dQ += scale dS K   (nr, D)
      if (h16) {  // on VDPBF16PS from P and dS rounded to bfloat16 and the 16-bit heads
        round_tile(p.data(), nr, nc, bc, h16->p);
        round_tile(dp.data(), nr, nc, bc, h16->ds);
      }
      if (!bf16_accumulate(h16, true, nc, Dv, nr, T(1), h16 ? h16->p : nullptr, bc,
                           h16 ? h16->go + i0 * h16->ldgo : nullptr, h16 ? h16->ldgo : 0, dv.data(), Dv))
        gemm(true, false, int(nc), int(Dv), int(nr), T(1), p.data(), int(bc), go + i0 * ldgo, int(ldgo), T(1),
             dv.data(), int(Dv));
      if (!bf16_accumulate(h16, true, nc, D, nr, scale, h16 ? h16->ds : nullptr, bc,
                           h16 ? h16->q + i0 * h16->ldq : nullptr, h16 ? h16->ldq : 0, dk.data(), D))
        gemm(true, false, int(nc), int(D), int(nr), scale, dp.data(), int(bc), q + i0 * ldq, int(ldq), T(1),
             dk.data(), int(D));
      if (!bf16_accumulate(h16, false, nr, D, nc, scale, h16 ? h16->ds : nullptr, bc,
                           h16 ? h16->k + j0 * h16->ldk : nullptr, h16 ? h16->ldk : 0, gq + i0 * ldgq, ldgq))
        gemm(false, false, int(nr), int(D), int(nc), scale, dp.data(), int(bc), k + j0 * ldk, int(ldk), T(1),
             gq + i0 * ldgq, int(ldgq));
    }
    for (int64_t c = 0; c < nc; ++c) {
      std::copy(dk.begin() + c * D, dk.begin() + (c + 1) * D, gk + (j0 + c) * ldgk);
      std::copy(dv.begin() + c * Dv, dv.begin() + (c + 1) * Dv, gv + (j0 + c) * ldgv);
    }
  }
}

// Pointer to row 0 of head (b, h) of a (B, H, T, D) tensor.
template <class T>
T* head(const Tensor& t, int64_t b, int64_t h) {
  return t.data<T>() + b * t.stride(0) + h * t.stride(1);
}

// The row stride of a (B, H, T, D) tensor as a GEMM leading dimension (any value >= D when T is 1).
int64_t ld(const Tensor& t) { return t.size(2) > 1 ? t.stride(2) : std::max<int64_t>(t.size(3), 1); }

// 16-bit heads: rows [r0, r1) of the (b, h) head of t (rows, cols) widened into the same rows of a
// contiguous float32 buffer (exact; `out` holds at least r1 · cols floats), and rows [r0, r1) of such a
// buffer rounded back into the head of t. The 16-bit kernels below are the float32 ones on these buffers:
// statistics, scores and accumulators all float32, one rounding per stored element.
template <class T>
void widen_head_rows(const Tensor& t, int64_t b, int64_t h, int64_t r0, int64_t r1, int64_t cols,
                     float* out) {
  const T* p = head<T>(t, b, h);
  const int64_t l = ld(t);
  if constexpr (std::is_same_v<T, bfloat16>)
    widen_rows(&p[r0 * l].bits, l, out + r0 * cols, cols, r1 - r0, cols);
  else
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = static_cast<float>(p[r * l + c]);
}
template <class T>
std::vector<float> widen_head(const Tensor& t, int64_t b, int64_t h, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  widen_head_rows<T>(t, b, h, 0, rows, cols, out.data());
  return out;
}
template <class T>
void store_head(const std::vector<float>& src, int64_t cols, const Tensor& t, int64_t b, int64_t h,
                int64_t r0, int64_t r1) {
  T* p = head<T>(t, b, h);
  const int64_t l = ld(t);
  if constexpr (std::is_same_v<T, bfloat16>)
    round_rows(src.data() + r0 * cols, cols, &p[r0 * l].bits, l, r1 - r0, cols);
  else
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c)
        p[r * l + c] = static_cast<T>(src[static_cast<size_t>(r * cols + c)]);
}

// Work worth a thread team (the flop count of the tile products); below it the kernel runs on one thread.
constexpr double kParallelFlops = 1 << 20;

}  // namespace

TileProductsGuard::TileProductsGuard(TileProducts how) : prev_(t_tile_products) { t_tile_products = how; }
TileProductsGuard::~TileProductsGuard() { t_tile_products = prev_; }

// sgemm at every head dim: bench/flash_tiles (fwd+bwd, (4, 4, 512, D), float32, 1 thread, under load) timed
// the loops 2.2-2.7x slower than sgemm at D = 32 and 64 and 3.3-3.5x at D = 128, causal or not.
TileProducts tile_products(int64_t /*d*/) {
  return t_tile_products != TileProducts::Auto ? t_tile_products : TileProducts::Gemm;
}

void CpuBackend::flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const ops::AttentionMask& mask, double scale,
                                         const ops::AttentionDropout& dropout, const Tensor& out,
                                         const Tensor& lse) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), D = q.size(3), Dv = v.size(3);
  const int64_t bc = key_tile(D, Dv), ntiles = (Tq + kBr - 1) / kBr, tasks = B * H * ntiles;
  const RowLimits lim = limits_of(mask, Tq, Tk);
  const TileProducts how = tile_products(std::max(D, Dv));
  const bool big = 2.0 * double(B * H * Tq) * double(Tk) * double(D + Dv) > kParallelFlops && tasks > 1;
  blas_first_use();
  dispatch_floating_and_half(q.dtype(), "flash_attention_forward", [&]<class T>() {
    using C = compute_t<T>;  // 16-bit q, k, v, out: float32 tiles, lse float32
    parallel_for(0, tasks, big ? 1 : tasks, [&](int64_t t0, int64_t t1) {
      TileGemm<C> gemm(how, bc * std::max(D, Dv));
      // 16-bit: float32 copies of the rows this task reads (its queries; the keys up to the tile's last)
      // (bfloat16 with VDPBF16PS: every product reads q, k and v themselves, nothing is widened)
      std::vector<float> qf, kf, vf, of;
      std::vector<uint32_t> pairs;
      std::vector<bfloat16> p16;
      const bool dot16 = std::is_same_v<T, bfloat16> && dot_rows_bf16_available(D);
      if constexpr (!std::is_same_v<T, C>) {
        if (!dot16) qf.resize(Tq * D), kf.resize(Tk * D), vf.resize(Tk * Dv);
        of.resize(Tq * Dv);
        if (dot16) pairs.resize(D / 2 * 64), p16.resize(kBr * bc);
      }
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t bh = t / ntiles, b = bh / H, h = bh % H, i0 = (t % ntiles) * kBr;
        const int64_t nr = std::min(kBr, Tq - i0);
        int64_t row_end[kBr];
        for (int64_t r = 0; r < nr; ++r) row_end[r] = lim.end(b, i0 + r);
        DropoutView<C> dv = dropout_of<C>(dropout, bh, Tq, Tk);
        if constexpr (!std::is_same_v<T, C>) {
          const int64_t tile_end = *std::max_element(row_end, row_end + nr);
          Bf16Heads h16;
          if constexpr (std::is_same_v<T, bfloat16>)
            h16 = {head<T>(q, b, h), head<T>(k, b, h), head<T>(v, b, h), nullptr, ld(q), ld(k), ld(v), 0,
                   pairs.data(),     p16.data()};
          if (!dot16) {
            widen_head_rows<T>(q, b, h, i0, i0 + nr, D, qf.data());
            widen_head_rows<T>(k, b, h, 0, tile_end, D, kf.data());
            widen_head_rows<T>(v, b, h, 0, tile_end, Dv, vf.data());
          }
          const int64_t ldd = std::max<int64_t>(D, 1), lddv = std::max<int64_t>(Dv, 1);
          forward_tile<float>(qf.data(), ldd, kf.data(), ldd, vf.data(), lddv, of.data(), lddv,
                              lse.data<float>() + bh * Tq, i0, nr, D, Dv, bc, float(scale), row_end,
                              keep_of(mask, b, h), dropout.p > 0 ? &dv : nullptr, gemm,
                              dot16 ? &h16 : nullptr);
          store_head<T>(of, Dv, out, b, h, i0, i0 + nr);
        } else
          forward_tile<T>(head<T>(q, b, h), ld(q), head<T>(k, b, h), ld(k), head<T>(v, b, h), ld(v),
                          head<T>(out, b, h), ld(out), lse.data<T>() + bh * Tq, i0, nr, D, Dv, bc, T(scale),
                          row_end, keep_of(mask, b, h), dropout.p > 0 ? &dv : nullptr, gemm);
      }
    });
  });
}

void CpuBackend::flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const Tensor& out, const Tensor& gout, const Tensor& lse,
                                          const ops::AttentionMask& mask, double scale,
                                          const ops::AttentionDropout& dropout, const Tensor& gq,
                                          const Tensor& gk, const Tensor& gv) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), D = q.size(3), Dv = v.size(3);
  const int64_t bc = key_tile(D, Dv);
  const RowLimits lim = limits_of(mask, Tq, Tk);
  const TileProducts how = tile_products(std::max(D, Dv));
  const bool big = 4.0 * double(B * H * Tq) * double(Tk) * double(D + Dv) > kParallelFlops && B * H > 1;
  blas_first_use();
  dispatch_floating_and_half(q.dtype(), "flash_attention_backward", [&]<class T>() {
    using C = compute_t<T>;  // 16-bit: the float32 kernel on widened heads (lse is float32)
    parallel_for(0, B * H, big ? 1 : B * H, [&](int64_t bh0, int64_t bh1) {
      TileGemm<C> gemm(how, std::max(bc, kBr) * std::max(D, Dv));
      // bfloat16 with VDPBF16PS: S = Q Kᵀ and dP = dO Vᵀ read the 16-bit heads (v is not widened)
      const bool dot16 = std::is_same_v<T, bfloat16> && dot_rows_bf16_available(D) && Dv % 2 == 0;
      std::vector<uint32_t> pairs(dot16 ? static_cast<size_t>(std::max(D, Dv) / 2 * 64) : 0);
      std::vector<bfloat16> p16(dot16 ? static_cast<size_t>(2 * kBr * bc) : 0);  // P and dS, rounded
      for (int64_t bh = bh0; bh < bh1; ++bh) {
        const int64_t b = bh / H, h = bh % H;
        std::vector<int64_t> row_end(static_cast<size_t>(Tq));
        for (int64_t i = 0; i < Tq; ++i) row_end[static_cast<size_t>(i)] = lim.end(b, i);
        DropoutView<C> dv = dropout_of<C>(dropout, bh, Tq, Tk);
        if constexpr (!std::is_same_v<T, C>) {
          // (with VDPBF16PS the products read the 16-bit heads: only out and dO are widened, for Δ)
          const std::vector<float> qf = dot16 ? std::vector<float>() : widen_head<T>(q, b, h, Tq, D),
                                   kf = dot16 ? std::vector<float>() : widen_head<T>(k, b, h, Tk, D),
                                   vf = dot16 ? std::vector<float>() : widen_head<T>(v, b, h, Tk, Dv),
                                   of = widen_head<T>(out, b, h, Tq, Dv),
                                   gof = widen_head<T>(gout, b, h, Tq, Dv);
          std::vector<float> gqf(static_cast<size_t>(Tq * D)), gkf(static_cast<size_t>(Tk * D)),
              gvf(static_cast<size_t>(Tk * Dv));
          Bf16Heads h16;
          if constexpr (std::is_same_v<T, bfloat16>)
            h16 = {head<T>(q, b, h),
                   head<T>(k, b, h),
                   head<T>(v, b, h),
                   head<T>(gout, b, h),
                   ld(q),
                   ld(k),
                   ld(v),
                   ld(gout),
                   pairs.data(),
                   p16.data(),
                   p16.data() + kBr * bc};
          const int64_t ldd = std::max<int64_t>(D, 1), lddv = std::max<int64_t>(Dv, 1);
          backward_head<float>(qf.data(), ldd, kf.data(), ldd, vf.data(), lddv, of.data(), lddv, gof.data(),
                               lddv, lse.data<float>() + bh * Tq, gqf.data(), ldd, gkf.data(), ldd,
                               gvf.data(), lddv, Tq, Tk, D, Dv, bc, float(scale), row_end,
                               keep_of(mask, b, h), dropout.p > 0 ? &dv : nullptr, gemm,
                               dot16 ? &h16 : nullptr);
          store_head<T>(gqf, D, gq, b, h, 0, Tq);
          store_head<T>(gkf, D, gk, b, h, 0, Tk);
          store_head<T>(gvf, Dv, gv, b, h, 0, Tk);
        } else
          backward_head<T>(head<T>(q, b, h), ld(q), head<T>(k, b, h), ld(k), head<T>(v, b, h), ld(v),
                           head<T>(out, b, h), ld(out), head<T>(gout, b, h), ld(gout),
                           lse.data<T>() + bh * Tq, head<T>(gq, b, h), ld(gq), head<T>(gk, b, h), ld(gk),
                           head<T>(gv, b, h), ld(gv), Tq, Tk, D, Dv, bc, T(scale), row_end,
                           keep_of(mask, b, h), dropout.p > 0 ? &dv : nullptr, gemm);
      }
    });
  });
}

}  // namespace saccade::cpu
