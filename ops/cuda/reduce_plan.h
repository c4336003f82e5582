#pragma once
// How the CUDA reductions (reduce.cu) split their work: plain C++ (no CUDA headers), so the [reduce_plan]
// tests check it in every build, GPU or not.
//
// A reduction of `outputs` results, each folding k elements, runs one pass when there are enough outputs
// to fill the GPU. When there are few outputs and k is long (sum of a 10⁶-element vector, a loss over a
// whole batch), one block or thread per output would leave most of the GPU idle and walk k alone: then each
// output's k elements are split into `splits` chunks of `chunk` elements, pass 1 folds every chunk into a
// partial result (splits partials per output) and pass 2 folds the partials of each output (the split-k /
// two-pass reduction, as in CUB's DeviceReduce and PyTorch's reduce kernels).
#include <algorithm>
#include <cstdint>

namespace saccade::cuda {

/// Chunks of one output's k elements: chunk s covers [s·chunk, min(k, (s + 1)·chunk)); every chunk is
/// non-empty (k ≥ 1), splits·chunk ≥ k. splits = 1 (chunk = k) is the one-pass reduction.
struct SplitPlan {
  int64_t splits = 1;
  int64_t chunk = 0;
};

/// The split of k elements per output for `outputs` outputs when `workers_wanted` parallel workers (blocks
/// for a row reduction, threads for a column reduction) would fill the GPU and a worker should fold at least
/// `min_chunk` elements to be worth launching. One pass (splits = 1) unless outputs < workers_wanted and
/// k ≥ 2·min_chunk. outputs, k ≥ 0; workers_wanted, min_chunk ≥ 1.
inline SplitPlan plan_split(int64_t outputs, int64_t k, int64_t workers_wanted, int64_t min_chunk) {
  SplitPlan p{1, k};
  if (outputs <= 0 || k <= 0 || outputs >= workers_wanted) return p;
  const int64_t by_gpu = (workers_wanted + outputs - 1) / outputs;  // splits that fill the GPU
  const int64_t by_work = k / min_chunk;                            // splits that keep chunks ≥ min_chunk
  const int64_t splits = std::min(by_gpu, by_work);
  if (splits < 2) return p;
  p.chunk = (k + splits - 1) / splits;
  p.splits = (k + p.chunk - 1) / p.chunk;  // no empty last chunk
  return p;
}

/// Row reductions (inner == 1, one block per output): blocks wanted per SM, and elements per block.
constexpr int64_t kRowBlocksPerSm = 4;
constexpr int64_t kRowMinChunk = 4096;  // 16 elements per thread of a 256-thread block
/// Column reductions (inner > 1, one thread per output): threads wanted per SM, and elements per thread.
constexpr int64_t kColThreadsPerSm = 1024;
constexpr int64_t kColMinChunk = 256;

/// The split of a reduction of a contiguous (outer, k, inner) tensor over k on a GPU of `sm_count`
/// multiprocessors.
inline SplitPlan plan_reduce(int64_t outer, int64_t k, int64_t inner, int sm_count) {
  const int64_t sms = std::max(sm_count, 1);
  return inner == 1 ? plan_split(outer, k, kRowBlocksPerSm * sms, kRowMinChunk)
                    : plan_split(outer * inner, k, kColThreadsPerSm * sms, kColMinChunk);
}

/// arg_reduce over the last dim (inner == 1) with at least this many elements per row takes one block per
/// row (warp shuffles of (value, index) pairs); shorter rows, and columns (inner > 1), one thread per output.
constexpr int64_t kArgRowMinK = 256;

/// Whether arg_reduce of (outer, k, inner) takes the block-per-row kernel.
inline bool arg_reduce_by_rows(int64_t k, int64_t inner) { return inner == 1 && k >= kArgRowMinK; }

}  // namespace saccade::cuda
