#pragma once
// One row of facts per differentiable op: its name, its autocast policy, its cost for the profiler, its
// 16-bit route and whether it can be differentiated twice. This file holds the row's type (OpInfo), the
// builders a row is written with, and the engine's own rows; each op's row sits beside its public function in
// autograd/functions/<file>.h (`op_info::softmax` in functions/nn.h), and autograd/op_table.h lists every
// row once (kOpTable). Every rule names its row (`OpScope op(op_info::softmax, x)`, autograd/function.h);
// autocast (autocast.h) and the profiler (profiling.cpp) read the row they are handed, so no table is keyed
// by a string. PyTorch keeps such facts in native_functions.yaml and derivatives.yaml, tinygrad in the one
// table of gradient.py.
//
// A row is a constexpr object: reading a column costs one load, no lookup. tests/test_op_table.cpp checks
// that every rule names a row of kOpTable, that running every row's rule records that row, and that
// autograd/README.md's rule index lists exactly these ops.
//
// NOTE: includes no autograd header (Variable is declared only), so that every autograd header may use it;
// of ops/ only the plain table ops/kernel16.h.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "ops/kernel16.h"

namespace saccade {

class Tensor;
class Variable;

/// How autocast treats an op's floating inputs (autograd/autocast.h): cast to the guard's 16-bit dtype
/// (Lower), 16-bit ones to float32 (Float32), all to the widest among them (Promote), or no cast (Keep).
enum class AutocastPolicy { Lower, Float32, Promote, Keep };

/// How the op's forward kernel meets a bfloat16 or float16 input on one device: Native, its kernel loads and
/// stores the 16 bits itself (float32 inside, compute_t); Widened, the float32 kernel runs on float32 copies
/// of the inputs and the result is rounded once.
// NOTE: a row whose forward is one kernel of Kernel16 names it (with_kernel16) and its columns are read from
// ops/kernel16.h's native_16bit_on, the table the backends answer native_16bit from: stated once.
// The other Widened rows compose several kernels in float32 (ops/widen.h's composed_in_float32, or a dtype
// rule such as cross_entropy's and gru_gates'), a fact of their op in ops/*.cpp, stated here by with_half.
enum class HalfRoute { Native, Widened };

/// What a forward op cost: FLOPs (products) or bytes read and written (everything else).
struct OpCost {
  int64_t flops = 0;
  int64_t bytes = 0;
};

/// A cost model of the profiler (profiler/flops.h for the formulas): the forward's cost from its result and
/// inputs, and the backward's FLOPs from the forward's.
struct CostModel {
  const char* name;  // for autograd/README.md and error messages
  OpCost (*forward)(const Tensor& result, const Variable* inputs, size_t n);
  int64_t (*backward_flops)(int64_t forward_flops);
};

namespace cost {
// The formulas, defined in autograd/profiling.cpp; run only while a profile with FLOPs is recording.
OpCost bytes_forward(const Tensor& y, const Variable* in, size_t n);      // Σ bytes in + out; 0 for a view
OpCost gemm_forward(const Tensor& y, const Variable* in, size_t n);       // 2·numel(y)·k
OpCost linear_forward(const Tensor& y, const Variable* in, size_t n);     // 2·numel(y)·in_features
OpCost grouped_forward(const Tensor& y, const Variable* in, size_t n);    // 2·numel(a)·N: one product a row
OpCost conv2d_forward(const Tensor& y, const Variable* in, size_t n);     // 2·numel(y)·C_in/groups·kH·kW
OpCost attention_forward(const Tensor& y, const Variable* in, size_t n);  // 2 products of B·H·Tq·Tk·D
int64_t products_backward(int64_t forward_flops);                         // one product per input: 2×
int64_t attention_backward(int64_t forward_flops);                        // five products against two: 2.5×

/// Bytes moved (the memory-bound ops): no FLOPs are counted.
inline constexpr CostModel kBytes{"bytes", &bytes_forward, &products_backward};
/// A (batched, broadcast) matrix product: matmul, mm, bmm.
inline constexpr CostModel kGemm{"gemm", &gemm_forward, &products_backward};
/// Grouped products (grouped_mm): every row of a (or column, groups along K) meets one group's matrix.
inline constexpr CostModel kGroupedGemm{"grouped_gemm", &grouped_forward, &products_backward};
/// x Wᵀ (+ b).
inline constexpr CostModel kLinear{"linear", &linear_forward, &products_backward};
/// A convolution as a GEMM over im2col.
inline constexpr CostModel kConv2d{"conv2d", &conv2d_forward, &products_backward};
/// q kᵀ and weights v, the softmax not counted (FlashAttention's convention).
inline constexpr CostModel kAttention{"attention", &attention_forward, &attention_backward};
}  // namespace cost

/// The facts of one op. `name` is how the op names itself in errors, profiles and graphs (Node::name).
struct OpInfo {
  const char* name;
  const char* file;  // its rule: autograd/functions/<file> (an engine row of kEngineRows: autograd/<file>)
  AutocastPolicy autocast_cuda;
  AutocastPolicy autocast_cpu;
  const CostModel* cost;
  HalfRoute half_cpu;
  HalfRoute half_cuda;
  /// Whether a gradient through it can be differentiated again (create_graph); a rule marked false calls
  /// check_once_differentiable.
  bool twice_differentiable;
  /// A composition of other recorded ops: it checks its arguments under its own name but records no node;
  /// its parts record themselves (and its profiler range is dropped).
  bool composite;
  /// The kernel of the backend's 16-bit route (ops/kernel16.h) that the forward runs, when it is one of them:
  /// half_cpu and half_cuda are then native_16bit_on(*kernel16)'s (with_kernel16).
  std::optional<Kernel16> kernel16;
};

namespace op_info {

using enum AutocastPolicy;
using enum HalfRoute;

// A row for the usual case: no autocast, bytes moved, native in 16 bits, twice differentiable, recorded.
constexpr OpInfo row(const char* name, const char* file) {
  return {name, file, Keep, Keep, &cost::kBytes, Native, Native, true, false, std::nullopt};
}
// The same row with its autocast policy on CUDA and on the CPU (PyTorch's lists: autocast.h).
constexpr OpInfo with_autocast(OpInfo r, AutocastPolicy cuda, AutocastPolicy cpu) {
  r.autocast_cuda = cuda;
  r.autocast_cpu = cpu;
  return r;
}
constexpr OpInfo with_cost(OpInfo r, const CostModel& model) {
  r.cost = &model;
  return r;
}
constexpr OpInfo with_half(OpInfo r, HalfRoute cpu, HalfRoute cuda) {
  r.half_cpu = cpu;
  r.half_cuda = cuda;
  return r;
}
// The same row with its forward's kernel of the 16-bit route: its 16-bit columns are what the backends do.
constexpr OpInfo with_kernel16(OpInfo r, Kernel16 k) {
  r.kernel16 = k;
  return with_half(r, native_16bit_on(k).cpu ? Native : Widened, native_16bit_on(k).cuda ? Native : Widened);
}
constexpr OpInfo once_differentiable(OpInfo r) {
  r.twice_differentiable = false;
  return r;
}
constexpr OpInfo as_composite(OpInfo r) {
  r.composite = true;
  return r;
}

// ---- the engine's own nodes: no public function, so no row of kOpTable (nor of autograd/README.md's rule
// index), but recorded as every op is (OpScope, make_result): named, costed as bytes moved, profiled. ----
// Under create_graph, a part view's gradient placed into zeros of the whole input (part_backward) and the
// part picked back out of a gradient of the whole (part): gradient_sum.cpp.
inline constexpr OpInfo part = row("part", "gradient_sum.cpp");
inline constexpr OpInfo part_backward = row("part_backward", "gradient_sum.cpp");
// The stand-in through which an input enters recompute_backward's recomputation under create_graph.
inline constexpr OpInfo alias = row("alias", "function.cpp");
// An activation-checkpointed segment: its node recomputes the segment, which is differentiated once.
inline constexpr OpInfo checkpoint = once_differentiable(row("checkpoint", "checkpoint.cpp"));

}  // namespace op_info

/// The engine's rows above, once (tests/test_op_table.cpp checks that they are what the engine records).
inline constexpr const OpInfo* kEngineRows[] = {&op_info::part, &op_info::part_backward, &op_info::alias,
                                                &op_info::checkpoint};

}  // namespace saccade
