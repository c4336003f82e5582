// CPU random kernels over Philox: element i is made from block offset + i, so threads need no coordination.
// The uniform draws (rand, dropout) make their Philox words at the machine's vector width: the ten rounds of
// a scalar loop were the cost of dropout, in attention above all (bench/gpt_step's profile). On AVX-512 the
// words come from philox16 (intrinsics: 16 counters in 32-bit lanes), faster than GCC's vectorisation of the
// scalar function, which keeps 64-bit lanes for the products.
//
// Shapes: out (n) contiguous float32 or float64; element i uses Philox counter offset + i.
#include "ops/cpu/random.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>
#include <vector>

#include "ops/cpu/backend.h"
#include "ops/cpu/bf16_lanes.h"
#include "ops/cpu/loop.h"
#include "ops/cpu/simd.h"
#include "ops/philox.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define SACCADE_PHILOX16 1
#endif

namespace saccade::cpu {

namespace {

// [0, 1) from one Philox word, as ops::rand draws it for T.
template <class T>
inline T uniform_of(uint32_t w) {
  if constexpr (std::is_same_v<T, float>)
    return uniform_float(w);
  else
    return uniform_double(w);
}

#if SACCADE_PHILOX16
// NOTE: GCC 12's avx512fintrin.h warns maybe-uninitialized inside its own shift and multiply intrinsics
// (their `__Y = __Y` undefined pass-through operand), a false positive
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Word 0 of the Philox4x32-10 blocks counter, ..., counter + 16 N - 1 (ops/philox.h's rounds, lane by
// lane), 16 in each out[b]: the 32x32 -> 64-bit products of the even lanes and, shifted down, of the odd
// lanes (vpmuludq); one masked dword shuffle per half puts each product's high (low) half back into its
// 32-bit lane, and one ternary logic op makes each three-way xor (12 vector ops a round where blends and
// shifts took 18). A round's ops depend on the one before: N = 2 independent blocks side by side fill the
// gaps (faster than N = 1; N = 4 runs out of registers and is slower again).
template <int N>
[[gnu::target("avx512f")]] inline void philox16(uint64_t seed, uint64_t counter, __m512i (&out)[N]) {
  const __m512i m0 = _mm512_set1_epi64(0xD2511F53u), m1 = _mm512_set1_epi64(0xCD9E8D57u);
  __m512i c0[N], c1[N], c2[N], c3[N];
  for (int b = 0; b < N; ++b) {
    const uint64_t cb = counter + 16 * static_cast<uint64_t>(b);
    const __m512i lo = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(cb)));
    const __m512i hi = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(cb >> 32)));
    c0[b] = _mm512_add_epi32(lo, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    // the high word carries where the low word wrapped
    c1[b] = _mm512_mask_add_epi32(hi, _mm512_cmplt_epu32_mask(c0[b], lo), hi, _mm512_set1_epi32(1));
    c2[b] = c3[b] = _mm512_setzero_si512();
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  constexpr __mmask16 kOdd = 0xAAAA, kEven = 0x5555;
  constexpr int kXor3 = 0x96;  // a ^ b ^ c as a truth table
  for (int round = 0; round < 10; ++round) {
    for (int b = 0; b < N; ++b) {
      const __m512i pe0 = _mm512_mul_epu32(c0[b], m0),
                    po0 = _mm512_mul_epu32(_mm512_srli_epi64(c0[b], 32), m0);
      const __m512i pe1 = _mm512_mul_epu32(c2[b], m1),
                    po1 = _mm512_mul_epu32(_mm512_srli_epi64(c2[b], 32), m1);
      // high halves: even lanes take dword 1 of their product, odd lanes already hold theirs (dword 1 of po)
      const __m512i hi0 = _mm512_mask_shuffle_epi32(po0, kEven, pe0, _MM_PERM_DDBB);
      const __m512i hi1 = _mm512_mask_shuffle_epi32(po1, kEven, pe1, _MM_PERM_DDBB);
      // low halves: even lanes hold theirs (dword 0 of pe), odd lanes take dword 0 of their product
      const __m512i lo0 = _mm512_mask_shuffle_epi32(pe0, kOdd, po0, _MM_PERM_CCAA);
      const __m512i lo1 = _mm512_mask_shuffle_epi32(pe1, kOdd, po1, _MM_PERM_CCAA);
      c0[b] = _mm512_ternarylogic_epi32(hi1, c1[b], _mm512_set1_epi32(static_cast<int>(k0)), kXor3);
      c1[b] = lo1;
      c2[b] = _mm512_ternarylogic_epi32(hi0, c3[b], _mm512_set1_epi32(static_cast<int>(k1)), kXor3);
      c3[b] = lo0;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int b = 0; b < N; ++b) out[b] = c0[b];
}

[[gnu::target("avx512f")]] void philox_words_avx512(uint64_t seed, uint64_t counter, int64_t n, uint32_t* w) {
  int64_t c = 0;
  for (; c + 32 <= n; c += 32) {
    __m512i v[2];
    philox16<2>(seed, counter + static_cast<uint64_t>(c), v);
    _mm512_storeu_si512(w + c, v[0]);
    _mm512_storeu_si512(w + c + 16, v[1]);
  }
  for (; c < n; c += 16) {
    __m512i v[1];
    philox16<1>(seed, counter + static_cast<uint64_t>(c), v);
    if (c + 16 <= n)
      _mm512_storeu_si512(w + c, v[0]);
    else
      _mm512_mask_storeu_epi32(w + c, static_cast<__mmask16>((1u << (n - c)) - 1), v[0]);
  }
}
#pragma GCC diagnostic pop
#endif

// w[c] = word 0 of Philox block counter + c under seed, for c < n.
void philox_words(uint64_t seed, uint64_t counter, int64_t n, uint32_t* w) {
#if SACCADE_PHILOX16
  if (kernel_isa() == Isa::Avx512) return philox_words_avx512(seed, counter, n, w);
#endif
  // NOTE: the lambda copies its arguments: loads through captured references keep GCC from vectorising
  with_isa([=] {
    uint32_t* __restrict out = w;
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) out[c] = philox4x32_10(seed, counter + static_cast<uint64_t>(c)).w[0];
  });
}

// Calls f(c0, words, len) for the runs [c0, c0 + len) of [0, n), len <= kRun, with words[j] = word 0 of
// Philox block counter + c0 + j.
constexpr int64_t kRun = 256;
template <class F>
void for_philox_runs(uint64_t seed, uint64_t counter, int64_t n, F&& f) {
  alignas(64) uint32_t words[kRun];
  for (int64_t c0 = 0; c0 < n; c0 += kRun) {
    const int64_t len = std::min(kRun, n - c0);
    philox_words(seed, counter + static_cast<uint64_t>(c0), len, words);
    f(c0, static_cast<const uint32_t*>(words), len);
  }
}

}  // namespace

template <class T>
void dropout_multipliers(uint64_t seed, uint64_t counter, int64_t n, T p, T scale, T* m) {
  for_philox_runs(seed, counter, n, [=](int64_t c0, const uint32_t* words, int64_t len) {
    with_isa([=] {
      T* __restrict out = m + c0;
#pragma omp simd
      for (int64_t c = 0; c < len; ++c) out[c] = uniform_of<T>(words[c]) >= p ? scale : T(0);
    });
  });
}
template void dropout_multipliers<float>(uint64_t, uint64_t, int64_t, float, float, float*);
template void dropout_multipliers<double>(uint64_t, uint64_t, int64_t, double, double, double*);

void CpuBackend::uniform(const Tensor& out, uint64_t seed, uint64_t offset, double low, double high) {
  dispatch_floating(out.dtype(), "uniform", [&]<class T>() {
    T* o = out.data<T>();
    parallel_for(0, out.numel(), kGrain / 16, [&](int64_t b, int64_t e) {
      for_philox_runs(seed, offset + static_cast<uint64_t>(b), e - b,
                      [=](int64_t c0, const uint32_t* words, int64_t len) {
                        with_isa([=] {
                          T* __restrict dst = o + b + c0;
#pragma omp simd
                          for (int64_t c = 0; c < len; ++c)
                            dst[c] = static_cast<T>(low + (high - low) * double(uniform_of<T>(words[c])));
                        });
                      });
    });
  });
}

// x, out, mask: (n) contiguous; the multipliers and the product a block at a time, while the block is in
// cache. 16-bit x: the float32 kernel's numbers (float multipliers, x · m in float rounded once; the mask
// rounded), without whole-tensor float32 copies.
void CpuBackend::dropout(const Tensor& x, uint64_t seed, uint64_t offset, double p, const Tensor& out,
                         const Tensor& mask) {
  dispatch_floating_and_half(x.dtype(), "dropout", [&]<class T>() {
    using C = compute_t<T>;
    const T* xs = x.data<T>();
    const C pt = static_cast<C>(p), scale = static_cast<C>(1.0 / (1.0 - p));
    T *o = out.data<T>(), *m = mask.data<T>();
    parallel_for(0, x.numel(), kGrain / 16, [&](int64_t b, int64_t e) {
      constexpr int64_t kBlock = 4096;
      for (int64_t i0 = b; i0 < e; i0 += kBlock) {
        const int64_t len = std::min(kBlock, e - i0);
        if constexpr (std::is_same_v<T, C>) {
          dropout_multipliers<T>(seed, offset + static_cast<uint64_t>(i0), len, pt, scale, m + i0);
          with_isa([=] {
            const T* __restrict xi = xs + i0, * __restrict mi = m + i0;
            T* __restrict oi = o + i0;
#pragma omp simd
            for (int64_t c = 0; c < len; ++c) oi[c] = xi[c] * mi[c];
          });
        } else {  // the block's float multipliers; the mask's 16 bits are those of 0 or of scale, rounded
          alignas(64) C wide[kBlock];
          dropout_multipliers<C>(seed, offset + static_cast<uint64_t>(i0), len, pt, scale, wide);
          const uint16_t kept = std::bit_cast<uint16_t>(static_cast<T>(scale));
          const C* wp = wide;
          if constexpr (std::is_same_v<T, bfloat16>) {  // branch-free conversions (bf16_lanes.h)
            with_isa([=] {
              const uint16_t* __restrict xi = reinterpret_cast<const uint16_t*>(xs + i0);
              const float* __restrict wi = wp;
              uint16_t* __restrict oi = reinterpret_cast<uint16_t*>(o + i0);
              uint16_t* __restrict mi = reinterpret_cast<uint16_t*>(m + i0);
#pragma omp simd
              for (int64_t c = 0; c < len; ++c) {
                oi[c] = bf16_round(bf16_widen(xi[c]) * wi[c]);
                mi[c] = static_cast<uint16_t>(kept & (0u - static_cast<uint32_t>(wi[c] != 0.0f)));
              }
            });
          } else {
            uint16_t* mi = reinterpret_cast<uint16_t*>(m + i0);
            for (int64_t c = 0; c < len; ++c) {
              o[i0 + c] = static_cast<T>(static_cast<C>(xs[i0 + c]) * wp[c]);
              mi[c] = wp[c] != C(0) ? kept : uint16_t{0};
            }
          }
        }
      }
    });
  });
}

void CpuBackend::normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double std) {
  dispatch_floating(out.dtype(), "normal", [&]<class T>() {
    T* o = out.data<T>();
    parallel_rows(out.numel(), 16, [&](int64_t i) {
      Philox4 r = philox4x32_10(seed, offset + static_cast<uint64_t>(i));
      // Box-Muller: sqrt(-2 ln u1) cos(2 pi u2) ~ N(0, 1)
      double z =
          std::sqrt(-2.0 * std::log(uniform_open0(r.w[0]))) * std::cos(2.0 * M_PI * uniform_double(r.w[1]));
      o[i] = static_cast<T>(mean + std * z);
    });
  });
}

}  // namespace saccade::cpu
