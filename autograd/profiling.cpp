// autograd's reports to the profiler: FLOPs and bytes of a forward op, arrows from forward ops to their
// nodes, and the backward ranges (see profiling.h).
#include "autograd/profiling.h"

#include <cctype>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "autograd/node.h"
#include "autograd/variable.h"
#include "profiler/flops.h"

namespace saccade::detail {

namespace {

bool is(const char* op, const char* name) { return std::strcmp(op, name) == 0; }

int64_t bytes_of(const Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.itemsize()) : 0; }

// What the forward op cost: FLOPs for products, else bytes moved. {flops, bytes}.
std::pair<int64_t, int64_t> forward_cost(const char* op, const Tensor& y, const Variable* in, size_t n) {
  if ((is(op, "matmul") || is(op, "mm") || is(op, "bmm")) && n >= 2) {
    // y (..., m, n) from a (..., m, k): 2·numel(y)·k, whatever the broadcast batch (a 1-d a: k = its size)
    const Shape& a = in[0].shape();
    const int64_t k = a.size() >= 1 ? a[a.size() - 1] : 1;
    return {profiler::flops::gemm(1, y.numel(), 1, k), 0};
  }
  if (is(op, "linear") && n >= 2) {  // x (..., in) · weight (out, in)ᵀ
    return {profiler::flops::gemm(1, y.numel(), 1, in[1].shape()[1]), 0};
  }
  if (is(op, "conv2d") && n >= 2) {  // weight (C_out, C_in/groups, kH, kW)
    return {profiler::flops::conv2d(y.numel(), in[1].numel(), in[1].shape()[0]), 0};
  }
  if (is(op, "flash_attention") && n >= 3 && in[0].dim() == 4) {  // q (B, H, Tq, D), k, v (B, H, Tk, D/Dv)
    const Shape &q = in[0].shape(), &v = in[2].shape();
    return {profiler::flops::attention(q[0] * q[1], q[2], v[2], q[3], v[3]), 0};
  }
  int64_t in_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!in[i].defined()) continue;
    if (in[i].data().storage() == y.storage()) return {0, 0};  // a view: nothing moved
    in_bytes += bytes_of(in[i].data());
  }
  return {0, profiler::flops::bytes_moved(in_bytes, bytes_of(y))};
}

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

// The forward FLOPs of the op whose arrow is about to be linked (same thread, between the two calls).
thread_local int64_t tls_last_backward_flops = 0;

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

void profile_op_begin_shapes(const char* op, std::string shapes) {
  if (shapes.size() >= 2) shapes.resize(shapes.size() - 2);  // the last ", "
  if (profiler::active_options().record_shapes) shapes = "[" + shapes + "]";
  profiler::detail::begin_op(op, std::move(shapes));
}

uint64_t profile_forward(const char* op, const Tensor& result, const Variable* inputs, size_t n) {
  int64_t flops = 0, bytes = 0;
  if (profiler::active_options().with_flops) std::tie(flops, bytes) = forward_cost(op, result, inputs, n);
  tls_last_backward_flops = is(op, "flash_attention") ? profiler::flops::attention_backward(flops)
                                                      : profiler::flops::product_backward(flops);
  const uint64_t flow = profiler::detail::next_flow_id();
  profiler::detail::end_op(op, flops, bytes, flow);
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
