#pragma once
// Rotary position embedding (RoPE; Su et al. 2021, "RoFormer", section 3.4.2, eq. 34): each pair of
// dimensions (x_a, x_b) of a query or key at position p is rotated by the angle p θ_i,
//   y_a = x_a cos(p θ_i) - x_b sin(p θ_i),   y_b = x_b cos(p θ_i) + x_a sin(p θ_i),   θ_i = theta^(-2i / R),
// so that the score of a query at m and a key at n depends on m - n only. Two conventions pair the
// dimensions differently:
//   - Half (GPT-NeoX, Hugging Face's Llama, rotate_half): pair i is (i, i + R/2);
//   - Interleaved (GPT-J, Meta's original Llama): pair i is (2i, 2i + 1).
// Partial rotary (GPT-NeoX's rotary_pct, Phi's partial_rotary_factor) rotates the first R of D dims and
// passes the others through.
#include <cstdint>
#include <vector>

#include "ops/tensor.h"

namespace saccade::ops {

/// Which dimensions form a rotated pair (see the file comment).
enum class RotaryStyle { Half, Interleaved };

/// How the frequencies θ_i are rescaled to stretch a model over a longer context than it was trained on, as
/// transformers' ROPE_INIT_FUNCTIONS (its config's rope_scaling / rope_parameters; attention_factor 1):
///   - Default: θ_i = theta^(-2i / R);
///   - Linear (position interpolation, Chen et al. 2023, arXiv 2306.15595): θ_i / factor;
///   - Llama3 (Meta's Llama 3.1 rope scaling): with wavelength λ_i = 2π / θ_i, L the original context,
///     λ_lo = L / low_freq_factor and λ_hi = L / high_freq_factor: θ_i unchanged where λ_i < λ_hi (high
///     frequencies), θ_i / factor where λ_i > λ_lo (low ones), and between them the blend
///     (1 - s) θ_i / factor + s θ_i with s = (L / λ_i - low_freq_factor) / (high_freq_factor -
///     low_freq_factor);
///   - Yarn (Peng et al. 2023, "YaRN", arXiv 2309.00071, eqs. 17-21): with d = rotary_dim, the correction
///     dims c(r) = d ln(L / (2π r)) / (2 ln theta) of beta_fast and beta_slow rotations (floored and ceiled
///     when truncate) clamped to [0, d - 1] as lo, hi, and the ramp γ_i = clamp((i - lo) / (hi - lo), 0, 1):
///     θ_i / factor · γ_i + θ_i · (1 - γ_i); and the tables' cos and sin times attention_factor (when 0:
///     0.1 ln(factor) + 1, or the ratio of that with mscale and with mscale_all_dim when both are set), so
///     the scores grow by its square (rotary_attention_factor);
///   - LongRope (Ding et al. 2024, "LongRoPE", arXiv 2402.13753; Phi-3's 128k models and Phi-4-mini): θ_i /
///     short_factor[i] while a forward's positions stay within L, θ_i / long_factor[i] once they pass it
///     (rope_scaling_at; transformers' longrope_frequency_update), and the tables' cos and sin times
///     attention_factor (when 0: √(1 + ln(factor) / ln L), or 1 for factor <= 1), whichever set runs;
///   - Dynamic (dynamic NTK-aware scaling, bloc97 and emozilla 2023; Code Llama's and Qwen's "dynamic"): the
///     base itself grows with the length S = max(positions, L) a forward reaches, theta' = theta ((factor S /
///     L) - (factor - 1))^(R / (R - 2)), θ_i = theta'^(-2i / R): the default frequencies up to L
///     (rope_scaling_at puts S in `positions`; transformers' _compute_dynamic_ntk_parameters, L its config's
///     max_position_embeddings). As transformers with a KV cache, each decoded key keeps the rotation of the
///     length at which it was written. (transformers also keeps a grown base for a later, shorter forward
///     that is still past L, until one within L resets it; here each forward's own length sets it.)
struct RopeScaling {
  enum class Type { Default, Linear, Llama3, Yarn, LongRope, Dynamic };
  Type type = Type::Default;
  double factor = 1.0;                              ///< Linear, Llama3, Yarn, Dynamic: how much longer
  double low_freq_factor = 1.0;                     ///< Llama3
  double high_freq_factor = 4.0;                    ///< Llama3
  int64_t original_max_position_embeddings = 8192;  ///< Llama3, Yarn, LongRope, Dynamic: L, the context
  double beta_fast = 32.0, beta_slow = 1.0;         ///< Yarn: the ramp's bounds, in rotations
  double attention_factor = 0.0;  ///< Yarn, LongRope: the cos and sin factor; 0: derived from factor
  double mscale = 0.0, mscale_all_dim = 0.0;          ///< Yarn (DeepSeek's): 0 unless both are set
  bool truncate = true;                               ///< Yarn: floor and ceil the correction dims
  std::vector<double> short_factor{}, long_factor{};  ///< LongRope: rotary_dim / 2 positive factors each
  int64_t positions = 0;  ///< Dynamic: S, the length that sets the base (rope_scaling_at); 0 or <= L: L
  bool operator==(const RopeScaling&) const = default;
};

/// Which set of tables a forward whose positions reach `positions` (its last position + 1) runs: 0 for the
/// scaling's own; past original_max_position_embeddings, 1 for LongRope's long factors and `positions` for
/// Dynamic's grown base. 0 for every other type.
int64_t rope_tables_at(const RopeScaling& scaling, int64_t positions);
/// The scaling whose tables serve a forward whose positions reach `positions` (its last position + 1, as
/// transformers' max(position_ids) + 1): `scaling` itself, but past original_max_position_embeddings for
/// LongRope the same with long_factor in short_factor's place, and for Dynamic the same with `positions` set.
RopeScaling rope_scaling_at(const RopeScaling& scaling, int64_t positions);

/// θ_i, i = 0 .. rotary_dim/2 - 1: the rotary inverse frequencies of base `theta` under `scaling` (see
/// RopeScaling), in float64. Throws saccade::Error naming `op` for an odd or non-positive rotary_dim, theta
/// <= 1 (or not finite), a factor < 1 (Linear, Llama3, Yarn, Dynamic; not finite), a Dynamic rotary_dim of
/// 2 or original_max_position_embeddings < 1, or (Llama3) low_freq_factor <= 0,
/// high_freq_factor <= low_freq_factor or original_max_position_embeddings < 1, or (LongRope) factors that
/// are not rotary_dim / 2 positive finite numbers each.
std::vector<double> rotary_inv_freq(int64_t rotary_dim, double theta, const RopeScaling& scaling = {},
                                    const char* op = "rotary_inv_freq");

/// The factor rotary_tables multiplies cos and sin by: Yarn's and LongRope's attention_factor (see
/// RopeScaling), 1 for the other types.
double rotary_attention_factor(const RopeScaling& scaling);

/// cos(p θ_i) and sin(p θ_i) for positions p = 0 .. num_positions - 1 and pairs i = 0 .. rotary_dim/2 - 1.
struct RotaryTables {
  Tensor cos, sin;  ///< (num_positions, rotary_dim / 2)
};
/// The tables of RoPE with base `theta` (10000 in RoFormer and Llama 2; 500000 in Llama 3), computed in
/// float64 (angles p θ_i exact to double rounding at any position) and stored as `dtype` (float32 or float64)
/// on `device`; θ_i rescaled by `scaling` (rotary_inv_freq), both times rotary_attention_factor(scaling).
/// Throws saccade::Error naming rotary_tables for num_positions < 0, another dtype, or the arguments
/// rotary_inv_freq refuses.
RotaryTables rotary_tables(int64_t num_positions, int64_t rotary_dim, double theta,
                           DType dtype = DType::Float32, Device device = Device::cpu(),
                           const RopeScaling& scaling = {});

/// x rotated at its positions: x (..., T, D) (a (B, H, T, D) head tensor, any strides), cos and sin (T, R/2)
/// the rows of rotary_tables at the T positions (index_select of the tables by the positions, or a narrow at
/// an offset: a KV-cache step rotates at its own position), R = 2 cos.size(1) <= D: the first R dims are
/// rotated by `style`, the others copied. `inverse` rotates by -p θ_i (the backward: the rotation's
/// transpose). Floating x (bfloat16 / float16: computed in float32, rounded once); cos and sin float32, or
/// float64 for a float64 x. Result: x's shape and dtype, contiguous. Throws saccade::Error naming
/// rotary_embedding for x with fewer than 2 dims, tables of another shape (T, R/2 with R even and <= D),
/// dtype or device.
Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryStyle style,
                        bool inverse = false);

}  // namespace saccade::ops
