// The 16-bit unit of the CPU flash attention: bfloat16 and float16 heads through the float32 tile loop
// (attention_loop.h), statistics, scores and accumulators float32, one rounding per stored element.
//
//   q: (B, H, Tq, D)   k: (B, H_kv, Tk, D)   v: (B, H_kv, Tk, Dv)   16-bit
//   out: (B, H, Tq, Dv)   16-bit;   lse: (B, H, Tq)   float32
//   (H = G·H_kv: grouped-query attention as in attention.cpp)
//
// Two routes for the tile products:
//   - widened: the float32 kernel's GemmProducts on float32 copies of the rows a task reads (exact);
//   - bfloat16 heads on a CPU with AVX512-BF16 (VDPBF16PS; Bf16Products): S = Q Kᵀ and dP = dO Vᵀ from the
//     heads themselves (flash_tiles_bf16.h; exact products, float32 sums), and P V, Pᵀ dO, dSᵀ Q, dS K
//     (gemm_bf16.h) with P and dS rounded to bfloat16 first, as PyTorch's CPU flash attention does for
//     reduced types (its attn_reduced / grad_attn_reduced buffers): each probability and score gradient then
//     carries a relative error of at most 2⁻⁹, the sums stay float32, and no head is widened (the backward
//     widens out and dO only, for Δ).
#include "ops/cpu/attention_half.h"

#include "ops/cpu/attention_loop.h"
#include "ops/cpu/bf16_lanes.h"
#include "ops/cpu/blas_check.h"
#include "ops/cpu/flash_tiles_bf16.h"
#include "ops/cpu/gemm_bf16.h"

namespace saccade::cpu::flash {

namespace {

// Rows [r0, r1) of head (b, h) of t (rows, cols) widened into the same rows of a contiguous float32 buffer
// (exact; `out` holds at least r1 · cols floats), and rows [r0, r1) of such a buffer rounded back into the
// head of t.
template <class T>
void widen_head_rows(const Tensor& t, int64_t b, int64_t h, int64_t r0, int64_t r1, int64_t cols,
                     float* out) {
  const HeadView<const T> x = head<const T>(t, b, h);
  const int64_t l = x.ld;
  if constexpr (std::is_same_v<T, bfloat16>)
    widen_rows(&x.p[r0 * l].bits, l, out + r0 * cols, cols, r1 - r0, cols);
  else
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = static_cast<float>(x.p[r * l + c]);
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
  const HeadView<T> x = head<T>(t, b, h);
  const int64_t l = x.ld;
  if constexpr (std::is_same_v<T, bfloat16>)
    round_rows(src.data() + r0 * cols, cols, &x.p[r0 * l].bits, l, r1 - r0, cols);
  else
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c)
        x.p[r * l + c] = static_cast<T>(src[static_cast<size_t>(r * cols + c)]);
}

// A contiguous float32 buffer of rows of `cols` as a head to read (rows_in) or to write (rows_out); the row
// stride is at least 1, for the GEMMs.
HeadView<const float> rows_in(const std::vector<float>& x, int64_t cols) {
  return {x.data(), std::max<int64_t>(cols, 1)};
}
HeadView<float> rows_out(std::vector<float>& x, int64_t cols) {
  return {x.data(), std::max<int64_t>(cols, 1)};
}

// The tile products of the loop (attention_loop.h) on VDPBF16PS, from the bfloat16 heads of one (b, h) (gout:
// backward only) instead of the HeadProblem's float32 views, which this route leaves empty. P and dS are
// rounded to bfloat16 into `p` and `ds` (kBr · Bc each, row stride Bc) before their products.
struct Bf16Products {
  HeadView<const bfloat16> q, k, v, gout;
  uint32_t* scratch;  // max(D, Dv) / 2 · 64 words: dot_rows_bf16's packed keys
  bfloat16 *p, *ds;

  void scores(const HeadProblem<float>& h, int64_t i0, int64_t nr, int64_t j0, int64_t nc, float* s) {
    dot_rows_bf16(nr, nc, h.d, h.scale, q.row(i0), q.ld, k.row(j0), k.ld, s, h.bc, scratch);
  }
  void add_pv(const HeadProblem<float>& h, int64_t nr, int64_t j0, int64_t nc, const float* pf, float* o) {
    round_rows(pf, h.bc, &p->bits, h.bc, nr, nc);
    gemm_bf16(false, false, nr, h.dv, nc, 1.0f, p, h.bc, v.row(j0), v.ld, 1.0f, o, h.dv);
  }
  void dp(const HeadProblem<float>& h, const HeadGrads<float>&, int64_t i0, int64_t nr, int64_t j0,
          int64_t nc, float* dpf) {
    dot_rows_bf16(nr, nc, h.dv, 1.0f, gout.row(i0), gout.ld, v.row(j0), v.ld, dpf, h.bc, scratch);
  }
  void add_grads(const HeadProblem<float>& h, const HeadGrads<float>& g, int64_t i0, int64_t nr, int64_t j0,
                 int64_t nc, const float* pf, const float* dsf, float* dk, float* dv) {
    round_rows(pf, h.bc, &p->bits, h.bc, nr, nc);
    round_rows(dsf, h.bc, &ds->bits, h.bc, nr, nc);
    gemm_bf16(true, false, nc, h.dv, nr, 1.0f, p, h.bc, gout.row(i0), gout.ld, 1.0f, dv, h.dv);
    gemm_bf16(true, false, nc, h.d, nr, h.scale, ds, h.bc, q.row(i0), q.ld, 1.0f, dk, h.d);
    gemm_bf16(false, false, nr, h.d, nc, h.scale, ds, h.bc, k.row(j0), k.ld, 1.0f, g.gq.row(i0), g.gq.ld);
  }
};

// Runs f.operator()<T>() with T the 16-bit type of `dt`.
template <class F>
void dispatch_16(DType dt, F&& f) {
  if (dt == DType::BFloat16)
    f.template operator()<bfloat16>();
  else
    f.template operator()<float16>();
}

// One thread's scratch of the forward: float32 copies of the rows a task reads (its queries; the keys up to
// the tile's last, kept for the next task while it reads the same key/value head: the group's other query
// heads and the head's later tiles widen only the rows they add), or with VDPBF16PS the packed keys and the
// rounded P.
struct ForwardScratch {
  TileGemm<float> gemm;
  std::vector<float> qf, kf, vf, of;
  std::vector<uint32_t> pairs;
  std::vector<bfloat16> p16;
  int64_t kv_head = -1,
          kv_rows = 0;  // kf, vf hold rows [0, kv_rows) of key/value head kv_head (b·H_kv + hkv)
};

}  // namespace

// q: (B, H, Tq, D), k: (B, H_kv, Tk, D), v: (B, H_kv, Tk, Dv) -> out (B, H, Tq, Dv), lse (B, H, Tq) float32
void forward_half(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionMask& mask,
                  double scale, const ops::AttentionDropout& dropout, const Tensor& out, const Tensor& lse) {
  const Call call(q, k, v, mask, scale, dropout);
  const Sizes& n = call.n;
  const TileProducts how = tile_products(std::max(n.D, n.Dv));
  blas_first_use();
  dispatch_16(q.dtype(), [&]<class T>() {
    // (bfloat16 with VDPBF16PS: every product reads q, k and v themselves, nothing is widened)
    const bool dot16 = std::is_same_v<T, bfloat16> && dot_rows_bf16_available(n.D);
    auto make = [&] {
      ForwardScratch s{TileGemm<float>(how, n.bc * std::max(n.D, n.Dv)), {}, {}, {}, {}, {}, {}, -1, 0};
      if (!dot16) s.qf.resize(n.Tq * n.D), s.kf.resize(n.Tk * n.D), s.vf.resize(n.Tk * n.Dv);
      s.of.resize(n.Tq * n.Dv);
      if (dot16) s.pairs.resize(n.D / 2 * 64), s.p16.resize(kBr * n.bc);
      return s;
    };
    for_each_query_tile(call, make, [&](ForwardScratch& s, const QueryTile& t) {
      const HeadProblem<float> hp =
          call.problem<float>(t.b, t.h, rows_in(s.qf, n.D), rows_in(s.kf, n.D), rows_in(s.vf, n.Dv),
                              rows_out(s.of, n.Dv), lse.data<float>());
      if constexpr (std::is_same_v<T, bfloat16>) {
        if (dot16) {
          Bf16Products prod{head<const T>(q, t.b, t.h),
                            head<const T>(k, t.b, t.hkv),
                            head<const T>(v, t.b, t.hkv),
                            {},
                            s.pairs.data(),
                            s.p16.data(),
                            nullptr};
          forward_tile(hp, t.i0, t.nr, t.row_begin, t.row_end, prod);
          return store_head<T>(s.of, n.Dv, out, t.b, t.h, t.i0, t.i0 + t.nr);
        }
      }
      const int64_t tile_end = *std::max_element(t.row_end, t.row_end + t.nr);
      widen_head_rows<T>(q, t.b, t.h, t.i0, t.i0 + t.nr, n.D, s.qf.data());
      const int64_t kv = t.b * n.Hkv + t.hkv, from = kv == s.kv_head ? s.kv_rows : 0;
      if (from == 0) s.gemm.forget();  // kf is rewritten: its packed tiles are stale
      widen_head_rows<T>(k, t.b, t.hkv, from, std::max(from, tile_end), n.D, s.kf.data());
      widen_head_rows<T>(v, t.b, t.hkv, from, std::max(from, tile_end), n.Dv, s.vf.data());
      s.kv_head = kv, s.kv_rows = std::max(from, tile_end);
      GemmProducts<float> prod{s.gemm};
      forward_tile(hp, t.i0, t.nr, t.row_begin, t.row_end, prod);
      store_head<T>(s.of, n.Dv, out, t.b, t.h, t.i0, t.i0 + t.nr);
    });
  });
}

// gout: (B, H, Tq, Dv) -> gq (B, H, Tq, D), gk (B, H_kv, Tk, D), gv (B, H_kv, Tk, Dv), all 16-bit
void backward_half(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& gout,
                   const Tensor& lse, const ops::AttentionMask& mask, double scale,
                   const ops::AttentionDropout& dropout, const Tensor& gq, const Tensor& gk,
                   const Tensor& gv) {
  const Call call(q, k, v, mask, scale, dropout);
  const Sizes& n = call.n;
  const TileProducts how = tile_products(std::max(n.D, n.Dv));
  blas_first_use();
  dispatch_16(q.dtype(), [&]<class T>() {
    // bfloat16 with VDPBF16PS: S = Q Kᵀ and dP = dO Vᵀ read the 16-bit heads (q, k, v are not widened)
    const bool dot16 = std::is_same_v<T, bfloat16> && dot_rows_bf16_available(n.D) && n.Dv % 2 == 0;
    struct Scratch {
      TileGemm<float> gemm;
      std::vector<uint32_t> pairs;
      std::vector<bfloat16> p16;  // P and dS, rounded
    };
    auto make = [&] {
      return Scratch{TileGemm<float>(how, std::max(n.bc, kBr) * std::max(n.D, n.Dv)),
                     std::vector<uint32_t>(dot16 ? static_cast<size_t>(std::max(n.D, n.Dv) / 2 * 64) : 0),
                     std::vector<bfloat16>(dot16 ? static_cast<size_t>(2 * kBr * n.bc) : 0)};
    };
    KvPartials<float> parts(call);  // dK and dV per slice of a group, when its query heads are split
    auto one_slice = [&](Scratch& s, int64_t b, int64_t hkv, int64_t g0, int64_t g1, int64_t slice,
                         const HeadRows& rows) {
      // the key/value head, widened once for its group (with VDPBF16PS the products read the 16-bit heads);
      // dK and dV summed over the group in float32 (here, or over the slices after), rounded once
      const std::vector<float> kf = dot16 ? std::vector<float>() : widen_head<T>(k, b, hkv, n.Tk, n.D),
                               vf = dot16 ? std::vector<float>() : widen_head<T>(v, b, hkv, n.Tk, n.Dv);
      std::vector<float> gkf(parts.slices > 1 ? 0 : static_cast<size_t>(n.Tk * n.D)),
          gvf(parts.slices > 1 ? 0 : static_cast<size_t>(n.Tk * n.Dv));
      const int64_t bh = b * n.Hkv + hkv;
      s.gemm.forget();  // kf and vf are new: packed tiles of an earlier head's buffers may share addresses
      const HeadView<float> dk = parts.slices > 1 ? parts.k(bh, slice) : rows_out(gkf, n.D),
                            dv = parts.slices > 1 ? parts.v(bh, slice) : rows_out(gvf, n.Dv);
      for (int64_t g = g0; g < g1; ++g) {  // query heads of the group that reads key/value head hkv
        const int64_t h = hkv * n.G + g;
        // (with VDPBF16PS only out and dO are widened, for Δ)
        const std::vector<float> qf = dot16 ? std::vector<float>() : widen_head<T>(q, b, h, n.Tq, n.D),
                                 gof = widen_head<T>(gout, b, h, n.Tq, n.Dv);
        std::vector<float> of = widen_head<T>(out, b, h, n.Tq, n.Dv), gqf(static_cast<size_t>(n.Tq * n.D));
        const HeadProblem<float> hp =
            call.problem<float>(b, h, rows_in(qf, n.D), rows_in(kf, n.D), rows_in(vf, n.Dv),
                                rows_out(of, n.Dv), lse.data<float>());
        const HeadGrads<float> grads{rows_in(gof, n.Dv), rows_out(gqf, n.D), dk, dv, g > g0};
        if constexpr (std::is_same_v<T, bfloat16>) {
          if (dot16) {
            Bf16Products prod{head<const T>(q, b, h),    head<const T>(k, b, hkv), head<const T>(v, b, hkv),
                              head<const T>(gout, b, h), s.pairs.data(),           s.p16.data(),
                              s.p16.data() + kBr * n.bc};
            backward_head(hp, grads, rows, prod);
          }
        }
        if (!dot16) {
          GemmProducts<float> prod{s.gemm};
          backward_head(hp, grads, rows, prod);
        }
        store_head<T>(gqf, n.D, gq, b, h, 0, n.Tq);
      }
      if (parts.slices > 1) return;
      store_head<T>(gkf, n.D, gk, b, hkv, 0, n.Tk);
      store_head<T>(gvf, n.Dv, gv, b, hkv, 0, n.Tk);
    };
    for_each_kv_head(call, make, one_slice);
    if (parts.slices > 1)
      for (int64_t b = 0; b < n.B; ++b)
        for (int64_t hkv = 0; hkv < n.Hkv; ++hkv) {
          std::vector<float> gkf(static_cast<size_t>(n.Tk * n.D)), gvf(static_cast<size_t>(n.Tk * n.Dv));
          parts.sum(b * n.Hkv + hkv, rows_out(gkf, n.D), rows_out(gvf, n.Dv));
          store_head<T>(gkf, n.D, gk, b, hkv, 0, n.Tk);
          store_head<T>(gvf, n.Dv, gv, b, hkv, 0, n.Tk);
        }
  });
}

}  // namespace saccade::cpu::flash
