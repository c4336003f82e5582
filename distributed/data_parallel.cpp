// DistributedDataParallel: the bucketed, overlapped gradient all-reduce (data_parallel.h explains the
// scheme; Li et al., VLDB 2020, section 3.2).
#include "distributed/data_parallel.h"

#include "ops/creation.h"
#include "ops/elementwise.h"
#include "core/error.h"
#include "profiler/profiler.h"

namespace saccade::distributed {

using Clock = std::chrono::steady_clock;

// The state the gradient hooks share with the DistributedDataParallel object. The hooks live on the
// parameters and may outlive it: they hold the Reducer weakly and do nothing once it is gone.
struct DistributedDataParallel::Reducer {
  struct Bucket {
    Tensor flat;                 // (numel,) the bucket's gradients, packed; all-reduced in place
    std::vector<size_t> params;  // indices into `params`
    int64_t pending = 0;         // gradients still missing this step
    std::unique_ptr<Work> work;  // the all-reduce in flight
    BucketTrace trace;
  };
  ProcessGroup* group = nullptr;
  double timeout_s = 0;
  std::vector<Variable> params;
  std::vector<size_t> bucket_of;  // per parameter: its bucket
  std::vector<int64_t> offset;    // per parameter: where its gradient starts in the bucket
  std::vector<bool> ready;        // per parameter: its gradient is in the bucket this step
  std::vector<Bucket> buckets;
  size_t next_launch = 0;  // buckets [0, next_launch) have been launched this step
  int64_t hooks_run = 0;
  bool sync_enabled = true;
  double wait_seconds = 0;

  Tensor slot(size_t i) const {
    const Variable& p = params[i];
    return buckets[bucket_of[i]].flat.narrow(0, offset[i], p.numel()).view(p.shape());
  }

  // Puts parameter i's gradient for this step (what the leaf already accumulated, e.g. under no_sync,
  // plus the new `g`) into its bucket.
  void fill(size_t i, const Tensor& g) {
    const Tensor& acc = params[i].grad();
    Tensor total = acc.defined() && g.defined() ? ops::add(acc, g) : (g.defined() ? g : acc);
    Tensor dst = slot(i);
    if (total.defined())
      ops::copy_(dst, total);
    else
      ops::copy_(dst, ops::zeros(params[i].shape(), params[i].dtype()));  // no gradient: contribute zeros
    ready[i] = true;
    --buckets[bucket_of[i]].pending;
  }

  // Launches buckets in index order while the next one is complete, then lets MPI progress the others.
  void launch_ready(bool from_hook) {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
      Bucket& b = buckets[next_launch++];
      b.trace.hooks_before_launch = hooks_run;
      b.trace.launched_in_backward = from_hook;
      profiler::RecordFunction range("all_reduce launch", "allreduce");
      b.work = group->allreduce_sum(b.flat);
    }
    for (size_t k = 0; k < next_launch; ++k) buckets[k].work->test();
  }

  void on_gradient(size_t i, const Tensor& g) {
    if (!sync_enabled) return;
    SACCADE_CHECK(!ready[i],
                  "DistributedDataParallel: parameter {} (shape {}) received a second gradient before "
                  "synchronize(): run one backward per step, or the earlier ones inside no_sync()",
                  i, params[i].shape());
    ++hooks_run;
    fill(i, g);
    launch_ready(/*from_hook=*/true);
  }

  void synchronize() {
    if (!sync_enabled) return;
    profiler::RecordFunction range("DistributedDataParallel::synchronize (all_reduce wait)", "allreduce");
    for (size_t i = 0; i < params.size(); ++i)
      if (!ready[i]) fill(i, Tensor());
    launch_ready(/*from_hook=*/false);
    auto start = Clock::now();
    for (size_t k = 0; k < buckets.size(); ++k)
      buckets[k].work->wait(timeout_s, fmt::format("DistributedDataParallel: all-reduce of bucket {}", k));
    wait_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const double scale = 1.0 / group->size();
    for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(ops::mul(slot(i), scale));
    // ready for the next step
    for (auto& b : buckets) b.pending = static_cast<int64_t>(b.params.size()), b.work.reset();
    std::fill(ready.begin(), ready.end(), false);
    next_launch = 0;
    hooks_run = 0;
  }
};

DistributedDataParallel::DistributedDataParallel(nn::Module& module, DataParallelOptions options,
                                                 ProcessGroup* group)
    : reducer_(std::make_shared<Reducer>()), group_(group ? group : &world()) {
  SACCADE_CHECK(options.bucket_cap_mb > 0, "DistributedDataParallel: bucket_cap_mb must be > 0, got {}",
                options.bucket_cap_mb);
  Reducer& r = *reducer_;
  r.group = group_;
  r.timeout_s = options.timeout_s > 0 ? options.timeout_s : default_timeout();
  for (const auto& [name, p] : module.named_parameters()) {
    if (!p.requires_grad()) continue;  // frozen: broadcast below, never reduced
    SACCADE_CHECK(p.device().is_cpu() && (p.dtype() == DType::Float32 || p.dtype() == DType::Float64),
                  "DistributedDataParallel: parameter {} is {} on {}; the MPI group needs float32/float64 "
                  "CPU tensors (device tensors need a NCCL group: not built)",
                  name, p.dtype(), p.device().str());
    r.params.push_back(p);
  }

  // Same start on every rank: rank 0's parameters and buffers.
  auto broadcast = [&](const Tensor& t) {
    Tensor buf = t.contiguous();
    group_->broadcast(buf, 0);
    if (buf.storage() != t.storage()) {
      Tensor dst = t;
      ops::copy_(dst, buf);
    }
  };
  // (bool tensors are masks, constants: MPI has no portable one-byte bool type to send them as)
  for (const Variable& p : module.parameters())
    if (p.dtype() != DType::Bool) broadcast(p.data());
  if (options.broadcast_buffers)
    for (const auto& [name, b] : module.named_buffers())
      if (b.dtype() != DType::Bool) broadcast(b);

  // Buckets in reverse registration order: the last layers' gradients come first in backward.
  const double cap_bytes = options.bucket_cap_mb * 1024 * 1024;
  r.bucket_of.resize(r.params.size());
  r.offset.resize(r.params.size());
  r.ready.assign(r.params.size(), false);
  std::vector<int64_t> sizes;
  for (size_t k = r.params.size(); k-- > 0;) {
    const Variable& p = r.params[k];
    bool fits = !r.buckets.empty() && r.buckets.back().flat.dtype() == p.dtype() &&
                (sizes.back() + p.numel()) * static_cast<double>(dtype_size(p.dtype())) <= cap_bytes;
    if (!fits) {
      r.buckets.emplace_back();
      r.buckets.back().flat = ops::zeros({1}, p.dtype());  // dtype marker until sized below
      sizes.push_back(0);
    }
    r.bucket_of[k] = r.buckets.size() - 1;
    r.offset[k] = sizes.back();
    sizes.back() += p.numel();
    r.buckets.back().params.push_back(k);
  }
  for (size_t b = 0; b < r.buckets.size(); ++b) {
    r.buckets[b].flat = ops::zeros({sizes[b]}, r.buckets[b].flat.dtype());
    r.buckets[b].pending = static_cast<int64_t>(r.buckets[b].params.size());
    r.buckets[b].trace.numel = sizes[b];
  }

  std::weak_ptr<Reducer> weak = reducer_;
  for (size_t i = 0; i < r.params.size(); ++i)
    r.params[i].register_hook([weak, i](const Tensor& g) {
      if (auto reducer = weak.lock()) reducer->on_gradient(i, g);
      return g;
    });
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::synchronize() { reducer_->synchronize(); }

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp)
    : ddp_(ddp), previous_(ddp.reducer_->sync_enabled) {
  ddp_.reducer_->sync_enabled = false;
}
DistributedDataParallel::NoSyncGuard::~NoSyncGuard() { ddp_.reducer_->sync_enabled = previous_; }

int64_t DistributedDataParallel::num_buckets() const {
  return static_cast<int64_t>(reducer_->buckets.size());
}

std::vector<BucketTrace> DistributedDataParallel::last_trace() const {
  std::vector<BucketTrace> out;
  for (const auto& b : reducer_->buckets) out.push_back(b.trace);
  return out;
}

double DistributedDataParallel::last_wait_seconds() const { return reducer_->wait_seconds; }

}  // namespace saccade::distributed
