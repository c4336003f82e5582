#pragma once
// kOpTable: every op's row of facts, once, for tests and tools (tests/test_op_table.cpp checks it against the
// rules, and autograd/README.md's rule index against it). Each row is defined beside its public function, in
// autograd/functions/<file>.h; the row's type and its columns are autograd/op_info.h's.
#include "autograd/functions/attention.h"
#include "autograd/functions/conv.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/rotary.h"
#include "autograd/functions/shape.h"
#include "autograd/op_info.h"

namespace saccade {

/// Every row of autograd/functions/*.h, once.
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
    &op_info::grouped_mm,
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
