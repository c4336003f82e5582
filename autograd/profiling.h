#pragma once
// NOTE: includes no autograd header but the op rows' type (autograd/op_info.h; forward declarations only), so
// that the engine and function.h can use it. How autograd reports to the profiler (profiler/profiler.h): the
// one place that turns an op's Variables into the profiler's names, shapes, FLOPs and arrows. Three hooks,
// each behind profiler::is_active():
//   - an op's OpScope (its first line, autograd/function.h) opens the op's range: profile_op_begin, with its
//     input shapes; it drops the range when it ends unclosed (profile_op_discard);
//   - make_result closes it: profile_forward (FLOPs or bytes by the cost model of the op's row,
//     autograd/op_info.h), and links the Node it made;
//   - the engine wraps each derivative rule in a BackwardRange named after the op ("MatmulBackward").
#include <cstdint>
#include <string>

#include "autograd/op_info.h"
#include "ops/tensor.h"
#include "profiler/profiler.h"

namespace saccade {

class Node;
class Variable;

namespace detail {

/// Opens the forward op `op` with `shapes` ("(2, 3), (3, 4), " or empty), as the profiler's "[(2, 3), (3,
/// 4)]". Returns the id of its range.
uint64_t profile_op_begin_shapes(const char* op, std::string shapes);
/// Drops the open range `range` without recording it.
void profile_op_discard(uint64_t range);
/// Closes the forward op `op`'s range `range` (0: none open, a zero-length event is recorded), the op having
/// produced `result` from `inputs`, with the FLOPs or bytes of `cost` (profiler/flops.h). Returns the id of
/// the arrow to its backward node, for profile_link_node.
uint64_t profile_forward(uint64_t range, const char* op, const CostModel& cost, const Tensor& result,
                         const Variable* inputs, size_t n);
/// Remembers that `node` was made by the forward op whose arrow is `flow` (a BackwardRange finds it).
void profile_link_node(const Node* node, uint64_t flow);

/// The range of one derivative rule, named after its op ("matmul" -> "MatmulBackward"), category "backward",
/// with the arrow from its forward op and its FLOPs (twice the forward's for a GEMM or convolution: one
/// product per input; 2.5 times for attention: five products of the forward's size against two).
class BackwardRange {
 public:
  explicit BackwardRange(const Node& node) {
    if (profiler::is_active()) [[unlikely]]
      begin(node);
  }
  ~BackwardRange() {
    if (name_) end();
  }
  BackwardRange(const BackwardRange&) = delete;
  BackwardRange& operator=(const BackwardRange&) = delete;

 private:
  void begin(const Node& node);
  void end();
  const char* name_ = nullptr;
  int64_t start_ns_ = 0, flops_ = 0;
  uint64_t flow_ = 0, generation_ = 0, nvtx_ = 0;
  bool was_in_backward_ = false;
};

}  // namespace detail
}  // namespace saccade
