#pragma once
// Which of the two tensor-core attention kernels (ops/cuda/attention_mma.cu) runs 16-bit attention when
// cuda::tensor_core_attention() is on. Header-only (an inline atomic), so a build without CUDA has it too and
// the tests can switch it on either build.
#include <atomic>

namespace saccade::cuda {

/// The tensor-core attention kernels, forward and backward (FlashAttention-2 on mma.sync.m16n8k16):
/// - Readable: every fragment built from 16- and 32-bit shared loads (ops/cuda/mma.h's a_source,
///   b_source_nk, b_source_kn), K and V tiles loaded synchronously, every score masked, expf. The reference.
/// - Pipelined: the same algorithm with ldmatrix (x4, .trans for V / dO / Q / K as (K, N) operands),
///   cp.async double buffering of the forward's K and V tiles, a mask-free path for key tiles every row of
///   the block sees whole, and exp2f with scale·log2(e) folded into the scores (FlashAttention-2,
///   section 3.1); lse stays in natural log.
enum class MmaAttentionVariant { Readable, Pipelined };

namespace detail {
inline std::atomic<MmaAttentionVariant> mma_attention_variant{MmaAttentionVariant::Readable};
}

/// The kernel the tensor-core attention uses (process-wide). Readable by default: it passed its tests on an
/// H200 (2026-11-28); Pipelined was written after that visit and has not run on a GPU yet.
inline MmaAttentionVariant mma_attention_variant() {
  return detail::mma_attention_variant.load(std::memory_order_relaxed);
}
/// Chooses the tensor-core attention kernel for every later call (forward and backward alike). The tests run
/// both against the CPU.
inline void set_mma_attention_variant(MmaAttentionVariant v) {
  detail::mma_attention_variant.store(v, std::memory_order_relaxed);
}

}  // namespace saccade::cuda
