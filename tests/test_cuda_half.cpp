// The 16-bit dtypes on CUDA against the CPU (both(): the CPU half runs everywhere; the GPU half skips
// without a GPU). The CPU kernels are themselves tested against float32 (test_half_kernels.cpp). Tolerances:
// copies, casts, comparisons, max / min and index ops are exact; arithmetic and sums may differ by one
// rounding of the 16-bit result (2^-8 relative for bfloat16, 2^-11 for float16) where the two devices sum in
// another order; cuBLAS's 16-bit GEMM (CUBLAS_COMPUTE_32F) differs from the CPU's float32 GEMM only in the
// order of its float32 sums, so again by at most about one rounding.
#include "cuda_helpers.h"

using namespace saccade;
using namespace saccade::testing;

TEST_CASE("cuda 16-bit: casts, elementwise, reductions and matmul agree with the CPU", "[cuda][half]") {
  for (DType t : {DType::BFloat16, DType::Float16}) {
    INFO(dtype_name(t));
    const double tol = t == DType::BFloat16 ? 0x1p-8 : 0x1p-11;
    both(
        [&](Device d) {
          Tensor x = testing::randn({6, 33}, 1).to(d), y = testing::randn({6, 33}, 2).to(d);
          Tensor xh = x.to(t), yh = y.to(t);
          return std::vector<Tensor>{
              xh.to(DType::Float32),  // the device's rounding
              ops::gt(xh, yh), ops::amax(xh, {1}).to(DType::Float32), ops::argmax(xh, 1),
              ops::index_select(xh, 0, ops::tensor({4, 1}, DType::Int64, d)).to(DType::Float32)};
        },
        0);
    both(
        [&](Device d) {
          Tensor xh = testing::randn({6, 33}, 1).to(d).to(t), yh = testing::randn({6, 33}, 2).to(d).to(t);
          Tensor wh = testing::randn({33, 17}, 3).to(d).to(t);
          return std::vector<Tensor>{ops::mul(ops::add(xh, yh), xh).to(DType::Float32),
                                     ops::exp(xh).to(DType::Float32),
                                     ops::gelu_backward(yh, xh).to(DType::Float32),
                                     ops::sum(xh, {1}).to(DType::Float32),
                                     ops::sum(xh, {0}).to(DType::Float32),
                                     ops::matmul(xh, wh).to(DType::Float32),
                                     ops::softmax(xh, 1).to(DType::Float32)};
        },
        4 * tol);
  }
  SKIP_WITHOUT_GPU();
  // summing 10^6 bfloat16 ones on the GPU: float32 accumulators, one rounding (999424 = bf16(10^6))
  CHECK(ops::sum(ops::ones({1000000}, DType::BFloat16, kGpu)).item<double>() == 999424.0);
}
