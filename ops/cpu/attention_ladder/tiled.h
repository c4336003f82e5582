#pragma once
// Step 2 of the attention ladder: the same three passes, one tile of Br queries at a time.
//   q: (Tq, D)  k: (Tk, D)  v: (Tk, Dv)  out: (Tq, Dv), row-major; keep(i, j): may query i see key j.
// Won: memory falls from (Tq, Tk) to (Br, Tk) scores, and the tiles are independent work for threads.
// Still every key is read twice per tile (scores, then values) and the whole row of scores is kept.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace saccade::ladder {

/// As attention_naive, tile by tile (Br queries per tile).
template <class T, class Keep>
void attention_tiled(const T* q, const T* k, const T* v, int64_t Tq, int64_t Tk, int64_t D, int64_t Dv,
                     T scale, Keep keep, T* out, int64_t Br = 16) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> s(static_cast<size_t>(Br * Tk));
  for (int64_t i0 = 0; i0 < Tq; i0 += Br) {
    const int64_t nr = std::min(Br, Tq - i0);
    for (int64_t r = 0; r < nr; ++r) {
      T* row = s.data() + r * Tk;
      const int64_t i = i0 + r;
      T m = neg_inf, l = 0;
      for (int64_t j = 0; j < Tk; ++j) {
        T dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += q[i * D + d] * k[j * D + d];
        row[j] = keep(i, j) ? dot * scale : neg_inf;
        m = std::max(m, row[j]);
      }
      for (int64_t j = 0; j < Tk; ++j) l += row[j] = m == neg_inf ? T(0) : std::exp(row[j] - m);
      for (int64_t d = 0; d < Dv; ++d) {
        T acc = 0;
        for (int64_t j = 0; j < Tk; ++j) acc += row[j] * v[j * Dv + d];
        out[i * Dv + d] = l > 0 ? acc / l : T(0);  // dividing once per output, not once per weight
      }
    }
  }
}

}  // namespace saccade::ladder
