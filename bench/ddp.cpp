// bench/ddp: data-parallel training speed of the image captioner (sat, default size) on this machine.
// Run under mpirun with one thread per rank; bench/ddp.sh runs -np 1 and -np 2 and prints the scaling.
//   mpirun -np 2 build/bench/ddp [--steps 30] [--batch-size 64]
// Prints (rank 0): ranks, global batch, steps/s, and the share of the step spent waiting in
// DistributedDataParallel::synchronize() (communication plus waiting for the slower rank).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "distributed/process_group.h"
#include "distributed/rank_zero.h"
#include "examples/common/idx.h"
#include "examples/image_caption/captioner.h"
#include "examples/image_caption/training.h"
#include "ops/threads.h"

namespace ex = saccade::examples;
namespace dist = saccade::distributed;

int main(int argc, char** argv) {
  dist::Environment env(&argc, &argv);
  int64_t steps = 30, batch = 64, warmup = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--batch-size")) batch = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--warmup")) warmup = std::atoll(argv[i + 1]);
  }
  saccade::set_num_threads(1);
  ex::ImageSet train = ex::load_fashion_mnist("train", ex::kFashionMnistDir);
  auto model = ex::make_captioner(ex::CaptionConfig::defaults("sat"), 0);
  ex::TrainOptions opts;
  opts.batch_size = batch;
  opts.distributed = true;
  opts.log = nullptr;
  opts.warmup = 0;
  opts.steps = warmup;  // first touches of every buffer, not measured
  ex::train_captioner(*model, train, opts);
  opts.steps = steps;
  opts.seed = 1;
  ex::TrainResult r = ex::train_captioner(*model, train, opts);
  dist::print(stdout, "ranks {} global_batch {} steps {} steps_per_s {:.3f} comm_wait_share {:.3f}\n",
              dist::world_size(), batch, steps, r.steps_done / r.seconds, r.comm_wait_seconds / r.seconds);
  return 0;
}
