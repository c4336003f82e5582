#pragma once
// The CPU backend: OpenBLAS for GEMM, our own kernels (threads: thread_pool.h) for the rest. Each family has
// its own file beside this one (the list of this folder's files is at the end of this header, kept whole by
// scripts/check_docs).
#include "ops/backend.h"
#include "ops/tensor.h"

namespace saccade::cpu {

/// The CPU's kernels. backend(Device::cpu()) hands out Widening<CpuBackend> (ops/backend_widening.h), which
/// widens the 16-bit operands of the kernels that native_16bit does not name.
class CpuBackend : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  /// 16 bits natively where native_16bit_on (ops/kernel16.h) says so for the CPU: dropout (converts block by
  /// block), layer norm and RMSNorm forward and backward (row by row, nn.cpp) and the rotary embedding
  /// (rotary.cpp). Flash attention widens head by head itself (attention_half.cpp); the other kernels of
  /// Kernel16 run on float32 copies.
  bool native_16bit(Kernel16 k) const override { return native_16bit_on(k).cpu; }
  bool keeps_dropout_flags() const override { return true; }
  /// Every fused kernel: the CPU makes each in one pass (elementwise.cpp, rnn.cpp, random.cpp, quant.cpp).
  bool fuses(FusedKernel) const override { return true; }
  SACCADE_BACKEND_MEMORY(SACCADE_MEMBER_OVERRIDE)
  // Every kernel of the families' lists (ops/kernels/*.h), the fused ones included.
  SACCADE_BACKEND_KERNELS(SACCADE_KERNEL_OVERRIDE, SACCADE_KERNEL_OVERRIDE)
  SACCADE_BACKEND_FUSED_KERNELS(SACCADE_KERNEL_OVERRIDE, SACCADE_KERNEL_OVERRIDE)
};

}  // namespace saccade::cpu

// The files of ops/cpu/: the kernels of CpuBackend in memory.cpp, elementwise.cpp, reduce.cpp, linalg.cpp,
// nn.cpp, index.cpp, conv_pool.cpp, random.cpp, rnn.cpp, rotary.cpp, optim.cpp, amp.cpp, quant.cpp,
// attention.cpp and additive_attention.cpp; what they call in attention_half.cpp, flash_tiles_f32.cpp,
// flash_tiles_bf16.cpp, gemm_bf16.cpp, gemm_half.cpp, bf16_lanes.cpp and simd.cpp (vector widths);
// thread_pool.cpp, blas_check.cpp (the OpenBLAS core) and backend.cpp (the backend's object and its 16-bit
// route).
