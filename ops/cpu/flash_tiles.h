#pragma once
// How the CPU flash-attention kernels (ops/cpu/attention_loop.h) compute their tile products (S = Q Kᵀ,
// O += P V and the five products of the backward): through OpenBLAS (cblas_sgemm / cblas_dgemm on one small
// tile at a time), through plain loops the compiler vectorises (the readable reference), or, in float32 on a
// CPU with AVX-512, through our own register-blocked kernel (flash_tiles_f32.h). The kernels choose by head
// dim and CPU (tile_products); a benchmark or a test can force one for a scope with TileProductsGuard
// (bench/flash_tiles, tests/test_flash_attention.cpp). Users never need it.
#include <cstdint>

namespace saccade::cpu {

/// Auto: tile_products' default. Gemm: OpenBLAS. Loops: loop_gemm (attention_tiles.h). Avx512: tile_gemm_f32
/// for float32 tiles where tile_gemm_f32_available(), else Gemm (float64 tiles, older CPUs, an IsaGuard).
enum class TileProducts { Auto, Gemm, Loops, Avx512 };

/// While it lives, the flash-attention kernels called from this thread use `how` for their tile products
/// (Auto: the default per head dim). Scoped and per thread, like NoGradGuard; restores the previous choice.
class TileProductsGuard {
 public:
  explicit TileProductsGuard(TileProducts how);
  ~TileProductsGuard();
  TileProductsGuard(const TileProductsGuard&) = delete;
  TileProductsGuard& operator=(const TileProductsGuard&) = delete;

 private:
  TileProducts prev_;
};

/// The tile products the kernels use for head dim `d` on this thread: a TileProductsGuard's choice, or under
/// Auto the default: Avx512 where tile_gemm_f32_available() (float64 tiles then take Gemm), else Gemm
/// (bench/flash_tiles compares them).
TileProducts tile_products(int64_t d);

}  // namespace saccade::cpu
