// The data-parallel tests' main: one Catch2 session per rank, inside an MPI environment. Run under
// `mpirun -np N` (CTest does, for N = 2 and 4) or alone (a world of one process).
#include "tests/catch_session.h"

#include <string>

#include "distributed/process_group.h"

int main(int argc, char** argv) {
  saccade::distributed::Environment env(&argc, &argv);
  int failed = saccade::testing::run_catch_session(argc, argv);
  // A rank whose test failed must not leave the others waiting in a collective: end the job.
  if (failed && saccade::distributed::world_size() > 1)
    saccade::distributed::world().abort("test_ddp: a test failed on rank " +
                                        std::to_string(saccade::distributed::rank()));
  return failed;
}
