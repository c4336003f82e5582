#pragma once
// How the CPU flash-attention kernels (ops/cpu/attention_loop.h) compute their tile products (S = Q Kᵀ,
// O += P V and the five products of the backward): through OpenBLAS (cblas_sgemm / cblas_dgemm on one small
// tile at a time) or through plain loops the compiler vectorises. The kernels choose by head dim
// (tile_products); a benchmark or a test can force one for a scope with TileProductsGuard (bench/attention
// --tiles, tests/test_flash_attention.cpp). Users never need it.
#include <cstdint>

namespace saccade::cpu {

enum class TileProducts { Auto, Gemm, Loops };

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
/// Auto the default (Gemm or Loops, whichever bench/attention --tiles measured faster at that head dim).
TileProducts tile_products(int64_t d);

}  // namespace saccade::cpu
