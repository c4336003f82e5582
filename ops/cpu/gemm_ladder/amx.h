#pragma once
// Step 5 of the bf16 GEMM ladder (README.md): Intel AMX tiles. Shapes as naive.h.
// AMX (Sapphire Rapids and later; Intel's Architecture Instruction Set Extensions Programming Reference,
// chapter 3) adds eight tile registers tmm0..tmm7 of up to 16 rows × 64 bytes and TDPBF16PS, which multiplies
// a 16 × 32 bf16 tile of a (16 rows of 32 consecutive k) by a tile of b holding 16 pairs of k for each of 16
// columns (the pairs side by side in 32 bits: step 4's packed panel, read 16 columns at a time) and adds the
// products to a 16 × 16 float tile: 8192 multiply-adds in one instruction, where VDPBF16PS does 32. Here a
// 32 × 32 block of c lives in four C tiles (tmm0..3), two tiles of a (tmm4, 5: rows 0-15 and 16-31) and two
// of b (tmm6, 7: columns 0-15 and 16-31) are loaded per 16 pairs of k, and four TDPBF16PS use them: every
// tile loaded serves two products. The tiles are loaded straight from memory with a row stride: a from its
// rows (k contiguous, 64 bytes a tile row), b from step 4's panel (a row of 16 columns is 64 bytes of a
// 128-byte panel row). Each product of two bf16 is exact in float; the sums are float32 with denormals
// flushed, as VDPBF16PS's, in the hardware's order. Before the first tile instruction a thread loads the tile
// configuration (configure_tiles) and the process must have asked Linux for the tile state
// (arch_prctl(ARCH_REQ_XCOMP_PERM), cpu::cpu_has_amx_bf16() does it once); release_tiles ends the use.
// ../gemm_bf16.cpp takes the micro-kernel's parts from here, with its edges (zero-padded packs).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/half.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define SACCADE_LADDER_AMX 1

// The tile instructions as inline assembly, each telling the compiler what memory it reads or writes. (GCC
// 12's <amxtileintrin.h> does not: its _tile_loadconfig declares an 8-byte operand, so the stores that fill
// the other 56 bytes may be dropped, and its _tile_loadd declares no memory read, so the stores that packed
// a tile's source may be moved after the load.) `t` is a tile register number, 0..7.
#define SACCADE_TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::)
#define SACCADE_TILE_LOAD(t, base, stride) \
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"(static_cast<long>(stride)) : "memory")
#define SACCADE_TILE_STORE(t, base, stride)                                                                  \
  __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"(static_cast<long>(stride)) : "memor" \
                                                                                                     "y")
#define SACCADE_TILE_DPBF16PS(c, a, b) __asm__ volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)

namespace saccade::ladder {

/// LDTILECFG's 64-byte operand (palette 1): every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

/// Loads the configuration of the eight tiles this step uses (each 16 × 64 bytes) in the calling thread.
inline void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}

/// Returns the tiles to their initial state (TILERELEASE): the thread's context switches no longer save them.
inline void release_tiles() { __asm__ volatile("tilerelease" ::); }

/// The micro-kernel's three parts (gemm_bf16.cpp calls them apart, to sum several blocks of k in the tiles):
/// the four C tiles set to zero; the C tiles += a (32 rows, row stride lda bf16, 2 · pairs consecutive k
/// each) times b's panel pb (pairs rows of 32 words: the pair of k of each of 32 columns), `pairs` a multiple
/// of 16; the C tiles stored as 32 × 32 floats at c (row stride ldc). The tiles must be configured.
inline void amx_zero() {
  SACCADE_TILE_ZERO(0);
  SACCADE_TILE_ZERO(1);
  SACCADE_TILE_ZERO(2);
  SACCADE_TILE_ZERO(3);
}
inline void amx_accumulate(int64_t pairs, const uint16_t* a, int64_t lda, const uint32_t* pb) {
  const int64_t sa = 2 * lda, sb = 4 * 32;  // row strides in bytes
  for (int64_t q = 0; q < pairs; q += 16) {
    SACCADE_TILE_LOAD(4, a + 2 * q, sa);             // rows 0-15, k 2q .. 2q + 31
    SACCADE_TILE_LOAD(5, a + 16 * lda + 2 * q, sa);  // rows 16-31
    SACCADE_TILE_LOAD(6, pb + q * 32, sb);           // pairs q .. q + 15 of columns 0-15
    SACCADE_TILE_LOAD(7, pb + q * 32 + 16, sb);      // of columns 16-31
    SACCADE_TILE_DPBF16PS(0, 4, 6);                  // C rows 0-15, columns 0-15 += a rows 0-15 × b 0-15
    SACCADE_TILE_DPBF16PS(1, 4, 7);
    SACCADE_TILE_DPBF16PS(2, 5, 6);
    SACCADE_TILE_DPBF16PS(3, 5, 7);
  }
}
inline void amx_store(float* c, int64_t ldc) {
  const int64_t sc = 4 * ldc;
  SACCADE_TILE_STORE(0, c, sc);
  SACCADE_TILE_STORE(1, c + 16, sc);
  SACCADE_TILE_STORE(2, c + 16 * ldc, sc);
  SACCADE_TILE_STORE(3, c + 16 * ldc + 16, sc);
}

/// The micro-kernel: c (32 × 32) = a (32 rows × 2 · pairs k) times b's panel, as the parts above.
inline void amx_tile(int64_t pairs, const uint16_t* a, int64_t lda, const uint32_t* pb, float* c,
                     int64_t ldc) {
  amx_zero();
  amx_accumulate(pairs, a, lda, pb);
  amx_store(c, ldc);
}

/// c = a b with AMX tiles (shapes as gemm_naive; m, n and k multiples of 32). Needs a CPU with AMX-BF16 and
/// the tile state granted (cpu::cpu_has_amx_bf16()).
inline void gemm_amx(const bfloat16* a, const bfloat16* b, float* c, int64_t m, int64_t n, int64_t k) {
  constexpr int64_t NR = 32, KC = 512;
  std::fill(c, c + m * n, 0.0f);
  std::vector<uint32_t> bp(KC / 2 * n);
  float tile[32 * 32];
  configure_tiles();
  for (int64_t p0 = 0; p0 < k; p0 += KC) {
    const int64_t pairs = std::min(KC, k - p0) / 2;
    for (int64_t j0 = 0; j0 < n; j0 += NR)  // step 4's panels: word (q, j) = (b[2q][j], b[2q + 1][j])
      for (int64_t q = 0; q < pairs; ++q)
        for (int64_t j = 0; j < NR; ++j)
          bp[j0 * pairs + q * NR + j] = b[(p0 + 2 * q) * n + j0 + j].bits |
                                        static_cast<uint32_t>(b[(p0 + 2 * q + 1) * n + j0 + j].bits) << 16;
    for (int64_t j0 = 0; j0 < n; j0 += NR)
      for (int64_t i0 = 0; i0 < m; i0 += 32) {  // a read where it lies: its rows are the tiles' rows
        amx_tile(pairs, &a[i0 * k + p0].bits, k, &bp[j0 * pairs], tile, 32);
        for (int64_t r = 0; r < 32; ++r)
          for (int64_t j = 0; j < NR; ++j) c[(i0 + r) * n + j0 + j] += tile[r * 32 + j];
      }
  }
  release_tiles();
}

}  // namespace saccade::ladder
#endif
