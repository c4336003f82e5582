#pragma once
// What the [cuda] test files share: skipping without a GPU, the two devices, seeded random CPU tensors, and
// both(), which runs a computation on the CPU and on the GPU and compares every result.
#include <functional>
#include <vector>

#include "helpers.h"

namespace saccade::testing {

/// True (after one warning) when there is no GPU to test on.
inline bool no_gpu() {
  if (cuda_is_available()) return false;
  WARN("skipped: no CUDA GPU present (or saccade was built without CUDA)");
  return true;
}

inline const Device kGpu = Device::cuda();
inline const Device kCpu = Device::cpu();

/// A standard-normal CPU tensor of shape s from generator seed `seed`.
inline Tensor randn(const Shape& s, uint64_t seed, DType dt = DType::Float32) {
  Generator g(seed);
  return ops::randn(s, dt, kCpu, &g);
}

/// Runs f on the CPU and on the GPU and checks that every returned tensor agrees within tol (absolute and
/// relative; GPU results copied back). Without a GPU only the CPU half runs (so that the test itself is
/// exercised everywhere); the caller then skips with SKIP_WITHOUT_GPU.
inline void both(const std::function<std::vector<Tensor>(Device)>& f, double tol = 1e-5) {
  const std::vector<Tensor> c = f(kCpu);
  REQUIRE_FALSE(c.empty());
  for (const Tensor& t : c) CHECK((!t.defined() || t.device() == kCpu));
  if (!cuda_is_available()) return;
  const std::vector<Tensor> g = f(kGpu);
  REQUIRE(c.size() == g.size());
  for (size_t i = 0; i < c.size(); ++i) {
    INFO(fmt::format("result {}: shape {}, dtype {}", i, c[i].shape(), c[i].dtype()));
    if (!c[i].defined()) {
      CHECK_FALSE(g[i].defined());
      continue;
    }
    CHECK(g[i].device() == kGpu);
    CHECK(g[i].dtype() == c[i].dtype());
    CHECK(allclose(g[i].to(kCpu), c[i], tol, tol));
  }
}

}  // namespace saccade::testing

/// Returns from the test case (after one warning) when there is no GPU.
#define SKIP_WITHOUT_GPU() \
  if (::saccade::testing::no_gpu()) return
