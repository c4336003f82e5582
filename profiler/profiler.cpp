// The recorder: per-thread buffers, the open-range stacks, and Profile's start and stop.
//
// Each thread appends to its own buffer (a mutex it alone takes while recording, so uncontended); stop()
// takes each buffer's mutex once to move its events out. Buffers are shared_ptrs held by a registry too, so
// the events of a thread that ended during the profile are kept. A generation number tells ranges opened
// under an earlier profile from the current one's.
#include "profiler/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "core/error.h"

namespace saccade::profiler {

namespace detail {
std::atomic<bool> g_active{false};
}  // namespace detail

namespace {

struct ThreadBuffer {
  std::mutex mutex;
  std::vector<Event> events;
  std::vector<MemoryEvent> memory;
  int tid = 0;
  std::string name;
};

struct OpenOp {
  uint64_t id;  // begin_op's answer: how end_op and discard_op find it
  const char* op;
  int64_t start_ns;
  std::string shapes;
  uint64_t generation;
  uint64_t nvtx;
};

struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  int next_tid = 1;
  ProfileOptions options;
  std::atomic<uint64_t> generation{0};
  std::atomic<uint64_t> next_flow{0};
  std::atomic<int64_t> epoch_ns{0};
  std::vector<void (*)()> stop_hooks;
};

// NOTE: never destroyed: pool threads may record while static destructors run.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

thread_local std::string tls_name;
thread_local std::shared_ptr<ThreadBuffer> tls_buffer;
thread_local std::vector<std::pair<const char*, int64_t>> tls_ranges;  // name, start
thread_local std::vector<OpenOp> tls_ops;
thread_local uint64_t tls_next_op_id = 0;
thread_local bool tls_in_backward = false;

ThreadBuffer& buffer() {
  if (!tls_buffer) {
    auto b = std::make_shared<ThreadBuffer>();
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    b->tid = r.next_tid++;
    b->name = tls_name.empty() ? fmt::format("thread {}", b->tid) : tls_name;
    r.buffers.push_back(b);
    tls_buffer = std::move(b);
  }
  return *tls_buffer;
}

// Open forward ops beyond this many are dropped from the bottom (ops that never made a result: composites,
// errors), so the stack stays small however long the profile.
constexpr size_t kMaxOpenOps = 64;

}  // namespace

namespace detail {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
             .count() -
         registry().epoch_ns.load(std::memory_order_relaxed);
}

const char* intern(const std::string& name) {
  static std::mutex mutex;
  static auto* names = new std::unordered_set<std::string>;  // NOTE: never freed: pointers handed out live on
  std::lock_guard<std::mutex> lock(mutex);
  return names->insert(name).first->c_str();
}

uint64_t generation() { return registry().generation.load(std::memory_order_acquire); }

void record(Event e, uint64_t gen) {
  if (gen != generation() || !is_active()) return;
  ThreadBuffer& b = buffer();
  e.tid = b.tid;
  std::lock_guard<std::mutex> lock(b.mutex);
  b.events.push_back(std::move(e));
}

void record_memory(int64_t delta, const char* device) {
  if (!registry().options.profile_memory) return;
  ThreadBuffer& b = buffer();
  MemoryEvent m{now_ns(), delta, b.tid, device};
  std::lock_guard<std::mutex> lock(b.mutex);
  b.memory.push_back(m);
}

void record_lane(const std::string& lane, Event e) {
  static std::mutex mutex;
  static auto* lanes = new std::map<std::string, std::shared_ptr<ThreadBuffer>>;  // kept: never "ended"
  std::shared_ptr<ThreadBuffer> b;
  {
    std::lock_guard<std::mutex> lock(mutex);
    std::shared_ptr<ThreadBuffer>& slot = (*lanes)[lane];
    if (!slot) {
      slot = std::make_shared<ThreadBuffer>();
      Registry& r = registry();
      std::lock_guard<std::mutex> rlock(r.mutex);
      slot->tid = r.next_tid++;
      slot->name = lane;
      r.buffers.push_back(slot);
    }
    b = slot;
  }
  e.tid = b->tid;
  std::lock_guard<std::mutex> lock(b->mutex);
  b->events.push_back(std::move(e));
}

const char* current_range() {
  // the later-opened of the innermost range and the innermost forward op
  const char* name = tls_ranges.empty() ? "" : tls_ranges.back().first;
  if (!tls_ops.empty() && (tls_ranges.empty() || tls_ops.back().start_ns >= tls_ranges.back().second))
    name = tls_ops.back().op;
  return name;
}
void push_range(const char* name, int64_t start_ns) { tls_ranges.emplace_back(name, start_ns); }
void pop_range() {
  if (!tls_ranges.empty()) tls_ranges.pop_back();
}

uint64_t begin_op(const char* op, std::string shapes) {
  if (tls_ops.size() >= kMaxOpenOps) {
    nvtx_end(tls_ops.front().nvtx);
    tls_ops.erase(tls_ops.begin());
  }
  const uint64_t id = ++tls_next_op_id;
  tls_ops.push_back({id, op, now_ns(), std::move(shapes), generation(), nvtx_start(op)});
  return id;
}

namespace {
// The index of the open op `id` on this thread, or -1 (never opened, closed, or trimmed at kMaxOpenOps).
std::ptrdiff_t find_open_op(uint64_t id) {
  for (size_t i = tls_ops.size(); id != 0 && i-- > 0;)
    if (tls_ops[i].id == id) return static_cast<std::ptrdiff_t>(i);
  return -1;
}
}  // namespace

void end_op(uint64_t id, const char* op, int64_t flops, int64_t bytes, uint64_t flow_out) {
  const int64_t end = now_ns();
  Event e;
  e.name = op;
  e.category = tls_in_backward ? "op_in_backward" : "forward";
  e.start_ns = end;
  e.end_ns = end;
  e.flops = flops;
  e.bytes = bytes;
  e.flow_out = flow_out;
  uint64_t gen = generation();
  if (const std::ptrdiff_t i = find_open_op(id); i >= 0) {
    OpenOp& o = tls_ops[static_cast<size_t>(i)];
    e.start_ns = o.start_ns;
    e.shapes = std::move(o.shapes);
    gen = o.generation;
    for (size_t j = tls_ops.size(); j-- > static_cast<size_t>(i);) nvtx_end(tls_ops[j].nvtx);
    tls_ops.resize(static_cast<size_t>(i));
  }
  record(std::move(e), gen);
}

void discard_op(uint64_t id) {
  if (const std::ptrdiff_t i = find_open_op(id); i >= 0) {
    nvtx_end(tls_ops[static_cast<size_t>(i)].nvtx);
    tls_ops.erase(tls_ops.begin() + i);
  }
}

size_t open_ops() { return tls_ops.size(); }

uint64_t next_flow_id() { return registry().next_flow.fetch_add(1, std::memory_order_relaxed) + 1; }
bool in_backward() { return tls_in_backward; }
void set_in_backward(bool on) { tls_in_backward = on; }

void add_stop_hook(void (*hook)()) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (std::find(r.stop_hooks.begin(), r.stop_hooks.end(), hook) == r.stop_hooks.end())
    r.stop_hooks.push_back(hook);
}

}  // namespace detail

const ProfileOptions& active_options() { return registry().options; }

void set_thread_name(const std::string& name) {
  tls_name = name;
  if (tls_buffer) {
    std::lock_guard<std::mutex> lock(tls_buffer->mutex);
    tls_buffer->name = name;
  }
}

// ---- RecordFunction ----

RecordFunction::RecordFunction(const char* name, const char* category) {
  if (is_active()) [[unlikely]]
    begin(detail::intern(name), category);
}

RecordFunction::RecordFunction(detail::Interned, const char* name, const char* category) {
  if (is_active()) [[unlikely]]
    begin(name, category);
}

RecordFunction::RecordFunction(const std::string& name, const char* category) {
  if (is_active()) [[unlikely]]
    begin(detail::intern(name), category);
}

void RecordFunction::begin(const char* interned_name, const char* category) {
  name_ = interned_name;
  category_ = category;
  generation_ = detail::generation();
  nvtx_ = detail::nvtx_start(name_);
  start_ns_ = detail::now_ns();
  detail::push_range(name_, start_ns_);
}

RecordFunction::~RecordFunction() {
  if (!name_) return;
  Event e;
  e.end_ns = detail::now_ns();
  detail::pop_range();
  detail::nvtx_end(nvtx_);
  e.name = name_;
  e.category = category_;
  e.start_ns = start_ns_;
  e.flops = flops_;
  e.bytes = bytes_;
  e.flow_in = flow_in_;
  detail::record(std::move(e), generation_);
}

// ---- Profile ----

void check_trace_path(const std::string& path, const char* who) {
  SACCADE_CHECK(!path.empty(), "{}: the trace file's path is empty", who);
  std::error_code ec;  // a folder's "path.partial" could be written, but the trace could never replace it
  SACCADE_CHECK(!std::filesystem::is_directory(path, ec),
                "{}: cannot write the trace file '{}' (it is a folder)", who, path);
  const std::string partial = path + ".partial";
  std::ofstream probe(partial, std::ios::trunc);
  SACCADE_CHECK(probe.good(), "{}: cannot write the trace file '{}' ({})", who, path, std::strerror(errno));
  probe.close();
  std::filesystem::remove(partial);
}

Profile::Profile(ProfileOptions options) : options_(std::move(options)) {
  // tried now so that a path that can't be written fails before the work, not after it
  if (!options_.trace_path.empty()) check_trace_path(options_.trace_path);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  SACCADE_CHECK(!detail::g_active.load(std::memory_order_acquire),
                "profiler::Profile: another profile is already active; profiles do not nest (stop the other "
                "one first, or mark ranges inside it with RecordFunction)");
  for (auto& b : r.buffers) {  // leftovers of ranges that ended after the last profile stopped
    std::lock_guard<std::mutex> block(b->mutex);
    b->events.clear();
    b->memory.clear();
  }
  r.options = options_;
  r.epoch_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count(),
                   std::memory_order_relaxed);
  r.generation.fetch_add(1, std::memory_order_acq_rel);
  detail::g_active.store(true, std::memory_order_release);
}

Profile::~Profile() {
  try {
    stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "saccade profiler: %s\n", e.what());
  }
}

void Profile::stop() {
  if (stopped_) return;
  stopped_ = true;
  std::vector<void (*)()> hooks;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    hooks = r.stop_hooks;
  }
  for (auto hook : hooks) hook();
  detail::g_active.store(false, std::memory_order_release);
  collect();
  if (!options_.trace_path.empty()) export_chrome_trace(options_.trace_path);
}

void Profile::collect() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  thread_names_.assign(r.next_tid, "");
  std::vector<std::shared_ptr<ThreadBuffer>> alive;
  for (auto& b : r.buffers) {
    std::lock_guard<std::mutex> block(b->mutex);
    thread_names_[b->tid] = b->name;
    std::move(b->events.begin(), b->events.end(), std::back_inserter(events_));
    memory_.insert(memory_.end(), b->memory.begin(), b->memory.end());
    b->events.clear();
    b->memory.clear();
    if (b.use_count() > 1) alive.push_back(b);  // a buffer only the registry holds: its thread has ended
  }
  r.buffers = std::move(alive);
  std::sort(events_.begin(), events_.end(), [](const Event& a, const Event& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.end_ns > b.end_ns;  // outer first
  });
  std::stable_sort(memory_.begin(), memory_.end(),
                   [](const MemoryEvent& a, const MemoryEvent& b) { return a.ts_ns < b.ts_ns; });
}

const std::vector<Event>& Profile::events() {
  stop();
  return events_;
}
const std::vector<MemoryEvent>& Profile::memory_events() {
  stop();
  return memory_;
}
const std::vector<std::string>& Profile::thread_names() {
  stop();
  return thread_names_;
}

}  // namespace saccade::profiler
