#pragma once
// Step 1 of the attention ladder: the textbook, three passes over a full score matrix.
//   q: (Tq, D)  k: (Tk, D)  v: (Tk, Dv)  out: (Tq, Dv), all row-major; keep(i, j): may query i see key j.
// Memory: the (Tq, Tk) scores. Every score is computed, masked ones too.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace saccade::ladder {

/// out = softmax(q kᵀ · scale, masked) v for one head; a row with nothing to attend gives zeros.
template <class T, class Keep>
void attention_naive(const T* q, const T* k, const T* v, int64_t Tq, int64_t Tk, int64_t D, int64_t Dv,
                     T scale, Keep keep, T* out) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> s(static_cast<size_t>(Tq * Tk));
  // pass 1: every score, masked ones set to -inf
  for (int64_t i = 0; i < Tq; ++i)
    for (int64_t j = 0; j < Tk; ++j) {
      T dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += q[i * D + d] * k[j * D + d];
      s[i * Tk + j] = keep(i, j) ? dot * scale : neg_inf;
    }
  // pass 2: softmax of each row (max, then exp and sum, then divide)
  for (int64_t i = 0; i < Tq; ++i) {
    T* row = s.data() + i * Tk;
    T m = neg_inf, l = 0;
    for (int64_t j = 0; j < Tk; ++j) m = std::max(m, row[j]);
    for (int64_t j = 0; j < Tk; ++j) l += row[j] = m == neg_inf ? T(0) : std::exp(row[j] - m);
    for (int64_t j = 0; j < Tk; ++j) row[j] = l > 0 ? row[j] / l : T(0);
  }
  // pass 3: out = P v
  for (int64_t i = 0; i < Tq; ++i)
    for (int64_t d = 0; d < Dv; ++d) {
      T acc = 0;
      for (int64_t j = 0; j < Tk; ++j) acc += s[i * Tk + j] * v[j * Dv + d];
      out[i * Dv + d] = acc;
    }
}

}  // namespace saccade::ladder
