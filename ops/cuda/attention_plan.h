#pragma once
// The tile plan of the CUDA fused attention kernels (attention.cu, attention_fast.cu, attention_mma.cu):
// which keys a query row may see under the causal rule and the sliding window, and from that which key tiles
// a block of query rows visits (the forwards) and which query rows a block of keys visits (the backwards),
// so that tiles wholly outside every row's window are never loaded and the work grows as O(T·W), not O(T²).
// Plain C++ (no CUDA headers): the [attention_plan] tests check it in every build, GPU or not; nvcc makes
// the functions callable from the kernels too.
//
// The rule (ops/backend.h, AttentionMask): with shift = Tk - Tq (CausalAlign::BottomRight) or 0 (TopLeft),
// query i sees keys j <= i + shift; a window W > 0 (only with a causal rule) keeps i + shift - W < j, the
// last W of them (Beltagy et al. 2020, Longformer; Jiang et al. 2023, Mistral). valid_lens and keep-masks
// only remove keys inside that range: the kernels test them element by element (attention.cuh, Masking).
#include <cstdint>

#include "ops/backend.h"

#if defined(__CUDACC__)
#define SACCADE_PLAN_HD __host__ __device__ inline
#else
#define SACCADE_PLAN_HD inline
#endif

namespace saccade::cuda {

/// Rows [begin, end) of a key or query range; empty when end <= begin.
struct RowSpan {
  int64_t begin = 0, end = 0;
};

/// A backward block's walk over the query tiles of the G query heads that share its key/value head
/// (grouped-query attention: query heads kv_head·G .. kv_head·G + G - 1): step t < steps() visits query head
/// head(t) and the query tile of `tile` rows starting at row0(t), head by head.
struct QueryWalk {
  RowSpan span;  ///< the query tiles of every head: [span.begin, span.end), span.begin a multiple of tile
  int64_t tile = 1, tiles = 0, group = 1, first_head = 0;

  SACCADE_PLAN_HD int64_t steps() const { return group * tiles; }
  SACCADE_PLAN_HD int64_t head(int64_t t) const { return first_head + t / tiles; }
  SACCADE_PLAN_HD int64_t row0(int64_t t) const { return span.begin + t % tiles * tile; }
};

/// The part of an attention mask that depends on the query and key positions only: Tq queries, Tk keys, the
/// causal rule and the window (0: none; W >= 1 only with a causal rule, as ops::check_attention_window
/// demands).
struct AttentionPlan {
  int64_t Tq = 0, Tk = 0;
  ops::CausalAlign causal = ops::CausalAlign::None;
  int64_t window = 0;

  /// The offset of the causal limit: query i's last visible key is i + shift().
  SACCADE_PLAN_HD int64_t shift() const { return causal == ops::CausalAlign::BottomRight ? Tk - Tq : 0; }

  /// The first key query i may see: i + shift - W + 1 under a window (at least 0), else 0.
  SACCADE_PLAN_HD int64_t first_key(int64_t i) const {
    if (window <= 0) return 0;
    const int64_t j = i + shift() - window + 1;
    return j > 0 ? j : 0;
  }

  /// One past the last key query i may see under the causal rule (Tk without one), in [0, Tk].
  SACCADE_PLAN_HD int64_t key_end(int64_t i) const {
    if (causal == ops::CausalAlign::None) return Tk;
    const int64_t e = i + shift() + 1;
    return e < 0 ? 0 : (e > Tk ? Tk : e);
  }

  /// The key tiles (of `tile` keys from key 0) a forward block of query rows i0, i0 + 1, ... walks, given
  /// `end`, one past the last key any of its rows sees (valid_lens included): [the start of the tile of
  /// first_key(i0), end). first_key grows with i, so row i0 has the smallest; empty (begin = end) when
  /// first_key(i0) >= end (no row of the block sees a key).
  SACCADE_PLAN_HD RowSpan key_tiles(int64_t i0, int64_t end, int64_t tile) const {
    const int64_t f = first_key(i0);
    if (f >= end) return {end, end};
    return {f / tile * tile, end};
  }

  /// The query rows that may see a key of [j0, j0 + n) (n >= 1): i with key_end(i) > j0 and first_key(i) <
  /// j0 + n, clamped to [0, Tq). Both limits are monotone in i, so the rows form one span.
  SACCADE_PLAN_HD RowSpan query_rows(int64_t j0, int64_t n) const {
    RowSpan s{0, Tq};
    if (causal != ops::CausalAlign::None && j0 - shift() > 0) s.begin = j0 - shift();  // i + shift + 1 > j0
    if (window > 0) {  // i + shift - W + 1 < j0 + n
      const int64_t hi = j0 + n + window - 1 - shift();
      if (hi < s.end) s.end = hi;
    }
    if (s.begin > Tq) s.begin = Tq;
    if (s.end < s.begin) s.end = s.begin;
    return s;
  }

  /// The query tiles (of `tile` rows from row 0) a backward block of keys [j0, j0 + n) walks: [start of the
  /// tile of query_rows' first row, query_rows' end). Empty (begin >= end) when no row sees a key of it.
  SACCADE_PLAN_HD RowSpan query_tiles(int64_t j0, int64_t n, int64_t tile) const {
    const RowSpan s = query_rows(j0, n);
    if (s.end <= s.begin) return s;
    return {s.begin / tile * tile, s.end};
  }

  /// The walk of a backward block of keys [j0, j0 + n) (n >= 1) over query tiles of `tile` rows, for the
  /// `group` query heads of key/value head `kv_head`.
  SACCADE_PLAN_HD QueryWalk query_walk(int64_t j0, int64_t n, int64_t tile, int64_t group,
                                       int64_t kv_head) const {
    QueryWalk w;
    w.span = query_tiles(j0, n, tile);
    w.tile = tile, w.group = group, w.first_head = kv_head * group;
    w.tiles = w.span.end > w.span.begin ? (w.span.end - w.span.begin + tile - 1) / tile : 0;
    return w;
  }
};

}  // namespace saccade::cuda
