#pragma once
// The tile loop of the CPU flash attention (FlashAttention, Dao et al. 2022, Algorithms 1-2; the work split
// of FlashAttention-2, Dao 2023), written once for both units: the float32 / float64 kernel
// (ops/cpu/attention.cpp) and the 16-bit one (ops/cpu/attention_half.cpp), which runs it on float32 tiles.
//
//   q: (Tq, D)  k: (Tk, D)  v: (Tk, Dv)  out: (Tq, Dv)  lse: (Tq)     one (b, h), HeadProblem
//   gout: (Tq, Dv)  gq: (Tq, D)  gk: (Tk, D)  gv: (Tk, Dv)            its gradients, HeadGrads
// (k, v, gk, gv: the key/value head that the query head reads, h / G with grouped-query attention)
//
// The loops own the softmax, the masks and the dropout; the tile products are a template argument (a
// Products type, below), so each unit brings its own without an indirect call in the loop: GemmProducts
// (OpenBLAS or loop_gemm on T tiles of the head itself or of widened copies) or the bfloat16 unit's
// VDPBF16PS products (attention_half.cpp). A Products type has
//   scores(h, i0, nr, j0, nc, s)             s (nr, nc) = scale · Q[i0, i0 + nr) K[j0, j0 + nc)ᵀ
//   add_pv(h, nr, j0, nc, p, o)              o (nr, Dv) += P V[j0, j0 + nc)
//   dp(h, g, i0, nr, j0, nc, dp)             dp (nr, nc) = dO[i0, i0 + nr) V[j0, j0 + nc)ᵀ
//   add_grads(h, g, i0, nr, j0, nc, p, ds, dk, dv)
//       dv (nc, Dv) += Pᵀ dO,  dk (nc, D) += scale dSᵀ Q,  gq[i0, i0 + nr) += scale dS K
// with the tiles s, p, dp, ds of row stride Bc (h.bc) and dk, dv, o contiguous.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/attention_tiles.h"
#include "ops/cpu/thread_pool.h"

namespace saccade::cpu::flash {

// The tile products on T tiles through TileGemm (sgemm / dgemm, or loop_gemm): the operands are the views
// of the HeadProblem and HeadGrads themselves.
template <class T>
struct GemmProducts {
  TileGemm<T>& gemm;

  void scores(const HeadProblem<T>& h, int64_t i0, int64_t nr, int64_t j0, int64_t nc, T* s) {
    gemm(false, true, int(nr), int(nc), int(h.d), h.scale, h.q.row(i0), int(h.q.ld), h.k.row(j0), int(h.k.ld),
         T(0), s, int(h.bc));
  }
  void add_pv(const HeadProblem<T>& h, int64_t nr, int64_t j0, int64_t nc, const T* p, T* o) {
    gemm(false, false, int(nr), int(h.dv), int(nc), T(1), p, int(h.bc), h.v.row(j0), int(h.v.ld), T(1), o,
         int(h.dv));
  }
  void dp(const HeadProblem<T>& h, const HeadGrads<T>& g, int64_t i0, int64_t nr, int64_t j0, int64_t nc,
          T* dp) {
    gemm(false, true, int(nr), int(nc), int(h.dv), T(1), g.gout.row(i0), int(g.gout.ld), h.v.row(j0),
         int(h.v.ld), T(0), dp, int(h.bc));
  }
  void add_grads(const HeadProblem<T>& h, const HeadGrads<T>& g, int64_t i0, int64_t nr, int64_t j0,
                 int64_t nc, const T* p, const T* ds, T* dk, T* dv) {
    gemm(true, false, int(nc), int(h.dv), int(nr), T(1), p, int(h.bc), g.gout.row(i0), int(g.gout.ld), T(1),
         dv, int(h.dv));
    gemm(true, false, int(nc), int(h.d), int(nr), h.scale, ds, int(h.bc), h.q.row(i0), int(h.q.ld), T(1), dk,
         int(h.d));
    gemm(false, false, int(nr), int(h.d), int(nc), h.scale, ds, int(h.bc), h.k.row(j0), int(h.k.ld), T(1),
         g.gq.row(i0), int(g.gq.ld));
  }
};

// ---- forward ----

// One tile of queries [i0, i0 + nr) of one (b, h): writes its rows of out and lse. Query i0 + r may see keys
// [row_begin[r], row_end[r]) (RowLimits::begin and ::end); key tiles before the first key and after the last
// one any query of the tile sees (the sliding window, causal, valid_lens) are never computed.
template <class T, class Products>
void forward_tile(const HeadProblem<T>& h, int64_t i0, int64_t nr, const int64_t* row_begin,
                  const int64_t* row_end, Products& prod) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const int64_t Dv = h.dv, bc = h.bc;
  const KeepView& keep = h.keep;
  const DropoutView<T>* drop = h.dropping ? &h.dropout : nullptr;
  std::vector<T> s(static_cast<size_t>(kBr * bc)), o(static_cast<size_t>(kBr * Dv), T(0));
  std::vector<T> m(static_cast<size_t>(nr), kNegInf), l(static_cast<size_t>(nr), T(0));
  std::vector<T> z(drop ? static_cast<size_t>(bc) : 0);  // one row's dropout multipliers
  const int64_t tile_end = *std::max_element(row_end, row_end + nr);
  // (the first key tile on the grid of Bc keys, the backward's: dropout flags come in whole bytes)
  const int64_t tile_begin = std::min(*std::min_element(row_begin, row_begin + nr), tile_end) / bc * bc;
  for (int64_t j0 = tile_begin; j0 < tile_end; j0 += bc) {
    const int64_t nc = std::min(bc, tile_end - j0);
    // S = Q Kᵀ · scale   (nr, nc)
    prod.scores(h, i0, nr, j0, nc, s.data());
    for (int64_t r = 0; r < nr; ++r) {
      T* sr = s.data() + r * bc;
      const int64_t i = i0 + r, end = row_end[r] - j0;
      const int64_t seen = std::clamp<int64_t>(end, 0, nc);
      const int64_t first =
          std::clamp<int64_t>(row_begin[r] - j0, 0, seen);  // keys before: outside the window
      std::fill(sr, sr + first, kNegInf);
      std::fill(sr + seen, sr + nc, kNegInf);
      if (keep.p)
        for (int64_t c = first; c < seen; ++c)
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
    prod.add_pv(h, nr, j0, nc, s.data(), o.data());
  }
  for (int64_t r = 0; r < nr; ++r) {
    // NOTE: a row with nothing to attend (l = 0) gives zeros and lse = -inf, not NaN
    const T inv = l[r] > 0 ? T(1) / l[r] : T(0);
    T* dst = h.out.row(i0 + r);
    const T* src = o.data() + r * Dv;
#pragma omp simd
    for (int64_t d = 0; d < Dv; ++d) dst[d] = src[d] * inv;
    h.lse[i0 + r] = l[r] > 0 ? m[r] + std::log(l[r]) : kNegInf;
  }
}

// ---- backward ----

// The keys each query of one (b, h) may see: [begin[i], end[i]) (RowLimits), with the union of its query
// tiles' ranges, [tile_begin[t], tile_end[t]) for the kBr queries from t · kBr.
struct HeadRows {
  std::vector<int64_t> begin, end, tile_begin, tile_end;
  HeadRows(const RowLimits& lim, int64_t b, int64_t tq)
      : begin(static_cast<size_t>(tq)), end(static_cast<size_t>(tq)) {
    for (int64_t i = 0; i < tq; ++i)
      begin[static_cast<size_t>(i)] = lim.begin(b, i), end[static_cast<size_t>(i)] = lim.end(b, i);
    for (int64_t i0 = 0; i0 < tq; i0 += kBr) {
      const auto from = static_cast<std::ptrdiff_t>(i0),
                 to = static_cast<std::ptrdiff_t>(std::min(tq, i0 + kBr));
      tile_begin.push_back(*std::min_element(begin.begin() + from, begin.begin() + to));
      tile_end.push_back(*std::max_element(end.begin() + from, end.begin() + to));
    }
  }
};

// One (b, h): writes g.gq of the head, and writes (or, g.add_kv, adds into) g.gk and g.gv of its key/value
// head. rows: the keys each query may see; the (query tile, key tile) pairs that no query sees (the sliding
// window, causal, valid_lens) are never computed.
template <class T, class Products>
void backward_head(const HeadProblem<T>& h, const HeadGrads<T>& g, const HeadRows& rows, Products& prod) {
  const int64_t Tq = h.tq, Tk = h.tk, D = h.d, Dv = h.dv, bc = h.bc;
  const KeepView& keep = h.keep;
  const DropoutView<T>* drop = h.dropping ? &h.dropout : nullptr;
  // Δ_i = dO_i · O_i;  dQ = 0
  std::vector<T> delta(static_cast<size_t>(Tq));
  for (int64_t i = 0; i < Tq; ++i) {
    T acc = 0;
    const T *gi = g.gout.row(i), *oi = h.out.row(i);
#pragma omp simd reduction(+ : acc)
    for (int64_t d = 0; d < Dv; ++d) acc += gi[d] * oi[d];
    delta[static_cast<size_t>(i)] = acc;
    std::fill(g.gq.row(i), g.gq.row(i) + D, T(0));
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
      const auto t = static_cast<size_t>(i0 / kBr);
      if (rows.tile_end[t] <= j0 || rows.tile_begin[t] >= j0 + nc) continue;  // sees none of these keys
      // P = exp(Q Kᵀ · scale - lse), masked   (nr, nc)
      prod.scores(h, i0, nr, j0, nc, p.data());
      // dP = dO Vᵀ   (nr, nc)
      prod.dp(h, g, i0, nr, j0, nc, dp.data());
      for (int64_t r = 0; r < nr; ++r) {
        const auto ri = static_cast<size_t>(i0 + r);
        const int64_t i = i0 + r, end = std::clamp<int64_t>(rows.end[ri] - j0, 0, nc);
        const int64_t first = std::clamp<int64_t>(rows.begin[ri] - j0, 0, end);
        const T li = h.lse[i], di = delta[static_cast<size_t>(i)];
        T *pr = p.data() + r * bc, *dpr = dp.data() + r * bc;
        // P = exp(S - lse) on the keys the row sees, 0 elsewhere (and on rows that see nothing: lse = -inf)
        if (li == -std::numeric_limits<T>::infinity()) {
          std::fill(pr, pr + nc, T(0));
        } else {
          // whole vectors (a tail left to the scalar epilogue costs more than the extra lanes; the scores
          // past `end` are finite, their values are overwritten)
          exp_shifted(pr, std::min<int64_t>(nc, (end + 15) / 16 * 16), li);
          std::fill(pr, pr + first, T(0));  // before the window
          std::fill(pr + end, pr + nc, T(0));
          if (keep.p)
            for (int64_t c = first; c < end; ++c)
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
      prod.add_grads(h, g, i0, nr, j0, nc, p.data(), dp.data(), dk.data(), dv.data());
    }
    for (int64_t c = 0; c < nc; ++c) {
      if (g.add_kv) {  // a later query head of the group: dK and dV sum over the group
        T *gkr = g.gk.row(j0 + c), *gvr = g.gv.row(j0 + c);
        const T *dkr = dk.data() + c * D, *dvr = dv.data() + c * Dv;
        for (int64_t d = 0; d < D; ++d) gkr[d] += dkr[d];
        for (int64_t d = 0; d < Dv; ++d) gvr[d] += dvr[d];
      } else {
        std::copy(dk.begin() + c * D, dk.begin() + (c + 1) * D, g.gk.row(j0 + c));
        std::copy(dv.begin() + c * Dv, dv.begin() + (c + 1) * Dv, g.gv.row(j0 + c));
      }
    }
  }
}

// ---- the work split, one task a query tile (forward) or a head (backward) ----

// The sizes of one call (ops/backend.h's contract): q (B, H, Tq, D), k (B, H_kv, Tk, D), v (B, H_kv, Tk, Dv)
// with H = G·H_kv (grouped-query attention; G = 1: multi-head); bc keys per tile.
struct Sizes {
  int64_t B, H, Hkv, G, Tq, Tk, D, Dv, bc;
  Sizes(const Tensor& q, const Tensor& k, const Tensor& v)
      : B(q.size(0)),
        H(q.size(1)),
        Hkv(k.size(1)),
        G(Hkv > 0 ? H / Hkv : 1),
        Tq(q.size(2)),
        Tk(k.size(2)),
        D(q.size(3)),
        Dv(v.size(3)),
        bc(key_tile(D, Dv)) {}
};

// What one call shares between its heads: its sizes, what the mask decides, the scale and the dropout.
struct Call {
  // Keys a query sees at most: Tk, or the window (the work of a call is Tq times these, not Tq·Tk).
  double keys_seen() const { return double(lim.window > 0 ? std::min(n.Tk, lim.window) : n.Tk); }
  Sizes n;
  RowLimits lim;
  double scale;
  const ops::AttentionMask& mask;
  const ops::AttentionDropout& dropout;
  Call(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionMask& mask, double scale,
       const ops::AttentionDropout& dropout)
      : n(q, k, v), lim(limits_of(mask, n.Tq, n.Tk)), scale(scale), mask(mask), dropout(dropout) {}

  // The HeadProblem of query head (b, h) on the given views of its heads; lse: row 0 of the (B, H, Tq) lse.
  template <class T>
  HeadProblem<T> problem(int64_t b, int64_t h, HeadView<const T> q, HeadView<const T> k, HeadView<const T> v,
                         HeadView<T> out, T* lse) const {
    const int64_t bh = b * n.H + h;
    return {q,
            k,
            v,
            out,
            lse + bh * n.Tq,
            n.Tq,
            n.Tk,
            n.D,
            n.Dv,
            n.bc,
            T(scale),
            keep_of(mask, b, h),
            dropout_of<T>(dropout, bh, n.Tq, n.Tk),
            dropout.p > 0};
  }

  // Whether the backward's work is worth a team of threads.
  bool backward_parallel() const {
    return 4.0 * double(n.B * n.H * n.Tq) * keys_seen() * double(n.D + n.Dv) > kParallelFlops;
  }
  // The backward's tasks per key/value head (for_each_kv_head): 1, a whole group, while the B·H_kv key/value
  // heads give every thread one; else the group's G query heads cut into this many runs (at most G), so that
  // multi-query attention at batch 1 still keeps every thread busy.
  int64_t kv_slices() const {
    const int64_t groups = n.B * n.Hkv, threads = pool_size();
    if (!backward_parallel() || groups >= threads) return 1;
    return std::min(n.G, (threads + groups - 1) / groups);
  }
};

// One task of the forward: the query tile [i0, i0 + nr) of head (b, h) (bh = b·H + h), its key/value head
// (b, hkv) with hkv = h / G, and the first key and one past the last each of its queries may see.
struct QueryTile {
  int64_t b, h, hkv, bh, i0, nr;
  int64_t row_begin[kBr], row_end[kBr];
};

// Runs body(scratch, tile) on every query tile of every (b, h): tiles are independent, so they are the
// threads' tasks when the work is worth a team. make() builds one thread's scratch, once. The G query heads
// of a group come one after the other at each query tile (task (b, hkv, tile, g)), so a thread reads a key
// tile for the whole group while it is in cache; with G = 1 this is head after head, tile after tile.
template <class MakeScratch, class Body>
void for_each_query_tile(const Call& call, MakeScratch make, Body body) {
  const Sizes& n = call.n;
  const int64_t ntiles = (n.Tq + kBr - 1) / kBr, tasks = n.B * n.H * ntiles;
  const bool big =
      2.0 * double(n.B * n.H * n.Tq) * call.keys_seen() * double(n.D + n.Dv) > kParallelFlops && tasks > 1;
  parallel_for(0, tasks, big ? 1 : tasks, [&](int64_t t0, int64_t t1) {
    auto scratch = make();
    for (int64_t t = t0; t < t1; ++t) {
      QueryTile tile;
      const int64_t g = t % n.G, kv_tile = t / n.G, bhkv = kv_tile / ntiles;
      tile.b = bhkv / n.Hkv, tile.hkv = bhkv % n.Hkv, tile.h = tile.hkv * n.G + g,
      tile.bh = tile.b * n.H + tile.h;
      tile.i0 = (kv_tile % ntiles) * kBr, tile.nr = std::min(kBr, n.Tq - tile.i0);
      for (int64_t r = 0; r < tile.nr; ++r)
        tile.row_begin[r] = call.lim.begin(tile.b, tile.i0 + r),
        tile.row_end[r] = call.lim.end(tile.b, tile.i0 + r);
      body(scratch, tile);
    }
  });
}

// Runs body(scratch, b, hkv, g0, g1, slice, rows) for every key/value head (b, hkv) and each of its
// call.kv_slices() runs of query heads [g0, g1) of its group (rows: the keys each query may see, HeadRows):
// the backward's tasks. A task owns dQ of its query heads hkv·G + g, which it runs one after the other
// (backward_head, the heads after g0 adding into dK and dV), and the dK and dV of its slice: the key/value
// head's own when there is one slice, else a buffer of its slice (KvPartials), which the caller sums in slice
// order once every task is done. So no two threads write the same memory, no key/value head is copied per
// query head, and the sums do not depend on which thread ran which task. make() as above.
template <class MakeScratch, class Body>
void for_each_kv_head(const Call& call, MakeScratch make, Body body) {
  const Sizes& n = call.n;
  const int64_t slices = call.kv_slices(), tasks = n.B * n.Hkv * slices;
  parallel_for(0, tasks, call.backward_parallel() && tasks > 1 ? 1 : tasks, [&](int64_t t0, int64_t t1) {
    auto scratch = make();
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bh = t / slices, s = t % slices, b = bh / n.Hkv, hkv = bh % n.Hkv;
      body(scratch, b, hkv, s * n.G / slices, (s + 1) * n.G / slices, s, HeadRows(call.lim, b, n.Tq));
    }
  });
}

// The dK and dV of every slice of every key/value head when call.kv_slices() > 1 (nothing otherwise), in the
// unit's accumulation type A: slice s of head bh = b·H_kv + hkv writes k(bh, s) (Tk, D) and v(bh, s) (Tk,
// Dv); sum(bh, ...) adds the slices in order, the same order whichever thread ran them.
template <class A>
struct KvPartials {
  int64_t slices, tk, d, dv;
  std::vector<A> gk, gv;
  explicit KvPartials(const Call& call)
      : slices(call.kv_slices()),
        tk(call.n.Tk),
        d(call.n.D),
        dv(call.n.Dv),
        gk(slices > 1 ? static_cast<size_t>(call.n.B * call.n.Hkv * slices * tk * d) : 0),
        gv(slices > 1 ? static_cast<size_t>(call.n.B * call.n.Hkv * slices * tk * dv) : 0) {}
  HeadView<A> k(int64_t bh, int64_t s) { return {gk.data() + (bh * slices + s) * tk * d, d}; }
  HeadView<A> v(int64_t bh, int64_t s) { return {gv.data() + (bh * slices + s) * tk * dv, dv}; }
  // out_k (Tk, D) = Σ_s k(bh, s), out_v (Tk, Dv) = Σ_s v(bh, s), summed in slice order
  void sum(int64_t bh, HeadView<A> out_k, HeadView<A> out_v) {
    auto add = [&](HeadView<A> out, int64_t cols, auto part) {
      for (int64_t j = 0; j < tk; ++j) {
        A* o = out.row(j);
        std::copy(part(0).row(j), part(0).row(j) + cols, o);
        for (int64_t s = 1; s < slices; ++s) {
          const A* p = part(s).row(j);
#pragma omp simd
          for (int64_t c = 0; c < cols; ++c) o[c] += p[c];
        }
      }
    };
    add(out_k, d, [&](int64_t s) { return k(bh, s); });
    add(out_v, dv, [&](int64_t s) { return v(bh, s); });
  }
};

}  // namespace saccade::cpu::flash
