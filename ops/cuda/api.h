#pragma once
// The user-facing controls of the CUDA backend (no CUDA headers: any program may include this). In a build
// without CUDA, or with no GPU present, each throws saccade::Error ("cuda: ... not available"), except
// allow_tf32/set_allow_tf32, which only keep a flag.
#include "ops/caching_allocator.h"

namespace saccade::cuda {

/// The caching allocator's counters (ops/caching_allocator.h): raw cudaMalloc calls, bytes in use and cached.
AllocatorStats memory_stats();
/// Returns every cached, unused block of device memory to the driver (torch.cuda.empty_cache()).
void empty_cache();
/// Waits until every kernel queued on the current stream has finished (torch.cuda.synchronize()).
void synchronize();
/// Whether float32 matmul / bmm may run on TF32 tensor cores (10-bit mantissa products, float32 accumulate;
/// ~1e-3 relative error). Off by default, as torch.backends.cuda.matmul.allow_tf32.
bool allow_tf32();
void set_allow_tf32(bool allow);
/// Whether fused attention (forward and backward) uses the readable one-thread-per-row kernels instead of the
/// tiled ones (ops/cuda/attention.cu). Off by default; the tests run both.
bool readable_attention();
void set_readable_attention(bool readable);
/// Whether float32 fused attention with head dims <= 128 uses the register-tiled kernels
/// (ops/cuda/attention_fast.cu) rather than the first tiled ones of attention.cu (one query row or one score
/// a thread). On by default; readable_attention() takes precedence. The tests and bench/attention run all.
bool fast_attention();
void set_fast_attention(bool fast);
/// Whether bfloat16 / float16 fused attention runs forward and backward on the tensor cores
/// (ops/cuda/attention_mma.cu: mma.sync with float32 accumulators, head dims <= 128, compute capability 8.0+)
/// instead of on float32 copies of q, k and v. On by default since its tests passed on an H200 (2026-11-28:
/// [cuda][flash][mma] and memcheck): it reads the 16-bit operands themselves (half the bytes, no widened
/// copies to write first) and multiplies on the tensor cores (figures: bench/RESULTS.md, "2026-11-28 — on a
/// GPU, third visit"); off sends 16-bit attention to the float32 kernels. The tests run both;
/// readable_attention() takes precedence.
bool tensor_core_attention();
void set_tensor_core_attention(bool on);
/// Whether the reductions (ops/cuda/reduce.cu) use their readable kernels only: reduce in one pass (no
/// split of long rows over several blocks), arg_reduce one thread per output (no block-per-row kernel). Off
/// by default; the tests run both.
bool readable_reductions();
void set_readable_reductions(bool readable);

}  // namespace saccade::cuda
