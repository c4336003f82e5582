// The MPI transport: the world communicator (MPI_COMM_WORLD), blocking broadcast and barrier, and the
// non-blocking in-place sum (MPI_Iallreduce) that data-parallel training overlaps with backward.
// MPI standard 3.1: MPI_Init_thread (12.4.3), MPI_Iallreduce (5.12.8), MPI_Test (3.7.3).
#define OMPI_SKIP_MPICXX 1  // the C API only: the C++ bindings are deprecated and slow to compile
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>

#include "distributed/transport.h"
#include "core/error.h"

namespace saccade::distributed {
namespace {
bool we_initialised = false;  // MPI_Init is ours to pair with MPI_Finalize (not when the host program did it)

// check_buffer admitted float32, float64 and int64 only (16-bit tensors are refused there, by name).
MPI_Datatype mpi_type(DType dtype) {
  return dtype == DType::Float32 ? MPI_FLOAT : dtype == DType::Float64 ? MPI_DOUBLE : MPI_INT64_T;
}

class MpiWork final : public Work {
 public:
  MpiWork(MPI_Request request, Tensor buffer) : request_(request), buffer_(std::move(buffer)) {}
  ~MpiWork() override {
    if (request_ == MPI_REQUEST_NULL) return;
    // A request must complete before its buffer goes (MPI 3.7.3); collectives cannot be cancelled. After a
    // timeout the peer is presumed gone and the job is about to abort: keep the buffer alive, do not block.
    if (abandoned_)
      new Tensor(buffer_);  // NOLINT: deliberately leaked
    else
      MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  bool test() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    MPI_Test(&request_, &done, MPI_STATUS_IGNORE);  // sets request_ to MPI_REQUEST_NULL when done
    return done != 0;
  }

 private:
  void abandon() override { abandoned_ = true; }
  MPI_Request request_;
  Tensor buffer_;
  bool abandoned_ = false;  // keeps the storage alive while MPI writes into it
};

class MpiGroup final : public ProcessGroup {
 public:
  MpiGroup() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  // Blocking collectives are non-blocking ones waited on with a timeout: a dead peer gives an error, not a
  // hang, and the waiting rank sleeps instead of spinning (OpenMPI's blocking calls busy-poll a core).
  void broadcast(Tensor& t, int root) override {
    detail::check_buffer(t, "broadcast", /*float_only=*/false);
    SACCADE_CHECK(root >= 0 && root < size_, "broadcast: root {} outside ranks [0, {})", root, size_);
    MPI_Request request;
    MPI_Ibcast(t.raw_data(), static_cast<int>(t.numel()), mpi_type(t.dtype()), root, MPI_COMM_WORLD,
               &request);
    MpiWork(request, t).wait(default_timeout(), "broadcast");
    t.bump_version();
  }

  std::unique_ptr<Work> allreduce_sum(Tensor& t) override {
    detail::check_buffer(t, "allreduce", /*float_only=*/true);
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), static_cast<int>(t.numel()), mpi_type(t.dtype()), MPI_SUM,
                   MPI_COMM_WORLD, &request);
    t.bump_version();
    return std::make_unique<MpiWork>(request, t);
  }

  void barrier(double timeout_s) override {
    MPI_Request request;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    MpiWork(request, Tensor()).wait(timeout_s > 0 ? timeout_s : default_timeout(), "barrier");
  }

  [[noreturn]] void abort(const std::string& message, int code) override {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this keeps the compiler's [[noreturn]] promise
  }

 private:
  int rank_ = 0, size_ = 1;
};
}  // namespace

bool mpi_available() { return true; }

namespace detail {
std::unique_ptr<ProcessGroup> start(int* argc, char*** argv) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    we_initialised = true;
    SACCADE_CHECK(
        provided >= MPI_THREAD_FUNNELED,
        "distributed::init: the MPI library gives thread level {}, saccade needs MPI_THREAD_FUNNELED",
        provided);
  }
  return std::make_unique<MpiGroup>();
}

void stop() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (we_initialised && !finalised) MPI_Finalize();
  we_initialised = false;
}
}  // namespace detail

}  // namespace saccade::distributed
