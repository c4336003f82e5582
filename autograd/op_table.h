#pragma once
// One row of facts per differentiable op: its name, its autocast policy, its cost for the profiler, its
// 16-bit route and whether it can be differentiated twice. Every rule in autograd/functions/ names its row
// (`OpScope op(op_info::softmax, x)`, autograd/function.h); autocast (autocast.h) and the profiler
// (profiling.cpp) read the row they are handed, so no table is keyed by a string. PyTorch keeps such facts in
// native_functions.yaml and derivatives.yaml, tinygrad in the one table of gradient.py.
//
// A row is a constexpr object: reading a column costs one load, no lookup. kOpTable lists every row once,
// for tests and tools: tests/test_op_table.cpp checks that every rule names a row of it, that running every
// row's rule records that row, and that autograd/README.md's rule index lists exactly these ops.
//
// NOTE: includes no autograd header (Variable is declared only), so that every autograd header may use it.
#include <cstddef>
#include <cstdint>

namespace saccade {

class Tensor;
class Variable;

/// How autocast treats an op's floating inputs (autograd/autocast.h): cast to the guard's 16-bit dtype
/// (Lower), 16-bit ones to float32 (Float32), all to the widest among them (Promote), or no cast (Keep).
enum class AutocastPolicy { Lower, Float32, Promote, Keep };

/// How the op's forward kernel meets a bfloat16 or float16 input on one device: Native, its kernel loads and
/// stores the 16 bits itself (float32 inside, compute_t); Widened, ops/ converts the inputs to float32
/// tensors, runs the float32 kernel and rounds the result once.
// NOTE: documents where ops/*.cpp widens today (its `if (is_half(...)) return op(f32(x)).to(...)` lines);
// the widening is moving into the backend, which will then read this column.
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
OpCost conv2d_forward(const Tensor& y, const Variable* in, size_t n);     // 2·numel(y)·C_in/groups·kH·kW
OpCost attention_forward(const Tensor& y, const Variable* in, size_t n);  // 2 products of B·H·Tq·Tk·D
int64_t products_backward(int64_t forward_flops);                         // one product per input: 2×
int64_t attention_backward(int64_t forward_flops);                        // five products against two: 2.5×

/// Bytes moved (the memory-bound ops): no FLOPs are counted.
inline constexpr CostModel kBytes{"bytes", &bytes_forward, &products_backward};
/// A (batched, broadcast) matrix product: matmul, mm, bmm.
inline constexpr CostModel kGemm{"gemm", &gemm_forward, &products_backward};
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
  const char* file;  // its rule: autograd/functions/<file>
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
};

namespace op_info {

using enum AutocastPolicy;
using enum HalfRoute;

// A row for the usual case: no autocast, bytes moved, native in 16 bits, twice differentiable, recorded.
constexpr OpInfo row(const char* name, const char* file) {
  return {name, file, Keep, Keep, &cost::kBytes, Native, Native, true, false};
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
constexpr OpInfo as_composite(OpInfo r) {
  r.composite = true;
  return r;
}

// ---- elementwise.cpp ----
inline constexpr OpInfo add = row("add", "elementwise.cpp");
inline constexpr OpInfo sub = row("sub", "elementwise.cpp");
inline constexpr OpInfo mul = row("mul", "elementwise.cpp");
inline constexpr OpInfo div = row("div", "elementwise.cpp");
inline constexpr OpInfo pow = with_autocast(row("pow", "elementwise.cpp"), Float32, Keep);
inline constexpr OpInfo rsub = row("rsub", "elementwise.cpp");
inline constexpr OpInfo rdiv = row("rdiv", "elementwise.cpp");
inline constexpr OpInfo maximum = row("maximum", "elementwise.cpp");
inline constexpr OpInfo minimum = row("minimum", "elementwise.cpp");
inline constexpr OpInfo neg = row("neg", "elementwise.cpp");
inline constexpr OpInfo exp = with_autocast(row("exp", "elementwise.cpp"), Float32, Keep);
inline constexpr OpInfo log = with_autocast(row("log", "elementwise.cpp"), Float32, Keep);
inline constexpr OpInfo sqrt = row("sqrt", "elementwise.cpp");
inline constexpr OpInfo rsqrt = row("rsqrt", "elementwise.cpp");
inline constexpr OpInfo abs = row("abs", "elementwise.cpp");
inline constexpr OpInfo sin = row("sin", "elementwise.cpp");
inline constexpr OpInfo cos = row("cos", "elementwise.cpp");
inline constexpr OpInfo tanh = row("tanh", "elementwise.cpp");
inline constexpr OpInfo sigmoid = row("sigmoid", "elementwise.cpp");
inline constexpr OpInfo relu = row("relu", "elementwise.cpp");
inline constexpr OpInfo gelu = row("gelu", "elementwise.cpp");
inline constexpr OpInfo gelu_grad = row("gelu_grad", "elementwise.cpp");
inline constexpr OpInfo silu = row("silu", "elementwise.cpp");
inline constexpr OpInfo swiglu = row("swiglu", "elementwise.cpp");
inline constexpr OpInfo clamp = row("clamp", "elementwise.cpp");
inline constexpr OpInfo where = row("where", "elementwise.cpp");
inline constexpr OpInfo masked_fill = row("masked_fill", "elementwise.cpp");

// ---- reduce.cpp ----
inline constexpr OpInfo sum = with_autocast(row("sum", "reduce.cpp"), Float32, Keep);
inline constexpr OpInfo mean = with_half(row("mean", "reduce.cpp"), Widened, Widened);
inline constexpr OpInfo max = row("max", "reduce.cpp");
inline constexpr OpInfo min = row("min", "reduce.cpp");
inline constexpr OpInfo amax = row("amax", "reduce.cpp");
inline constexpr OpInfo amin = row("amin", "reduce.cpp");
inline constexpr OpInfo var = as_composite(row("var", "reduce.cpp"));
inline constexpr OpInfo logsumexp =
    with_half(with_autocast(row("logsumexp", "reduce.cpp"), Float32, Keep), Widened, Widened);
inline constexpr OpInfo sum_to = row("sum_to", "reduce.cpp");

// ---- shape.cpp ----
inline constexpr OpInfo reshape = row("reshape", "shape.cpp");
inline constexpr OpInfo view = row("view", "shape.cpp");
inline constexpr OpInfo flatten = row("flatten", "shape.cpp");
inline constexpr OpInfo squeeze = row("squeeze", "shape.cpp");
inline constexpr OpInfo unsqueeze = row("unsqueeze", "shape.cpp");
inline constexpr OpInfo permute = row("permute", "shape.cpp");
inline constexpr OpInfo transpose = row("transpose", "shape.cpp");
inline constexpr OpInfo t = row("t", "shape.cpp");
inline constexpr OpInfo expand = row("expand", "shape.cpp");
inline constexpr OpInfo narrow = row("narrow", "shape.cpp");
inline constexpr OpInfo slice = row("slice", "shape.cpp");
inline constexpr OpInfo select = row("select", "shape.cpp");
inline constexpr OpInfo split = row("split", "shape.cpp");
inline constexpr OpInfo chunk = row("chunk", "shape.cpp");
inline constexpr OpInfo contiguous = row("contiguous", "shape.cpp");
inline constexpr OpInfo to = row("to", "shape.cpp");  // Variable::to, a dtype or device conversion
inline constexpr OpInfo cat = with_autocast(row("cat", "shape.cpp"), Promote, Promote);
inline constexpr OpInfo stack = with_autocast(row("stack", "shape.cpp"), Promote, Promote);
inline constexpr OpInfo repeat = row("repeat", "shape.cpp");
inline constexpr OpInfo repeat_interleave = row("repeat_interleave", "shape.cpp");
inline constexpr OpInfo tril = row("tril", "shape.cpp");
inline constexpr OpInfo triu = row("triu", "shape.cpp");

// ---- index.cpp ----
inline constexpr OpInfo index_select = row("index_select", "index.cpp");
inline constexpr OpInfo gather = row("gather", "index.cpp");
inline constexpr OpInfo scatter_add = with_half(row("scatter_add", "index.cpp"), Widened, Widened);
inline constexpr OpInfo index_add = with_half(row("index_add", "index.cpp"), Widened, Widened);
inline constexpr OpInfo embedding = row("embedding", "index.cpp");

// ---- linalg.cpp ----
inline constexpr OpInfo matmul =
    with_cost(with_autocast(row("matmul", "linalg.cpp"), Lower, Lower), cost::kGemm);
inline constexpr OpInfo bmm = with_cost(with_autocast(row("bmm", "linalg.cpp"), Lower, Lower), cost::kGemm);
inline constexpr OpInfo mm = with_cost(with_autocast(row("mm", "linalg.cpp"), Lower, Lower), cost::kGemm);
inline constexpr OpInfo linear =
    with_cost(with_autocast(row("linear", "linalg.cpp"), Lower, Lower), cost::kLinear);

// ---- nn.cpp ----
// NOTE: softmax and the other float32-on-CUDA rows keep their 16-bit dtype on the CPU (torch.autocast("cpu")
// lists them nowhere); layer_norm and rms_norm are float32 on the CPU too, where PyTorch lists them nowhere:
// its CPU kernel takes a bf16 input beside float32 weights and computes in float32; ours takes one dtype,
// and casting the input computes the same.
inline constexpr OpInfo softmax =
    with_half(with_autocast(row("softmax", "nn.cpp"), Float32, Keep), Widened, Widened);
inline constexpr OpInfo log_softmax =
    with_half(with_autocast(row("log_softmax", "nn.cpp"), Float32, Keep), Widened, Widened);
inline constexpr OpInfo masked_softmax =
    with_half(with_autocast(row("masked_softmax", "nn.cpp"), Float32, Keep), Widened, Widened);
inline constexpr OpInfo layer_norm =
    with_half(with_autocast(row("layer_norm", "nn.cpp"), Float32, Float32), Native, Widened);
inline constexpr OpInfo layer_norm_composed = as_composite(row("layer_norm_composed", "nn.cpp"));
inline constexpr OpInfo rms_norm =
    with_half(with_autocast(row("rms_norm", "nn.cpp"), Float32, Float32), Native, Native);
inline constexpr OpInfo rms_norm_composed = as_composite(row("rms_norm_composed", "nn.cpp"));
inline constexpr OpInfo dropout = with_half(row("dropout", "nn.cpp"), Native, Widened);
inline constexpr OpInfo gru_gates = with_half(row("gru_gates", "nn.cpp"), Widened, Widened);
inline constexpr OpInfo cross_entropy =
    with_half(with_autocast(row("cross_entropy", "nn.cpp"), Float32, Float32), Widened, Widened);
inline constexpr OpInfo mse_loss = with_autocast(row("mse_loss", "nn.cpp"), Float32, Float32);

// ---- conv.cpp ----
inline constexpr OpInfo conv2d = with_half(
    with_cost(with_autocast(row("conv2d", "conv.cpp"), Lower, Lower), cost::kConv2d), Widened, Widened);
inline constexpr OpInfo conv2d_input_grad = with_half(row("conv2d_input_grad", "conv.cpp"), Widened, Widened);
inline constexpr OpInfo conv2d_weight_grad =
    with_half(row("conv2d_weight_grad", "conv.cpp"), Widened, Widened);
inline constexpr OpInfo max_pool2d = with_half(row("max_pool2d", "conv.cpp"), Widened, Widened);
inline constexpr OpInfo max_pool2d_backward =
    with_half(row("max_pool2d_backward", "conv.cpp"), Widened, Widened);
inline constexpr OpInfo avg_pool2d = with_half(row("avg_pool2d", "conv.cpp"), Widened, Widened);
inline constexpr OpInfo avg_pool2d_backward =
    with_half(row("avg_pool2d_backward", "conv.cpp"), Widened, Widened);

// ---- attention.cpp ----
// NOTE: CUDA's 16-bit flash attention runs the tensor-core kernel (native) unless it is switched off
// (cuda::set_tensor_core_attention), when it widens.
inline constexpr OpInfo flash_attention =
    with_cost(with_autocast(row("flash_attention", "attention.cpp"), Lower, Lower), cost::kAttention);
inline constexpr OpInfo additive_attention_scores = with_half(
    with_autocast(row("additive_attention_scores", "attention.cpp"), Lower, Lower), Widened, Widened);
inline constexpr OpInfo additive_scores_composed =
    as_composite(row("additive_scores_composed", "attention.cpp"));

// ---- rotary.cpp ----
inline constexpr OpInfo rotary_embedding = with_half(row("rotary_embedding", "rotary.cpp"), Native, Native);

}  // namespace op_info

/// Every row above, once (tests/test_op_table.cpp checks it against the rules and autograd/README.md).
inline constexpr const OpInfo* kOpTable[] = {
    &op_info::add,
    &op_info::sub,
    &op_info::mul,
    &op_info::div,
    &op_info::pow,
    &op_info::rsub,
    &op_info::rdiv,
    &op_info::maximum,
    &op_info::minimum,
    &op_info::neg,
    &op_info::exp,
    &op_info::log,
    &op_info::sqrt,
    &op_info::rsqrt,
    &op_info::abs,
    &op_info::sin,
    &op_info::cos,
    &op_info::tanh,
    &op_info::sigmoid,
    &op_info::relu,
    &op_info::gelu,
    &op_info::gelu_grad,
    &op_info::silu,
    &op_info::swiglu,
    &op_info::clamp,
    &op_info::where,
    &op_info::masked_fill,
    //
    &op_info::sum,
    &op_info::mean,
    &op_info::max,
    &op_info::min,
    &op_info::amax,
    &op_info::amin,
    &op_info::var,
    &op_info::logsumexp,
    &op_info::sum_to,
    //
    &op_info::reshape,
    &op_info::view,
    &op_info::flatten,
    &op_info::squeeze,
    &op_info::unsqueeze,
    &op_info::permute,
    &op_info::transpose,
    &op_info::t,
    &op_info::expand,
    &op_info::narrow,
    &op_info::slice,
    &op_info::select,
    &op_info::split,
    &op_info::chunk,
    &op_info::contiguous,
    &op_info::to,
    &op_info::cat,
    &op_info::stack,
    &op_info::repeat,
    &op_info::repeat_interleave,
    &op_info::tril,
    &op_info::triu,
    //
    &op_info::index_select,
    &op_info::gather,
    &op_info::scatter_add,
    &op_info::index_add,
    &op_info::embedding,
    //
    &op_info::matmul,
    &op_info::bmm,
    &op_info::mm,
    &op_info::linear,
    //
    &op_info::softmax,
    &op_info::log_softmax,
    &op_info::masked_softmax,
    &op_info::layer_norm,
    &op_info::layer_norm_composed,
    &op_info::rms_norm,
    &op_info::rms_norm_composed,
    &op_info::dropout,
    &op_info::gru_gates,
    &op_info::cross_entropy,
    &op_info::mse_loss,
    //
    &op_info::conv2d,
    &op_info::conv2d_input_grad,
    &op_info::conv2d_weight_grad,
    &op_info::max_pool2d,
    &op_info::max_pool2d_backward,
    &op_info::avg_pool2d,
    &op_info::avg_pool2d_backward,
    //
    &op_info::flash_attention,
    &op_info::additive_attention_scores,
    &op_info::additive_scores_composed,
    //
    &op_info::rotary_embedding,
};

}  // namespace saccade
