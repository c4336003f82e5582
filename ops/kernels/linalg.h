#pragma once
// The kernels of matrix products, as every backend implements them: one row per kernel (row format:
// ops/backend.h), its contract above it. CPU: ops/cpu/linalg.cpp; CUDA: ops/cuda/linalg.cpp. The ops that
// call them: ops/linalg.h. A contract header includes no op header (scripts/check_layers).
#include <cstdint>

#include "ops/tensor.h"

namespace saccade {

/// How the last two dims (rows R, cols C) of a strided tensor are handed to a row-major GEMM (cblas, cuBLAS)
/// without a copy: row-major (`trans` false; element (r, c) at r * ld + c) or a transposed column-major
/// matrix (`trans` true; element (r, c) at c * ld + r). `ok` is false when neither fits (then the op copies
/// to contiguous before calling Backend::bmm). Part of bmm's contract, shared by every backend.
struct MatrixLayout {
  bool ok = false;
  bool trans = false;
  int64_t ld = 1;
};
/// The layout of `t`'s last two dims (t has at least 2 dims). A size-1 dim may have any stride.
MatrixLayout matrix_layout(const Tensor& t);

}  // namespace saccade

#define SACCADE_LINALG_KERNELS(K, K16)                                                                     \
  /* out (B, M, N) contiguous = a (B, M, K) @ b (B, K, N). a and b may have any strides for which          \
   * matrix_layout(...).ok holds (row- or column-major matrices, see MatrixLayout above); batch            \
   * stride may be 0. One dtype: float32, float64, bfloat16 or float16 (16-bit: float32 sums, rounded once \
   * per output element). */                                                                               \
  K(bmm, (const Tensor& a, const Tensor& b, const Tensor& out), (a, b, out))
