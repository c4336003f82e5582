// Autocast's thread-local state, its policy lookup and the weight cache (autograd/autocast.h).
#include "autograd/autocast.h"

#include <memory>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "autograd/node.h"

namespace saccade {

namespace {

// One cached cast of a parameter: the cast Variable, the parameter's storage version when it was made, and
// the parameter itself (weakly: a freed parameter's address may be reused).
struct CacheEntry {
  std::weak_ptr<VariableImpl> source;
  uint64_t version = 0;
  Variable cast;
};

struct AutocastState {
  bool enabled = false;
  DType dtype = DType::Float32;
  int depth = 0;      // live guards
  int64_t casts = 0;  // parameter casts made (tests)
  // keyed by parameter (a parameter has one cast per guard: to the guard's dtype, or a 16-bit one to
  // float32); dropped when the outermost guard ends
  std::unordered_map<const VariableImpl*, CacheEntry> cache;
};

thread_local AutocastState g_state;

}  // namespace

bool autocast_enabled() { return g_state.enabled; }
DType autocast_dtype() { return g_state.dtype; }

AutocastGuard::AutocastGuard(DType dtype, bool enabled)
    : prev_enabled_(g_state.enabled), prev_dtype_(g_state.dtype) {
  SACCADE_CHECK(is_half(dtype), "AutocastGuard: expected bfloat16 or float16, got {}", dtype);
  g_state.enabled = enabled;
  g_state.dtype = dtype;
  ++g_state.depth;
}

AutocastGuard::~AutocastGuard() {
  g_state.enabled = prev_enabled_;
  g_state.dtype = prev_dtype_;
  if (--g_state.depth == 0) g_state.cache.clear();
}

namespace autocast {

bool active() { return g_state.enabled && !autocast_excluded(); }

State state() { return {active(), g_state.dtype}; }

StateGuard::StateGuard(State s) : prev_excluded_(autocast_excluded()) {
  set_autocast_excluded(!s.active);
  if (s.active) guard_.emplace(s.dtype);
}

StateGuard::~StateGuard() {
  guard_.reset();
  set_autocast_excluded(prev_excluded_);
}

DType target_dtype(AutocastPolicy policy, DType from, DType widest) {
  if (from == DType::Float64) return from;  // never cast (PyTorch's is_eligible)
  switch (policy) {
    case AutocastPolicy::Lower:
      return g_state.dtype;
    case AutocastPolicy::Float32:
      return is_half(from) ? DType::Float32 : from;
    case AutocastPolicy::Promote:
      return widest;
    case AutocastPolicy::Keep:
      return from;
  }
  return from;
}

Variable cast(const Variable& v, DType dtype) {
  if (!v.defined() || v.dtype() == dtype) return v;
  // only parameters are cached (a leaf that requires grad lives across ops; activations are cast once anyway)
  if (!v.is_leaf() || !v.requires_grad() || g_state.depth == 0) return v.to(dtype);
  auto& cache = g_state.cache;
  const VariableImpl* key = v.impl().get();
  auto it = cache.find(key);
  if (it != cache.end()) {
    const CacheEntry& e = it->second;
    const bool same_param = !e.source.expired() && e.source.lock().get() == key;
    const bool fresh = e.version == v.data().version() && e.cast.dtype() == dtype;
    // a cast made without history cannot carry a gradient (a cast's node saves nothing: no backward
    // spends it, Node::set_saves_nothing)
    const bool usable = !grad_enabled() || e.cast.grad_fn() != nullptr;
    if (same_param && fresh && usable) return e.cast;
  }
  Variable c = v.to(dtype);
  ++g_state.casts;
  cache[key] = CacheEntry{v.impl(), v.data().version(), c};
  return c;
}

int64_t weight_cache_casts() { return g_state.casts; }
void reset_weight_cache_casts() { g_state.casts = 0; }

}  // namespace autocast

}  // namespace saccade
