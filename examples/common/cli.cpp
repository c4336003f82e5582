#include "examples/common/cli.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "profiler/profiler.h"

namespace saccade::examples::cli {

namespace fs = std::filesystem;

UsageError::UsageError(const std::string& flag, const std::string& reason)
    : std::runtime_error(flag + ": " + reason) {}

namespace {

// "%g" of a bound, without "1e+06" noise for the usual values.
std::string show(double v) { return fmt::format("{}", v); }

// Parses the whole of `text` as a double: kNumber for a finite one, kInfinite for "inf", "nan" or a value
// past double's range ("1e400"), kNotNumber otherwise.
enum class Real { kNumber, kInfinite, kNotNumber };
Real parse_real(const std::string& text, double& value) {
  if (text.empty()) return Real::kNotNumber;
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return Real::kNotNumber;
  return std::isfinite(value) ? Real::kNumber : Real::kInfinite;
}

// The refusal of a text that is not a finite number, or "" when it is one.
std::string not_finite(const std::string& text, double& value) {
  switch (parse_real(text, value)) {
    case Real::kNumber:
      return "";
    case Real::kInfinite:
      return fmt::format("{} is not allowed (must be finite)", text);
    default:
      return fmt::format("'{}' is not a number", text);
  }
}

// The help's type column: CLI11's type name ("INT", "FLOAT", "TEXT") and the validator's description after
// it ("INT >= 1"); a set of choices stands alone ("{sat,transformer}").
std::string type_text(const CLI::Option* opt) {
  std::string name = opt->get_type_name();
  const size_t colon = name.find(':');
  if (colon == std::string::npos) return name;
  std::string base = name.substr(0, colon);
  const std::string rule = name.substr(colon + 1);
  if (base == "UINT") base = "INT";  // the rule after it gives the range: an unsigned flag's is narrower
  return rule.rfind('{', 0) == 0 ? rule : base + " " + rule;
}

// --help of the examples: each option's allowed values beside its name and its default after its text.
class Formatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
    std::string out;
    if (opt->get_type_size() != 0) {
      if (!opt->get_type_name().empty()) out += " " + type_text(opt);
      if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
      if (opt->get_required()) out += " REQUIRED";
    }
    return out;
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string desc = opt->get_description();
    // the flags this one cannot go with, or needs, unless its text names them already
    std::vector<std::string> excluded, needed;
    for (const CLI::Option* other : opt->get_excludes()) excluded.push_back(other->get_name());
    for (const CLI::Option* other : opt->get_needs())
      if (desc.find(other->get_name()) == std::string::npos) needed.push_back(other->get_name());
    std::sort(excluded.begin(), excluded.end());
    if (!excluded.empty()) desc += fmt::format(" (not with {})", fmt::join(excluded, ", "));
    if (!needed.empty()) desc += fmt::format(" (needs {})", fmt::join(needed, ", "));
    if (opt->get_type_size() != 0 && !opt->get_default_str().empty() && opt->get_default_str() != "[]")
      desc += " (default: " + opt->get_default_str() + ")";
    return desc;
  }
};

}  // namespace

namespace {

// integer(lo, hi), and the value `special` too when it is set.
CLI::Validator integer_rule(int64_t lo, int64_t hi, std::optional<int64_t> special) {
  const bool unbounded = hi == std::numeric_limits<int64_t>::max();
  const std::string range =
      unbounded ? fmt::format("an integer >= {}", lo) : fmt::format("an integer from {} to {}", lo, hi);
  const std::string need = special ? fmt::format("{} or {}", *special, range) : range;
  std::string rule = unbounded ? fmt::format(">= {}", lo) : fmt::format("{}..{}", lo, hi);
  if (special) rule = fmt::format("{} or {}", *special, rule);
  return CLI::Validator(
      [lo, hi, special, need](std::string& text) -> std::string {
        const char* first = text.c_str() + (text.rfind('+', 0) == 0 ? 1 : 0);
        const char* last = text.c_str() + text.size();
        int64_t v = 0;
        auto [end, ec] = std::from_chars(first, last, v);
        double real = 0;
        if (ec == std::errc() && end == last)
          return (v >= lo && v <= hi) || (special && v == *special)
                     ? std::string()
                     : fmt::format("{} is not allowed (need {})", text, need);
        if (std::string refusal = not_finite(text, real); !refusal.empty()) return refusal;
        if (ec == std::errc::result_out_of_range)  // past int64: say the real limit, not only the rule
          return fmt::format("{} is out of range (need {}; the largest allowed is {})", text, need, hi);
        return fmt::format("{} is not an integer (need {})", text, need);
      },
      rule, "integer range");
}

}  // namespace

CLI::Validator integer(int64_t lo, int64_t hi) { return integer_rule(lo, hi, std::nullopt); }

CLI::Validator integer_or(int64_t special, int64_t lo, int64_t hi) { return integer_rule(lo, hi, special); }

CLI::Validator seed() {
  CLI::Validator v = integer_rule(0, std::numeric_limits<int64_t>::max(), std::nullopt);
  v.description("0..2^63-1");
  return v;
}

CLI::Validator real(double lo, bool lo_closed, double hi, bool hi_closed) {
  std::string need = "a number";
  std::string rule;
  if (std::isfinite(lo)) rule = fmt::format("{} {}", lo_closed ? ">=" : ">", show(lo));
  if (std::isfinite(hi))
    rule += fmt::format("{}{} {}", rule.empty() ? "" : " and ", hi_closed ? "<=" : "<", show(hi));
  if (!rule.empty()) need += " " + rule;
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        if (std::string refusal = not_finite(text, v); !refusal.empty()) return refusal;
        const bool above = !std::isfinite(lo) || (lo_closed ? v >= lo : v > lo);
        const bool below = !std::isfinite(hi) || (hi_closed ? v <= hi : v < hi);
        return above && below ? std::string() : fmt::format("{} is not allowed (need {})", text, need);
      },
      rule, "real range");
}

CLI::Validator positive_real() { return real(0, false); }
CLI::Validator non_negative_real() { return real(0, true); }
CLI::Validator probability_below_one() { return real(0, true, 1, false); }

CLI::Validator dtype_choices() { return CLI::IsMember({"f32", "bf16", "f16"}); }

saccade::DType dtype(const std::string& name) {
  return name == "bf16" ? DType::BFloat16 : name == "f16" ? DType::Float16 : DType::Float32;
}

void setup(CLI::App& app) {
  // a flag given twice takes its last value (a script's override), as argparse does
  app.option_defaults()->always_capture_default()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.formatter(std::make_shared<Formatter>());
}

namespace {

// Levenshtein distance between two short words (option and command names).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// " (did you mean X?)" for the name in `names` nearest to `word` (at most 2 edits, or one name that starts
// with it), or "" when none is near.
std::string suggestion(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = 3;
  for (const std::string& name : names) {
    const size_t d = name.rfind(word, 0) == 0 ? 1 : edit_distance(word, name);
    if (d < best_distance) best = name, best_distance = d;
  }
  return best.empty() ? "" : fmt::format(" (did you mean {}?)", best);
}

// The first word of a refused command line that is not a command or not an option, worded the way the rest
// of the refusals are ("trian: not a command ..."), or "" when every word is known. CLI11 words these as "A
// subcommand is required" and "The following arguments were not expected: 5 --step" (the option last).
std::string unknown_word(CLI::App& app, int argc, char** argv) {
  CLI::App* command = &app;
  int i = 1;
  const std::vector<CLI::App*> commands = app.get_subcommands([](CLI::App*) { return true; });
  if (!commands.empty() && i < argc && argv[i][0] != '-') {
    const std::string word = argv[i];
    std::vector<std::string> names;
    for (CLI::App* c : commands) {
      names.push_back(c->get_name());
      if (c->get_name() == word) command = c;
    }
    if (command == &app)
      return fmt::format("{}: not a command{} (the commands: {})", word, suggestion(word, names),
                         fmt::join(names, ", "));
    ++i;
  }
  for (; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;
    if (word.rfind("--", 0) != 0) continue;
    const std::string name = word.substr(0, word.find('='));
    if (command->get_option_no_throw(name) != nullptr || app.get_option_no_throw(name) != nullptr) continue;
    std::vector<std::string> names;
    for (const CLI::Option* opt : command->get_options())
      for (const std::string& long_name : opt->get_lnames()) names.push_back("--" + long_name);
    return fmt::format("{}: not an option{}", name, suggestion(name, names));
  }
  return "";
}

}  // namespace

int parse(CLI::App& app, int argc, char** argv, const std::string& program) {
  std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);  // before any output: keeps `> log 2>&1` in order
  try {
    app.parse(argc, argv);
    if (const char* only = std::getenv("SACCADE_EXAMPLES_PARSE_ONLY");
        only && *only && std::string(only) != "0") {
      std::printf("%s: the command line parses\n", program.c_str());
      return 0;
    }
    return -1;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::string msg = unknown_word(app, argc, argv);
    if (msg.empty()) msg = e.what();
    for (char& c : msg)
      if (c == '\n') c = ' ';
    std::fprintf(stderr, "%s: %s\n", program.c_str(), msg.c_str());
    return kUsageExit;
  }
}

int report(const std::string& program, const std::exception& e) {
  std::string msg = e.what();
  const std::string prefix = program + ": ";
  while (msg.rfind(prefix, 0) == 0) msg.erase(0, prefix.size());
  std::fflush(stdout);
  std::fprintf(stderr, "%s%s\n", prefix.c_str(), msg.c_str());
  return dynamic_cast<const UsageError*>(&e) ? kUsageExit : 1;
}

saccade::Device device(const std::string& flag, const std::string& name) {
  saccade::Device d;
  try {
    d = saccade::Device::parse(name);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    const std::string op = "Device::parse: ";  // the user typed a flag, not a function
    if (msg.rfind(op, 0) == 0) msg.erase(0, op.size());
    throw UsageError(flag, msg);
  }
  if (!d.is_cpu() && !saccade::cuda_is_available())
    throw UsageError(flag, name + " asked for, but saccade was built without CUDA or no GPU is present");
  return d;
}

void require_same_model(const CLI::App& app, const std::vector<ModelFlag>& flags, const std::string& flag,
                        const std::string& file, const std::string& saved) {
  std::string differs;
  for (const auto& [name, same] : flags)
    if (app.count(name) > 0 && !same) differs += (differs.empty() ? "" : ", ") + name;
  if (!differs.empty())
    throw UsageError(flag,
                     fmt::format("'{}' holds another model ({}) than {} ask for", file, saved, differs));
}

void refuse_flags(const CLI::App& app, const std::vector<std::string>& flags, const std::string& mode) {
  for (const std::string& flag : flags)
    if (app.count(flag) > 0) throw UsageError(flag, "does not apply " + mode);
}

void require_trace_path(const std::string& flag, const std::string& path) {
  try {
    profiler::check_trace_path(path, flag.c_str());
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (msg.rfind(flag + ": ", 0) == 0) msg.erase(0, flag.size() + 2);
    throw UsageError(flag, msg);
  }
}

void require_directory(const std::string& flag, const std::string& path, const std::string& hint) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw UsageError(flag, fmt::format("'{}' does not exist{}", path, hint.empty() ? "" : " (" + hint + ")"));
  if (!fs::is_directory(path, ec)) throw UsageError(flag, fmt::format("'{}' is not a folder", path));
}

void require_file(const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (path.empty()) throw UsageError(flag, "the file name is empty");
  if (!fs::exists(path, ec)) throw UsageError(flag, fmt::format("'{}' does not exist", path));
  if (fs::is_directory(path, ec)) throw UsageError(flag, fmt::format("'{}' is a folder, not a file", path));
  if (!std::ifstream(path)) throw UsageError(flag, fmt::format("cannot read '{}'", path));
}

namespace {

// The nearest existing folder at or above `path`, and the folders below it that are missing (outermost
// first).
fs::path existing_ancestor(const std::string& flag, const fs::path& path, std::vector<fs::path>* missing) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "out/" names the folder "out"
  std::vector<fs::path> below;
  while (!fs::exists(p, ec)) {
    below.insert(below.begin(), p);
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  if (!fs::is_directory(p, ec))
    throw UsageError(
        flag, fmt::format("cannot make the folder '{}': '{}' is not a folder", path.string(), p.string()));
  if (::access(p.c_str(), W_OK | X_OK) != 0)
    throw UsageError(flag, fmt::format("cannot write in '{}'", p.string()));
  if (missing) *missing = below;
  return p;
}

}  // namespace

void require_writable_directory(const std::string& flag, const std::string& path) {
  if (path.empty()) throw UsageError(flag, "the folder name is empty");
  std::vector<fs::path> missing;
  const fs::path parent = existing_ancestor(flag, path, &missing);
  if (missing.empty()) return;
  // access() says yes to root everywhere (/proc too): make a folder of our own in the nearest existing one,
  // and remove it again. It has a name nobody else uses, so programs started beside this one, making and
  // filling the same folders, are never disturbed.
  std::string probe = (parent / ".saccade-probe-XXXXXX").string();
  if (::mkdtemp(probe.data()) == nullptr)
    throw UsageError(
        flag, fmt::format("cannot make the folder '{}' (cannot write in '{}')", path, parent.string()));
  std::error_code ec;
  fs::remove(probe, ec);
}

void require_writable_file(const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (path.empty()) throw UsageError(flag, "the file name is empty");
  if (fs::is_directory(path, ec)) throw UsageError(flag, fmt::format("'{}' is a folder, not a file", path));
  fs::path folder = fs::absolute(path, ec).parent_path();
  if (!fs::is_directory(folder, ec))
    throw UsageError(flag,
                     fmt::format("cannot write '{}': the folder '{}' does not exist", path, folder.string()));
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    throw UsageError(
        flag, fmt::format("cannot write '{}': the folder '{}' is not writable", path, folder.string()));
}

void require_different_files(const std::string& flag, const std::string& a, const std::string& b) {
  std::error_code ec;
  const bool same = fs::exists(a, ec) && fs::exists(b, ec)
                        ? fs::equivalent(a, b, ec)
                        : fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
  if (same) throw UsageError(flag, fmt::format("'{}' is the file being read: write to another file", b));
}

OutputDir::OutputDir(const std::string& flag, const std::string& path)
    : path_(path), exceptions_(std::uncaught_exceptions()) {
  if (path.empty()) throw UsageError(flag, "the folder name is empty");
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_directory(path, ec))
    throw UsageError(flag, fmt::format("'{}' exists and is not a folder", path));
  existing_ancestor(flag, path, &created_);
  fs::create_directories(path, ec);
  if (ec) throw UsageError(flag, fmt::format("cannot make the folder '{}' ({})", path, ec.message()));
}

OutputDir::~OutputDir() {
  if (std::uncaught_exceptions() <= exceptions_) return;
  std::error_code ec;
  for (auto it = created_.rbegin(); it != created_.rend(); ++it)
    if (fs::is_directory(*it, ec) && fs::is_empty(*it, ec)) fs::remove(*it, ec);
}

}  // namespace saccade::examples::cli
