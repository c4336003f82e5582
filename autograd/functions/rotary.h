#pragma once
// The rotary position embedding on Variables (ops/rotary.h; Su et al. 2021). Its derivative is the inverse
// rotation of the incoming gradient (a rotation's transpose), so the rule is the op again: differentiable
// any number of times.
#include "autograd/op_info.h"
#include "autograd/variable.h"
#include "ops/rotary.h"

namespace saccade {

// The rows of facts of this file's ops (autograd/op_info.h; autograd/op_table.h lists every row once).
namespace op_info {

inline constexpr OpInfo rotary_embedding =
    with_kernel16(row("rotary_embedding", "rotary.cpp"), Kernel16::RotaryEmbedding);

}  // namespace op_info

using ops::RotaryStyle;

/// x rotated at its positions (ops::rotary_embedding): x (..., T, D) — a (B, H, T, D) query or key tensor —
/// cos, sin (T, R/2) the rows of ops::rotary_tables at the T positions; the first R <= D dims rotated by
/// `style`, the rest passed through. dx = the inverse rotation of g. Any floating dtype (16-bit: float32
/// inside, one rounding). Throws what ops::rotary_embedding throws.
Variable rotary_embedding(const Variable& x, const Tensor& cos, const Tensor& sin, RotaryStyle style);

/// The composed reference of rotary_embedding (Half: Hugging Face's x ⊙ cos + rotate_half(x) ⊙ sin with the
/// tables repeated over the two halves; Interleaved: the pairs as strided views), of saccade:: functions:
/// the readable version the fused kernel is tested against. Same arguments; checks nothing itself.
Variable rotary_embedding_composed(const Variable& x, const Tensor& cos, const Tensor& sin,
                                   RotaryStyle style);

}  // namespace saccade
