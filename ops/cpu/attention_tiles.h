#pragma once
// The pieces of the CPU flash-attention kernels (ops/cpu/attention.cpp: float32 and float64;
// ops/cpu/attention_half.cpp: bfloat16 and float16) that both units share: the tile sizes, the tile products
// through OpenBLAS, plain loops or the float32 AVX-512 kernel (flash_tiles.h), the row helpers of the online
// softmax, what the mask and the dropout decide for one head, and the views of one head that the tile loop
// (attention_loop.h) takes.
//
//   a head: (T, D) rows, row r at p + r · ld, unit stride along D
//
// Everything here is inline and header-only on purpose: the tile loop calls these helpers once a row or a
// tile, and they must inline into it in each unit as they did when both lived in one file.
#include <cblas.h>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/backend.h"
#include "ops/cpu/flash_tiles.h"
#include "ops/cpu/flash_tiles_f32.h"
#include "ops/cpu/random.h"
#include "ops/cpu/simd.h"
#include "ops/elementwise_math.h"

namespace saccade::cpu::flash {

// ---- tile products ----

// C (m, n) = alpha op(A) op(B) + beta C, row-major, op = transpose when ta / tb (beta is 0 or 1 here).
inline void blas_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
                      const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, c, ldc);
}
inline void blas_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda,
                      const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
              a, lda, b, ldb, beta, c, ldc);
}

// The same product with loops the compiler vectorises: each row of C is built W columns at a time in a
// fixed-size accumulator (W = 64 floats or 32 doubles), as a sum over p of a[i, p] times row p of B. op(B) =
// Bᵀ (tb) is first copied transposed into `bt` (k·n; tiles are small) so that the inner loop always reads B
// with unit stride. This is the readable reference of the tile products, not a fast path: GCC 12 keeps `acc`
// in L1 (a load, a multiply-add and a store per vector), not in registers, and a loop form of the
// register-blocked micro-kernel was slower still (GCC vectorised the sum over p with gathers), which is why
// the fast float32 kernel is written in intrinsics (flash_tiles_f32.h).
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

// The tile products of one task, through OpenBLAS, loop_gemm, or (float32, TileProducts::Avx512 on a CPU
// with AVX-512) tile_gemm_f32 (flash_tiles_f32.h), with the scratch that loop_gemm's transposed operand
// needs and the packed Bᵀ operands that tile_gemm_f32 keeps for the task. Call forget() when the task
// rewrites an operand in place (TransposedTiles).
template <class T>
struct TileGemm {
  TileProducts how;  // Gemm, Loops or Avx512 (resolved: Avx512 only where it runs)
  std::vector<T> bt;
  TransposedTiles packs;
  TileGemm(TileProducts asked, int64_t scratch)
      : how(asked == TileProducts::Avx512 && !(std::is_same_v<T, float> && tile_gemm_f32_available())
                ? TileProducts::Gemm
                : asked) {
    if (this->how == TileProducts::Loops) bt.resize(static_cast<size_t>(scratch));
  }
  void operator()(bool ta, bool tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb,
                  T beta, T* c, int ldc) {
    if constexpr (std::is_same_v<T, float>) {
      if (how == TileProducts::Avx512) {
        if (tb) b = packs.get(b, ldb, n, k), ldb = int(TransposedTiles::ld(n));
        return tile_gemm_f32(ta, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      }
    }
    if (how == TileProducts::Loops)
      loop_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bt.data());
    else
      blas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void forget() { packs.forget(); }
};

// ---- row helpers of the online softmax ----

// x[c] = e^(x[c] - m) for c < n; returns Σ x[c] (summed in vector lanes: a serial sum of each row is a chain
// of dependent adds, which short rows feel most; bench/RESULTS.md has the figures).
inline float exp_shifted(float* __restrict x, int64_t n, float m) {
  // NOTE: the lambda copies its arguments: loads through captured references keep GCC from vectorising
  return with_isa([=] {
    float* __restrict y = x;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < n; ++c) sum += y[c] = math::exp_nonpositive(y[c] - m);
    return sum;
  });
}
inline double exp_shifted(double* __restrict x, int64_t n, double m) {
  double sum = 0;
  for (int64_t c = 0; c < n; ++c) sum += x[c] = std::exp(x[c] - m);
  return sum;
}

// max(-inf, x[0], ..., x[n - 1]) (NaN entries may or may not win).
inline float row_max(const float* __restrict x, int64_t n) {
  return with_isa([=] {
    const float* __restrict y = x;
    float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
    for (int64_t c = 0; c < n; ++c) mx = y[c] > mx ? y[c] : mx;  // (std::max stayed scalar: GCC 12)
    return simd_max_result(mx, y, n);
  });
}
inline double row_max(const double* x, int64_t n) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < n; ++c) mx = std::max(mx, x[c]);
  return mx;
}

// ---- tile sizes ----

constexpr int64_t kBr = 64;  // queries per tile

// Keys per tile: Br·Bc·max(D, Dv) <= 64³ (see attention.cpp's file comment), a multiple of 8, at least 8.
inline int64_t key_tile(int64_t d, int64_t dv) {
  const int64_t w = std::max<int64_t>(std::max(d, dv), 1);
  return std::clamp<int64_t>((64 * 64 / w) / 8 * 8, 8, 64);
}

// Work worth a thread team (the flop count of the tile products); below it the kernel runs on one thread.
constexpr double kParallelFlops = 1 << 20;

// ---- what the mask decides ----

// Everything about one (b, h) that the mask decides, without the per-element Bool mask.
struct RowLimits {
  const int64_t* valid_lens;  // nullptr, (B) or (B, Tq)
  bool per_query;
  const int64_t* key_starts;  // nullptr or (B, Tq): packed documents (ops::with_documents)
  ops::CausalAlign causal;
  int64_t tq, tk;
  int64_t window;  // 0: none; else only with a causal rule (ops::AttentionMask::window)

  // One past the last key the causal rule lets query i see (tk without one).
  int64_t causal_end(int64_t i) const {
    if (causal == ops::CausalAlign::None) return tk;
    return i + 1 + (causal == ops::CausalAlign::BottomRight ? tk - tq : 0);
  }
  // One past the last key query i of batch row b may see.
  int64_t end(int64_t b, int64_t i) const {
    int64_t e = std::min(tk, causal_end(i));
    if (valid_lens) e = std::min(e, std::max<int64_t>(0, valid_lens[per_query ? b * tq + i : b]));
    return std::max<int64_t>(e, 0);
  }
  // The first key query i of batch row b may see: the window's first, c - W + 1 with c its last causal key
  // (0 without a window), or its document's first (key_starts), the later of the two. May be >= end (the row
  // sees nothing).
  int64_t begin(int64_t b, int64_t i) const {
    const int64_t w = window > 0 ? std::max<int64_t>(0, causal_end(i) - window) : 0;
    return key_starts ? std::max(w, key_starts[b * tq + i]) : w;
  }
};

inline RowLimits limits_of(const ops::AttentionMask& m, int64_t tq, int64_t tk) {
  const bool vl = m.valid_lens.defined();
  return {vl ? m.valid_lens.data<int64_t>() : nullptr,
          vl && m.valid_lens.dim() == 2,
          m.key_starts.defined() ? m.key_starts.data<int64_t>() : nullptr,
          m.causal,
          tq,
          tk,
          m.window};
}

// The Bool keep-mask of one (b, h): keep(i, j), or true everywhere when undefined.
struct KeepView {
  const bool* p = nullptr;
  int64_t si = 0, sj = 0;
  bool operator()(int64_t i, int64_t j) const { return !p || p[i * si + j * sj]; }
};

inline KeepView keep_of(const ops::AttentionMask& m, int64_t b, int64_t h) {
  if (!m.keep.defined()) return {};
  const Tensor& k = m.keep;
  return {k.data<bool>() + b * k.stride(0) + h * k.stride(1), k.stride(2), k.stride(3)};
}

// ---- dropout ----

// Keep flags <-> multipliers: flag c of a run is bit c % 8 of bytes[c / 8]; a flag is set iff m[c] != 0, and
// reads back as `scale` (set) or 0. With AVX-512 a compare or a masked move does 16 at a time (the scalar
// loops cost as much as the Philox draws they save).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SACCADE_FLAGS16 1
[[gnu::target("avx512f")]] inline void record_flags_avx512(const float* m, int64_t n, uint8_t* bytes) {
  for (int64_t c = 0; c < n; c += 16) {
    const int64_t len = std::min<int64_t>(16, n - c);
    const __mmask16 valid = static_cast<__mmask16>(len == 16 ? 0xffffu : (1u << len) - 1);
    const uint16_t k =
        _mm512_mask_cmp_ps_mask(valid, _mm512_maskz_loadu_ps(valid, m + c), _mm512_setzero_ps(), _CMP_NEQ_UQ);
    std::memcpy(bytes + c / 8, &k, static_cast<size_t>((len + 7) / 8));  // little-endian: flag c first
  }
}
[[gnu::target("avx512f")]] inline void read_flags_avx512(const uint8_t* bytes, int64_t n, float scale,
                                                         float* m) {
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
// it back, instead of drawing every number twice (the Philox draws are a large share of the attention's time
// with dropout; bench/RESULTS.md). Flag j of
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

// bh: the flat index b·H + h of the query head.
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

// ---- views of one head ----

// One (T, D) head of a (B, H, T, D) tensor: row r at p + r · ld, unit stride along D.
template <class T>
struct HeadView {
  T* p = nullptr;
  int64_t ld = 0;
  T* row(int64_t r) const { return p + r * ld; }
};

// The row stride of a (B, H, T, D) tensor as a GEMM leading dimension (any value >= D when T is 1).
inline int64_t ld(const Tensor& t) { return t.size(2) > 1 ? t.stride(2) : std::max<int64_t>(t.size(3), 1); }

// Head (b, h) of a (B, H, T, D) tensor.
template <class T>
HeadView<T> head(const Tensor& t, int64_t b, int64_t h) {
  return {t.data<std::remove_const_t<T>>() + b * t.stride(0) + h * t.stride(1), ld(t)};
}

// Everything the tile loop needs about one (b, h) besides its tile products' operands:
//   q: (Tq, D)  k: (Tk, D)  v: (Tk, Dv)  out: (Tq, Dv)  lse: (Tq)
// (k, v: key/value head h / G with grouped-query attention)
// The forward writes out and lse; the backward reads them.
template <class T>
struct HeadProblem {
  HeadView<const T> q, k, v;
  HeadView<T> out;
  T* lse;
  int64_t tq, tk, d, dv, bc;  // bc: keys per tile (key_tile)
  T scale;
  KeepView keep;
  DropoutView<T> dropout;
  bool dropping;  // dropout.p > 0
};

// The backward's views of one (b, h): gout (Tq, Dv) read; gq (Tq, D), gk (Tk, D), gv (Tk, Dv) written, or
// with add_kv (a later query head of a grouped-query group) gk and gv added into.
template <class T>
struct HeadGrads {
  HeadView<const T> gout;
  HeadView<T> gq, gk, gv;
  bool add_kv = false;
};

}  // namespace saccade::cpu::flash
