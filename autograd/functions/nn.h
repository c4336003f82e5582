#pragma once
// Differentiable nn primitives on Variables: softmax family, masked softmax, layer norm, RMS norm, dropout,
// losses. Shapes, dtypes, semantics and errors as in ops/nn.h; each derivative rule sits beside its forward
// in nn.cpp.
#include <optional>

#include "autograd/op_info.h"
#include "autograd/variable.h"
#include "ops/nn.h"

namespace saccade {

// The rows of facts of this file's ops (autograd/op_info.h; autograd/op_table.h lists every row once).
namespace op_info {

// NOTE: softmax and the other float32-on-CUDA rows keep their 16-bit dtype on the CPU (torch.autocast("cpu")
// lists them nowhere); layer_norm and rms_norm are float32 on the CPU too, where PyTorch lists them nowhere:
// its CPU kernel takes a bf16 input beside float32 weights and computes in float32; ours takes one dtype,
// and casting the input computes the same.
inline constexpr OpInfo softmax =
    with_kernel16(with_autocast(row("softmax", "nn.cpp"), Float32, Keep), Kernel16::Softmax);
inline constexpr OpInfo log_softmax =
    with_kernel16(with_autocast(row("log_softmax", "nn.cpp"), Float32, Keep), Kernel16::Softmax);
inline constexpr OpInfo masked_softmax =
    with_kernel16(with_autocast(row("masked_softmax", "nn.cpp"), Float32, Keep), Kernel16::Softmax);
inline constexpr OpInfo layer_norm =
    with_kernel16(with_autocast(row("layer_norm", "nn.cpp"), Float32, Float32), Kernel16::LayerNorm);
inline constexpr OpInfo layer_norm_composed = as_composite(row("layer_norm_composed", "nn.cpp"));
inline constexpr OpInfo rms_norm =
    with_kernel16(with_autocast(row("rms_norm", "nn.cpp"), Float32, Float32), Kernel16::RmsNorm);
inline constexpr OpInfo rms_norm_composed = as_composite(row("rms_norm_composed", "nn.cpp"));
inline constexpr OpInfo dropout = with_kernel16(row("dropout", "nn.cpp"), Kernel16::Dropout);
inline constexpr OpInfo gru_gates = with_half(row("gru_gates", "nn.cpp"), Widened, Widened);
inline constexpr OpInfo cross_entropy =
    with_half(with_autocast(row("cross_entropy", "nn.cpp"), Float32, Float32), Widened, Widened);
inline constexpr OpInfo mse_loss = with_autocast(row("mse_loss", "nn.cpp"), Float32, Float32);

}  // namespace op_info

using ops::Reduction;

/// softmax along `dim` (as torch.softmax); an all -inf slice gives zeros and zero gradient.
Variable softmax(const Variable& x, int64_t dim);
/// log-softmax along `dim` (as torch.log_softmax).
Variable log_softmax(const Variable& x, int64_t dim);
/// Softmax over the last dim of scores x (..., Tq, Tk) with masked keys excluded (d2l section 11.3):
/// `valid_lens_or_mask` is int64 valid_lens (B) or (B, Tq), a Bool keep-mask broadcastable to x (true =
/// attend, as scaled_dot_product_attention's boolean attn_mask), or undefined (plain softmax). Masked
/// positions, and every position of a fully masked row, get probability 0 and gradient 0.
Variable masked_softmax(const Variable& x, const Tensor& valid_lens_or_mask);
/// Layer normalisation over the trailing dims `normalized_shape` (Ba et al. 2016; as
/// torch.nn.functional.layer_norm). weight, bias: of normalized_shape, or undefined Variables.
Variable layer_norm(const Variable& x, const Shape& normalized_shape, const Variable& weight = Variable(),
                    const Variable& bias = Variable(), double eps = 1e-5);
/// layer_norm composed of mean, rsqrt, mul, add (the readable reference of the fused kernel, and how its
/// second derivative is computed under create_graph). Same arguments; does not check shapes itself.
Variable layer_norm_composed(const Variable& x, const Shape& normalized_shape,
                             const Variable& weight = Variable(), const Variable& bias = Variable(),
                             double eps = 1e-5);
/// Root-mean-square normalisation over the trailing dims `normalized_shape` (Zhang & Sennrich 2019, eq. 4; as
/// torch.nn.functional.rms_norm): x / sqrt(mean(x²) + eps) ⊙ weight. weight: of normalized_shape, or an
/// undefined Variable; eps unset: the machine epsilon of x's dtype (PyTorch's default; Llama checkpoints set
/// 1e-5 or 1e-6). One fused pass each way (ops::rms_norm); twice differentiable through rms_norm_composed.
/// Under autocast: float32, as layer_norm. Throws saccade::Error naming rms_norm for a normalized_shape that
/// is not x's trailing dims, a weight of another shape or dtype, or eps < 0.
Variable rms_norm(const Variable& x, const Shape& normalized_shape, const Variable& weight = Variable(),
                  std::optional<double> eps = std::nullopt);
/// rms_norm composed of mean, rsqrt and mul (its readable reference, and its second derivative). Same
/// arguments; does not check shapes itself.
Variable rms_norm_composed(const Variable& x, const Shape& normalized_shape,
                           const Variable& weight = Variable(), std::optional<double> eps = std::nullopt);
/// Inverted dropout (as torch.nn.functional.dropout): zeroes each element with probability p and scales the
/// rest by 1/(1-p); the gradient is masked and scaled the same way. Returns x itself when !training or p ==
/// 0.
Variable dropout(const Variable& x, double p, bool training = true, Generator* gen = nullptr);
/// The gate math of one GRU step (ops::gru_gates; torch.nn.GRUCell after its two products): gi, gh (B, 3H)
/// laid out [r | z | n], h (B, H) -> h' (B, H) = n + z ⊙ (h - n). Fused on the CPU; the composed reference
/// is nn::gru_gates_composed. Throws saccade::Error naming "gru_gates" and the shapes for mismatched shapes,
/// dtypes or devices.
Variable gru_gates(const Variable& gi, const Variable& gh, const Variable& h);
/// The gate math of one GRU step composed of autograd ops (chunk, sigmoid, tanh, products): gi, gh (B, 3H) or
/// (3H) laid out [r | z | n], h (B, H) or (H) -> h'. The readable reference that GRUCell and GRU's fused
/// gru_gates is tested against, and how gru_gates is differentiated under create_graph.
Variable gru_gates_composed(const Variable& gi, const Variable& gh, const Variable& h);
/// Cross-entropy of logits (N, C) against int64 class indices target (N), or of logits (N, C, d1, ...)
/// against target (N, d1, ...) (a loss per position; None returns target's shape), with ignore_index and
/// label_smoothing exactly as torch.nn.functional.cross_entropy (torch 1.13). Differentiable in logits.
Variable cross_entropy(const Variable& logits, const Tensor& target, int64_t ignore_index = -100,
                       Reduction reduction = Reduction::Mean, double label_smoothing = 0.0);
/// Mean squared error (as torch.nn.functional.mse_loss); a and b of one shape, both differentiable.
Variable mse_loss(const Variable& a, const Variable& b, Reduction reduction = Reduction::Mean);

}  // namespace saccade
