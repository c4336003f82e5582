#pragma once
// Step 3 of the attention ladder: one pass over tiles of keys with an online softmax (Milakov & Gimelshein
// 2018; the heart of FlashAttention, Dao et al. 2022, Algorithm 1).
//   q: (Tq, D)  k: (Tk, D)  v: (Tk, Dv)  out: (Tq, Dv)  lse: (Tq), row-major; keep(i, j) as before.
// For each row keep a running max m, a running sum l and an unnormalised output o. A new tile of scores s
// with max m' >= m rescales what was accumulated by e^(m - m'):
//   l <- l e^(m - m') + Σ_j e^(s_j - m'),   o <- o e^(m - m') + Σ_j e^(s_j - m') v_j,   m <- m'
// and at the end out = o / l, lse = m + log l (all backward needs to recompute the probabilities).
// Won: scores live only as a (Br, Bc) tile: memory O(T·D) instead of O(T²), and keys and values are read
// once per query tile. A key tile that no query of the tile may see is skipped (causal: half the work).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace saccade::ladder {

/// As attention_naive, with key tiles of Bc and an online softmax; also writes lse (-inf for an empty row).
/// key_end(i0, nr): one past the last key any of the queries [i0, i0 + nr) may see (Tk without a bound).
template <class T, class Keep, class KeyEnd>
void attention_online(const T* q, const T* k, const T* v, int64_t Tq, int64_t Tk, int64_t D, int64_t Dv,
                      T scale, Keep keep, KeyEnd key_end, T* out, T* lse, int64_t Br = 16, int64_t Bc = 16) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> s(static_cast<size_t>(Bc)), o(static_cast<size_t>(Dv));
  for (int64_t i0 = 0; i0 < Tq; i0 += Br) {
    const int64_t nr = std::min(Br, Tq - i0), end = std::min(key_end(i0, nr), Tk);
    for (int64_t i = i0; i < i0 + nr; ++i) {
      T m = neg_inf, l = 0;
      std::fill(o.begin(), o.end(), T(0));
      for (int64_t j0 = 0; j0 < end; j0 += Bc) {
        const int64_t nc = std::min(Bc, end - j0);
        T mt = neg_inf;
        for (int64_t c = 0; c < nc; ++c) {
          T dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q[i * D + d] * k[(j0 + c) * D + d];
          s[c] = keep(i, j0 + c) ? dot * scale : neg_inf;
          mt = std::max(mt, s[c]);
        }
        const T mnew = std::max(m, mt);
        if (mnew == neg_inf) continue;  // nothing to see yet
        const T alpha = std::exp(m - mnew);
        l *= alpha;
        for (int64_t d = 0; d < Dv; ++d) o[d] *= alpha;
        for (int64_t c = 0; c < nc; ++c) {
          const T p = std::exp(s[c] - mnew);
          l += p;
          for (int64_t d = 0; d < Dv; ++d) o[d] += p * v[(j0 + c) * Dv + d];
        }
        m = mnew;
      }
      for (int64_t d = 0; d < Dv; ++d) out[i * Dv + d] = l > 0 ? o[d] / l : T(0);
      lse[i] = l > 0 ? m + std::log(l) : neg_inf;
    }
  }
}

}  // namespace saccade::ladder
