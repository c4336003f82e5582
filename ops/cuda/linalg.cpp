// CUDA GEMM through cuBLAS. a: (B, M, K), b: (B, K, N), out: (B, M, N) contiguous.
//
// cuBLAS is column-major; our matrices are row-major. A row-major (R, C) matrix with leading dimension ld is,
// read column-major, its transpose (C, R) with the same ld. So the row-major product out = a b is computed as
// the column-major product outᵀ = bᵀ aᵀ: cuBLAS's "A" is our b, its "B" our a, its (m, n, k) our (N, M, K).
// An operand that is row-major (MatrixLayout trans = false) is handed over as is (CUBLAS_OP_N); a transposed
// view (trans = true: column-major, e.g. w.t()) as CUBLAS_OP_T with ld = stride(-1). No copies. Batch
// strides are the tensors' (0 for a broadcast operand), one cublasGemmStridedBatchedEx for the whole batch.
//
// Precision: float32 uses CUBLAS_COMPUTE_32F (exact float32 products, as on the CPU) unless
// cuda::set_allow_tf32(true) (ops/cuda/api.h), then CUBLAS_COMPUTE_32F_FAST_TF32 (tensor cores, 10-bit
// mantissa inputs); float64 uses CUBLAS_COMPUTE_64F. bfloat16 and float16 (CUDA_R_16BF / CUDA_R_16F in and
// out) use CUBLAS_COMPUTE_32F: tensor cores multiply the 16-bit inputs exactly and accumulate in float32,
// and the result is rounded to 16 bits once, on the store (alpha and beta are then floats).
#include <limits>

#include "ops/cuda/api.h"
#include "ops/cuda/backend.h"
#include "ops/cuda/error.h"

namespace saccade::cuda {

namespace {

// The cuBLAS element and compute types of a dtype, and whether alpha and beta are doubles.
struct GemmTypes {
  cudaDataType_t type;
  cublasComputeType_t compute;
  bool double_scalars;
};

GemmTypes gemm_types(DType t) {
  switch (t) {
    case DType::Float32:
      return {CUDA_R_32F, allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, false};
    case DType::Float64:
      return {CUDA_R_64F, CUBLAS_COMPUTE_64F, true};
    case DType::BFloat16:
      return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, false};
    case DType::Float16:
      return {CUDA_R_16F, CUBLAS_COMPUTE_32F, false};
    default:
      break;
  }
  throw Error(fmt::format("bmm: expected a floating-point tensor, got {}", t));
}

}  // namespace

void CudaBackend::bmm(const Tensor& a, const Tensor& b, const Tensor& out) {
  const MatrixLayout la = matrix_layout(a), lb = matrix_layout(b);
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  const int64_t sa = a.size(0) == 1 ? 0 : a.stride(0), sb = b.size(0) == 1 ? 0 : b.stride(0);
  if (batch == 0 || m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: zeros (out is contiguous)
    SACCADE_CUDA_CHECK("bmm", cudaMemsetAsync(out.raw_data(), 0, out.numel() * out.itemsize(), stream()));
    return;
  }
  constexpr int64_t kInt = std::numeric_limits<int>::max();
  SACCADE_CHECK(m <= kInt && n <= kInt && k <= kInt && batch <= kInt && la.ld <= kInt && lb.ld <= kInt,
                "bmm: sizes ({}, {}, {}) x ({}, {}, {}) exceed cuBLAS's 32-bit dimensions", batch, m, k,
                b.size(0), k, n);
  const GemmTypes g = gemm_types(a.dtype());
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const void* alpha = g.double_scalars ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = g.double_scalars ? static_cast<const void*>(&zero_d) : &zero_f;
  // column-major: outᵀ (N, M) = op(b) (N, K) · op(a) (K, M)
  SACCADE_CUBLAS_CHECK(
      "bmm", cublasGemmStridedBatchedEx(
                 cublas("bmm"), lb.trans ? CUBLAS_OP_T : CUBLAS_OP_N, la.trans ? CUBLAS_OP_T : CUBLAS_OP_N,
                 static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), alpha, b.raw_data(), g.type,
                 static_cast<int>(lb.ld), sb, a.raw_data(), g.type, static_cast<int>(la.ld), sa, beta,
                 out.raw_data(), g.type, static_cast<int>(n), m * n, static_cast<int>(batch), g.compute,
                 CUBLAS_GEMM_DEFAULT));
}

}  // namespace saccade::cuda
