// Q8_0: quantize_q8_0, dequantize_q8_0 and linear_q8_0's checks and shapes; the fused kernel is the
// backend's (ops/cpu/quant.cpp), the composed version matmul on the dequantized matrix.
#include "ops/quant.h"

#include <algorithm>
#include <cmath>

#include "ops/backend.h"
#include "ops/linalg.h"

namespace saccade::ops {

Q8_0Matrix quantize_q8_0(const Tensor& w) {
  constexpr const char* op = "quantize_q8_0";
  SACCADE_CHECK(w.defined(), "{}: got an undefined matrix", op);
  SACCADE_CHECK(w.dim() == 2 && is_floating(w.dtype()),
                "{}: expected a floating matrix (rows, cols), got {} of {}", op, w.shape(), w.dtype());
  const Tensor wf = w.to(Device::cpu()).to(DType::Float32).contiguous();
  Q8_0Matrix q;
  q.rows = w.size(0), q.cols = w.size(1);
  const int64_t nb = q.blocks_per_row();
  auto blocks = std::make_shared<std::vector<BlockQ8_0>>(static_cast<size_t>(q.rows * nb));
  const float* p = wf.data<float>();
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t c0 = b * BlockQ8_0::kSize, len = std::min(BlockQ8_0::kSize, q.cols - c0);
      const float* x = p + r * q.cols + c0;
      float amax = 0;
      for (int64_t i = 0; i < len; ++i) {
        SACCADE_CHECK(std::isfinite(x[i]), "{}: the matrix {} holds {} at ({}, {})", op, w.shape(), x[i], r,
                      c0 + i);
        amax = std::max(amax, std::fabs(x[i]));
      }
      const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
      BlockQ8_0& blk = (*blocks)[static_cast<size_t>(r * nb + b)];
      blk.d = float16(d);
      for (int64_t i = 0; i < BlockQ8_0::kSize; ++i)
        blk.qs[i] = static_cast<int8_t>(i < len ? std::round(x[i] * id) : 0.0f);
    }
  q.blocks = std::move(blocks);
  return q;
}

Tensor dequantize_q8_0(const Q8_0Matrix& w) {
  SACCADE_CHECK(w.defined(), "dequantize_q8_0: got an undefined Q8_0 matrix");
  Tensor out = Tensor::empty({w.rows, w.cols}, DType::Float32, Device::cpu(), "dequantize_q8_0");
  float* y = out.data<float>();
  const int64_t nb = w.blocks_per_row();
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) {
      const BlockQ8_0& blk = (*w.blocks)[static_cast<size_t>(r * nb + c / BlockQ8_0::kSize)];
      y[r * w.cols + c] = static_cast<float>(blk.d) * blk.qs[c % BlockQ8_0::kSize];
    }
  return out;
}

namespace {
void check_linear_q8_0(const Tensor& x, const Q8_0Matrix& w) {
  constexpr const char* op = "linear_q8_0";
  SACCADE_CHECK(w.defined(), "{}: got an undefined Q8_0 matrix", op);
  SACCADE_CHECK(x.defined(), "{}: got an undefined input", op);
  SACCADE_CHECK(x.dim() >= 1 && is_floating(x.dtype()) && x.size(-1) == w.cols,
                "{}: expected a floating input (*, {}) for the Q8_0 matrix ({}, {}), got {} of {}", op,
                w.cols, w.rows, w.cols, x.shape(), x.dtype());
}
}  // namespace

Tensor linear_q8_0(const Tensor& x, const Q8_0Matrix& w) {
  check_linear_q8_0(x, w);
  Backend& b = backend(x.device());
  if (!b.fuses(FusedKernel::LinearQ8_0)) return linear_q8_0_composed(x, w);
  Shape out_shape = x.shape();
  out_shape[x.dim() - 1] = w.rows;
  int64_t m = 1;  // the rows of x: its leading dims (K may be 0)
  for (int d = 0; d + 1 < x.dim(); ++d) m *= x.size(d);
  const Tensor x2 = x.to(DType::Float32).reshape({m, w.cols}).contiguous();
  Tensor out = Tensor::empty({m, w.rows}, DType::Float32, x.device(), "linear_q8_0");
  if (out.numel() > 0) b.linear_q8_0(x2, w, out);
  return out.view(out_shape).to(x.dtype());
}

Tensor linear_q8_0_composed(const Tensor& x, const Q8_0Matrix& w) {
  check_linear_q8_0(x, w);
  return matmul(x.to(DType::Float32), dequantize_q8_0(w).to(x.device()).t()).to(x.dtype());
}

}  // namespace saccade::ops
