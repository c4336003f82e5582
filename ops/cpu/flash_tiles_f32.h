#pragma once
// The float32 tile products of the CPU flash attention (ops/cpu/attention_loop.h's GemmProducts: S = Q Kᵀ,
// O += P V, dP = dO Vᵀ, dV += Pᵀ dO, dK += scale dSᵀ Q, dQ += scale dS K) in our own AVX-512F kernel, as the
// bfloat16 unit's are (flash_tiles_bf16.h): a register tile of 4 rows × 64 columns of C (16 zmm), built by
// one FMA per row and column vector for each p, B's row p loaded once for the 4 rows and A's element
// broadcast (the outer-product form of a GEMM micro-kernel: Goto & van de Geijn 2008, BLIS's
// microkernel, as in ops/cpu/gemm_ladder/microkernel.h). OpenBLAS's sgemm on one small tile at a time runs
// at the vector width of the core OpenBLAS chose, which the environment may pin lower than the CPU has
// (OPENBLAS_CORETYPE=Haswell: AVX2 on an AVX-512 CPU); this kernel runs at the CPU's own width whatever
// OpenBLAS does. The readable reference is flash::loop_gemm (attention_tiles.h), which the tests compare it
// with; without AVX-512F (or under an IsaGuard below it) the kernels keep sgemm (TileGemm).
//
//   C (m, n) = alpha op(A) B + beta C    op(A) (m, k): A (m, k) rows, or Aᵀ with A (k, m) rows (ta)
//                                        B (k, n) rows; Bᵀ products pack B first (TransposedTiles)
#include <cstdint>
#include <vector>

namespace saccade::cpu {

/// Whether tile_gemm_f32 can run now: the CPU has AVX-512 (simd.h's Isa::Avx512: F with BW, VL, DQ) and no
/// IsaGuard lowers the width.
bool tile_gemm_f32_available();

/// C (m, n) = alpha op(A) B + beta C, float32, row-major: op(A) = A (m, k) at a[i · lda + p], or with `ta`
/// Aᵀ, A (k, m) at a[p · lda + i]; B (k, n) at b[p · ldb + j]; C at c[i · ldc + j]. beta = 0 leaves C unread
/// (it may be uninitialised), as BLAS does. Any m, n, k >= 0 (edges: masked vectors and repeated rows, never
/// a read past the operands' last row or column). Sums over p in order, one FMA at a time, so the result is
/// the float32 product up to the order of the additions. Requires tile_gemm_f32_available() (throws
/// saccade::Error naming tile_gemm_f32 otherwise).
void tile_gemm_f32(bool ta, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                   const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

/// The transposed B operands of one task's tile products, kept while the task runs: get(b, ldb, n, k)
/// returns Bᵀ (k, n) as rows of stride ld(n) (n rounded up to 16) for B (n, k) at b[j · ldb + p], packed on
/// first use and found again on later calls with the same (b, ldb, n, k), so a key (or value) tile is
/// transposed once for all the query tiles and query heads of a group that read it (the backward's inner
/// loop, the forward's next tasks). The memory under b must not change while an entry for it lives: call
/// forget() when a task rewrites an operand in place (attention_half.cpp's widened rows). Past `budget`
/// floats every entry is dropped.
class TransposedTiles {
 public:
  explicit TransposedTiles(int64_t budget = int64_t(1) << 20) : budget_(budget) {}
  /// Bᵀ of b (n, k) with row stride ld(n): the packed copy (valid until the next get or forget).
  const float* get(const float* b, int64_t ldb, int64_t n, int64_t k);
  /// The row stride of a packed Bᵀ with n columns.
  static int64_t ld(int64_t n) { return (n + 15) / 16 * 16; }
  /// Drops every entry.
  void forget() {
    entries_.clear();
    used_ = 0;
  }

 private:
  struct Entry {
    const float* b;
    int64_t ldb, n, k, offset;
  };
  int64_t budget_, used_ = 0;
  std::vector<Entry> entries_;
  std::vector<float> arena_;
};

}  // namespace saccade::cpu
