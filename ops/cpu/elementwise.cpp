// CPU elementwise kernels: unary, binary, where. Operands arrive expanded to out's shape (stride 0 on
// broadcast dims); for_each (loop.h) walks them in runs.
//
// Each op's per-element math is a functor from ops/elementwise_math.h (shared with the CUDA kernels); the
// switch on the op sits outside the loops, so every op gets its own loop instantiation and the contiguous
// (and tensor-op-scalar) runs vectorise, at the machine's vector width (with_isa, simd.h), where the op
// allows (+ - * /, max/min, comparisons, neg/abs/relu,
// ...; transcendental ones call libm per element, except float tanh).
//
// Shapes: a, b, cond, out: (shape of out), any strides (stride 0 on broadcast dims); a, b, out share a
// dtype T (out is uint8_t/Bool for comparisons), cond is Bool.
#include <cstdint>

#include "ops/cpu/backend.h"
#include "ops/cpu/bf16_lanes.h"
#include "ops/cpu/loop.h"
#include "ops/cpu/simd.h"
#include "ops/elementwise_math.h"

namespace saccade::cpu {

namespace {

template <class T>
const T& at(char* p, int64_t stride, int64_t i) {
  return *reinterpret_cast<const T*>(p + i * stride);
}

// a, out: (shape of out); out[i] = f(a[i]).
template <class T, class R, class F>
void unary_loop(const Tensor& a, const Tensor& out, F f) {
  for_each<2>(out.shape(), {&a, &out}, [f](char** p, const int64_t* s, int64_t n) {
    const T* x = reinterpret_cast<const T*>(p[0]);
    R* y = reinterpret_cast<R*>(p[1]);
    if (s[0] == sizeof(T) && s[1] == sizeof(R)) {
      with_isa([&] {
        for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
      });
      return;
    }
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<R*>(p[1] + i * s[1]) = f(at<T>(p[0], s[0], i));
  });
}

// a, b, out: (shape of out); out[i] = f(a[i], b[i]). Fast paths: all contiguous, and one side a scalar.
template <class T, class R, class F>
void binary_loop(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  for_each<3>(out.shape(), {&a, &b, &out}, [f](char** p, const int64_t* s, int64_t n) {
    constexpr int64_t w = sizeof(T), wr = sizeof(R);
    const T* x = reinterpret_cast<const T*>(p[0]);
    const T* y = reinterpret_cast<const T*>(p[1]);
    R* z = reinterpret_cast<R*>(p[2]);
    if (s[0] == w && s[1] == w && s[2] == wr) {
      with_isa([&] {
        for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
      });
    } else if (s[0] == w && s[1] == 0 && s[2] == wr) {  // tensor op scalar (bias, scaling)
      const T c = y[0];
      with_isa([&] {
        for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], c);
      });
    } else if (s[0] == 0 && s[1] == w && s[2] == wr) {  // scalar op tensor (rsub, rdiv)
      const T c = x[0];
      with_isa([&] {
        for (int64_t i = 0; i < n; ++i) z[i] = f(c, y[i]);
      });
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<R*>(p[2] + i * s[2]) = f(at<T>(p[0], s[0], i), at<T>(p[1], s[1], i));
    }
  });
}

// f computed in float on bfloat16 elements, through bf16_lanes.h's branch-free conversions (the same bits as
// math::store_as / load_as, which convert through the struct, whose NaN branch kept GCC from vectorising
// these loops: bfloat16 ran one element at a time). float16 and the other dtypes keep math::store_as.
template <class F>
struct Bf16Lanes {
  F f;
  template <class... X>
  bfloat16 operator()(X... x) const {
    return bfloat16::from_bits(bf16_round(f(bf16_widen(x.bits)...)));
  }
};
template <class F>
struct Bf16LanesTest {
  F f;
  template <class... X>
  auto operator()(X... x) const {
    return f(bf16_widen(x.bits)...);
  }
};
template <class T, class F>
auto store_lanes(F f) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return Bf16Lanes<F>{f};
  else
    return math::store_as<T>(f);
}
template <class T, class F>
auto load_lanes(F f) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return Bf16LanesTest<F>{f};
  else
    return math::load_as<T>(f);
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const Tensor& a, const Tensor& out, double alpha) {
  if (a.dtype() == DType::Bool) {
    SACCADE_CHECK(op == UnaryOp::LogicalNot, "{}: not defined for bool tensors", unary_op_name(op));
    return unary_loop<uint8_t, uint8_t>(a, out, math::LogicalNot{});
  }
  // 16-bit tensors: load, compute in float (compute_t), store (store_lanes); GELU's erf in float, not
  // double, as a 16-bit result needs (math::Gelu16)
  const bool defined = dispatch_numeric_and_half(a.dtype(), unary_op_name(op).data(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, compute_t<T>>) {
      if (op == UnaryOp::Gelu) return unary_loop<T, T>(a, out, store_lanes<T>(math::Gelu16{})), true;
      if (op == UnaryOp::GeluGrad) return unary_loop<T, T>(a, out, store_lanes<T>(math::GeluGrad16{})), true;
    }
    return math::with_unary_functor<compute_t<T>>(
        op, alpha, [&](auto f) { unary_loop<T, T>(a, out, store_lanes<T>(f)); });
  });
  SACCADE_CHECK(defined, "{}: not defined for {} tensors", unary_op_name(op), a.dtype());
}

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_all_and_half(a.dtype(), binary_op_name(op).data(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, compute_t<T>>)  // as unary's 16-bit GELU
      if (op == BinaryOp::GeluBackward)
        return binary_loop<T, T>(a, b, out, store_lanes<T>(math::GeluBackward16{}));
    math::with_binary_functor<compute_t<T>>(
        op, [&](auto f) { binary_loop<T, T>(a, b, out, store_lanes<T>(f)); },
        [&](auto f) { binary_loop<T, uint8_t>(a, b, out, load_lanes<T>(f)); });
  });
}

// g, gate, up, dgate, dup: one shape, contiguous, one dtype (16 bits loaded and stored by bf16_lanes.h's
// lanes, float32 inside): one pass, split over the pool in runs of kGrain elements.
void CpuBackend::swiglu_backward(const Tensor& g, const Tensor& gate, const Tensor& up, const Tensor& dgate,
                                 const Tensor& dup) {
  dispatch_floating_and_half(gate.dtype(), "swiglu_backward", [&]<class S>() {
    using T = compute_t<S>;
    const S* pg = g.data<S>();
    const S* px = gate.data<S>();
    const S* pu = up.data<S>();
    S* pdx = dgate.data<S>();
    S* pdu = dup.data<S>();
    parallel_for(0, gate.numel(), kGrain, [&](int64_t begin, int64_t end) {
      // NOTE: the lambda copies its arguments: loads through captured references keep GCC from vectorising
      with_isa([=] {
        const S* __restrict gg = pg;
        const S* __restrict xx = px;
        const S* __restrict uu = pu;
        S* __restrict dx = pdx;
        S* __restrict du = pdu;
        const math::SwigluBackward<T> f;
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) {
          const typename math::SwigluBackward<T>::Grads d =
              f(lane_load(gg[i]), lane_load(xx[i]), lane_load(uu[i]));
          dx[i] = lane_store<S>(d.dgate);
          du[i] = lane_store<S>(d.dup);
        }
      });
    });
  });
}

void CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_all_and_half(a.dtype(), "where", [&]<class T>() {
    for_each<4>(out.shape(), {&cond, &a, &b, &out}, [](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<T*>(p[3] + i * s[3]) =
            at<uint8_t>(p[0], s[0], i) ? at<T>(p[1], s[1], i) : at<T>(p[2], s[2], i);
    });
  });
}

}  // namespace saccade::cpu
