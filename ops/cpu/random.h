#pragma once
// Philox draws at the machine's vector width, for the CPU kernels that draw inside a loop of their own (the
// fused attention's dropout). Element c uses counter `counter + c` and word 0 of its block, as every random
// kernel does (ops/cpu/random.cpp, ops/cuda/random.cu), so a fused kernel draws exactly the mask that the
// composed path's ops::dropout draws.
#include <cstdint>

namespace saccade::cpu {

/// The dropout multipliers of `n` consecutive Philox counters: m[c] = scale when
/// u = uniform(philox4x32_10(seed, counter + c).w[0]) >= p, else 0, for c < n; u as ops::rand draws it
/// (uniform_float for float, uniform_double for double, ops/philox.h). T is float or double; m holds n T's.
template <class T>
void dropout_multipliers(uint64_t seed, uint64_t counter, int64_t n, T p, T scale, T* m);

}  // namespace saccade::cpu
