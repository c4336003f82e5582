// The parts of api.h that every build has (the TF32 and readable-kernel flags), and the rest for a build
// without CUDA, where each throws. With CUDA, memory_stats / empty_cache / synchronize live in backend.cpp.
#include "ops/cuda/api.h"

#include <atomic>

#include "core/error.h"

namespace saccade::cuda {

namespace {
std::atomic<bool> tf32{false}, readable{false}, readable_reduce{false}, fast{true}, tensor_core{true};
}

bool allow_tf32() { return tf32.load(std::memory_order_relaxed); }
void set_allow_tf32(bool allow) { tf32.store(allow, std::memory_order_relaxed); }
bool readable_attention() { return readable.load(std::memory_order_relaxed); }
void set_readable_attention(bool r) { readable.store(r, std::memory_order_relaxed); }
bool fast_attention() { return fast.load(std::memory_order_relaxed); }
void set_fast_attention(bool f) { fast.store(f, std::memory_order_relaxed); }
bool tensor_core_attention() { return tensor_core.load(std::memory_order_relaxed); }
void set_tensor_core_attention(bool on) { tensor_core.store(on, std::memory_order_relaxed); }
bool readable_reductions() { return readable_reduce.load(std::memory_order_relaxed); }
void set_readable_reductions(bool r) { readable_reduce.store(r, std::memory_order_relaxed); }

#ifndef SACCADE_WITH_CUDA
namespace {
[[noreturn]] void unavailable(const char* op) {
  throw Error(
      fmt::format("{}: CUDA is not available (saccade was built without CUDA; configure with "
                  "-DSACCADE_CUDA=ON)",
                  op));
}
}  // namespace
AllocatorStats memory_stats() { unavailable("memory_stats"); }
void empty_cache() { unavailable("empty_cache"); }
void synchronize() { unavailable("synchronize"); }
#endif

}  // namespace saccade::cuda
