#include "nn/moe.h"

#include <algorithm>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "nn/init.h"
#include "ops/creation.h"
#include "ops/reduce.h"

namespace saccade::nn {

MoeExperts::MoeExperts(int64_t num_experts, int64_t hidden_size, int64_t intermediate_size,
                       const std::string& hidden_act, Generator* gen)
    : Module("MoeExperts") {
  ErrorScope scope(name());
  SACCADE_CHECK(num_experts > 0 && hidden_size > 0 && intermediate_size > 0,
                "MoeExperts: num_experts {}, hidden_size {} and intermediate_size {} must be positive",
                num_experts, hidden_size, intermediate_size);
  gelu_ = SwiGLU::gelu_for("MoeExperts", hidden_act);
  auto weight = [&](const char* name, int64_t rows, int64_t cols) {
    return register_parameter(name, init::normal_(Tensor::empty({num_experts, rows, cols}), 0.0, 0.02, gen));
  };
  gate_proj = weight("gate_proj", intermediate_size, hidden_size);
  up_proj = weight("up_proj", intermediate_size, hidden_size);
  down_proj = weight("down_proj", hidden_size, intermediate_size);
}

// x (M, D) grouped by expert -> (M, D): per group g, rows x_g -> down_g(act(x_g gate_gᵀ) ⊙ x_g up_gᵀ)
Variable MoeExperts::forward(const Variable& x, const std::vector<int64_t>& offs) {
  ErrorScope scope(name(), {shape_of(x)});
  SACCADE_CHECK(x.defined() && x.dim() == 2 && x.size(1) == gate_proj.size(2),
                "MoeExperts: expected x (M, {}), got {}", gate_proj.size(2),
                x.defined() ? x.shape() : Shape{});
  // a weight (E, out, in) as grouped_mm's b (E, in, out): a transposed view, no copy
  auto through = [&](const Variable& in, const Variable& w) {
    return grouped_mm(in, transpose(w, 1, 2), offs);
  };
  const Variable g = through(x, gate_proj), u = through(x, up_proj);
  return through(gelu_ ? mul(gelu_->forward(g), u) : swiglu(g, u), down_proj);
}

Variable MoeExperts::forward_composed(const Variable& x, const std::vector<int64_t>& offs) {
  ErrorScope scope(name(), {shape_of(x)});
  std::vector<Variable> out;
  int64_t start = 0;
  for (int64_t e = 0; e < static_cast<int64_t>(offs.size()); ++e) {
    const int64_t len = offs[static_cast<size_t>(e)] - start;
    if (len > 0) {
      const Variable xe = narrow(x, 0, start, len);
      const Variable g = matmul(xe, t(select(gate_proj, 0, e))), u = matmul(xe, t(select(up_proj, 0, e)));
      const Variable h = gelu_ ? mul(gelu_->forward(g), u) : mul(silu(g), u);
      out.push_back(matmul(h, t(select(down_proj, 0, e))));
    }
    start = offs[static_cast<size_t>(e)];
  }
  return cat(out, 0);
}

ExpertRoutes ExpertRoutes::of(const Tensor& indices, int64_t num_experts) {
  SACCADE_CHECK(indices.defined() && indices.dim() == 2 && indices.dtype() == DType::Int64,
                "SparseMoeBlock: expected expert indices int64 (N, k), got {}",
                indices.defined() ? indices.shape() : Shape{});
  const Tensor host = indices.to(Device::cpu()).contiguous();
  const int64_t* e = host.data<int64_t>();
  const int64_t routes = host.numel(), k = host.size(1);
  std::vector<int64_t> count(static_cast<size_t>(num_experts), 0);
  for (int64_t i = 0; i < routes; ++i) {
    SACCADE_CHECK(e[i] >= 0 && e[i] < num_experts, "SparseMoeBlock: expert index {} is not in [0, {})", e[i],
                  num_experts);
    ++count[static_cast<size_t>(e[i])];
  }
  ExpertRoutes r;
  r.offs.resize(count.size());
  std::vector<int64_t> next(count.size());  // where expert e's next route goes (a counting sort)
  int64_t end = 0;
  for (size_t x = 0; x < count.size(); ++x) next[x] = end, end += count[x], r.offs[x] = end;
  r.rows.resize(static_cast<size_t>(routes));
  r.slots.resize(static_cast<size_t>(routes));
  for (int64_t i = 0; i < routes; ++i) {
    const auto at = static_cast<size_t>(next[static_cast<size_t>(e[i])]++);
    r.rows[at] = i / k;
    r.slots[at] = i;
  }
  return r;
}

SparseMoeBlock::SparseMoeBlock(int64_t hidden_size, const MoeOptions& o, Generator* gen)
    : UnaryModule("SparseMoeBlock"), options(o) {
  ErrorScope scope(name());
  SACCADE_CHECK(o.num_experts > 0 && o.num_experts_per_tok >= 1 && o.num_experts_per_tok <= o.num_experts,
                "SparseMoeBlock: num_experts_per_tok {} must be in 1..num_experts ({})",
                o.num_experts_per_tok, o.num_experts);
  SACCADE_CHECK(o.shared_expert_intermediate_size >= 0,
                "SparseMoeBlock: shared_expert_intermediate_size {} must be >= 0 (0: none)",
                o.shared_expert_intermediate_size);
  gate = register_module("gate", std::make_shared<Linear>(hidden_size, o.num_experts, false, gen));
  experts = register_module("experts", std::make_shared<MoeExperts>(o.num_experts, hidden_size,
                                                                    o.intermediate_size, o.hidden_act, gen));
  if (o.shared_expert_intermediate_size > 0) {
    shared_expert = register_module(
        "shared_expert",
        std::make_shared<SwiGLU>(hidden_size, o.shared_expert_intermediate_size, false, gen, o.hidden_act));
    shared_expert_gate =
        register_module("shared_expert_gate", std::make_shared<Linear>(hidden_size, 1, false, gen));
  }
}

// x (*, D) -> (*, D)
Variable SparseMoeBlock::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  SACCADE_CHECK(x.defined() && x.dim() >= 1,
                "SparseMoeBlock: expected x (*, D), got an undefined or 0-d input");
  const int64_t d = x.size(-1), n = x.numel() / std::max<int64_t>(d, 1), k = options.num_experts_per_tok;
  const Variable flat = reshape(x, {n, d});
  router_logits = gate->forward(flat);  // (N, E)
  // the routing probabilities in float32 for 16-bit x (transformers' softmax(..., dtype=torch.float))
  const bool half = is_half(router_logits.dtype());
  const Variable probs = softmax(half ? router_logits.to(DType::Float32) : router_logits, -1);
  const ops::ValuesIndices top = ops::topk(probs.data(), k, -1);
  Variable weights = gather(probs, -1, top.indices);  // (N, k), differentiable through the router
  if (options.norm_topk_prob) weights = div(weights, sum(weights, {-1}, true));
  if (half) weights = weights.to(x.dtype());
  // the N·k routes sorted by expert: each expert multiplies its own tokens' rows (grouped_mm)
  const ExpertRoutes routes = ExpertRoutes::of(top.indices, options.num_experts);
  auto index = [&](const std::vector<int64_t>& v) {
    return ops::from_vector(v, {static_cast<int64_t>(v.size())}, x.device());
  };
  const Tensor rows = index(routes.rows);
  const Variable out = experts->forward(index_select(flat, 0, rows), routes.offs);  // (N·k, D)
  const Variable w = unsqueeze(index_select(reshape(weights, {n * k}), 0, index(routes.slots)), -1);
  Variable y = index_add(Variable(ops::zeros({n, d}, x.dtype(), x.device())), 0, rows, mul(out, w));
  if (shared_expert)
    y = add(y, mul(sigmoid(shared_expert_gate->forward(flat)), shared_expert->forward(flat)));
  return reshape(y, x.shape());
}

Variable load_balancing_loss(const std::vector<Variable>& router_logits, int64_t num_experts, int64_t top_k) {
  const char* op = "load_balancing_loss";
  ErrorScope scope(op);
  SACCADE_CHECK(!router_logits.empty(), "{}: no router logits", op);
  SACCADE_CHECK(top_k >= 1 && top_k <= num_experts, "{}: top_k {} must be in 1..num_experts ({})", op, top_k,
                num_experts);
  for (const Variable& l : router_logits)
    SACCADE_CHECK(l.defined() && l.dim() == 2 && l.size(1) == num_experts,
                  "{}: expected router logits (N, {}), got {}", op, num_experts,
                  l.defined() ? l.shape() : Shape{});
  const Variable probs = softmax(cat(router_logits, 0), -1);  // (L·N, E)
  // f_e: the share of the L·N·k routes that expert e takes (transformers: mean over tokens of the one-hot
  // mask, summed over the k slots)
  const Tensor chosen = ops::topk(probs.data(), top_k, -1).indices;
  const ExpertRoutes routes = ExpertRoutes::of(chosen, num_experts);
  std::vector<double> share(static_cast<size_t>(num_experts));
  const auto tokens = static_cast<double>(probs.size(0));
  for (size_t e = 0; e < share.size(); ++e)
    share[e] = static_cast<double>(routes.offs[e] - (e ? routes.offs[e - 1] : 0)) / tokens;
  const Tensor f = ops::from_vector(share, {num_experts}, probs.device()).to(probs.dtype());
  return mul(sum(mul(mean(probs, {0}), Variable(f))), static_cast<double>(num_experts));
}

}  // namespace saccade::nn
