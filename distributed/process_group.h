#pragma once
// The processes of a data-parallel job and the collectives they speak: the one seam between saccade and a
// communication library. saccade writes no transport of its own: on CPU tensors the group is MPI's world
// communicator (process_group_mpi.cpp, when CMake found MPI; process_group_local.cpp otherwise, a world of
// one process). A NCCL group for device tensors would be a second implementation of ProcessGroup
// (allreduce_sum on a CUDA stream, Work::test polling its event); it is not written: there is no GPU here.
//
// Typical use (mpirun -np 4 ./train):
//
//     int main(int argc, char** argv) {
//       distributed::Environment env(&argc, &argv);   // MPI_Init_thread; MPI_Finalize at scope exit
//       ... distributed::rank(), distributed::world_size(), distributed::barrier() ...
//     }
//
// Faults: an exception that escapes main, or any error before Environment's destructor on one rank, aborts
// the whole job (MPI_Abort) with a message naming the rank; a rank that dies makes mpirun kill the others;
// a collective that does not complete within its timeout throws saccade::Error (see Work::wait).
#include <cstdint>
#include <memory>
#include <string>

#include "ops/tensor.h"

namespace saccade::distributed {

/// A collective in flight (MPI_Request). Not copyable; waiting twice is allowed.
class Work {
 public:
  virtual ~Work() = default;
  /// True once the collective finished; drives its progress (MPI progresses non-blocking collectives only
  /// inside MPI calls, so calling test() from backward's hooks is what makes communication overlap).
  virtual bool test() = 0;
  /// Blocks until the collective finished, polling test() and sleeping between polls (no core is held
  /// spinning). Throws saccade::Error naming `what` after `timeout_s` seconds: a peer died or hung.
  void wait(double timeout_s, const std::string& what);

 protected:
  /// Called when wait() gives up: the collective may never finish, so destroying the Work must not block.
  virtual void abandon() {}
};

/// The processes of a job and their collectives, as torch.distributed's ProcessGroup. Every rank must call
/// the same collectives in the same order (MPI's rule).
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  /// This process's index in [0, size()).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The name of the transport: "mpi" or "local".
  virtual std::string backend() const = 0;
  /// Overwrites `t` (contiguous CPU float32/float64/int64) on every rank with rank `root`'s values.
  /// Blocking. Throws saccade::Error naming "broadcast" for another device, dtype or a non-contiguous tensor.
  virtual void broadcast(Tensor& t, int root = 0) = 0;
  /// Starts an in-place sum of `t` (contiguous CPU float32/float64) over all ranks: when the returned Work
  /// finished, every rank's `t` holds the sum (MPI_Iallreduce with MPI_SUM). `t` must not be read or written
  /// until then. Throws saccade::Error naming "allreduce" as broadcast does.
  virtual std::unique_ptr<Work> allreduce_sum(Tensor& t) = 0;
  /// Returns when every rank has called it (MPI_Ibarrier, waited on). Throws saccade::Error after
  /// `timeout_s` seconds (0: default_timeout()).
  virtual void barrier(double timeout_s = 0) = 0;
  /// Ends the whole job now with `message` on stderr (MPI_Abort): for errors seen by one rank only.
  [[noreturn]] virtual void abort(const std::string& message, int code = 1) = 0;
};

/// Initialises the communication library from the environment mpirun sets up (MPI_Init_thread, asking for
/// MPI_THREAD_FUNNELED: only the main thread calls MPI; pool threads never do) and installs a
/// std::terminate handler that aborts the whole job naming the rank and the exception. Idempotent. Without
/// MPI (or when the program was not started by mpirun) the world is this one process.
void init(int* argc = nullptr, char*** argv = nullptr);
/// True after init() and before finalize().
bool is_initialized();
/// True when saccade was built with MPI (SACCADE_MPI).
bool mpi_available();
/// Finalises MPI after a barrier without a practical time limit (ranks may finish at very different times,
/// e.g. while rank 0 alone evaluates; a dead peer is still caught by mpirun). Idempotent.
void finalize();

/// The world: every process of the job. Throws saccade::Error naming "distributed" before init().
ProcessGroup& world();
/// world().rank() / size(); 0 and 1 before init(), so single-process code can ask freely.
int rank();
int world_size();
/// rank() == 0: the process that prints and writes checkpoints.
bool is_main_process();
/// world().barrier(); a no-op before init().
void barrier();

/// RAII for init/finalize (boost::mpi::environment's pattern). The destructor finalises on a normal exit
/// and aborts the job (MPI_Abort) when it runs because an exception is unwinding: the other ranks would
/// otherwise wait for this one forever.
class Environment {
 public:
  Environment(int* argc = nullptr, char*** argv = nullptr) { init(argc, argv); }
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;
};

/// Seconds a collective may take before Work::wait throws: $SACCADE_DIST_TIMEOUT, default 300.
double default_timeout();

}  // namespace saccade::distributed
