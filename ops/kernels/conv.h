#pragma once
// The kernels of convolution and pooling, as every backend implements them: one row per kernel (row format:
// ops/backend.h), its contract above it. CPU: ops/cpu/conv_pool.cpp; CUDA: ops/cuda/conv_pool.cu. The ops
// that call them: ops/conv.h. A contract header includes no op header (scripts/check_layers).
#include "ops/tensor.h"

#define SACCADE_CONV_KERNELS(K, K16)                                                                       \
  /* NCHW, contiguous. x (N, C, H, W) -> cols (N, C*kh*kw, OH*OW). */                                      \
  K(im2col, (const Tensor& x, const Tensor& cols, int kh, int kw, int sh, int sw, int ph, int pw),         \
    (x, cols, kh, kw, sh, sw, ph, pw))                                                                     \
  /* cols (N, C*kh*kw, OH*OW) -> x (N, C, H, W), summing overlaps; x is zeroed first. */                   \
  K(col2im, (const Tensor& cols, const Tensor& x, int kh, int kw, int sh, int sw, int ph, int pw),         \
    (cols, x, kh, kw, sh, sw, ph, pw))                                                                     \
  /* out (N, C, OH, OW); indices int64 (N, C, OH, OW): flat h*W+w of each max. Padding counts as -inf. 16  \
   * bits: the max of 16-bit values is one of them, so widening is exact. */                               \
  K16(max_pool2d,                                                                                          \
      (const Tensor& x, const Tensor& out, const Tensor& indices, int kh, int kw, int sh, int sw, int ph,  \
       int pw),                                                                                            \
      (x, out, indices, kh, kw, sh, sw, ph, pw), Kernel16::MaxPool2d, OutFrom<1>)                          \
  /* gx (N, C, H, W) zeroed then gx[n,c,indices] += gy. */                                                 \
  K16(max_pool2d_backward, (const Tensor& gy, const Tensor& indices, const Tensor& gx), (gy, indices, gx), \
      Kernel16::MaxPool2dBackward, OutFrom<2>)                                                             \
  /* out (N, C, OH, OW): mean over each window, padding counted (PyTorch's count_include_pad=True). */     \
  K16(avg_pool2d, (const Tensor& x, const Tensor& out, int kh, int kw, int sh, int sw, int ph, int pw),    \
      (x, out, kh, kw, sh, sw, ph, pw), Kernel16::AvgPool2d, OutFrom<1>)                                   \
  /* gy (N, C, OH, OW) -> gx (N, C, H, W): each gy spread evenly over its window, summed. */               \
  K16(avg_pool2d_backward,                                                                                 \
      (const Tensor& gy, const Tensor& gx, int kh, int kw, int sh, int sw, int ph, int pw),                \
      (gy, gx, kh, kw, sh, sw, ph, pw), Kernel16::AvgPool2dBackward, OutFrom<1>)
