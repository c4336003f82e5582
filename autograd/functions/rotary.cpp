// The rotary position embedding's rule (autograd/functions/rotary.h).
#include "autograd/functions/rotary.h"

#include "autograd/function.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/shape.h"
#include "ops/elementwise.h"

namespace saccade {

namespace {

using Grads = std::vector<Variable>;

// y = R(±θ) x:  dx = R(∓θ) g  (a rotation's inverse is its transpose)
Variable rotate(const Variable& x, const Tensor& cos, const Tensor& sin, RotaryStyle style, bool inverse) {
  OpScope op(op_info::rotary_embedding, x, cos, sin);
  Tensor y = ops::rotary_embedding(x.data(), cos, sin, style, inverse);
  return make_result(op, y, {x}, [cos, sin, style, inverse](const Variable& g) -> Grads {
    return {rotate(g, cos, sin, style, !inverse)};
  });
}

}  // namespace

// x: (..., T, D); cos, sin: (T, R/2)
Variable rotary_embedding(const Variable& x, const Tensor& cos, const Tensor& sin, RotaryStyle style) {
  return rotate(x, cos, sin, style, false);
}

Variable rotary_embedding_composed(const Variable& x, const Tensor& cos, const Tensor& sin,
                                   RotaryStyle style) {
  const int64_t half = cos.size(1), R = 2 * half, D = x.size(-1);
  const int64_t last = x.dim() - 1;
  const Variable c(cos.to(x.dtype())), s(sin.to(x.dtype()));
  Variable rotated;
  if (style == RotaryStyle::Half) {
    // x ⊙ [c, c] + rotate_half(x) ⊙ [s, s],  rotate_half(x) = [-x2, x1]
    const Variable x1 = narrow(x, last, 0, half), x2 = narrow(x, last, half, half);
    const Variable cc = cat({c, c}, -1), ss = cat({s, s}, -1);
    rotated = add(mul(narrow(x, last, 0, R), cc), mul(cat({neg(x2), x1}, -1), ss));
  } else {
    // pairs (2i, 2i + 1): viewed as (..., R/2, 2)
    Shape pairs = x.shape();
    pairs[last] = half;
    pairs.push_back(2);
    const Variable xp = reshape(contiguous(narrow(x, last, 0, R)), pairs);
    const Variable a = select(xp, -1, 0), b = select(xp, -1, 1);
    const Variable ya = sub(mul(a, c), mul(b, s)), yb = add(mul(b, c), mul(a, s));
    Shape flat = x.shape();
    flat[last] = R;
    rotated = reshape(stack({ya, yb}, -1), flat);
  }
  return R < D ? cat({rotated, narrow(x, last, R, D - R)}, -1) : rotated;
}

}  // namespace saccade
