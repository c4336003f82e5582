// autograd's reports to the profiler: FLOPs and bytes of a forward op, arrows from forward ops to their
// nodes, and the backward ranges (see profiling.h).
#include "autograd/profiling.h"

#include <cctype>
#include <mutex>
#include <unordered_map>

#include "autograd/node.h"
#include "autograd/variable.h"
#include "profiler/flops.h"

namespace saccade {

namespace {
int64_t bytes_of(const Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.itemsize()) : 0; }
}  // namespace

// ---- the cost models of autograd/op_info.h ----

OpCost cost::bytes_forward(const Tensor& y, const Variable* in, size_t n) {
  int64_t in_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!in[i].defined()) continue;
    if (in[i].data().storage() == y.storage()) return {};  // a view: nothing moved
    in_bytes += bytes_of(in[i].data());
  }
  return {0, profiler::flops::bytes_moved(in_bytes, bytes_of(y))};
}

OpCost cost::gemm_forward(const Tensor& y, const Variable* in, size_t n) {
  if (n < 2) return bytes_forward(y, in, n);
  // y (..., m, n) from a (..., m, k): 2·numel(y)·k, whatever the broadcast batch (a 1-d a: k = its size)
  const Shape& a = in[0].shape();
  const int64_t k = a.size() >= 1 ? a[a.size() - 1] : 1;
  return {profiler::flops::gemm(1, y.numel(), 1, k), 0};
}

OpCost cost::linear_forward(const Tensor& y, const Variable* in, size_t n) {
  if (n < 2) return bytes_forward(y, in, n);
  return {profiler::flops::gemm(1, y.numel(), 1, in[1].shape()[1]), 0};  // x (..., in) · weight (out, in)ᵀ
}

OpCost cost::grouped_forward(const Tensor& y, const Variable* in, size_t n) {
  if (n < 2) return bytes_forward(y, in, n);
  // a (M, K) @ b (G, K, N) or a (K, M) @ b (M, N): each of a's M·K entries meets one group's N columns
  return {profiler::flops::gemm(1, in[0].data().numel(), 1, y.size(-1)), 0};
}

OpCost cost::conv2d_forward(const Tensor& y, const Variable* in, size_t n) {
  if (n < 2) return bytes_forward(y, in, n);
  return {profiler::flops::conv2d(y.numel(), in[1].numel(), in[1].shape()[0]), 0};  // weight (C_out, ...)
}

OpCost cost::attention_forward(const Tensor& y, const Variable* in, size_t n) {
  if (n < 3 || in[0].dim() != 4) return bytes_forward(y, in, n);
  const Shape &q = in[0].shape(), &v = in[2].shape();  // q (B, H, Tq, D), k, v (B, H, Tk, D/Dv)
  return {profiler::flops::attention(q[0] * q[1], q[2], v[2], q[3], v[3]), 0};
}

int64_t cost::products_backward(int64_t forward_flops) {
  return profiler::flops::product_backward(forward_flops);
}
int64_t cost::attention_backward(int64_t forward_flops) {
  return profiler::flops::attention_backward(forward_flops);
}

}  // namespace saccade

namespace saccade::detail {

namespace {

// The forward FLOPs of the op whose arrow is about to be linked (same thread, between the two calls).
thread_local int64_t tls_last_backward_flops = 0;

struct NodeInfo {
  uint64_t flow;
  int64_t backward_flops;
};

std::mutex& nodes_mutex() {
  static std::mutex m;
  return m;
}
// NOTE: keyed by address: a node freed and another made at its address is re-linked when that one is made.
std::unordered_map<const Node*, NodeInfo>& nodes() {
  static auto* m = new std::unordered_map<const Node*, NodeInfo>;
  return *m;
}

// "flash_attention" -> "FlashAttentionBackward", once per op name and thread
const char* backward_name(const std::string& op) {
  thread_local std::unordered_map<std::string, const char*> cache;
  auto it = cache.find(op);
  if (it != cache.end()) return it->second;
  std::string s;
  bool up = true;
  for (char c : op) {
    if (c == '_') {
      up = true;
      continue;
    }
    s += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  const char* name = profiler::detail::intern(s + "Backward");
  cache.emplace(op, name);
  return name;
}

}  // namespace

uint64_t profile_op_begin_shapes(const char* op, std::string shapes) {
  if (shapes.size() >= 2) shapes.resize(shapes.size() - 2);  // the last ", "
  if (profiler::active_options().record_shapes) shapes = "[" + shapes + "]";
  return profiler::detail::begin_op(op, std::move(shapes));
}

void profile_op_discard(uint64_t range) { profiler::detail::discard_op(range); }

uint64_t profile_forward(uint64_t range, const char* op, const CostModel& cost, const Tensor& result,
                         const Variable* inputs, size_t n) {
  OpCost c;
  if (profiler::active_options().with_flops) c = cost.forward(result, inputs, n);
  tls_last_backward_flops = cost.backward_flops(c.flops);
  const uint64_t flow = profiler::detail::next_flow_id();
  profiler::detail::end_op(range, op, c.flops, c.bytes, flow);
  return flow;
}

void clear_nodes() {
  std::lock_guard<std::mutex> lock(nodes_mutex());
  nodes().clear();
}

void profile_link_node(const Node* node, uint64_t flow) {
  static const bool registered = (profiler::detail::add_stop_hook(&clear_nodes), true);  // nodes die with it
  (void)registered;
  std::lock_guard<std::mutex> lock(nodes_mutex());
  nodes()[node] = {flow, tls_last_backward_flops};
}

void BackwardRange::begin(const Node& node) {
  name_ = backward_name(node.name());
  {
    std::lock_guard<std::mutex> lock(nodes_mutex());
    auto it = nodes().find(&node);
    if (it != nodes().end()) {
      flow_ = it->second.flow;
      flops_ = it->second.backward_flops;
      nodes().erase(it);
    }
  }
  generation_ = profiler::detail::generation();
  was_in_backward_ = profiler::detail::in_backward();
  profiler::detail::set_in_backward(true);
  nvtx_ = profiler::detail::nvtx_start(name_);
  start_ns_ = profiler::detail::now_ns();
  profiler::detail::push_range(name_, start_ns_);
}

void BackwardRange::end() {
  profiler::Event e;
  e.end_ns = profiler::detail::now_ns();
  profiler::detail::nvtx_end(nvtx_);
  profiler::detail::pop_range();
  profiler::detail::set_in_backward(was_in_backward_);
  e.name = name_;
  e.category = "backward";
  e.start_ns = start_ns_;
  e.flops = flops_;
  e.flow_in = flow_;
  profiler::detail::record(std::move(e), generation_);
}

}  // namespace saccade::detail
