#pragma once
// The kernels of elementwise ops, as every backend implements them: one row per kernel (row format:
// ops/backend.h), its contract above it. CPU: ops/cpu/elementwise.cpp; CUDA: ops/cuda/elementwise.cu. The ops
// that call them: ops/elementwise.h. A contract header includes no op header (scripts/check_layers).
#include <string_view>

#include "ops/tensor.h"

namespace saccade {

/// The elementwise ops of one input (Backend::unary); each one's per-element math is a functor of the same
/// name in ops/elementwise_math.h. Names for messages: unary_op_name.
enum class UnaryOp {
  Neg,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Abs,
  Sin,
  Cos,
  Tanh,
  Sigmoid,
  Relu,
  Gelu,
  GeluGrad,  // d gelu(x) / dx (exact, erf-based gelu)
  Silu,      // x · sigmoid(x)
  Sign,
  PowScalar,   // x ** alpha
  LogicalNot,  // bool -> bool
};

/// The elementwise ops of two inputs (Backend::binary); math in ops/elementwise_math.h; names from
/// binary_op_name.
enum class BinaryOp {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,  // out is Bool
  LogicalAnd,
  LogicalOr,     // Bool x Bool -> Bool
  GeluBackward,  // g · d gelu(x) / dx, with g the first operand and x the second (floating only)
  SiluBackward,  // g · d silu(x) / dx, g first, x second (floating only)
  Swiglu,        // silu(gate) · up, gate first, up second (floating only)
};

/// The op's name as users call it ("neg", "gelu_grad", "pow", ...), for error messages.
std::string_view unary_op_name(UnaryOp op);
/// The op's name as users call it ("add", "maximum", "logical_or", ...), for error messages.
std::string_view binary_op_name(BinaryOp op);

}  // namespace saccade

#define SACCADE_ELEMENTWISE_KERNELS(K, K16)                                                            \
  /* out = op(a) (alpha is the exponent for PowScalar); a already expanded to out's shape (stride 0 on \
   * broadcast dims). a and out share a dtype, except LogicalNot (Bool). */                            \
  K(unary, (UnaryOp op, const Tensor& a, const Tensor& out, double alpha), (op, a, out, alpha))        \
  /* out = a op b; a, b expanded to out's shape; a and b share a dtype; out has it too, or Bool for    \
   * comparisons. out may alias a. */                                                                  \
  K(binary, (BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out), (op, a, b, out))       \
  /* out = cond ? a : b; all expanded to out's shape; cond Bool; a, b, out share a dtype. */           \
  K(where, (const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out), (cond, a, b, out))

/// The kernels a backend may leave out (Backend::fuses, FusedKernel): without one, the op composes the same
/// numbers from other ops (ops::swiglu_backward_composed, ops/elementwise.cpp). Rows as above.
#define SACCADE_ELEMENTWISE_FUSED_KERNELS(K, K16)                                                           \
  /* SwiGLU's backward (ops::swiglu_backward). g, gate, up, dgate, dup: one shape, contiguous, one floating \
   * dtype (16-bit: float32 inside, each output rounded once): math::SwigluBackward's dgate and dup,        \
   * written. The CPU's makes them in one pass (ops/cpu/elementwise.cpp); CUDA has none (the op composes    \
   * three passes). */                                                                                      \
  K(swiglu_backward,                                                                                        \
    (const Tensor& g, const Tensor& gate, const Tensor& up, const Tensor& dgate, const Tensor& dup),        \
    (g, gate, up, dgate, dup))
