// Default kernels: every kernel a backend does not override throws, naming the kernel and the device.
#include "ops/backend.h"

#include "ops/tensor.h"

namespace saccade {

std::string_view unary_op_name(UnaryOp op) {
  static constexpr std::string_view names[] = {"neg",  "exp",     "log",  "sqrt", "rsqrt",    "abs",
                                               "sin",  "cos",     "tanh", "sigmoid", "relu",  "gelu",
                                               "gelu_grad", "sign", "pow", "logical_not"};
  return names[static_cast<int>(op)];
}

std::string_view binary_op_name(BinaryOp op) {
  static constexpr std::string_view names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq",
                                               "ne",  "lt",  "le",  "gt",  "ge",  "logical_and", "logical_or"};
  return names[static_cast<int>(op)];
}

void Backend::missing(const char* kernel) const {
  throw Error(fmt::format("{}: kernel not implemented on the {} backend", kernel, name()));
}

void Backend::copy(const Tensor&, const Tensor&) { missing("copy"); }
void Backend::flash_attention_forward(const Tensor&, const Tensor&, const Tensor&, const ops::AttentionMask&,
                                      double, const ops::AttentionDropout&, const Tensor&, const Tensor&) {
  missing("flash_attention_forward");
}
void Backend::flash_attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                       const Tensor&, const Tensor&, const ops::AttentionMask&, double,
                                       const ops::AttentionDropout&, const Tensor&, const Tensor&,
                                       const Tensor&) {
  missing("flash_attention_backward");
}
void Backend::fill(const Tensor&, double) { missing("fill"); }
void Backend::arange(const Tensor&, double, double) { missing("arange"); }
void Backend::unary(UnaryOp, const Tensor&, const Tensor&, double) { missing("unary"); }
void Backend::binary(BinaryOp, const Tensor&, const Tensor&, const Tensor&) { missing("binary"); }
void Backend::where(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { missing("where"); }
void Backend::reduce(ReduceOp, const Tensor&, const Tensor&, int64_t, int64_t, int64_t) { missing("reduce"); }
void Backend::arg_reduce(ReduceOp, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, int64_t) {
  missing("arg_reduce");
}
void Backend::bmm(const Tensor&, const Tensor&, const Tensor&) { missing("bmm"); }
void Backend::softmax(const Tensor&, const Tensor&, bool) { missing("softmax"); }
void Backend::softmax_backward(const Tensor&, const Tensor&, const Tensor&, bool) { missing("softmax_backward"); }
void Backend::layer_norm(const Tensor&, const Tensor&, const Tensor&, double, const Tensor&, const Tensor&,
                         const Tensor&) {
  missing("layer_norm");
}
void Backend::layer_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                  const Tensor&, const Tensor&, const Tensor&) {
  missing("layer_norm_backward");
}
void Backend::index_select(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t) {
  missing("index_select");
}
void Backend::index_add(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t) { missing("index_add"); }
void Backend::gather(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t) { missing("gather"); }
void Backend::scatter_add(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t) {
  missing("scatter_add");
}
void Backend::im2col(const Tensor&, const Tensor&, int, int, int, int, int, int) { missing("im2col"); }
void Backend::col2im(const Tensor&, const Tensor&, int, int, int, int, int, int) { missing("col2im"); }
void Backend::max_pool2d(const Tensor&, const Tensor&, const Tensor&, int, int, int, int, int, int) {
  missing("max_pool2d");
}
void Backend::max_pool2d_backward(const Tensor&, const Tensor&, const Tensor&) { missing("max_pool2d_backward"); }
void Backend::avg_pool2d(const Tensor&, const Tensor&, int, int, int, int, int, int) { missing("avg_pool2d"); }
void Backend::avg_pool2d_backward(const Tensor&, const Tensor&, int, int, int, int, int, int) {
  missing("avg_pool2d_backward");
}
void Backend::uniform(const Tensor&, uint64_t, uint64_t, double, double) { missing("uniform"); }
void Backend::normal(const Tensor&, uint64_t, uint64_t, double, double) { missing("normal"); }

}  // namespace saccade
