// What a Profile gives back: the Chrome trace, the key_averages-like table, time by op family.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "profiler/profiler.h"

namespace saccade::profiler {

namespace {

double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

// Each event's time minus that of its children on the same thread (the pool's tasks excepted: they are the
// enclosing op's own work). Events are sorted by thread, start, longest first (Profile::collect).
std::vector<int64_t> self_times(const std::vector<Event>& events) {
  std::vector<int64_t> self(events.size());
  std::vector<size_t> stack;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    self[i] = e.duration_ns();
    while (!stack.empty() && (events[stack.back()].tid != e.tid || events[stack.back()].end_ns <= e.start_ns))
      stack.pop_back();
    if (!stack.empty() && std::strcmp(e.category, "pool") != 0) self[stack.back()] -= e.duration_ns();
    stack.push_back(i);
  }
  return self;
}

bool is_backward_node(const Event& e) { return std::strcmp(e.category, "backward") == 0; }

}  // namespace

void Profile::export_chrome_trace(const std::string& path) {
  stop();
  const std::string partial = path + ".partial";
  std::ofstream out(partial, std::ios::trunc);
  SACCADE_CHECK(out.good(), "profiler::export_chrome_trace: cannot write '{}' ({})", path,
                std::strerror(errno));
  using nlohmann::json;
  const int pid = static_cast<int>(::getpid());
  bool first = true;
  auto emit = [&](const json& j) {
    out << (first ? "\n" : ",\n") << j.dump();
    first = false;
  };
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  emit({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", "saccade"}}}});
  for (size_t t = 1; t < thread_names_.size(); ++t) {
    if (thread_names_[t].empty()) continue;  // a thread that ended before this profile
    emit({{"name", "thread_name"},
          {"ph", "M"},
          {"pid", pid},
          {"tid", t},
          {"args", {{"name", thread_names_[t]}}}});
    emit({{"name", "thread_sort_index"},
          {"ph", "M"},
          {"pid", pid},
          {"tid", t},
          {"args", {{"sort_index", t}}}});
  }
  // arrows only where both ends were recorded
  std::map<uint64_t, const Event*> flow_ends;
  for (const Event& e : events_)
    if (e.flow_in) flow_ends[e.flow_in] = &e;
  for (const Event& e : events_) {
    json args = json::object();
    if (!e.shapes.empty()) args["input_shapes"] = e.shapes;
    if (e.flops) args["flops"] = e.flops;
    if (e.bytes) args["bytes"] = e.bytes;
    json j = {{"name", e.name},
              {"cat", e.category},
              {"ph", "X"},
              {"ts", us(e.start_ns)},
              {"dur", us(e.duration_ns())},
              {"pid", pid},
              {"tid", e.tid},
              {"args", args}};
    emit(j);
    if (e.flow_out && flow_ends.count(e.flow_out)) {
      const Event& b = *flow_ends[e.flow_out];
      emit({{"name", "forward to backward"},
            {"cat", "flow"},
            {"ph", "s"},
            {"id", e.flow_out},
            {"ts", us(e.start_ns)},
            {"pid", pid},
            {"tid", e.tid}});
      emit({{"name", "forward to backward"},
            {"cat", "flow"},
            {"ph", "f"},
            {"bp", "e"},
            {"id", e.flow_out},
            {"ts", us(b.start_ns)},
            {"pid", pid},
            {"tid", b.tid}});
    }
  }
  // one counter track per device: bytes allocated since the profile started (frees of older blocks count)
  std::map<std::string, int64_t> level;
  for (const MemoryEvent& m : memory_) {
    int64_t& v = level[m.device];
    v += m.delta;
    emit({{"name", fmt::format("memory {} (bytes since start)", m.device)},
          {"ph", "C"},
          {"ts", us(m.ts_ns)},
          {"pid", pid},
          {"args", {{"bytes", v}}}});
  }
  out << "\n]}\n";
  out.close();
  if (!out) {
    std::filesystem::remove(partial);
    throw Error(fmt::format("profiler::export_chrome_trace: writing '{}' failed", path));
  }
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  SACCADE_CHECK(!ec, "profiler::export_chrome_trace: cannot rename '{}' to '{}' ({})", partial, path,
                ec.message());
}

std::string Profile::table(const std::string& sort_by, int row_limit) {
  static const char* kKeys[] = {"self_cpu_time_total", "cpu_time_total", "count", "flops", "bytes"};
  SACCADE_CHECK(
      std::find(std::begin(kKeys), std::end(kKeys), sort_by) != std::end(kKeys),
      "profiler::Profile::table: unknown sort_by '{}' (expected self_cpu_time_total, cpu_time_total, "
      "count, flops or bytes)",
      sort_by);
  stop();
  struct Row {
    std::string name;
    int64_t calls = 0, self_ns = 0, total_ns = 0, flops = 0, bytes = 0;
  };
  std::map<std::string, Row> rows;
  const std::vector<int64_t> self = self_times(events_);
  int64_t all_self = 0;
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    if (std::strcmp(e.category, "pool") == 0)
      continue;  // in their lanes of the trace; the op holds their time
    Row& r = rows[e.name];
    r.name = e.name;
    ++r.calls;
    r.self_ns += self[i];
    r.total_ns += e.duration_ns();
    r.flops += e.flops;
    r.bytes += e.bytes;
    all_self += self[i];
  }
  std::vector<Row> sorted;
  for (auto& [name, r] : rows) sorted.push_back(r);
  auto key = [&](const Row& r) -> int64_t {
    if (sort_by == "cpu_time_total") return r.total_ns;
    if (sort_by == "count") return r.calls;
    if (sort_by == "flops") return r.flops;
    if (sort_by == "bytes") return r.bytes;
    return r.self_ns;
  };
  std::stable_sort(sorted.begin(), sorted.end(), [&](const Row& a, const Row& b) { return key(a) > key(b); });
  if (row_limit > 0 && sorted.size() > static_cast<size_t>(row_limit)) sorted.resize(row_limit);
  std::string s =
      fmt::format("{:<28} {:>8} {:>11} {:>7} {:>11} {:>10} {:>11} {:>9} {:>11} {:>7}\n", "Name", "Calls",
                  "Self (ms)", "Self %", "Total (ms)", "Avg (us)", "FLOPs", "GFLOP/s", "Bytes", "GB/s");
  s += std::string(s.size() - 1, '-') + "\n";
  for (const Row& r : sorted) {
    const double total = static_cast<double>(r.total_ns);
    s += fmt::format("{:<28} {:>8} {:>11.3f} {:>6.1f}% {:>11.3f} {:>10.1f} {:>11} {:>9} {:>11} {:>7}\n",
                     r.name.size() > 28 ? r.name.substr(0, 25) + "..." : r.name, r.calls, r.self_ns / 1e6,
                     all_self ? 100.0 * r.self_ns / all_self : 0.0, r.total_ns / 1e6, total / 1e3 / r.calls,
                     r.flops ? fmt::format("{:.4g}", double(r.flops)) : "-",
                     r.flops && total > 0 ? fmt::format("{:.2f}", r.flops / total) : "-",
                     r.bytes ? fmt::format("{:.4g}", double(r.bytes)) : "-",
                     r.bytes && total > 0 ? fmt::format("{:.2f}", r.bytes / total) : "-");
  }
  s += fmt::format("Self time total: {:.3f} ms\n", all_self / 1e6);
  return s;
}

std::vector<Profile::FamilyTime> Profile::time_by_family() {
  stop();
  const std::vector<int64_t> self = self_times(events_);
  std::map<std::string, FamilyTime> by;
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    const double s = self[i] / 1e9;
    if (std::strcmp(e.category, "forward") == 0) {
      by[family_of(e.name)].forward_s += s;
    } else if (is_backward_node(e) || std::strcmp(e.category, "op_in_backward") == 0) {
      by[family_of(e.name)].backward_s += s;
    } else if (std::strcmp(e.category, "optimizer") == 0 || std::strcmp(e.category, "scheduler") == 0) {
      by["optimizer"].other_s += s;
    } else if (std::strcmp(e.category, "allreduce") == 0) {
      by["all-reduce"].other_s += s;
    }
  }
  std::vector<FamilyTime> out;
  for (auto& [family, t] : by) {
    t.family = family;
    out.push_back(t);
  }
  std::sort(out.begin(), out.end(), [](const FamilyTime& a, const FamilyTime& b) {
    return a.forward_s + a.backward_s + a.other_s > b.forward_s + b.backward_s + b.other_s;
  });
  return out;
}

const char* family_of(const std::string& name) {
  // "MaxPool2dBackward" and "max_pool2d" both become "maxpool2d"
  std::string k;
  for (char c : name)
    if (c != '_') k += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (k.size() > 8 && k.ends_with("backward")) k.resize(k.size() - 8);
  static const std::vector<std::pair<const char*, std::vector<std::string>>> kFamilies = {
      {"GEMM", {"matmul", "mm", "bmm", "linear", "addmm", "linearq80"}},
      {"convolution", {"conv2d", "conv2dinputgrad", "conv2dweightgrad", "maxpool2d", "avgpool2d"}},
      {"normalization", {"layernorm", "rmsnorm"}},
      {"softmax", {"softmax", "logsoftmax", "maskedsoftmax", "logsumexp"}},
      {"loss", {"crossentropy", "mseloss"}},
      {"reduction", {"sum", "mean", "max", "min", "amax", "amin", "prod", "var"}},
      {"shape", {"view",      "reshape", "permute", "transpose",        "squeeze",
                 "unsqueeze", "expand",  "flatten", "contiguous",       "cat",
                 "stack",     "split",   "chunk",   "narrow",           "slice",
                 "select",    "t",       "repeat",  "repeatinterleave", "to"}},
      {"indexing", {"embedding", "gather", "indexselect", "indexadd", "scatteradd"}},
  };
  if (k.find("attention") != std::string::npos) return "attention";
  for (const auto& [family, names] : kFamilies)
    if (std::find(names.begin(), names.end(), k) != names.end()) return family;
  // clang-format off
  static const std::vector<std::string> kElementwise = {
      "add",  "sub",  "mul",     "div",        "pow",     "neg",  "exp",  "log",     "sin",
      "cos",  "tanh", "sigmoid", "relu",       "gelu",    "abs",  "sqrt", "rsqrt",   "clamp",
      "rsub", "rdiv", "where",   "maskedfill", "dropout", "tril", "triu", "grugates", "silu",
      "swiglu", "rotaryembedding"};
  // clang-format on
  if (std::find(kElementwise.begin(), kElementwise.end(), k) != kElementwise.end()) return "elementwise";
  return "other";
}

}  // namespace saccade::profiler
