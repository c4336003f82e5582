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
#include <cstddef>
#include <cstdint>
#include <type_traits>

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
// `run`, when given, takes the all-contiguous runs instead: run(x, y, z, n) computes z[i] = f(x[i], y[i]).
template <class T, class R, class F, class Run = std::nullptr_t>
void binary_loop(const Tensor& a, const Tensor& b, const Tensor& out, F f, Run run = nullptr) {
  for_each<3>(out.shape(), {&a, &b, &out}, [f, run](char** p, const int64_t* s, int64_t n) {
    (void)run;  // a nullptr when no run is given (clang warns of an unused capture then)
    constexpr int64_t w = sizeof(T), wr = sizeof(R);
    const T* x = reinterpret_cast<const T*>(p[0]);
    const T* y = reinterpret_cast<const T*>(p[1]);
    R* z = reinterpret_cast<R*>(p[2]);
    if (s[0] == w && s[1] == w && s[2] == wr) {
      if constexpr (!std::is_same_v<Run, std::nullptr_t>) {
        run(x, y, z, n);
      } else {
        with_isa([&] {
          for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
        });
      }
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

#if SACCADE_BF16_LANES16
// The SiLU family on bfloat16 at 16 float lanes (AVX-512), with the rounding to bfloat16 in one instruction
// where the CPU has AVX512-BF16: the bfloat16 SwiGLU was compute-bound (slower than a copy of its bytes,
// where float32 keeps up with one), and GCC's loop of the per-element lanes spent much of its time on the
// integer rounding (bench/RESULTS.md, "bfloat16 SwiGLU at 16 lanes"). Each step below is
// math::sigmoid_float's (exp_nonpositive's) step on 16 lanes, in the same order, compiled under the same
// rules (GCC fuses a product and a sum into an FMA in both, -ffp-contract=fast being its default for C++), so
// the values are the float32 kernel's bit for bit, each rounded once. tests/test_swiglu.cpp checks every bit
// against the per-element path and the float32 twin.
// NOTE: GCC 12's avx512fintrin.h warns maybe-uninitialized inside its own widening and shift intrinsics
// (their `__Y = __Y` undefined pass-through operand), a false positive, as in random.cpp
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define SACCADE_AVX512_LANES [[gnu::target("avx512f,avx512bw,avx512vl,avx512dq"), gnu::always_inline]] inline

// exp_nonpositive on 16 lanes (see math::exp_nonpositive: the -87 clamp, Cody-Waite, Cephes' polynomial).
SACCADE_AVX512_LANES __m512 exp_nonpositive16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.0f);
  const __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);  // false for NaN, as x >= -87.0f
  const __m512 xc = _mm512_mask_blend_ps(keep, lo, x);
  const __m512i n = _mm512_cvttps_epi32(
      _mm512_sub_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)), _mm512_set1_ps(0.5f)));
  const __m512 nf = _mm512_cvtepi32_ps(n);
  const __m512 r = _mm512_add_ps(_mm512_sub_ps(xc, _mm512_mul_ps(nf, _mm512_set1_ps(0.693359375f))),
                                 _mm512_mul_ps(nf, _mm512_set1_ps(2.12194440e-4f)));
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(5.0000001201e-1f));
  const __m512 e =
      _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(p, r), r), r), _mm512_set1_ps(1.0f));
  const __m512 two_n =
      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
  return _mm512_maskz_mov_ps(keep, _mm512_mul_ps(e, two_n));
}

// math::sigmoid_float on 16 lanes: e = e^-|x|, 1 / (1 + e) for x >= 0, e / (1 + e) for x < 0, NaN kept.
SACCADE_AVX512_LANES __m512 sigmoid16(__m512 x) {
  const __m512 e = exp_nonpositive16(_mm512_or_ps(x, _mm512_set1_ps(-0.0f)));  // -|x|
  const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_blend_ps(nan, _mm512_mask_blend_ps(neg, inv, _mm512_mul_ps(e, inv)), x);
}

// math::SiluBackward's g s (1 + x (1 - s)), given s = σ(x); math::SwigluBackward's dgate is this with g · up.
SACCADE_AVX512_LANES __m512 silu_grad16(__m512 g, __m512 x, __m512 s) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_mul_ps(_mm512_mul_ps(g, s), _mm512_add_ps(one, _mm512_mul_ps(x, _mm512_sub_ps(one, s))));
}

// The loops below are compiled with AVX512-BF16 allowed, for VCVTNEPS2BF16 (bf16_round16_bf16) alone: they
// use it where kBf16 is true, which they run only where the CPU has it (kernel_avx512_bf16()); the rest is
// float and integer intrinsics, which GCC compiles to AVX-512 F/BW/VL/DQ instructions only.
#define SACCADE_AVX512_BF16_LANES \
  [[gnu::target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"), gnu::always_inline]] inline

// Runs step(i, mask) for i = 0, 16, ... < n; mask selects the lanes inside [i, n) (all 16 but at the end).
// A step is a struct whose operator() carries the AVX-512 target (a lambda's cannot).
template <class Step>
[[gnu::target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]] void for_lanes16(int64_t n,
                                                                                  const Step& step) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) step(i, __mmask16(0xffff));
  if (i < n) step(i, static_cast<__mmask16>((1u << (n - i)) - 1u));
}
SACCADE_AVX512_LANES __m512 load16(const bfloat16* p, __mmask16 m) {
  return bf16_widen16(_mm256_maskz_loadu_epi16(m, p));
}
// v rounded to bfloat16 (bf16_round's bits) and stored in the lanes of m: by VCVTNEPS2BF16 where kBf16.
template <bool kBf16>
SACCADE_AVX512_BF16_LANES void store16(bfloat16* p, __mmask16 m, __m512 v) {
  _mm256_mask_storeu_epi16(p, m, kBf16 ? bf16_round16_bf16(v) : bf16_round16(v));
}

// a, b, out: bfloat16; out = Op()(a, b) on 16 float lanes, rounded once.
template <class Op, bool kBf16>
struct BinaryStep16 {
  const bfloat16 *a, *b;
  bfloat16* out;
  SACCADE_AVX512_BF16_LANES void operator()(int64_t i, __mmask16 m) const {
    store16<kBf16>(out + i, m, Op{}(load16(a + i, m), load16(b + i, m)));
  }
};
// math::Swiglu<float>: gate s up.
struct Swiglu16 {
  SACCADE_AVX512_LANES __m512 operator()(__m512 gate, __m512 up) const {
    return _mm512_mul_ps(_mm512_mul_ps(gate, sigmoid16(gate)), up);
  }
};
// math::SiluBackward<float>(g, x).
struct SiluBackward16 {
  SACCADE_AVX512_LANES __m512 operator()(__m512 g, __m512 x) const { return silu_grad16(g, x, sigmoid16(x)); }
};
template <bool kBf16>
using SwigluStep16 = BinaryStep16<Swiglu16, kBf16>;
template <bool kBf16>
using SiluBackwardStep16 = BinaryStep16<SiluBackward16, kBf16>;

// g, gate, up, dgate, dup: bfloat16; math::SwigluBackward<float>'s two gradients, each rounded once.
template <bool kBf16>
struct SwigluBackwardStep16 {
  const bfloat16 *g, *gate, *up;
  bfloat16 *dgate, *dup;
  SACCADE_AVX512_BF16_LANES void operator()(int64_t i, __mmask16 m) const {
    const __m512 gv = load16(g + i, m), x = load16(gate + i, m), s = sigmoid16(x);
    store16<kBf16>(dgate + i, m, silu_grad16(_mm512_mul_ps(gv, load16(up + i, m)), x, s));
    store16<kBf16>(dup + i, m, _mm512_mul_ps(_mm512_mul_ps(x, s), gv));
  }
};

// for_lanes16 of Step<true> where VCVTNEPS2BF16 may run, else of Step<false>.
template <template <bool> class Step, class... P>
void run_lanes16(int64_t n, P... p) {
  if (kernel_avx512_bf16())
    for_lanes16(n, Step<true>{p...});
  else
    for_lanes16(n, Step<false>{p...});
}
#undef SACCADE_AVX512_BF16_LANES
#undef SACCADE_AVX512_LANES
#pragma GCC diagnostic pop
#endif

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
#if SACCADE_BF16_LANES16
    // bfloat16 SwiGLU and SiLU backward at 16 lanes (the same bits as the per-element lanes below)
    if constexpr (std::is_same_v<T, bfloat16>) {
      if (op == BinaryOp::Swiglu && kernel_isa() == Isa::Avx512)
        return binary_loop<T, T>(
            a, b, out, store_lanes<T>(math::Swiglu<float>{}),
            [](const T* x, const T* y, T* z, int64_t n) { run_lanes16<SwigluStep16>(n, x, y, z); });
      if (op == BinaryOp::SiluBackward && kernel_isa() == Isa::Avx512)
        return binary_loop<T, T>(
            a, b, out, store_lanes<T>(math::SiluBackward<float>{}),
            [](const T* g, const T* x, T* dx, int64_t n) { run_lanes16<SiluBackwardStep16>(n, g, x, dx); });
    }
#endif
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
#if SACCADE_BF16_LANES16
      if constexpr (std::is_same_v<S, bfloat16>)
        if (kernel_isa() == Isa::Avx512)
          return run_lanes16<SwigluBackwardStep16>(end - begin, pg + begin, px + begin, pu + begin,
                                                   pdx + begin, pdu + begin);
#endif
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
