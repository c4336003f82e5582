#pragma once
// The 16-bit route's facts, in one place: which kernels meet bfloat16 / float16 operands through the route
// (Kernel16), and on which backend each one takes them itself (native_16bit_on). The backends answer
// Backend::native_16bit from this table (cpu/backend.h, cuda/backend.h), and the op table's 16-bit columns
// (autograd/op_info.h, with_kernel16) are read from it, so the fact is stated once. Plain data, no
// includes: autograd/op_info.h reads it without the backend's headers.

namespace saccade {

/// The kernels whose bfloat16 / float16 route a backend chooses (Backend::native_16bit): run on the 16-bit
/// tensors themselves, or widened by Backend::widen (float32 copies in, the float32 kernel, each 16-bit
/// output rounded once). The routing itself is Widening<> (ops/backend_widening.h).
enum class Kernel16 {
  Softmax,
  SoftmaxBackward,
  LayerNorm,
  LayerNormBackward,
  RmsNorm,
  RmsNormBackward,
  AdditiveScores,
  AdditiveScoresBackward,
  IndexAdd,
  MaxPool2d,
  MaxPool2dBackward,
  AvgPool2d,
  AvgPool2dBackward,
  Dropout,
  RotaryEmbedding,
  Uniform,
  Normal,
  GruGates,
  GruGatesBackward,
  CrossEntropyRows,
  CrossEntropyRowsBackward,
};

/// Where a kernel of Kernel16 takes 16-bit operands itself (loads and stores 16 bits, float32 inside): on
/// the CPU backend, on the CUDA backend. Where it does not, Widening<> widens it.
struct Native16 {
  bool cpu = false;
  bool cuda = false;
};

/// The one statement of which kernel is native in 16 bits on which backend: the CPU's dropout (converts
/// block by block, cpu/random.cpp), layer_norm and rms_norm forward and backward (row by row, the float32
/// row code: each element widened where it is read, each result rounded once; cpu/nn.cpp) and
/// rotary_embedding (cpu/rotary.cpp); CUDA's rms_norm and its backward (nn.cu) and rotary_embedding
/// (rotary.cu). Every other kernel of Kernel16 is widened. A switch without a default, so that a new Kernel16
/// without a case here is a -Wswitch warning.
constexpr Native16 native_16bit_on(Kernel16 k) {
  switch (k) {
    case Kernel16::Dropout:
    case Kernel16::LayerNorm:
    case Kernel16::LayerNormBackward:
      return {.cpu = true, .cuda = false};
    case Kernel16::RmsNorm:
    case Kernel16::RmsNormBackward:
    case Kernel16::RotaryEmbedding:
      return {.cpu = true, .cuda = true};
    case Kernel16::CrossEntropyRows:
    case Kernel16::CrossEntropyRowsBackward:
      return {.cpu = true, .cuda = false};
    case Kernel16::Softmax:
    case Kernel16::SoftmaxBackward:
    case Kernel16::AdditiveScores:
    case Kernel16::AdditiveScoresBackward:
    case Kernel16::IndexAdd:
    case Kernel16::MaxPool2d:
    case Kernel16::MaxPool2dBackward:
    case Kernel16::AvgPool2d:
    case Kernel16::AvgPool2dBackward:
    case Kernel16::Uniform:
    case Kernel16::Normal:
    case Kernel16::GruGates:
    case Kernel16::GruGatesBackward:
      break;
  }
  return {};
}

}  // namespace saccade
