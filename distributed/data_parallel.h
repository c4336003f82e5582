#pragma once
// Data-parallel training: every rank holds a replica of the model, computes the gradient of its shard of the
// global batch, and the gradients are averaged across ranks before each optimizer step, so every replica
// takes the same step. The averaging is bucketed and overlapped with backward as in PyTorch's
// DistributedDataParallel (Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel
// Training", VLDB 2020, section 3.2):
//
//   - parameters are packed, in reverse registration order (roughly the order backward produces their
//     gradients), into buckets of about `bucket_cap_mb` each (3.2.3: one large all-reduce is cheaper than
//     many small ones, yet the first bucket can start while backward still runs);
//   - a gradient hook on every parameter copies its gradient into its bucket; when a bucket's last gradient
//     arrives, the bucket's non-blocking all-reduce (MPI_Iallreduce) is launched (3.2.3 "overlap"). Buckets
//     are launched strictly in index order on every rank, because MPI requires all ranks to start
//     collectives in the same order (3.2.4);
//   - synchronize(), called after backward and before the optimizer step, launches what is left (buckets
//     with a parameter that got no gradient this step: it contributes zeros, 3.2.4 "unused parameters"),
//     waits for every bucket and writes the averaged gradients (sum / world size) into the parameters;
//   - no_sync() skips communication: gradients accumulate locally, and the next synchronized step
//     all-reduces the accumulated sum (3.2.4 "gradient accumulation").
//
//     distributed::Environment env(&argc, &argv);
//     auto model = make_model();                       // any nn::Module
//     distributed::DistributedDataParallel ddp(*model);  // broadcasts rank 0's parameters and buffers
//     nn::Adam opt(model->parameters(), {.lr = 1e-3});
//     for (...) {                                     // each rank: its shard of the global batch
//       Variable loss = ...model->forward(shard)...;  // mean over the shard
//       opt.zero_grad();
//       loss.backward();                              // buckets are all-reduced as their gradients arrive
//       ddp.synchronize();                            // the average over ranks of the shards' gradients
//       opt.step();
//     }
//
// With equal shards and a loss that is a mean over the batch, the average of the ranks' gradients is the
// gradient of the global batch: N ranks with batch b train, step for step, like one process with batch N*b
// (tests/distributed/test_ddp.cpp checks this to 1e-10 in float64).
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/process_group.h"
#include "nn/module.h"

namespace saccade::distributed {

/// Settings of DistributedDataParallel (names as torch.nn.parallel.DistributedDataParallel's).
struct DataParallelOptions {
  double bucket_cap_mb = 25;      ///< bucket size in MiB (PyTorch's default); a parameter never splits
  bool broadcast_buffers = true;  ///< also broadcast the module's buffers from rank 0 at construction
  double timeout_s = 0;           ///< how long synchronize() waits (0: default_timeout())
};

/// One bucket's communication in the last synchronized step, for tests and the benchmark.
struct BucketTrace {
  int64_t numel = 0;                  ///< elements in the bucket
  int64_t hooks_before_launch = 0;    ///< gradient hooks that had run when its all-reduce started
  bool launched_in_backward = false;  ///< started from a hook (true) or from synchronize() (false)
};

/// Averages gradients over the ranks of `group` (default: the world), bucketed and overlapped with backward.
/// It does not own the module: the module must outlive it. The module's parameters must be float32/float64
/// CPU tensors (device tensors need a NCCL group: not built). Register your own gradient hooks on the
/// parameters before constructing it: hooks registered later see the gradient after it was copied.
class DistributedDataParallel {
 public:
  /// Broadcasts rank 0's parameters (and buffers) to every rank and registers a gradient hook on every
  /// parameter that requires grad. Collective: every rank must construct it. Throws saccade::Error naming
  /// "DistributedDataParallel" for a parameter on another device or of another dtype, or a bucket_cap_mb <=
  /// 0.
  explicit DistributedDataParallel(nn::Module& module, DataParallelOptions options = {},
                                   ProcessGroup* group = nullptr);
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// Finishes the step's gradient averaging: launches the buckets backward did not complete, waits for all
  /// (up to the timeout), and sets every parameter's grad to the mean over ranks. Collective. Call it after
  /// backward and before clipping or the optimizer step. Inside no_sync() it does nothing. Throws
  /// saccade::Error when a peer does not answer within the timeout.
  void synchronize();

  /// RAII: while it lives, backward passes only accumulate gradients locally (torch's ddp.no_sync()).
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  /// How many buckets the parameters were packed into.
  int64_t num_buckets() const;
  /// Per bucket, what happened in the last synchronize().
  std::vector<BucketTrace> last_trace() const;
  /// Seconds the last synchronize() spent waiting for communication.
  double last_wait_seconds() const;
  ProcessGroup& group() const { return *group_; }

 private:
  struct Reducer;
  std::shared_ptr<Reducer> reducer_;  // shared with the hooks, which hold it weakly
  ProcessGroup* group_;
};

}  // namespace saccade::distributed
