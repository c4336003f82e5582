#pragma once
// Matrix products: matmul (torch.matmul semantics), bmm, mm, in the floating dtypes: float32, float64,
// bfloat16 and float16 (the 16-bit ones sum in float32 and round once per output element:
// ops/cpu/gemm_half.h, cuBLAS on CUDA). Both operands share a dtype and a device. GEMM goes to the backend's
// bmm kernel (cblas_sgemm/dgemm on the CPU), which is handed transposed and strided matrices as they are:
// only a matrix with unit stride in neither of its last two dims is copied.
#include <cstdint>
#include <vector>

#include "ops/kernels/linalg.h"
#include "ops/tensor.h"

namespace saccade::ops {

/// Matrix product with torch.matmul's rules:
/// - (K) · (K) -> () (dot product);
/// - (M, K) @ (K, N) -> (M, N);
/// - (K) @ (*, K, N) -> (*, N) and (*, M, K) @ (K) -> (*, M) (the 1-d operand gets a dim that is then
/// removed);
/// - (*a, M, K) @ (*b, K, N) -> (broadcast(*a, *b), M, N): batch dims broadcast as in NumPy.
/// (B, T, K) @ (K, N), also with a transposed view such as w.t(), folds into one (B*T, K) @ (K, N) GEMM
/// without copying. Throws saccade::Error naming "matmul" and both shapes for a 0-d operand, mismatched inner
/// sizes, unbroadcastable batch dims, a non-float or mixed dtype, or tensors on different devices. As
/// torch.matmul.
Tensor matmul(const Tensor& a, const Tensor& b);

/// Batched product (B, M, K) @ (B, K, N) -> (B, M, N), no broadcasting (as torch.bmm). Throws naming "bmm"
/// and both shapes for wrong ranks, mismatched B or K, or a non-float or mixed dtype.
Tensor bmm(const Tensor& a, const Tensor& b);

/// (M, K) @ (K, N) -> (M, N) (as torch.mm). Throws naming "mm" and both shapes for wrong ranks, mismatched
/// K, or a non-float or mixed dtype.
Tensor mm(const Tensor& a, const Tensor& b);

/// Grouped matrix products (torch._grouped_mm, with host offsets): one product per group of rows, the
/// expert products of a mixture of experts (each expert multiplies the tokens routed to it; Fedus et al.
/// 2021, Switch Transformers). `offs` (G) are the groups' cumulative ends, non-decreasing, the last one the
/// grouped dim's size; group g spans [offs[g-1], offs[g]) (offs[-1] = 0) and may be empty.
/// - a (M, K) @ b (G, K, N) -> (M, N): rows of group g are a_g @ b[g] (the experts' forward, b a weight
///   (G, out, in) transposed);
/// - a (K, M) @ b (M, N) -> (G, K, N): out[g] = a[:, group g] @ b[group g, :] (the groups along the
///   contracted dim: the experts' weight gradients, a = xᵀ); an empty group gives zeros.
/// Each group is one GEMM of the backend's (no product over the rows of other groups), written in place.
/// Dtypes and devices as mm. Throws saccade::Error naming "grouped_mm" and the shapes for other ranks,
/// mismatched K, offsets that are not non-decreasing or do not end at the grouped dim's size, or a b whose G
/// is not offs.size().
Tensor grouped_mm(const Tensor& a, const Tensor& b, const std::vector<int64_t>& offs);

}  // namespace saccade::ops
