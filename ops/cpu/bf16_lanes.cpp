// bf16_lanes.h's row loops, in the library (its -fopenmp-simd) rather than inline in the header that tests
// include too.
#include "ops/cpu/bf16_lanes.h"

#include "ops/cpu/simd.h"

namespace saccade::cpu {

namespace {

// Row r of `to` = f of row r of `from`, element by element, at the machine's vector width.
template <class From, class To, class F>
void map_rows(const From* from, int64_t ldf, To* to, int64_t ldt, int64_t rows, int64_t cols, F f) {
  // NOTE: the lambda copies its arguments: loads through captured references keep GCC from vectorising
  with_isa([=] {
    for (int64_t r = 0; r < rows; ++r) {
      const From* __restrict x = from + r * ldf;
      To* __restrict y = to + r * ldt;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) y[c] = f(x[c]);
    }
  });
}

}  // namespace

void round_rows(const float* from, int64_t ldf, uint16_t* to, int64_t ldt, int64_t rows, int64_t cols) {
  map_rows(from, ldf, to, ldt, rows, cols, [](float v) { return bf16_round(v); });
}

void widen_rows(const uint16_t* from, int64_t ldf, float* to, int64_t ldt, int64_t rows, int64_t cols) {
  map_rows(from, ldf, to, ldt, rows, cols, [](uint16_t h) { return bf16_widen(h); });
}

}  // namespace saccade::cpu
