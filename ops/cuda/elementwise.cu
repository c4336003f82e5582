// CUDA elementwise kernels: unary, binary, where. Operands arrive expanded to out's shape (stride 0 on
// broadcast dims); for_each (loop.cuh) gives one thread per element. The per-element math is the functor of
// ops/elementwise_math.h that the CPU kernels use (ops/cpu/elementwise.cpp), so the CPU tests cover the math
// and the CUDA tests the launch. The switch on the op sits on the host: one kernel per (op, dtype).
//
// Shapes: a, b, cond, out: (shape of out), any strides; a, b, out share a dtype T (out is uint8_t/Bool for
// comparisons), cond is Bool.
#include "ops/cuda/backend.h"
#include "ops/cuda/loop.cuh"
#include "ops/elementwise_math.h"

namespace saccade::cuda {

namespace {

// out = f(a): p[0] -> a's element, p[1] -> out's.
template <class T, class R, class F>
struct UnaryAt {
  F f;
  __device__ void operator()(char** p) const {
    *reinterpret_cast<R*>(p[1]) = f(*reinterpret_cast<const T*>(p[0]));
  }
};

// out = f(a, b).
template <class T, class R, class F>
struct BinaryAt {
  F f;
  __device__ void operator()(char** p) const {
    *reinterpret_cast<R*>(p[2]) = f(*reinterpret_cast<const T*>(p[0]), *reinterpret_cast<const T*>(p[1]));
  }
};

template <class T>
struct WhereAt {
  __device__ void operator()(char** p) const {
    *reinterpret_cast<T*>(p[3]) = *reinterpret_cast<const uint8_t*>(p[0]) ? *reinterpret_cast<const T*>(p[1])
                                                                          : *reinterpret_cast<const T*>(p[2]);
  }
};

template <class T, class R, class F>
void unary_launch(const Tensor& a, const Tensor& out, F f) {
  const Tensor* ts[2] = {&a, &out};
  for_each<2>("unary", out.shape(), ts, UnaryAt<T, R, F>{f});
}

template <class T, class R, class F>
void binary_launch(const char* op, const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const Tensor* ts[3] = {&a, &b, &out};
  for_each<3>(op, out.shape(), ts, BinaryAt<T, R, F>{f});
}

}  // namespace

void CudaBackend::unary(UnaryOp op, const Tensor& a, const Tensor& out, double alpha) {
  if (a.dtype() == DType::Bool) {
    SACCADE_CHECK(op == UnaryOp::LogicalNot, "{}: not defined for bool tensors", unary_op_name(op));
    return unary_launch<uint8_t, uint8_t>(a, out, math::LogicalNot{});
  }
  // 16-bit tensors: load, compute in float (compute_t), store (math::store_as)
  const bool defined = dispatch_numeric_and_half(a.dtype(), unary_op_name(op).data(), [&]<class T>() {
    return math::with_unary_functor<compute_t<T>>(
        op, alpha, [&](auto f) { unary_launch<T, T>(a, out, math::store_as<T>(f)); });
  });
  SACCADE_CHECK(defined, "{}: not defined for {} tensors", unary_op_name(op), a.dtype());
}

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_all_and_half(a.dtype(), binary_op_name(op).data(), [&]<class T>() {
    math::with_binary_functor<compute_t<T>>(
        op, [&](auto f) { binary_launch<T, T>(binary_op_name(op).data(), a, b, out, math::store_as<T>(f)); },
        [&](auto f) {
          binary_launch<T, uint8_t>(binary_op_name(op).data(), a, b, out, math::load_as<T>(f));
        });
  });
}

void CudaBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const Tensor* ts[4] = {&cond, &a, &b, &out};
  dispatch_all_and_half(a.dtype(), "where",
                        [&]<class T>() { for_each<4>("where", out.shape(), ts, WhereAt<T>{}); });
}

}  // namespace saccade::cuda
