#pragma once
// Differentiable elementwise ops on Variables, with broadcasting (gradients are summed back to each input's
// shape with ops::sum_to). Shapes, dtypes and errors as in ops/elementwise.h.
#include <optional>

#include "autograd/op_info.h"
#include "autograd/variable.h"

namespace saccade {

// The rows of facts of this file's ops (autograd/op_info.h; autograd/op_table.h lists every row once).
namespace op_info {

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

}  // namespace op_info

/// a + b, broadcast together (torch.add).
Variable add(const Variable& a, const Variable& b);
/// a - b, broadcast together (torch.sub).
Variable sub(const Variable& a, const Variable& b);
/// a * b elementwise, broadcast together (torch.mul).
Variable mul(const Variable& a, const Variable& b);
/// a / b elementwise, broadcast together (true division, torch.div).
Variable div(const Variable& a, const Variable& b);
/// a ** b (b differentiable too, where a > 0).
Variable pow(const Variable& a, const Variable& b);
/// a + b, a - b, a * b, a / b with a scalar b (no gradient to b).
Variable add(const Variable& a, double b);
Variable sub(const Variable& a, double b);
Variable mul(const Variable& a, double b);
Variable div(const Variable& a, double b);
/// a ** exponent with a scalar exponent.
Variable pow(const Variable& a, double exponent);
/// b - a and b / a with a scalar b (for `2.0 - x`, `1.0 / x`).
Variable rsub(const Variable& a, double b);
Variable rdiv(const Variable& a, double b);
/// Elementwise max / min; at ties the gradient is split evenly (as PyTorch).
Variable maximum(const Variable& a, const Variable& b);
Variable minimum(const Variable& a, const Variable& b);

/// -a.
Variable neg(const Variable& a);
/// e^a.
Variable exp(const Variable& a);
/// ln a (NaN for a < 0, -inf at 0).
Variable log(const Variable& a);
/// √a.
Variable sqrt(const Variable& a);
/// 1 / √a.
Variable rsqrt(const Variable& a);
/// |a| (gradient 0 at a = 0, as torch).
Variable abs(const Variable& a);
/// sin a (radians).
Variable sin(const Variable& a);
/// cos a (radians).
Variable cos(const Variable& a);
/// tanh a (float32 through a rational approximation within 3.5e-7, ops/elementwise_math.h).
Variable tanh(const Variable& a);
/// 1 / (1 + e^-a).
Variable sigmoid(const Variable& a);
/// max(a, 0); NaN propagates (as torch.relu).
Variable relu(const Variable& a);
/// Exact GELU x Φ(x) (Hendrycks & Gimpel 2016).
Variable gelu(const Variable& a);
/// d gelu(a) / da = Φ(a) + a φ(a), elementwise (the derivative gelu's rule uses; differentiable again).
Variable gelu_grad(const Variable& a);
/// SiLU (swish) a σ(a) (Elfwing et al. 2018; torch.nn.functional.silu). The backward is one pass
/// (ops::silu_backward); under create_graph it is composed of sigmoid and mul, so differentiable again.
Variable silu(const Variable& a);
/// silu(gate) ⊙ up, forward in one pass (ops::swiglu): the gating of a SwiGLU feed-forward (Shazeer 2020),
/// as Llama's MLP, down_proj(silu(gate_proj(x)) * up_proj(x)). gate, up: one shape and dtype. Backward: d up
/// = silu(gate) ⊙ g and d gate = silu'(gate) ⊙ (g ⊙ up) in one pass (ops::swiglu_backward); under
/// create_graph the composed silu(gate) * up. Throws saccade::Error naming "swiglu" for other shapes or
/// dtypes.
Variable swiglu(const Variable& gate, const Variable& up);
/// Gradient passes where lo <= a <= hi, zero outside.
Variable clamp(const Variable& a, std::optional<double> lo, std::optional<double> hi);

/// cond (Bool tensor, no gradient) ? a : b, broadcast together.
Variable where(const Tensor& cond, const Variable& a, const Variable& b);
/// a with `value` where mask (Bool, broadcast to a's shape) is true; no gradient flows to filled entries.
Variable masked_fill(const Variable& a, const Tensor& mask, double value);

/// The C++ operators call the functions above.
inline Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
inline Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
inline Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
inline Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }
inline Variable operator+(const Variable& a, double b) { return add(a, b); }
inline Variable operator-(const Variable& a, double b) { return sub(a, b); }
inline Variable operator*(const Variable& a, double b) { return mul(a, b); }
inline Variable operator/(const Variable& a, double b) { return div(a, b); }
inline Variable operator+(double a, const Variable& b) { return add(b, a); }
inline Variable operator-(double a, const Variable& b) { return rsub(b, a); }
inline Variable operator*(double a, const Variable& b) { return mul(b, a); }
inline Variable operator/(double a, const Variable& b) { return rdiv(b, a); }
inline Variable operator-(const Variable& a) { return neg(a); }

}  // namespace saccade
