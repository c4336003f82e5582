// CPU kernels of fused attention (FlashAttention, Dao et al. 2022, Algorithms 1-2; the work split of
// FlashAttention-2, Dao 2023): the float32 and float64 unit, and the entry points of both units. The steps
// that led here, each simpler and slower, are in attention_ladder/. Read in this order: attention_tiles.h
// (tile products, row helpers, mask and dropout of one head), attention_loop.h (the tile loop, shared),
// this file, attention_half.cpp (16-bit heads).
//
//   q: (B, H, Tq, D)   k: (B, H_kv, Tk, D)   v: (B, H_kv, Tk, Dv)   out: (B, H, Tq, Dv)   lse: (B, H, Tq)
//   (any strides on B, H, T; unit stride on D; H = G·H_kv)
//
// Grouped-query attention (GQA, Ainslie et al. 2023; multi-query when H_kv = 1; multi-head when G = 1): query
// head h reads key/value head h / G in place. The forward's tasks take the G query heads of a group one after
// the other at each query tile, so a key tile is read from cache by the whole group; the backward's task is
// a key/value head, which runs its G query heads one after the other and sums their dK and dV into its own
// (attention_loop.h's for_each_kv_head), or, with fewer key/value heads than threads (multi-query attention
// at batch 1), a run of a group's query heads, whose dK and dV partial sums are added in a fixed order after.
// K and V are never repeated in memory.
//
// Forward, per (b, h, tile of Br queries): for each tile of Bc keys that some query of the tile may see,
//   S = Q Kᵀ · scale;  masked entries -> -inf;  m' = max(m, rowmax S);  P = exp(S - m');
//   l = l e^(m - m') + rowsum P;   O = O e^(m - m') + dropout(P) V;  m = m'
// and at the end O /= l, lse = m + log l. Key tiles past the last key any query of the tile may see (causal,
// valid_lens), and before the first one (a sliding window: Beltagy et al. 2020, Longformer; Jiang et al.
// 2023, Mistral), are never computed, so a window of W keys costs O(Tq·W), not O(Tq·Tk).
// Backward, per (b, h): for each key tile, for each query tile that sees it, P = exp(S - lse) is recomputed
// and
//   dV += dropout(P)ᵀ dO,  dP = dropout(dO Vᵀ),  dS = P ⊙ (dP - Δ),  dQ += scale dS K,  dK += scale dSᵀ Q
// with Δ_i = dO_i · O_i (FlashAttention-2's D). dK, dV of a key tile stay in a local buffer; dQ of the head
// is owned by the task, so no two threads write the same memory.
//
// The tile products are small GEMMs: in float32 on a CPU with AVX-512 our own register-blocked kernel
// (flash_tiles_f32.h), which runs at the CPU's width whatever core OpenBLAS was pinned to; elsewhere
// cblas_sgemm / cblas_dgemm on one thread (Br·Bc·D <= 64³ keeps OpenBLAS from starting its own threads inside
// ours); loop_gemm, the same products in plain vectorised loops, is the readable reference (flash_tiles.h,
// bench/flash_tiles). 16-bit heads run the same loop on float32 tiles (attention_half.cpp: widened rows, or
// VDPBF16PS products on bfloat16 heads).
#include "ops/cpu/attention_half.h"
#include "ops/cpu/attention_loop.h"
#include "ops/cpu/backend.h"
#include "ops/cpu/blas_check.h"

namespace saccade::cpu {

namespace {

thread_local TileProducts t_tile_products = TileProducts::Auto;

}  // namespace

TileProductsGuard::TileProductsGuard(TileProducts how) : prev_(t_tile_products) { t_tile_products = how; }
TileProductsGuard::~TileProductsGuard() { t_tile_products = prev_; }

// The same choice at every head dim. sgemm runs small tiles at the width of OpenBLAS's core, which the
// environment may pin below the CPU's: then the AVX-512 kernel, where it runs. When the core itself is an
// AVX-512 one, sgemm (its packed micro-kernels beat ours on these tiles). Never the loops: GCC keeps
// loop_gemm's accumulator row in L1, not in registers (attention_tiles.h). bench/flash_tiles measures them;
// bench/RESULTS.md has the figures.
TileProducts tile_products(int64_t /*d*/) {
  if (t_tile_products != TileProducts::Auto) return t_tile_products;
  static const bool blas_is_avx512 = core_vector_level(blas_core()) == VectorLevel::Avx512;
  return tile_gemm_f32_available() && !blas_is_avx512 ? TileProducts::Avx512 : TileProducts::Gemm;
}

// q: (B, H, Tq, D), k: (B, H_kv, Tk, D), v: (B, H_kv, Tk, Dv) -> out (B, H, Tq, Dv), lse (B, H, Tq)
void CpuBackend::flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const ops::AttentionMask& mask, double scale,
                                         const ops::AttentionDropout& dropout, const Tensor& out,
                                         const Tensor& lse) {
  if (is_half(q.dtype())) return flash::forward_half(q, k, v, mask, scale, dropout, out, lse);
  using namespace flash;
  const Call call(q, k, v, mask, scale, dropout);
  const TileProducts how = tile_products(std::max(call.n.D, call.n.Dv));
  blas_first_use();
  dispatch_floating(q.dtype(), "flash_attention_forward", [&]<class T>() {
    auto make = [&] { return TileGemm<T>(how, call.n.bc * std::max(call.n.D, call.n.Dv)); };
    for_each_query_tile(call, make, [&](TileGemm<T>& gemm, const QueryTile& t) {
      const HeadProblem<T> hp =
          call.problem<T>(t.b, t.h, head<const T>(q, t.b, t.h), head<const T>(k, t.b, t.hkv),
                          head<const T>(v, t.b, t.hkv), head<T>(out, t.b, t.h), lse.data<T>());
      GemmProducts<T> prod{gemm};
      forward_tile(hp, t.i0, t.nr, t.row_begin, t.row_end, prod);
    });
  });
}

// gout: (B, H, Tq, Dv) -> gq (B, H, Tq, D), gk (B, H_kv, Tk, D), gv (B, H_kv, Tk, Dv)
void CpuBackend::flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const Tensor& out, const Tensor& gout, const Tensor& lse,
                                          const ops::AttentionMask& mask, double scale,
                                          const ops::AttentionDropout& dropout, const Tensor& gq,
                                          const Tensor& gk, const Tensor& gv) {
  if (is_half(q.dtype()))
    return flash::backward_half(q, k, v, out, gout, lse, mask, scale, dropout, gq, gk, gv);
  using namespace flash;
  const Call call(q, k, v, mask, scale, dropout);
  const TileProducts how = tile_products(std::max(call.n.D, call.n.Dv));
  blas_first_use();
  dispatch_floating(q.dtype(), "flash_attention_backward", [&]<class T>() {
    auto make = [&] { return TileGemm<T>(how, std::max(call.n.bc, kBr) * std::max(call.n.D, call.n.Dv)); };
    KvPartials<T> parts(call);  // dK and dV per slice of a group, when its query heads are split
    auto one_slice = [&](TileGemm<T>& gemm, int64_t b, int64_t hkv, int64_t g0, int64_t g1, int64_t slice,
                         const HeadRows& rows) {
      const int64_t bh = b * call.n.Hkv + hkv;
      const HeadView<T> dk = parts.slices > 1 ? parts.k(bh, slice) : head<T>(gk, b, hkv),
                        dv = parts.slices > 1 ? parts.v(bh, slice) : head<T>(gv, b, hkv);
      for (int64_t g = g0; g < g1; ++g) {  // query heads of the group that reads key/value head hkv
        const int64_t h = hkv * call.n.G + g;
        const HeadProblem<T> hp =
            call.problem<T>(b, h, head<const T>(q, b, h), head<const T>(k, b, hkv), head<const T>(v, b, hkv),
                            head<T>(out, b, h), lse.data<T>());
        const HeadGrads<T> grads{head<const T>(gout, b, h), head<T>(gq, b, h), dk, dv, g > g0};
        GemmProducts<T> prod{gemm};
        backward_head(hp, grads, rows, prod);
      }
    };
    for_each_kv_head(call, make, one_slice);
    if (parts.slices > 1)
      for (int64_t b = 0; b < call.n.B; ++b)
        for (int64_t hkv = 0; hkv < call.n.Hkv; ++hkv)
          parts.sum(b * call.n.Hkv + hkv, head<T>(gk, b, hkv), head<T>(gv, b, hkv));
  });
}

}  // namespace saccade::cpu
