#pragma once
// saccade's op-level profiler: what ran, on which thread, for how long, how many FLOPs, how much memory.
//
//   {
//     profiler::Profile prof({.record_shapes = true, .profile_memory = true, .with_flops = true,
//                             .trace_path = "trace.json"});    // refused here if trace.json can't be written
//     loss = model.forward(x); loss.backward(); opt.step();
//   }                                                          // trace.json written (Perfetto,
//   chrome://tracing) std::cout << prof.table("self_cpu_time_total", 15);       // like torch's
//   key_averages().table()
//
// It sits below ops/ (profiler/ knows no tensors: names, times, numbers), so that the allocator and the
// thread pool can report to it. What records itself: every saccade:: op's forward (autograd/profiling.h,
// from the op's first-line check and its make_result), every backward node (the engine), optimizer steps,
// schedulers, the data-parallel all-reduces, the thread pool's tasks, the allocator (a memory counter).
//
// Cost when no profile is active: one relaxed atomic load (is_active()) per recorded place. Always compiled.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace saccade::profiler {

/// What a Profile records besides names and times (torch.profiler.profile's options of the same names).
struct ProfileOptions {
  bool record_shapes = false;  ///< each forward op's input shapes, as "[[2, 3], [3, 4]]"
  bool profile_memory =
      false;                ///< every allocation and free of tensor storage, as a counter track per device
  bool with_flops = false;  ///< FLOPs of GEMMs, convolutions and attention; bytes of the other ops
  /// When not empty: the Chrome trace is written there when the profile stops. The file is created (empty)
  /// when the profile starts, so a path that cannot be written throws saccade::Error then, before any work;
  /// the trace is written to "<path>.partial" and renamed over `path` only once complete.
  std::string trace_path = {};
};

/// One timed range on one thread. Times in nanoseconds since the profile started.
struct Event {
  const char* name = "";      ///< the op ("matmul"), node ("MatmulBackward") or range name; lives forever
  const char* category = "";  ///< "forward", "backward", "op_in_backward", "user", "optimizer", "pool", ...
  int64_t start_ns = 0, end_ns = 0;
  int tid = 0;            ///< saccade's thread number (1, 2, ... in the order threads first recorded)
  int64_t flops = 0;      ///< floating-point operations (with_flops; GEMM, conv2d, attention)
  int64_t bytes = 0;      ///< bytes read and written (with_flops; ops counted by bytes rather than FLOPs)
  uint64_t flow_out = 0;  ///< nonzero on a forward op whose node ran backward: the arrow's id
  uint64_t flow_in = 0;   ///< on a backward node: the id of the arrow from its forward op
  std::string shapes;     ///< input shapes (record_shapes)
  int64_t duration_ns() const { return end_ns - start_ns; }
};

/// One allocation (delta > 0) or free (delta < 0) of tensor storage on `device` ("cpu", "cuda").
struct MemoryEvent {
  int64_t ts_ns = 0;
  int64_t delta = 0;
  int tid = 0;
  const char* device = "";
};

/// A profiling session: records from construction until stop() (or destruction), on every thread of the
/// process. One at a time: constructing a Profile while another is active throws saccade::Error (profiles
/// do not nest; put RecordFunction ranges inside one instead). Throws saccade::Error when
/// options.trace_path cannot be created. Not copyable; its results (events(), table(), the trace) are read
/// after stop(), which each of them calls first.
class Profile {
 public:
  explicit Profile(ProfileOptions options = {});
  ~Profile();  // stops; writes options.trace_path (an error is printed on stderr: destructors don't throw)
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  /// Stops recording, collects every thread's events and writes options.trace_path if set (throws
  /// saccade::Error when the write fails; nothing half-written is left at the path). Idempotent.
  void stop();
  const ProfileOptions& options() const { return options_; }
  /// The recorded ranges, sorted by thread, then start time (outer before inner).
  const std::vector<Event>& events();
  /// Every allocation and free, in time order (profile_memory).
  const std::vector<MemoryEvent>& memory_events();
  /// Thread names by saccade thread number (index 0 unused): "thread 1", "pool worker 1", ...
  const std::vector<std::string>& thread_names();
  /// Writes the Chrome Trace Event Format JSON (complete events "X", a memory counter "C" per device,
  /// flow arrows "s"/"f" from each forward op to its backward node, thread names "M"). Opens in
  /// https://ui.perfetto.dev and chrome://tracing. Throws saccade::Error naming `path` when it can't be
  /// written; writes "<path>.partial" then renames it, so `path` is never half-written.
  void export_chrome_trace(const std::string& path);
  /// The events aggregated by name, as torch's key_averages().table(): calls, self and total time (ms),
  /// FLOPs, achieved GFLOP/s (FLOPs / total time), bytes, and GB/s. sort_by: "self_cpu_time_total" (default),
  /// "cpu_time_total", "count", "flops", "bytes"; row_limit rows (<= 0: all). Self time is a range's time
  /// minus its children's on the same thread (the thread pool's tasks are not children: they are the op's
  /// own work, shown in their own lanes). Throws saccade::Error on an unknown sort_by.
  std::string table(const std::string& sort_by = "self_cpu_time_total", int row_limit = 20);
  /// Seconds spent per op family ("GEMM", "attention", "elementwise", ...: family_of) in forward ops and in
  /// backward nodes, self time, summed over threads. Families in decreasing total.
  struct FamilyTime {
    std::string family;
    double forward_s = 0, backward_s = 0, other_s = 0;
  };
  std::vector<FamilyTime> time_by_family();

 private:
  void collect();
  ProfileOptions options_;
  bool stopped_ = false;
  std::vector<Event> events_;
  std::vector<MemoryEvent> memory_;
  std::vector<std::string> thread_names_;
};

namespace detail {
struct Interned {};
}  // namespace detail

/// A user range, recorded while a profile is active: RecordFunction r("data loading"); ... (until scope end).
/// `category` must be a string literal (or otherwise outlive the program's profiles). Costs one relaxed
/// atomic load when no profile is active.
class RecordFunction {
 public:
  explicit RecordFunction(const char* name, const char* category = "user");
  explicit RecordFunction(const std::string& name, const char* category = "user");
  /// For a name from detail::intern (or a string literal): no copy is made.
  RecordFunction(detail::Interned, const char* name, const char* category);
  ~RecordFunction();
  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;
  /// FLOPs / bytes to report for this range (with_flops).
  void set_cost(int64_t flops, int64_t bytes) { flops_ = flops, bytes_ = bytes; }
  /// The arrow coming into this range (a backward node's, from its forward op).
  void set_flow_in(uint64_t id) { flow_in_ = id; }

 private:
  void begin(const char* interned_name, const char* category);
  const char* name_ = nullptr;  // nullptr: not recording
  const char* category_ = "";
  int64_t start_ns_ = 0;
  int64_t flops_ = 0, bytes_ = 0;
  uint64_t flow_in_ = 0;
  uint64_t nvtx_ = 0;
  uint64_t generation_ = 0;
};

/// The op family of an op or node name, for summaries: "GEMM" (matmul mm bmm linear linear_q8_0), "attention",
/// "convolution" (conv2d and pooling), "normalization" (layer_norm, rms_norm), "softmax", "loss",
/// "elementwise" (rotary_embedding, silu and swiglu included), "reduction",
/// "shape" (views and copies), "indexing", "optimizer", "other". A backward node has its op's family.
const char* family_of(const std::string& name);

/// Throws saccade::Error ("`who`: cannot write the trace file '<path>' (<reason>)") when a file can't be
/// created at `path` (the directory is missing or not writable); leaves nothing behind. Profile calls it when
/// it starts; a program can call it before it starts its work (the examples' --profile).
void check_trace_path(const std::string& path, const char* who = "profiler::Profile");

/// Names the calling thread in traces ("pool worker 1"); the name is kept for the thread's lifetime.
void set_thread_name(const std::string& name);

namespace detail {
extern std::atomic<bool> g_active;
}  // namespace detail

/// Whether a profile is recording: one relaxed atomic load, the only cost of the profiler when it is off.
inline bool is_active() noexcept { return detail::g_active.load(std::memory_order_relaxed); }

/// The active profile's options (meaningful only while is_active()).
const ProfileOptions& active_options();

namespace detail {
// The low-level recording interface used by autograd/profiling.h, the engine, the allocator and the pool.
// All of them are called only after is_active() returned true, and are safe to call from any thread.
int64_t now_ns();
/// A stable copy of `name` (interned once; the pointer lives forever).
const char* intern(const std::string& name);
/// The number of the current profile (0: none); stale ranges of an earlier profile are dropped by it.
uint64_t generation();
/// Appends a finished range to the calling thread's buffer (dropped if `generation` is not the current one).
void record(Event e, uint64_t generation);
/// An allocation (+bytes) or free (-bytes) of tensor storage, when profile_memory is on.
void record_memory(int64_t delta, const char* device);
/// The name of the innermost open range on this thread (for naming the pool's tasks); "" when none.
const char* current_range();
void push_range(const char* name, int64_t start_ns);
void pop_range();
/// Open forward ops of this thread (autograd's OpScope, autograd/function.h): begin_op opens one and returns
/// its id (never 0); end_op records the open op `id` as `op` (ops opened above it and never closed are
/// dropped; with `id` not open, 0 included, it records a zero-length event); discard_op closes the open op
/// `id` without recording it (nothing when it is not open): an op that threw, a composite whose parts record
/// themselves, or one that handed itself on to a second call (autocast's redispatch).
uint64_t begin_op(const char* op, std::string shapes);
void end_op(uint64_t id, const char* op, int64_t flops, int64_t bytes, uint64_t flow_out);
void discard_op(uint64_t id);
/// How many forward ops are open on the calling thread (tests).
size_t open_ops();
/// A new arrow id.
uint64_t next_flow_id();
/// Whether the calling thread is inside a backward node (then ops are category "op_in_backward").
bool in_backward();
void set_in_backward(bool on);
/// NVTX ranges (CUDA builds; no-ops otherwise): start returns an id for end.
uint64_t nvtx_start(const char* name);
void nvtx_end(uint64_t id);
/// Appends a finished range to a lane of its own named `lane` (not a thread: e.g. "cuda stream", whose
/// kernels' GPU times are known only at stop()), made on first use.
void record_lane(const std::string& lane, Event e);
/// Runs at stop() before events are collected (the CUDA backend registers one that reads its kernel timers).
void add_stop_hook(void (*hook)());
}  // namespace detail

}  // namespace saccade::profiler
