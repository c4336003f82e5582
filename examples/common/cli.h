#pragma once
// The command line of the example programs: one way to declare and check a flag, on CLI11's own validators.
// Every number has a range, checked before any work; a refusal is one line on stderr, "<program>: --steps: 0
// is not allowed (need an integer >= 1)" or "<program>: --steps: 'abc' is not a number", and exit code 2.
// --help shows every option's allowed values and its default.
#include <cstdint>
#include <exception>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "ops/device.h"
#include "ops/dtype.h"

namespace saccade::examples::cli {

/// Exit code of a refused command line (a flag's value, a missing path): 2, as for a usage error in POSIX
/// tools.
inline constexpr int kUsageExit = 2;

/// A refusal found after parsing but before any work (a path that does not exist, two flags that disagree).
/// `what()` is "<flag>: <reason>"; report() prints it after the program's name and exit() gives kUsageExit.
class UsageError : public std::runtime_error {
 public:
  /// `flag` is the option refused ("--data"), `reason` says why ("/x does not exist").
  UsageError(const std::string& flag, const std::string& reason);
};

/// The integer range check of a flag: a value in [lo, hi]. The refusals: "'abc' is not a number", "'2.5' is
/// not an integer", "0 is not allowed (need an integer >= 1)" (or "from 1 to 9" when hi is below int64's
/// largest value). Runs on the text before CLI11 converts it, so a negative value for an unsigned flag (a
/// seed) is refused, not wrapped around.
CLI::Validator integer(int64_t lo, int64_t hi = std::numeric_limits<int64_t>::max());

/// integer(lo, hi) that also takes the one value `special` below lo (a "-1: all" of a count): its help reads
/// "-1 or >= 1" and its refusal "0 is not allowed (need -1 or an integer >= 1)".
CLI::Validator integer_or(int64_t special, int64_t lo, int64_t hi = std::numeric_limits<int64_t>::max());

/// The check of a --seed flag: integer(0) on a uint64_t, whose help reads "INT 0..2^63-1", the real limit
/// (a seed is read as int64 and kept so in checkpoints' metadata); 2^63 is refused as "out of range (need an
/// integer >= 0; the largest allowed is 9223372036854775807)".
CLI::Validator seed();

/// The real range check of a flag: a finite number above lo (at or above it when lo_closed) and below hi (at
/// or below it when hi_closed); an infinite bound is no bound. The refusals: "'abc' is not a number", "inf is
/// not allowed (must be finite)" (also "nan" and "1e400", past double's range), "0 is not allowed (need a
/// number > 0)", "1 is not allowed (need a number >= 0 and < 1)".
CLI::Validator real(double lo, bool lo_closed, double hi = std::numeric_limits<double>::infinity(),
                    bool hi_closed = false);

/// real(0, false): a number > 0 (learning rates, a time in seconds).
CLI::Validator positive_real();
/// real(0, true): a number >= 0.
CLI::Validator non_negative_real();
/// real(0, true, 1, false): a probability that may not be 1 (dropout).
CLI::Validator probability_below_one();

/// The choices of a --dtype flag (precision of the forward): "f32", "bf16", "f16".
CLI::Validator dtype_choices();

/// The DType of a --dtype value that dtype_choices() accepted: Float32, BFloat16 or Float16.
saccade::DType dtype(const std::string& name);

/// Readies `app` for the examples' conventions: every option (of the subcommands added later too) captures
/// its default, a flag given twice takes its last value, and --help prints each option's allowed values and
/// default ("--steps INT >= 1   training steps (default: 2500)").
void setup(CLI::App& app);

/// Parses the command line. Returns -1 when the program should go on; otherwise the program's exit code:
/// 0 after printing --help, kUsageExit after printing one line "<program>: <what is wrong>" on stderr.
/// Makes stdout line-buffered first, so that a log of `> log 2>&1` keeps the order of stdout's and stderr's
/// lines. With SACCADE_EXAMPLES_PARSE_ONLY=1 in the environment, a command line that parses prints
/// "<program>: the command line parses" and returns 0 without running (tests/examples_cli checks every
/// command the READMEs show this way). A word that is not a command or not an option is named first, with the
/// nearest name: "gpt: trian: not a command (did you mean train?) (the commands: train, ...)", "gpt: --step:
/// not an option (did you mean --steps?)".
int parse(CLI::App& app, int argc, char** argv, const std::string& program);

/// Prints `e` as one line on stderr, "<program>: <message>" (a message that already begins with
/// "<program>: " is not prefixed twice), and returns the exit code: kUsageExit for a UsageError, else 1.
int report(const std::string& program, const std::exception& e);

/// The device `name` names ("cpu", "cuda", "cuda:1"). Throws UsageError naming `flag` for a name
/// saccade::Device::parse refuses, and for a CUDA device in a build without CUDA or on a machine without a
/// GPU.
saccade::Device device(const std::string& flag, const std::string& name);

/// profiler::check_trace_path(path) for the flag `flag` (--profile): a trace file that cannot be written is a
/// UsageError naming the flag, before any work.
void require_trace_path(const std::string& flag, const std::string& path);

/// A flag that names a model setting and whether its value is the one a checkpoint holds: {"--model",
/// saved.model == model}.
using ModelFlag = std::pair<std::string, bool>;

/// Refuses (UsageError naming `flag`, "--resume" or "--eval-only") a run whose command line gives a model
/// setting that differs from the model saved in `file` (described by `saved`): each of `flags` given on the
/// command line (app.count) must agree. Flags left out take the checkpoint's settings, as a resume should.
void require_same_model(const CLI::App& app, const std::vector<ModelFlag>& flags, const std::string& flag,
                        const std::string& file, const std::string& saved);

/// Refuses the flags that cannot apply in a mode of the program: the first of `flags` given on the command
/// line (app.count) throws UsageError("<that flag>: does not apply <mode>"), for example "--steps: does not
/// apply with --checkpoint (pronouncing with a trained model)". A flag silently ignored is a wrong run.
void refuse_flags(const CLI::App& app, const std::vector<std::string>& flags, const std::string& mode);

/// Throws UsageError("<flag>: '<path>' does not exist (<hint>)") unless `path` is an existing directory;
/// `hint` (where the data comes from, say) is left out when empty.
void require_directory(const std::string& flag, const std::string& path, const std::string& hint = "");

/// Throws UsageError unless `path` is an existing regular file that can be opened for reading.
void require_file(const std::string& flag, const std::string& path);

/// Throws UsageError unless a directory `path` exists and is writable, or can be created (its nearest
/// existing ancestor is a writable directory, and making the folders works: they are removed again). Leaves
/// nothing.
void require_writable_directory(const std::string& flag, const std::string& path);

/// Throws UsageError unless a file can be written at `path` (its folder exists and is writable, and `path`
/// is not a directory). Creates nothing.
void require_writable_file(const std::string& flag, const std::string& path);

/// Throws UsageError("<flag>: ...") when `a` and `b` name the same file (after resolving links), for example
/// `gpt export --to` and the checkpoint it reads.
void require_different_files(const std::string& flag, const std::string& a, const std::string& b);

/// An output folder made for a run: the constructor checks that it can be written (UsageError naming `flag`
/// otherwise) and creates it with the missing folders above it. When the run fails (the object is destroyed
/// by an exception), every folder it created that is still empty is removed again, so that a failed run
/// leaves no empty folder behind.
class OutputDir {
 public:
  /// Checks and creates `path`.
  OutputDir(const std::string& flag, const std::string& path);
  /// On an exception: removes the folders this object created, deepest first, while they are empty.
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;
  /// The folder.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::filesystem::path> created_;  // outermost first
  int exceptions_ = 0;                          // std::uncaught_exceptions() at construction
};

}  // namespace saccade::examples::cli
