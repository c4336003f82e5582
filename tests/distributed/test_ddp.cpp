// DistributedDataParallel under mpirun: N ranks with batch b train like one process with batch N*b (the
// reference is computed in every rank's own process, without communication); buckets start during backward;
// no_sync accumulates; checkpoints cross between distributed and single-process runs; the sampler shards.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <set>

#include "autograd/functions/nn.h"
#include "autograd/functions/shape.h"
#include "distributed/data_parallel.h"
#include "distributed/rank_zero.h"
#include "distributed/sampler.h"
#include "nn/linear.h"
#include "nn/multihead.h"
#include "nn/optim.h"
#include "ops/creation.h"
#include "ops/random.h"

using namespace saccade;
namespace dist = saccade::distributed;

namespace {

// A small MHA + Linear model: self-attention over (B, T, 8), then a projection to 3 outputs.
struct Net : nn::Module {
  std::shared_ptr<nn::MultiHeadAttention> attention;
  std::shared_ptr<nn::Linear> head;
  explicit Net(uint64_t seed) : Module("Net") {
    manual_seed(seed);
    attention = register_module("attention", std::make_shared<nn::MultiHeadAttention>(8, 2));
    head = register_module("head", std::make_shared<nn::Linear>(8, 3));
  }
  Variable forward(const Variable& x, const Tensor& valid_lens) {
    return head->forward(attention->forward(x, x, x, valid_lens));
  }
};

struct Batch {
  Tensor x, y, valid_lens;
  Batch rows(dist::Range r) const {
    return {x.narrow(0, r.begin, r.size()), y.narrow(0, r.begin, r.size()),
            valid_lens.narrow(0, r.begin, r.size())};
  }
};

// The global batch of step `step`: the same on every rank.
Batch global_batch(int64_t step, int64_t rows, DType dtype) {
  Generator gen(1000 + step);
  Batch b;
  b.x = ops::randn({rows, 5, 8}, dtype, Device::cpu(), &gen);
  b.y = ops::randn({rows, 5, 3}, dtype, Device::cpu(), &gen);
  b.valid_lens = ops::randint(1, 6, {rows}, Device::cpu(), &gen);
  return b;
}

Variable loss_of(Net& net, const Batch& b) { return mse_loss(net.forward(b.x, b.valid_lens), b.y); }

double max_param_diff(const nn::Module& a, const nn::Module& b) {
  auto pa = a.parameters(), pb = b.parameters();
  REQUIRE(pa.size() == pb.size());
  double worst = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    auto va = pa[i].data().to_vector<double>(), vb = pb[i].data().to_vector<double>();
    for (size_t k = 0; k < va.size(); ++k) worst = std::max(worst, std::abs(va[k] - vb[k]));
  }
  return worst;
}

// N ranks x batch b against one process x batch N*b, step for step over 20 Adam steps.
void check_equivalence(DType dtype, double tol) {
  const int N = dist::world_size(), r = dist::rank();
  const int64_t b = 3;
  Net reference(7);
  reference.to(dtype);
  Net replica(7 + 100 * r);  // different initial weights off rank 0: the broadcast must fix them
  replica.to(dtype);
  dist::DistributedDataParallel ddp(replica, {.bucket_cap_mb = 0.0005});  // ~500 B: several buckets
  CHECK(max_param_diff(reference, replica) == 0);
  nn::Adam opt_ref(reference.parameters(), {.lr = 1e-2});
  nn::Adam opt(replica.parameters(), {.lr = 1e-2});
  double worst = 0;
  for (int64_t step = 0; step < 20; ++step) {
    Batch global = global_batch(step, N * b, dtype);
    opt_ref.zero_grad();
    loss_of(reference, global).backward();
    opt_ref.step();

    opt.zero_grad();
    loss_of(replica, global.rows(dist::shard_range(N * b, r, N))).backward();
    ddp.synchronize();
    opt.step();
    double diff = max_param_diff(reference, replica);
    worst = std::max(worst, diff);
    INFO("rank " << r << " of " << N << ", step " << step);
    REQUIRE(diff <= tol);
  }
  WARN("rank " << r << " of " << N << ": largest parameter difference over 20 steps " << worst);
}

}  // namespace

TEST_CASE("ddp: N ranks x batch b == 1 process x batch N*b over 20 Adam steps, float64", "[ddp]") {
  check_equivalence(DType::Float64, 1e-10);
}

TEST_CASE("ddp: N ranks x batch b == 1 process x batch N*b over 20 Adam steps, float32", "[ddp]") {
  check_equivalence(DType::Float32, 1e-5);
}

TEST_CASE("ddp: early buckets are all-reduced while backward still runs", "[ddp]") {
  Net net(3);
  net.to(DType::Float64);
  dist::DistributedDataParallel ddp(net, {.bucket_cap_mb = 0.0005});
  const int64_t num_params = static_cast<int64_t>(net.parameters().size());
  REQUIRE(ddp.num_buckets() >= 3);
  Batch batch = global_batch(0, 4, DType::Float64);
  for (int step = 0; step < 2; ++step) {  // the second step checks that the state was reset
    net.zero_grad();
    loss_of(net, batch).backward();
    ddp.synchronize();
    std::vector<dist::BucketTrace> trace = ddp.last_trace();
    REQUIRE(trace.size() == static_cast<size_t>(ddp.num_buckets()));
    // Every bucket started from a gradient hook, i.e. during backward; the first one when fewer than all
    // the parameters' gradients existed, and the launches follow backward's order.
    int64_t total = 0;
    for (size_t k = 0; k < trace.size(); ++k) {
      CHECK(trace[k].launched_in_backward);
      if (k > 0) CHECK(trace[k].hooks_before_launch >= trace[k - 1].hooks_before_launch);
      total += trace[k].numel;
    }
    CHECK(trace.front().hooks_before_launch < num_params);
    CHECK(trace.back().hooks_before_launch == num_params);
    CHECK(total == net.num_parameters());
  }
}

TEST_CASE("ddp: a parameter without a gradient contributes zeros, launched by synchronize", "[ddp]") {
  Net net(3);
  net.to(DType::Float64);
  dist::DistributedDataParallel ddp(net, {.bucket_cap_mb = 1e-6});  // one parameter per bucket
  Batch batch = global_batch(0, 2, DType::Float64);
  // The head alone: the attention's parameters get no gradient.
  loss_of(net, batch).backward();
  ddp.synchronize();
  net.zero_grad();
  mse_loss(net.head->forward(batch.x), batch.y).backward();
  ddp.synchronize();
  auto trace = ddp.last_trace();
  CHECK_FALSE(trace.back().launched_in_backward);  // the first registered parameter is the last bucket
  for (const auto& [name, p] : net.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    if (name.rfind("attention.", 0) == 0)
      for (double g : p.grad().to_vector<double>()) CHECK(g == 0);
  }
}

TEST_CASE("ddp: no_sync accumulates locally, the next step all-reduces the sum", "[ddp]") {
  const int N = dist::world_size(), r = dist::rank();
  Net reference(5), replica(5);
  reference.to(DType::Float64);
  replica.to(DType::Float64);
  dist::DistributedDataParallel ddp(replica);
  Batch a = global_batch(1, 2 * N, DType::Float64), b = global_batch(2, 2 * N, DType::Float64);
  loss_of(reference, a).backward();
  loss_of(reference, b).backward();
  dist::Range mine = dist::shard_range(2 * N, r, N);
  {
    auto guard = ddp.no_sync();
    loss_of(replica, a.rows(mine)).backward();
    ddp.synchronize();  // inside no_sync: does nothing
  }
  loss_of(replica, b.rows(mine)).backward();
  ddp.synchronize();
  auto pr = reference.parameters(), pd = replica.parameters();
  for (size_t i = 0; i < pr.size(); ++i) {
    auto gr = pr[i].grad().to_vector<double>(), gd = pd[i].grad().to_vector<double>();
    for (size_t k = 0; k < gr.size(); ++k) REQUIRE(gd[k] == Approx(gr[k]).margin(1e-12));
  }
  // A second backward without synchronize is a usage error, reported clearly.
  loss_of(replica, a.rows(mine)).backward();
  CHECK_THROWS_WITH(loss_of(replica, a.rows(mine)).backward(), Catch::Contains("second gradient"));
}

TEST_CASE("ddp: a checkpoint written by rank 0 loads in a single process, and vice versa", "[ddp]") {
  const int N = dist::world_size(), r = dist::rank();
  // One directory for all ranks: rank 0's pid, broadcast.
  Tensor id = ops::full({1}, static_cast<double>(getpid()), DType::Int64);
  dist::world().broadcast(id, 0);
  auto dir = std::filesystem::temp_directory_path() / ("saccade_ddp_" + std::to_string(id.item<int64_t>()));
  if (r == 0) std::filesystem::create_directories(dir);
  dist::barrier();

  Net net(11 + r);
  dist::DistributedDataParallel ddp(net);
  nn::Adam opt(net.parameters(), {.lr = 1e-2});
  for (int64_t step = 0; step < 3; ++step) {
    opt.zero_grad();
    loss_of(net, global_batch(step, 2 * N, DType::Float32).rows(dist::shard_range(2 * N, r, N))).backward();
    ddp.synchronize();
    opt.step();
  }
  dist::save_checkpoint((dir / "ddp.safetensors").string(), net, opt, 3);
  // A single process (no DDP, no communication) loads it: rank 0's replica, which every rank holds too.
  Net single(99);
  nn::Adam single_opt(single.parameters(), {.lr = 1e-2});
  CHECK(nn::load_checkpoint((dir / "ddp.safetensors").string(), single, single_opt).step == 3);
  CHECK(max_param_diff(single, net) == 0);

  // Vice versa: a single process's checkpoint (written by rank 0 alone) starts a distributed run.
  if (r == 0) nn::save_checkpoint((dir / "single.safetensors").string(), single, single_opt, 3);
  dist::barrier();
  Net resumed(123 + r);
  nn::Adam resumed_opt(resumed.parameters(), {.lr = 1e-2});
  CHECK(nn::load_checkpoint((dir / "single.safetensors").string(), resumed, resumed_opt).step == 3);
  dist::DistributedDataParallel resumed_ddp(resumed);
  // One more step: distributed (resumed) and the single process with the whole global batch agree.
  Batch global = global_batch(3, 2 * N, DType::Float32);
  resumed_opt.zero_grad();
  loss_of(resumed, global.rows(dist::shard_range(2 * N, r, N))).backward();
  resumed_ddp.synchronize();
  resumed_opt.step();
  single_opt.zero_grad();
  loss_of(single, global).backward();
  single_opt.step();
  CHECK(max_param_diff(single, resumed) <= 1e-5);
  dist::barrier();
  if (r == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("ddp: bad input is reported, not crashed on", "[ddp]") {
  Net net(1);
  CHECK_THROWS_WITH(dist::DistributedDataParallel(net, {.bucket_cap_mb = 0}),
                    Catch::Contains("bucket_cap_mb"));
  Tensor ints = ops::zeros({3}, DType::Int64);
  CHECK_THROWS_WITH(dist::world().allreduce_sum(ints), Catch::Contains("allreduce"));
  // 16-bit tensors are refused by name, not summed in 16 bits (autocast keeps float32 gradients)
  Tensor half = ops::zeros({3}, DType::BFloat16);
  CHECK_THROWS_WITH(dist::world().allreduce_sum(half), Catch::Contains("bfloat16"));
  Net half_net(1);
  half_net.to(DType::Float16);
  CHECK_THROWS_WITH(dist::DistributedDataParallel(half_net), Catch::Contains("float16"));
  Tensor strided = ops::zeros({4, 4}).t();
  CHECK_THROWS_WITH(dist::world().broadcast(strided, 0), Catch::Contains("contiguous"));
  CHECK_THROWS_WITH(dist::shard_range(10, 3, 2), Catch::Contains("shard_range"));
  CHECK_THROWS_WITH(dist::DistributedSampler(10, 0, 0), Catch::Contains("DistributedSampler"));
}

TEST_CASE("shard_range and DistributedSampler: every item once, equal shares, same order on every rank",
          "[ddp][sampler]") {
  for (int world : {1, 2, 3, 4}) {
    for (int64_t n : {0, 1, 7, 64}) {
      int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        dist::Range range = dist::shard_range(n, r, world);
        CHECK(range.begin == next);
        CHECK(range.size() >= n / world);
        CHECK(range.size() <= n / world + 1);
        next = range.end;
      }
      CHECK(next == n);
    }
    std::multiset<int64_t> seen;
    for (int r = 0; r < world; ++r) {
      dist::DistributedSampler sampler(10, r, world, /*seed=*/4);
      sampler.set_epoch(2);
      auto idx = sampler.indices();
      CHECK(static_cast<int64_t>(idx.size()) == sampler.num_samples());
      seen.insert(idx.begin(), idx.end());
    }
    CHECK(static_cast<int64_t>(seen.size()) == (10 + world - 1) / world * world);
    for (int64_t i = 0; i < 10; ++i) CHECK(seen.count(i) >= 1);
  }
  dist::DistributedSampler a(50, 0, 2, 4), b(50, 0, 2, 4);
  b.set_epoch(1);
  CHECK(a.indices() != b.indices());  // a new order each epoch
  CHECK(dist::DistributedSampler(50, 1, 2, 4, /*shuffle=*/false).indices().front() == 1);
}
