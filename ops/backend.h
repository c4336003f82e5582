#pragma once
// The dispatch table: one Backend per device type holds that device's kernels. An op in ops/*.cpp checks its
// arguments, works out shapes and dtypes, allocates the result, then calls backend(device).kernel(...).
// Kernels assume their arguments were checked: same device, shapes as their rows document. Calls go down
// only: a kernel never calls an op (CPU kernels live in cpu/, CUDA kernels in cuda/, beside this file).
//
// Each kernel is declared once, as a row of its op family's list in the family's contract header,
// ops/kernels/<family>.h (softmax's row is in ops/kernels/nn.h, bmm's in ops/kernels/linalg.h), with the
// types its parameters need (AttentionMask, BinaryOp, MatrixLayout, ...). A contract header includes no
// public op header (ops/nn.h, ...); a public op header may include its contract header for those types. A
// row reads
//   K(name, (parameters), (arguments))                                    a kernel, or
//   K16(name, (parameters), (arguments), kernel16, Written)               one on the 16-bit route:
// kernel16 is its Kernel16 entry (ops/kernel16.h), and Written says which tensor parameters it writes
// (OutFrom<i>: those from parameter i on; InOut<i>: parameter i, read and written), all that Widening<>
// (ops/backend_widening.h) needs to widen it. Every kernel returns void and writes its outputs. Each family
// has one list of the kernels every backend implements (SACCADE_NN_KERNELS, ...) and, where it has them, one
// of the fused kernels a backend may leave out (SACCADE_NN_FUSED_KERNELS, ...; Backend::fuses says which it
// has, and the op composes the others from other ops). This file expands the lists into Backend's virtual
// functions, the CPU's and CUDA's backend headers into overrides: a reader following one kernel reads its
// row, its CPU kernel and its CUDA kernel, and never these lists of declarations.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "ops/caching_allocator.h"
#include "ops/device.h"
#include "ops/dtype.h"
#include "ops/kernel16.h"
#include "ops/kernels/amp.h"
#include "ops/kernels/attention.h"
#include "ops/kernels/conv.h"
#include "ops/kernels/creation.h"
#include "ops/kernels/elementwise.h"
#include "ops/kernels/index.h"
#include "ops/kernels/linalg.h"
#include "ops/kernels/nn.h"
#include "ops/kernels/optim.h"
#include "ops/kernels/quant.h"
#include "ops/kernels/random.h"
#include "ops/kernels/reduce.h"
#include "ops/kernels/rotary.h"
#include "ops/tensor.h"

/// Every family's list of the kernels each backend implements (pure virtual in Backend).
#define SACCADE_BACKEND_KERNELS(K, K16) \
  SACCADE_CREATION_KERNELS(K, K16)      \
  SACCADE_ELEMENTWISE_KERNELS(K, K16)   \
  SACCADE_REDUCE_KERNELS(K, K16)        \
  SACCADE_LINALG_KERNELS(K, K16)        \
  SACCADE_NN_KERNELS(K, K16)            \
  SACCADE_ATTENTION_KERNELS(K, K16)     \
  SACCADE_INDEX_KERNELS(K, K16)         \
  SACCADE_CONV_KERNELS(K, K16)          \
  SACCADE_RANDOM_KERNELS(K, K16)        \
  SACCADE_AMP_KERNELS(K, K16)           \
  SACCADE_OPTIM_KERNELS(K, K16)         \
  SACCADE_ROTARY_KERNELS(K, K16)
/// Every family's list of the fused kernels a backend may leave out (Backend::fuses).
#define SACCADE_BACKEND_FUSED_KERNELS(K, K16) \
  SACCADE_ELEMENTWISE_FUSED_KERNELS(K, K16)   \
  SACCADE_NN_FUSED_KERNELS(K, K16)            \
  SACCADE_RANDOM_FUSED_KERNELS(K, K16)        \
  SACCADE_QUANT_FUSED_KERNELS(K, K16)

/// A device's memory, every backend's own (the CPU's and CUDA's caching allocators, ops/caching_allocator.h):
/// rows M(return type, name, (parameters), qualifiers), declared once like the kernels' rows.
#define SACCADE_BACKEND_MEMORY(M)                                                      \
  /* nbytes of device memory, and its return (nbytes as allocated) */                  \
  M(void*, allocate, (size_t nbytes), )                                                \
  M(void, deallocate, (void* p, size_t nbytes), )                                      \
  /* raw byte copies between this device and host memory */                            \
  M(void, copy_to_host, (void* host_dst, const void* src, size_t nbytes), )            \
  M(void, copy_from_host, (void* dst, const void* host_src, size_t nbytes), )          \
  /* the counters of the device's caching allocator */                                 \
  M(AllocatorStats, memory_stats, (), const)                                           \
  /* returns the allocator's cached, unused blocks to their source (cudaFree, free) */ \
  M(void, empty_cache, (), )
/// A memory row as a pure virtual function and as an override.
#define SACCADE_PURE_MEMBER(ret, name, params, qualifiers) virtual ret name params qualifiers = 0;
#define SACCADE_MEMBER_OVERRIDE(ret, name, params, qualifiers) ret name params qualifiers override;

/// A row as a pure virtual function, a virtual function whose default body throws (a fused kernel the
/// backend may leave out: ops/backend.cpp), and an override.
#define SACCADE_PURE_KERNEL(name, params, ...) virtual void name params = 0;
#define SACCADE_FUSED_KERNEL(name, params, ...) virtual void name params;
#define SACCADE_KERNEL_OVERRIDE(name, params, ...) void name params override;

namespace saccade {

/// The fused kernels a backend may leave out, one entry per row of SACCADE_BACKEND_FUSED_KERNELS. The op asks
/// Backend::fuses and, where the backend has no such kernel (CUDA has none of these), composes the same
/// numbers from other ops: ops::swiglu_backward_composed, ops::gru_gates_composed and its backward,
/// ops::dropout_composed, ops::linear_q8_0_composed, each the readable reference its kernel is tested
/// against.
enum class FusedKernel {
  SwigluBackward,
  GruGates,
  GruGatesBackward,
  Dropout,
  LinearQ8_0,
  CrossEntropyRows,
  CrossEntropyRowsBackward
};

/// One device's kernels: a virtual function per kernel, each documented with its contract (shapes, strides,
/// dtypes) by its row in its family's list (see the top of this file). A kernel of Kernel16 takes bfloat16 /
/// float16 operands on every backend: natively, or widened by Widening<> (ops/backend_widening.h). An op
/// checks its arguments and allocates the result, then calls backend(device).kernel(...). Every backend
/// implements every kernel (they are pure virtual; CPU: ops/cpu/backend.h), except the fused kernels it may
/// leave out (FusedKernel: swiglu_backward, gru_gates, gru_gates_backward, dropout, linear_q8_0,
/// cross_entropy_rows and its backward), which the op then
/// composes. A device saccade was built without has no backend at all (backend(device) throws).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // ---- the 16-bit route ----
  /// Whether this backend's kernel `k` takes bfloat16 / float16 tensors itself (loads and stores 16 bits,
  /// computes in float32). The default: no kernel does, Widening<> widens them all; the CPU and CUDA backends
  /// answer from native_16bit_on (ops/kernel16.h), the table the op table's 16-bit columns read too. A kernel
  /// outside Kernel16 (copy, GEMM, elementwise, reductions, flash attention, ...) is native on every backend
  /// or throws.
  virtual bool native_16bit(Kernel16 k) const;
  /// The one widening of the 16-bit route: runs `f32_kernel` on float32 copies of the bfloat16 / float16
  /// tensors among `in` and `inout`, and into float32 buffers standing in for those among `out` and `inout`
  /// (an `inout` buffer starts as its copy), then rounds each buffer into the tensor it stands for (once, to
  /// nearest even, as Tensor::to). Tensors of other dtypes (float32 statistics, int64 indices) and undefined
  /// ones are passed as they are. `f32_kernel` gets the tensors in the order in, inout, out. Widening
  /// is exact (float32 holds every bfloat16 and float16), so the numbers are the float32 kernel's rounded
  /// once.
  static void widen(std::initializer_list<Tensor> in, std::initializer_list<Tensor> inout,
                    std::initializer_list<Tensor> out,
                    const std::function<void(const std::vector<Tensor>&)>& f32_kernel);
  /// Whether the 16-bit route widens `t`: it is defined and bfloat16 / float16. Float32 statistics, int64
  /// indices and undefined (optional) tensors pass as they are.
  static bool widens(const Tensor& t);
  /// widen's two steps for one tensor, shared with Widening<>'s generated route: the float32 stand-in of a
  /// tensor the route widens (its copy when the kernel reads `t`, else an uninitialised buffer of its
  /// shape), or `t` itself otherwise ...
  static Tensor widened(const Tensor& t, bool read);
  /// ... and, after the kernel, `wide` rounded into `t` (once, to nearest even, as Tensor::to) when the route
  /// widens `t`; nothing otherwise.
  static void round_into(const Tensor& wide, const Tensor& t);

  // ---- memory: SACCADE_BACKEND_MEMORY's rows as pure virtual functions ----
  SACCADE_BACKEND_MEMORY(SACCADE_PURE_MEMBER)

  // ---- the kernels: one virtual function per row of the families' lists ----
  SACCADE_BACKEND_KERNELS(SACCADE_PURE_KERNEL, SACCADE_PURE_KERNEL)
  SACCADE_BACKEND_FUSED_KERNELS(SACCADE_FUSED_KERNEL, SACCADE_FUSED_KERNEL)
  /// Whether this backend has the fused kernel `k` (false: its function throws, and the op composes the same
  /// numbers from other ops). The default: none; the CPU has them all.
  virtual bool fuses(FusedKernel k) const;

  /// Whether flash_attention_forward writes the dropout keep flags (ops::AttentionDropout::kept) for the
  /// backward to read; ops::flash_attention_forward allocates them only for such a backend (the CPU).
  virtual bool keeps_dropout_flags() const { return false; }
};

/// The backend of `device` (ops/backend.cpp). Throws saccade::Error naming "backend" and the device when
/// saccade was built without that device's backend or no such device is present.
Backend& backend(Device device);

namespace detail {
Backend* cpu_backend();   // ops/cpu/backend.cpp
Backend* cuda_backend();  // cuda/backend.cpp when built with CUDA; nullptr when no GPU is present
}  // namespace detail

}  // namespace saccade
