// Sharding by rank (sampler.h).
#include "distributed/sampler.h"

#include <numeric>

#include "core/error.h"
#include "ops/random.h"

namespace saccade::distributed {

Range shard_range(int64_t n, int rank, int world_size) {
  SACCADE_CHECK(world_size > 0 && rank >= 0 && rank < world_size && n >= 0,
                "shard_range: need 0 <= rank < world_size and n >= 0, got rank {}, world_size {}, n {}", rank,
                world_size, n);
  const int64_t base = n / world_size, extra = n % world_size;
  Range r;
  r.begin = rank * base + std::min<int64_t>(rank, extra);
  r.end = r.begin + base + (rank < extra ? 1 : 0);
  return r;
}

DistributedSampler::DistributedSampler(int64_t size, int rank, int world_size, uint64_t seed, bool shuffle,
                                       bool drop_last)
    : size_(size),
      rank_(rank),
      world_size_(world_size),
      seed_(seed),
      shuffle_(shuffle),
      drop_last_(drop_last) {
  SACCADE_CHECK(size >= 0 && world_size > 0 && rank >= 0 && rank < world_size,
                "DistributedSampler: need size >= 0 and 0 <= rank < world_size, got size {}, rank {}, "
                "world_size {}",
                size, rank, world_size);
  SACCADE_CHECK(!drop_last || size >= world_size,
                "DistributedSampler: drop_last with {} items leaves nothing for {} ranks", size, world_size);
  num_samples_ = drop_last ? size / world_size : (size + world_size - 1) / world_size;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order(size_);
  if (shuffle_) {
    Generator gen(seed_ + static_cast<uint64_t>(epoch_));  // torch: seed + epoch
    if (size_ > 0) order = ops::randperm(size_, &gen).to_vector<int64_t>();
  } else {
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  const int64_t total = num_samples_ * world_size_;
  for (int64_t i = size_; i < total; ++i) {  // wrap around to equal shares
    int64_t again = order[i % size_];
    order.push_back(again);
  }
  std::vector<int64_t> mine;
  mine.reserve(num_samples_);
  for (int64_t i = rank_; i < total; i += world_size_) mine.push_back(order[i]);
  return mine;
}

}  // namespace saccade::distributed
