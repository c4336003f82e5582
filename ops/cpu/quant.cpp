// The CPU's linear_q8_0 (ops/kernels/quant.h): out (M, N) = x (M, K) · wᵀ with w (N, K) in Q8_0 blocks.
//
// A few rows of x (decoding: M = 1 a sequence): each block of 32 int8 weights is widened to float32 in
// registers on its way to the product and scaled by its d once per row-block pair, so the matrix streams from
// memory once, in its 34 bytes a block, and nothing is written back (the same shape as gemm_half.cpp's
// widened bf16 rows). Many rows (a prompt's prefill): a panel of 64 rows of w is dequantized into a float32
// buffer and multiplied with cblas_sgemm, so the widening is paid once per panel, not once per row of x.
// The readable twin is ops::linear_q8_0_composed (dequantize, then matmul), tests/test_quant.cpp.
//
// Threads: the N rows of w are split across the pool in panels of 64 (kPanel), each panel's rows read by
// one thread. From memory, the widening loop prefetches each row's blocks kAhead blocks ahead of its loads:
// the hardware prefetcher alone kept too few lines in flight for a loop this slow (bench/RESULTS.md, "Q8_0
// weights").
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ops/cpu/backend.h"
#include "ops/cpu/simd.h"
#include "ops/cpu/thread_pool.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define SACCADE_Q8_INTRINSICS 1
#endif

namespace saccade::cpu {

namespace {

constexpr int64_t kPanel = 64;    // rows of w a thread takes at a time
constexpr int64_t kGemvRows = 8;  // up to this many rows of x: the widening loop; more: dequantize + sgemm
constexpr int64_t kGrain = 2 * 64 * 1024;  // multiply-adds worth a thread's wake-up (linalg.cpp's kGemvGrain)

// y[r] = Σ_b d_rb · Σ_i qs_rb[i] · x[32b + i] for R rows of blocks (row r at w + r · ldw), nb blocks each; x
// holds nb · 32 floats (zero-padded). 32 float32 sums a row in vector lanes, one product scaled per block:
// the plain loop, for the baseline width (and the model of the intrinsics below).
template <int R>
void dot_blocks(int64_t nb, const float* x, const BlockQ8_0* w, int64_t ldw, float* y) {
  constexpr int L = BlockQ8_0::kSize;
  float acc[R][L] = {};
  for (int64_t b = 0; b < nb; ++b)
    for (int r = 0; r < R; ++r) {
      const BlockQ8_0& blk = w[r * ldw + b];
      const float d = static_cast<float>(blk.d);
      for (int l = 0; l < L; ++l) acc[r][l] += d * (x[b * L + l] * static_cast<float>(blk.qs[l]));
    }
  for (int r = 0; r < R; ++r) {
    float s = 0;
    for (int l = 0; l < L; ++l) s += acc[r][l];
    y[r] = s;
  }
}

#if SACCADE_Q8_INTRINSICS
// NOTE: GCC 12's avx512fintrin.h warns (maybe-)uninitialized inside its own conversion and reduction
// intrinsics (their `__Y = __Y` undefined pass-through operand), a false positive (as in random.cpp)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
constexpr int64_t kAhead = 32;  // blocks (1088 bytes) a row's software prefetch runs ahead of its loads

// Every float16 as float32 (256 KiB, made once): a block's scale is then one broadcast load from the table
// instead of a move, a conversion and a broadcast through the shuffle port that the widening itself needs
// (ggml keeps the same table, ggml_table_f32_f16)
const float* f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i)
      t[i] = static_cast<float>(float16::from_bits(static_cast<uint16_t>(i)));
    return t;
  }();
  return table.data();
}
// dot_blocks written out for AVX-512 and AVX2 (GCC's vectoriser left the int8 -> float widening of the loop
// above in 8-lane pieces with shuffles): per block, the 32 int8 weights sign-extended to 32-bit lanes
// (vpmovsxbd) and converted (vcvtdq2ps), multiplied by the 32 floats of x (loaded once for the R rows),
// summed into one vector, and that vector scaled by the block's d (f16_table's float) into the row's sums.
template <int R>
[[gnu::target("avx512f,fma")]] void dot_blocks_avx512(int64_t nb, const float* x, const BlockQ8_0* w,
                                                      int64_t ldw, float* y) {
  const float* f16 = f16_table();
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + b * 32), x1 = _mm512_loadu_ps(x + b * 32 + 16);
    for (int r = 0; r < R; ++r) {
      const BlockQ8_0& blk = w[r * ldw + b];
      _mm_prefetch(reinterpret_cast<const char*>(&blk + kAhead), _MM_HINT_T0);
      const __m128i* q = reinterpret_cast<const __m128i*>(blk.qs);
      const __m512 w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(q))),
                   w1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(q + 1)));
      const __m512 p = _mm512_fmadd_ps(x1, w1, _mm512_mul_ps(x0, w0));
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(f16[blk.d.bits]), p, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = _mm512_reduce_add_ps(acc[r]);
}

// The low 8 int8 of q as 8 floats.
[[gnu::target("avx2,fma")]] inline __m256 widen(__m128i q) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
}

template <int R>
[[gnu::target("avx2,fma")]] void dot_blocks_avx2(int64_t nb, const float* x, const BlockQ8_0* w, int64_t ldw,
                                                 float* y) {
  const float* f16 = f16_table();
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * 32;
    const __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8), x2 = _mm256_loadu_ps(xb + 16),
                 x3 = _mm256_loadu_ps(xb + 24);
    for (int r = 0; r < R; ++r) {
      const BlockQ8_0& blk = w[r * ldw + b];
      _mm_prefetch(reinterpret_cast<const char*>(&blk + kAhead), _MM_HINT_T0);
      const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs)),
                    q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + 16));
      __m256 p = _mm256_mul_ps(x0, widen(q0));
      p = _mm256_fmadd_ps(x1, widen(_mm_srli_si128(q0, 8)), p);
      p = _mm256_fmadd_ps(x2, widen(q1), p);
      p = _mm256_fmadd_ps(x3, widen(_mm_srli_si128(q1, 8)), p);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(f16[blk.d.bits]), p, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    y[r] = _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
  }
}
#pragma GCC diagnostic pop
#endif

// y (j1 - j0) = rows [j0, j1) of w (nb blocks a row) · x: four rows at a time, at the width kernel_isa()
// allows (the intrinsics at AVX-512 and AVX2, else dot_blocks through with_isa).
void dot_rows(int64_t nb, const float* x, const BlockQ8_0* w, int64_t j0, int64_t j1, float* y) {
#if SACCADE_Q8_INTRINSICS
  const Isa isa = kernel_isa();
  if (isa == Isa::Avx512 || isa == Isa::Avx2) {
    const bool wide = isa == Isa::Avx512;
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4)
      (wide ? dot_blocks_avx512<4> : dot_blocks_avx2<4>)(nb, x, w + j * nb, nb, y + (j - j0));
    for (; j < j1; ++j)
      (wide ? dot_blocks_avx512<1> : dot_blocks_avx2<1>)(nb, x, w + j * nb, nb, y + (j - j0));
    return;
  }
#endif
  with_isa([=] {
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4) dot_blocks<4>(nb, x, w + j * nb, nb, y + (j - j0));
    for (; j < j1; ++j) dot_blocks<1>(nb, x, w + j * nb, nb, y + (j - j0));
  });
}

// Rows [j0, j1) of w dequantized into panel (j1 - j0, nb · 32), row-major.
void dequantize_panel(const BlockQ8_0* w, int64_t nb, int64_t j0, int64_t j1, float* panel) {
  with_isa([=] {
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t b = 0; b < nb; ++b) {
        const BlockQ8_0& blk = w[j * nb + b];
        const float d = static_cast<float>(blk.d);
        float* out = panel + ((j - j0) * nb + b) * BlockQ8_0::kSize;
        for (int l = 0; l < BlockQ8_0::kSize; ++l) out[l] = d * static_cast<float>(blk.qs[l]);
      }
  });
}

}  // namespace

void CpuBackend::linear_q8_0(const Tensor& x, const Q8_0Matrix& w, const Tensor& out) {
  const int64_t m = x.size(0), k = w.cols, n = w.rows, nb = w.blocks_per_row(), kp = nb * BlockQ8_0::kSize;
  const BlockQ8_0* pw = w.blocks->data();
  float* pc = out.data<float>();
  // x zero-padded to whole blocks (a copy of M · K floats: nothing beside the matrix's bytes)
  std::vector<float> xp(static_cast<size_t>(m * kp), 0.0f);
  const float* px = x.data<float>();
  for (int64_t i = 0; i < m; ++i) std::copy(px + i * k, px + (i + 1) * k, xp.begin() + i * kp);
  const int64_t panels = (n + kPanel - 1) / kPanel, panel_cost = std::max<int64_t>(1, kPanel * m * kp);
  parallel_for(0, panels, (kGrain + panel_cost - 1) / panel_cost, [&](int64_t p0, int64_t p1) {
    const int64_t j0 = p0 * kPanel, j1 = std::min(n, p1 * kPanel);
    if (m <= kGemvRows) {
      std::vector<float> y(static_cast<size_t>(j1 - j0));
      for (int64_t i = 0; i < m; ++i) {
        dot_rows(nb, xp.data() + i * kp, pw, j0, j1, y.data());
        std::copy(y.begin(), y.end(), pc + i * n + j0);
      }
      return;
    }
    std::vector<float> panel(static_cast<size_t>(std::min(kPanel, j1 - j0) * kp));
    for (int64_t a = j0; a < j1; a += kPanel) {
      const int64_t rows = std::min(kPanel, j1 - a);
      dequantize_panel(pw, nb, a, a + rows, panel.data());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(rows),
                  static_cast<int>(kp), 1.0f, xp.data(), static_cast<int>(kp), panel.data(),
                  static_cast<int>(kp), 0.0f, pc + a, static_cast<int>(n));
    }
  });
}

}  // namespace saccade::cpu
