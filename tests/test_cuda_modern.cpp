// The modern-attention ops on CUDA against the CPU (issue 40): SiLU, its backward and SwiGLU through the
// elementwise kernels (ops/cuda/elementwise.cu with the functors of ops/elementwise_math.h), RMSNorm forward
// and backward (ops/cuda/nn.cu's rms_norm kernels: layer norm's device code without the centring) and the
// rotary embedding (ops/cuda/rotary.cu), in float32, float64, bfloat16 and float16. both() runs each
// computation on the CPU everywhere and on the GPU when there is one (skipping with a warning otherwise).
// Tolerances: float32 1e-5, float64 1e-12 (the devices differ in the order of sums and in exp's last bits);
// 16-bit results within one rounding of the 16-bit result (2^-8 relative for bfloat16, 2^-11 for float16)
// where both devices compute in float32 and round once, four where a float32 sum over a row comes before the
// rounding.
#include <vector>

#include "cuda_helpers.h"
#include "helpers.h"

using namespace saccade;
using namespace saccade::testing;

namespace {

// The tolerance of a result of dtype t: float32 1e-5, float64 1e-12, 16 bits one rounding.
double one_rounding(DType t) {
  switch (t) {
    case DType::Float64:
      return 1e-12;
    case DType::BFloat16:
      return 0x1p-8;
    case DType::Float16:
      return 0x1p-11;
    default:
      return 1e-5;
  }
}

const DType kFloatTypes[] = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16};

}  // namespace

TEST_CASE("cuda modern ops: silu, silu_backward and swiglu = the CPU in every float dtype",
          "[cuda][swiglu]") {
  for (DType t : kFloatTypes) {
    INFO(dtype_name(t));
    both(
        [&](Device d) {
          // 3 x 3 standard deviations: the saturated tails of σ too; a transposed (strided) operand
          Tensor x = ops::mul(randn({7, 129}, 1), 3.0).to(t).to(d);
          Tensor u = randn({7, 129}, 2).to(t).to(d), g = randn({129, 7}, 3).to(t).to(d).transpose(0, 1);
          return std::vector<Tensor>{
              ops::silu(x).to(DType::Float64), ops::silu_backward(g, x).to(DType::Float64),
              ops::swiglu(x, u).to(DType::Float64), ops::swiglu(g, x).to(DType::Float64)};
        },
        one_rounding(t));
  }
  SKIP_WITHOUT_GPU();
}

TEST_CASE("cuda modern ops: rms_norm forward and backward = the CPU in every float dtype",
          "[cuda][rms_norm]") {
  for (DType t : kFloatTypes) {
    INFO(dtype_name(t));
    const bool half = is_half(t);
    both(
        [&](Device d) {
          std::vector<Tensor> out;
          // rows of 700 (a block's threads fold several elements each) and of 3 x 50 (two normalised dims)
          for (int kind = 0; kind < 2; ++kind) {
            const Shape xs = kind == 0 ? Shape{5, 3, 700} : Shape{4, 3, 50};
            const Shape ns = kind == 0 ? Shape{700} : Shape{3, 50};
            Variable vx(randn(xs, 10 + kind).to(t).to(d), true),
                vw(ops::add(randn(ns, 12 + kind), 1.0).to(t).to(d), true);
            Variable y = rms_norm(vx, ns, kind == 0 ? vw : Variable(), 1e-6);
            y.backward(randn(xs, 14 + kind).to(t).to(d));
            out.push_back(y.data().to(DType::Float64));
            out.push_back(vx.grad().to(DType::Float64));
            if (kind == 0) out.push_back(vw.grad().to(DType::Float64));
          }
          return out;
        },
        (half ? 4 : 1) * one_rounding(t));
  }
  SKIP_WITHOUT_GPU();
}

TEST_CASE("cuda modern ops: rotary_embedding = the CPU, both styles, partial rotary, inverse, every dtype",
          "[cuda][rotary]") {
  for (DType t : kFloatTypes) {
    INFO(dtype_name(t));
    for (RotaryStyle style : {RotaryStyle::Half, RotaryStyle::Interleaved})
      for (int64_t R : {16, 8}) {  // all of D = 16, or the first half (partial rotary)
        INFO("style " << int(style) << " R " << R);
        both(
            [&](Device d) {
              const DType table = t == DType::Float64 ? DType::Float64 : DType::Float32;
              // positions 5 .. 15 of a 40-position table: a KV-cache step's offset
              ops::RotaryTables tab = ops::rotary_tables(40, R, 10000.0, table, d);
              Tensor cos = tab.cos.narrow(0, 5, 11), sin = tab.sin.narrow(0, 5, 11);
              Tensor x = randn({2, 3, 11, 16}, 20).to(t).to(d);
              Variable vx(x, true);
              Variable y = rotary_embedding(vx, cos, sin, style);
              y.backward(randn({2, 3, 11, 16}, 21).to(t).to(d));
              return std::vector<Tensor>{y.data().to(DType::Float64), vx.grad().to(DType::Float64),
                                         ops::rotary_embedding(x, cos, sin, style, true).to(DType::Float64)};
            },
            one_rounding(t));
      }
  }
  SKIP_WITHOUT_GPU();
}
