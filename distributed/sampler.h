#pragma once
// Sharding the training data by rank: each rank trains on its own part of every global batch, and the
// parts together are the batch one process would have used.
#include <cstdint>
#include <vector>

namespace saccade::distributed {

/// The contiguous share [begin, end) of `n` items that rank `rank` of `world_size` takes: the first
/// n % world_size ranks take one more. Concatenating the shares of ranks 0..N-1 gives 0..n-1 in order, so a
/// global batch split this way is the same batch. Throws saccade::Error naming "shard_range" unless
/// 0 <= rank < world_size and n >= 0.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
Range shard_range(int64_t n, int rank, int world_size);

/// The indices of a dataset of `size` items that one rank visits in an epoch, as
/// torch.utils.data.DistributedSampler: a permutation seeded by (seed, epoch) (the same on every rank),
/// padded by wrapping around to a multiple of world_size (or truncated when drop_last), of which rank r
/// takes the elements r, r + N, r + 2N, ... Every rank gets the same count, so every rank runs the same
/// number of steps (and collectives).
class DistributedSampler {
 public:
  /// Throws saccade::Error naming "DistributedSampler" for size < 0, a rank outside [0, world_size), or
  /// drop_last with size < world_size.
  DistributedSampler(int64_t size, int rank, int world_size, uint64_t seed = 0, bool shuffle = true,
                     bool drop_last = false);
  /// A different order each epoch (call before each epoch, as PyTorch's set_epoch).
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  /// This rank's indices for the current epoch.
  std::vector<int64_t> indices() const;
  /// How many indices each rank gets.
  int64_t num_samples() const { return num_samples_; }

 private:
  int64_t size_;
  int rank_, world_size_;
  uint64_t seed_;
  bool shuffle_, drop_last_;
  int64_t epoch_ = 0, num_samples_ = 0;
};

}  // namespace saccade::distributed
