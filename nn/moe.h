#pragma once
// A sparse mixture-of-experts feed-forward layer (Shazeer et al. 2017; Fedus et al. 2021, Switch
// Transformers; Jiang et al. 2024, Mixtral of Experts, section 2.1): a router scores each token against E
// experts, the token goes through its top-k experts only, and their outputs are summed with the router's
// weights. Hugging Face's MixtralSparseMoeBlock, Qwen3MoeSparseMoeBlock, OlmoeSparseMoeBlock and, with a
// shared expert, Qwen2MoeSparseMoeBlock.
//
//   p = softmax(gate(x))                       (N, E), in float32 for 16-bit x, as transformers
//   (w, e) = topk(p, k)                        (N, k); w /= Σ w when norm_topk_prob (Mixtral: always)
//   y_n = Σ_j w_nj · expert_{e_nj}(x_n)        expert_e(x) = down_e (act(gate_e x) ⊙ up_e x)
//   (+ σ(shared_expert_gate(x)) · shared_expert(x) with a shared expert, Qwen2-MoE)
//
// No token is dropped (no capacity factor). The expert products are grouped GEMMs: the N·k (token, expert)
// pairs are sorted by expert and each expert multiplies its own rows only (grouped_mm), so the forward's
// FLOPs grow with k, not with E. The experts' weights are one batched tensor each, (E, I, D) and (E, D, I).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/transformer_layers.h"

namespace saccade::nn {

/// The experts of a sparse MoE layer as batched weights (transformers' MixtralExperts, its gate_up_proj held
/// as two): parameters gate_proj and up_proj (E, I, D), down_proj (E, D, I); expert e maps x (D) to
/// down_proj[e] (act(gate_proj[e] x) ⊙ up_proj[e] x), act by `hidden_act` as nn::SwiGLU's. Init N(0, 0.02²)
/// from `gen` (transformers' initializer_range). Throws saccade::Error naming "MoeExperts" for sizes that
/// are not positive or a hidden_act SwiGLU does not run.
class MoeExperts : public Module {
 public:
  MoeExperts(int64_t num_experts, int64_t hidden_size, int64_t intermediate_size,
             const std::string& hidden_act = "silu", Generator* gen = nullptr);
  /// x (M, D) whose rows are grouped by expert, `offs` (E) the groups' cumulative ends (grouped_mm's) ->
  /// (M, D), each row through its group's expert: three grouped_mm, one GEMM per expert with rows. Throws
  /// saccade::Error naming "MoeExperts" for another shape or offsets grouped_mm refuses.
  Variable forward(const Variable& x, const std::vector<int64_t>& offs);
  /// The readable twin: each expert's rows through three matmuls (narrow, matmul, cat), the reference
  /// forward is tested against.
  Variable forward_composed(const Variable& x, const std::vector<int64_t>& offs);

  Variable gate_proj, up_proj, down_proj;
  int64_t num_experts() const { return gate_proj.size(0); }

 private:
  std::shared_ptr<GELU> gelu_;  // the gate's activation unless silu (fused in swiglu)
};

/// The routing switches of a sparse MoE layer (transformers' config names).
struct MoeOptions {
  int64_t num_experts = 8;          ///< E (Mixtral's num_local_experts; Qwen-MoE's and OLMoE's num_experts)
  int64_t num_experts_per_tok = 2;  ///< k
  int64_t intermediate_size = 0;    ///< each expert's I (Qwen-MoE's moe_intermediate_size)
  /// The top-k weights renormalised to sum to one (Qwen-MoE's and OLMoE's norm_topk_prob; Mixtral: always)
  bool norm_topk_prob = true;
  std::string hidden_act = "silu";
  /// The always-on shared expert's width (Qwen2-MoE's shared_expert_intermediate_size); 0: none
  int64_t shared_expert_intermediate_size = 0;
};

/// The sparse MoE feed-forward layer (the file comment's formulas). Children: gate Linear(D, E, no bias)
/// (the router, transformers' name), experts MoeExperts(E, D, I); with a shared expert, shared_expert
/// SwiGLU(D, shared I) and shared_expert_gate Linear(D, 1, no bias). forward: x (*, D) -> (*, D); the
/// router's logits of the last forward stay in `router_logits` (N, E) for load_balancing_loss. Throws
/// saccade::Error naming "SparseMoeBlock" for k outside 1..E or sizes that are not positive, Linear's
/// errors for another width.
class SparseMoeBlock : public UnaryModule {
 public:
  SparseMoeBlock(int64_t hidden_size, const MoeOptions& options, Generator* gen = nullptr);
  Variable forward(const Variable& x) override;

  std::shared_ptr<Linear> gate;
  std::shared_ptr<MoeExperts> experts;
  std::shared_ptr<SwiGLU> shared_expert;       ///< null without a shared expert
  std::shared_ptr<Linear> shared_expert_gate;  ///< null without a shared expert
  Variable router_logits;                      ///< (N, E) of the last forward
  /// The routing switches; num_experts_per_tok and norm_topk_prob may change between forwards (num_experts
  /// is fixed by the weights)
  MoeOptions options;
};

/// Where each of N tokens' k routes goes, sorted by expert (what SparseMoeBlock::forward computes from the
/// top-k indices, on the host): `rows` (N·k) the token of each sorted route, `slots` (N·k) its place n·k + j
/// in the (N, k) routing weights, `offs` (E) each expert's cumulative end. Stable: within an expert, routes
/// in token order. `indices` is int64 (N, k) with entries in [0, E); throws saccade::Error naming
/// "SparseMoeBlock" otherwise.
struct ExpertRoutes {
  std::vector<int64_t> rows, slots, offs;
  static ExpertRoutes of(const Tensor& indices, int64_t num_experts);
};

/// The router's auxiliary load-balancing loss (Fedus et al. 2021, Switch Transformers, eq. 4; transformers'
/// load_balancing_loss_func without an attention mask): over the tokens of every layer's router logits (each
/// (N, E), concatenated), E · Σ_e f_e · P_e with f_e the share of the top-k routes that go to expert e (a
/// constant) and P_e the mean router probability of e. A 0-d Variable in the logits' dtype, differentiable
/// through P. Throws saccade::Error naming "load_balancing_loss" for an empty list, logits of other widths
/// than E, or k outside 1..E.
Variable load_balancing_loss(const std::vector<Variable>& router_logits, int64_t num_experts, int64_t top_k);

}  // namespace saccade::nn
