#pragma once
// The 16-bit route of every backend, in one place: Widening<Kernels> is the backend that backend(device)
// hands out (cpu/backend.cpp, cuda/backend.cpp). For each K16 row of the kernel lists (ops/kernels/*.h) it
// calls the Kernels class's own kernel when none of its tensors is bfloat16 / float16 or when
// Kernels::native_16bit says the kernel takes 16 bits itself; otherwise it runs the float32 kernel on float32
// stand-ins and rounds each 16-bit tensor the kernel writes once. The overrides are generated from the rows
// (which name the Kernel16 entry and the written tensors), so no kernel is routed by hand here, and the ops
// in ops/*.cpp call backend(device).kernel(...) with 16-bit tensors and never widen by hand.
#include <cstddef>
#include <functional>
#include <tuple>
#include <utility>

#include "ops/backend.h"

namespace saccade {

/// A K16 row's Written: the kernel writes its tensor parameters from parameter `First` on, and reads only
/// those before (softmax: OutFrom<1>, out is parameter 1). A written 16-bit tensor is handed to the float32
/// kernel as an uninitialised float32 buffer.
template <size_t First>
struct OutFrom {
  static constexpr bool reads(size_t i) { return i < First; }
  static constexpr bool writes(size_t i) { return i >= First; }
};
/// A K16 row's Written: the kernel reads and writes parameter `I` (index_add's out, which it adds into), and
/// only reads the others. The written 16-bit tensor is handed over as its float32 copy.
template <size_t I>
struct InOut {
  static constexpr bool reads(size_t) { return true; }
  static constexpr bool writes(size_t i) { return i == I; }
};

/// `Kernels` (a Backend: CpuBackend, CudaBackend) with the 16-bit route of Kernel16 in front of its kernels:
/// one override per K16 row of the kernel lists, made by SACCADE_ROUTE_KERNEL below; float32 statistics,
/// int64 indices and undefined tensors pass as they are (Backend::widened).
template <class Kernels>
class Widening final : public Kernels {
 public:
  using Kernels::Kernels;

#define SACCADE_UNPAREN(...) __VA_ARGS__
#define SACCADE_NOT_ROUTED(...)
#define SACCADE_ROUTE_KERNEL(name, params, args, kernel16, Written)                         \
  void name params override {                                                               \
    route<Written>(                                                                         \
        kernel16, [this](const auto&... a) { Kernels::name(a...); }, SACCADE_UNPAREN args); \
  }
  SACCADE_BACKEND_KERNELS(SACCADE_NOT_ROUTED, SACCADE_ROUTE_KERNEL)
  SACCADE_BACKEND_FUSED_KERNELS(SACCADE_NOT_ROUTED, SACCADE_ROUTE_KERNEL)
#undef SACCADE_ROUTE_KERNEL
#undef SACCADE_NOT_ROUTED
#undef SACCADE_UNPAREN

 private:
  // Runs `kernel` on the arguments as they are when no tensor among them is 16-bit or the backend declares
  // `k` native in 16 bits; otherwise on float32 stand-ins of the 16-bit tensors, rounding those it writes
  // back once. (Any tensor, not only the first: the GRU gates take 16-bit gi, gh beside a float32 h under
  // autocast.)
  template <class Written, class Kernel, class... A>
  void route(Kernel16 k, const Kernel& kernel, const A&... args) {
    if (!(widens(args) || ...) || this->native_16bit(k)) return kernel(args...);
    widen_call<Written>(std::index_sequence_for<A...>{}, kernel, args...);
  }
  using Kernels::widens;  // a Tensor: Backend::widens; any other argument is never widened
  template <class A>
  static bool widens(const A&) {
    return false;
  }

  // The float32 kernel's arguments: a tensor's float32 stand-in (Backend::widened), anything else as it is;
  // after the kernel, each written 16-bit tensor gets its stand-in rounded back (Backend::round_into).
  template <class Written, size_t... I, class Kernel, class... A>
  static void widen_call(std::index_sequence<I...>, const Kernel& kernel, const A&... args) {
    std::tuple wide{stand_in(args, Written::reads(I))...};
    std::apply([&](const auto&... w) { kernel(unwrap(w)...); }, wide);
    (round_back(std::get<I>(wide), args, Written::writes(I)), ...);
  }
  static Tensor stand_in(const Tensor& t, bool read) { return Backend::widened(t, read); }
  template <class A>
  static std::reference_wrapper<const A> stand_in(const A& a, bool) {
    return std::cref(a);
  }
  static const Tensor& unwrap(const Tensor& t) { return t; }
  template <class A>
  static const A& unwrap(std::reference_wrapper<const A> r) {
    return r.get();
  }
  static void round_back(const Tensor& wide, const Tensor& t, bool written) {
    if (written) Backend::round_into(wide, t);
  }
  template <class W, class A>
  static void round_back(const W&, const A&, bool) {}
};

}  // namespace saccade
