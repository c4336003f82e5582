// A data-parallel run in which one rank fails at step 3, for the fault tests (tests/distributed/CMakeLists):
//   ddp_fault throw   rank 1 throws: the job aborts, naming the rank and the error
//   ddp_fault kill    rank 1 is killed (SIGKILL): mpirun ends the others
//   ddp_fault hang    rank 1 stops communicating: the others time out (SACCADE_DIST_TIMEOUT) with an error
// In every case the job must end, with a non-zero status, well within CTest's timeout.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "autograd/functions/nn.h"
#include "distributed/data_parallel.h"
#include "distributed/rank_zero.h"
#include "nn/linear.h"
#include "nn/optim.h"
#include "ops/creation.h"
#include "ops/random.h"

using namespace saccade;
namespace dist = saccade::distributed;

int main(int argc, char** argv) {
  dist::Environment env(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "throw";
  nn::Linear model(4, 2);
  dist::DistributedDataParallel ddp(model);
  nn::SGD opt(model.parameters(), {.lr = 0.1});
  for (int step = 0; step < 1000; ++step) {
    if (step == 3 && dist::rank() == 1) {
      if (mode == "throw") throw Error("ddp_fault: injected error on rank 1");
      if (mode == "kill") std::raise(SIGKILL);
      if (mode == "hang") pause();  // until the job is torn down
    }
    Generator gen(step);
    Variable loss =
        mse_loss(model.forward(ops::randn({8, 4}, DType::Float32, Device::cpu(), &gen)), ops::zeros({8, 2}));
    opt.zero_grad();
    loss.backward();
    ddp.synchronize();
    opt.step();
    dist::print(stdout, "step {} loss {:.4f}\n", step, loss.item<double>());
  }
  return 0;
}
