#pragma once
// The fuzz cases over saccade's public API (tests/fuzz/cases.cpp), run by tests/fuzz/harness.h.
#include <cstdint>

#include "tests/fuzz/harness.h"

namespace saccade::fuzz {

/// How many different calls (ops, methods, modules) the cases cycle through; case i calls kind i % this.
int64_t num_case_kinds();
/// Case `index` of the seeded stream: draws the arguments from (seed, index), names its op in `ctx`, calls it
/// and checks the result where a check is cheap. Throws what the op throws, or FuzzWrong.
void run_case(int64_t index, uint64_t seed, CaseContext& ctx);

}  // namespace saccade::fuzz
