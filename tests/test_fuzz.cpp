// The fuzz test: a seeded stream of valid and invalid calls over every public op, Tensor method, autograd
// function and nn module (tests/fuzz/cases.cpp), each run in a forked child (tests/fuzz/harness.h). Every
// call must return a correct result or throw a saccade::Error that names the op; never another exception,
// never a crash or a hang.
//
// CI runs a few thousand cases (fewer under the sanitizers, which are slower). For a long run:
//   SACCADE_FUZZ_CASES=100000 SACCADE_FUZZ_SEED=1 build/tests/saccade_tests "[fuzz]"
// It prints the totals and every failing case (number, op, message or signal); rerun one case with
// SACCADE_FUZZ_FIRST=<number> SACCADE_FUZZ_CASES=1.
#include <cstdlib>
#include <iostream>

#include "tests/fuzz/cases.h"
#include "tests/helpers.h"

using namespace saccade;

namespace {
int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}
#if defined(__SANITIZE_ADDRESS__)
constexpr int64_t kDefaultCases = 1500;
#else
constexpr int64_t kDefaultCases = 4000;
#endif
}  // namespace

TEST_CASE("fuzz: every public call returns a result or a saccade::Error naming the op", "[fuzz]") {
  const int64_t count = env_int("SACCADE_FUZZ_CASES", kDefaultCases);
  const int64_t first = env_int("SACCADE_FUZZ_FIRST", 0);
  const auto seed = static_cast<uint64_t>(env_int("SACCADE_FUZZ_SEED", 20261123));
  fuzz::Report r = fuzz::run_forked(fuzz::run_case, first, count, seed);
  std::cout << "fuzz (seed " << seed << ", " << fuzz::num_case_kinds() << " kinds of call): " << r.summary()
            << "\n";
  for (const auto& f : r.failures)
    std::cout << "  case " << f.index << " [" << fuzz::outcome_name(f.outcome) << "] " << f.op << ": "
              << f.detail << "\n";
  CHECK(r.count(fuzz::Outcome::Crash) == 0);
  CHECK(r.count(fuzz::Outcome::Hang) == 0);
  CHECK(r.count(fuzz::Outcome::Foreign) == 0);
  CHECK(r.count(fuzz::Outcome::Wrong) == 0);
  CHECK(r.count(fuzz::Outcome::Misnamed) == 0);
  // the stream exercises both sides: enough calls succeed and enough are refused
  CHECK(r.count(fuzz::Outcome::Ok) > count / 10);
  CHECK(r.count(fuzz::Outcome::Error) > count / 10);
}

TEST_CASE("fuzz harness: a crash, a foreign exception and a misnamed error are reported, not fatal",
          "[fuzz]") {
  fuzz::CaseFn body = [](int64_t i, uint64_t, fuzz::CaseContext& ctx) {
    ctx.set_op("op" + std::to_string(i));
    if (i == 1) std::abort();
    if (i == 2) throw std::length_error("vector");
    if (i == 3) throw Error("other: bad");
    if (i == 4) throw Error("op4: bad");
  };
  fuzz::Report r = fuzz::run_forked(body, 0, 6, 0);
  CHECK(r.count(fuzz::Outcome::Ok) == 2);
  CHECK(r.count(fuzz::Outcome::Crash) == 1);
  CHECK(r.count(fuzz::Outcome::Foreign) == 1);
  CHECK(r.count(fuzz::Outcome::Misnamed) == 1);
  CHECK(r.count(fuzz::Outcome::Error) == 1);
  REQUIRE(r.failures.size() == 3);
  CHECK(r.failures[0].index == 1);
  CHECK(r.failures[0].op == "op1");
}
