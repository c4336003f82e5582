#pragma once
// The fuzz harness: runs numbered cases in forked children so that a crash or a hang is reported, not fatal.
//
// A case is a function of its number: it seeds its own argument generator from (seed, number), calls one
// public op or module with those arguments and classifies what happened:
//   ok         the call returned and the result passed the case's checks
//   error      it threw saccade::Error whose message names the op the case called
//   misnamed   it threw saccade::Error that does not name the op
//   wrong      it returned, but the result failed a check (FuzzWrong)
//   foreign    it threw something other than saccade::Error (std::bad_alloc, std::length_error, ...)
//   crash      the child died (signal, sanitizer report, abort) while running the case
//   hang       the case ran longer than the time limit; the child is killed
// A child runs cases one after another and tells the parent over a pipe which case it starts and how each
// ended; after a crash or a hang the parent starts a new child at the next case. Children run on one
// thread (the parent's pool workers are not copied by fork; saccade's pool never waits for them).
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace saccade::fuzz {

/// Thrown by a case whose call returned a result that fails a check.
struct FuzzWrong : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// What a case did.
enum class Outcome { Ok, Error, Misnamed, Wrong, Foreign, Crash, Hang };
const char* outcome_name(Outcome o);

/// One failing case: its number, the op it called, and the message or signal.
struct Failure {
  int64_t index;
  Outcome outcome;
  std::string op, detail;
};

/// Totals of a run and the failures (misnamed, wrong, foreign, crash, hang), in case order.
struct Report {
  std::map<Outcome, int64_t> counts;
  std::vector<Failure> failures;
  int64_t count(Outcome o) const {
    auto it = counts.find(o);
    return it == counts.end() ? 0 : it->second;
  }
  /// "N cases: ok A, error B, misnamed C, wrong D, foreign E, crash F, hang G".
  std::string summary() const;
};

/// What a case tells the harness before it calls its op: the name an error must contain (also reported
/// for a crash or a hang in that case).
class CaseContext {
 public:
  explicit CaseContext(int fd) : fd_(fd) {}
  void set_op(std::string op);
  const std::string& op() const { return op_; }

 private:
  int fd_;
  std::string op_ = "?";
};

/// A case body: given its number and a seed, draws arguments, calls ctx.set_op(name), then calls the op. It
/// throws whatever the op throws, or FuzzWrong for a result that fails a check.
using CaseFn = std::function<void(int64_t index, uint64_t seed, CaseContext& ctx)>;

/// Runs cases [first, first + count) of `body` in forked children; `timeout_s` per case.
Report run_forked(const CaseFn& body, int64_t first, int64_t count, uint64_t seed, double timeout_s = 20.0);

}  // namespace saccade::fuzz
