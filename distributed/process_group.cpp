// What every transport shares: the world's lifetime, waiting with a timeout, and the rank-0 shortcuts.
// The transport itself is process_group_mpi.cpp (built with MPI) or process_group_local.cpp (without).
#include "distributed/process_group.h"

#include <chrono>
#include <climits>
#include <cstdlib>
#include <exception>
#include <thread>

#include "distributed/transport.h"
#include "core/error.h"

namespace saccade::distributed {
namespace {
std::unique_ptr<ProcessGroup>& world_ptr() {
  static std::unique_ptr<ProcessGroup> world;  // the one process-wide communicator, like MPI_COMM_WORLD
  return world;
}

// Abort the job, not only this rank, when an exception escapes main on any rank.
void terminate_job() {
  std::string what = "unknown exception";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
  }
  if (world_ptr())
    world_ptr()->abort(fmt::format("saccade.distributed: rank {} of {} terminated: {}", world_ptr()->rank(),
                                   world_ptr()->size(), what));
  std::abort();
}
}  // namespace

void Work::wait(double timeout_s, const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Poll: a short yield loop first (most collectives of a step finish in microseconds), then sleep, so a
  // rank waiting for a slow peer leaves the core to it (2 ranks on 2 busy cores).
  for (int polls = 0; !test(); ++polls) {
    double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited >= timeout_s) abandon();
    SACCADE_CHECK(waited < timeout_s,
                  "{}: did not complete within {} s on rank {} of {}: another rank died, hung or called "
                  "different collectives (set SACCADE_DIST_TIMEOUT to wait longer)",
                  what, timeout_s, rank(), world_size());
    if (polls < 200)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void detail::check_buffer(const Tensor& t, const char* op, bool float_only) {
  SACCADE_CHECK(t.defined(), "{}: undefined tensor", op);
  SACCADE_CHECK(t.device().is_cpu(),
                "{}: tensor on {}: this group takes CPU tensors (device tensors need a NCCL group)", op,
                t.device().str());
  SACCADE_CHECK(t.is_contiguous(), "{}: tensor of shape {} is not contiguous", op, t.shape());
  SACCADE_CHECK(t.numel() <= INT_MAX, "{}: {} elements exceed MPI's int count", op, t.numel());
  // NOTE: 16-bit tensors are refused, not reduced: MPI has no bfloat16 sum, and summing in 16 bits would
  // round at every hop. Training keeps f32 master weights (and so f32 gradients) under autocast.
  SACCADE_CHECK((is_floating(t.dtype()) && !is_half(t.dtype())) || (!float_only && t.dtype() == DType::Int64),
                "{}: dtype {} is not supported ({}; convert 16-bit tensors to float32 first)", op, t.dtype(),
                float_only ? "float32, float64" : "float32, float64, int64");
}

void init(int* argc, char*** argv) {
  if (world_ptr()) return;
  world_ptr() = detail::start(argc, argv);
  std::set_terminate(terminate_job);
}

bool is_initialized() { return world_ptr() != nullptr; }

void finalize() {
  if (!world_ptr()) return;
  world_ptr()->barrier(/*timeout_s=*/24 * 3600.0);
  world_ptr().reset();
  detail::stop();
}

ProcessGroup& world() {
  SACCADE_CHECK(world_ptr() != nullptr,
                "distributed: call distributed::init() (or make an Environment) first");
  return *world_ptr();
}

int rank() { return world_ptr() ? world_ptr()->rank() : 0; }
int world_size() { return world_ptr() ? world_ptr()->size() : 1; }
bool is_main_process() { return rank() == 0; }
void barrier() {
  if (world_ptr()) world_ptr()->barrier();
}

Environment::~Environment() {
  if (std::uncaught_exceptions() > 0 && world_ptr() && world_ptr()->size() > 1)
    world_ptr()->abort(fmt::format("saccade.distributed: rank {} of {} left with an exception in flight",
                                   world_ptr()->rank(), world_ptr()->size()));
  finalize();
}

double default_timeout() {
  const char* env = std::getenv("SACCADE_DIST_TIMEOUT");
  double t = env ? std::atof(env) : 0;
  return t > 0 ? t : 300.0;
}

}  // namespace saccade::distributed
