#include "nn/gpt_block.h"

#include <cmath>
#include <optional>

#include "autograd/functions/elementwise.h"
#include "autograd/grad_mode.h"
#include "nn/init.h"

namespace saccade::nn {

GPTMLP::GPTMLP(int64_t d_model, int64_t hidden, Generator* gen) : UnaryModule("GPTMLP") {
  ErrorScope scope(name());
  c_fc = register_module("c_fc", std::make_shared<Linear>(d_model, hidden, true, gen));
  gelu = register_module("gelu", std::make_shared<GELU>());
  c_proj = register_module("c_proj", std::make_shared<Linear>(hidden, d_model, true, gen));
}

// x: (*, d) -> (*, d)
Variable GPTMLP::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  return c_proj->forward(gelu->forward(c_fc->forward(x)));
}

GPTBlock::GPTBlock(int64_t d_model, int64_t n_head, double p, Generator* gen) : Module("GPTBlock") {
  ErrorScope scope(name());
  SACCADE_CHECK(d_model > 0 && n_head > 0 && d_model % n_head == 0 && p >= 0 && p < 1,
                "GPTBlock: need n_head > 0 dividing d_model > 0 and dropout in [0, 1), got n_head {}, "
                "d_model {}, dropout {}",
                n_head, d_model, p);
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(d_model));
  attn = register_module(
      "attn", std::make_shared<MultiHeadAttention>(
                  d_model, n_head, MultiHeadAttentionOptions{.dropout = p, .bias = true, .generator = gen}));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(d_model));
  mlp = register_module("mlp", std::make_shared<GPTMLP>(d_model, 4 * d_model, gen));
  dropout = register_module("dropout", std::make_shared<Dropout>(p, gen));
  gen_ = gen;
}

void GPTBlock::check(const Variable& x) const {
  const int64_t d = attn->num_hiddens();
  SACCADE_CHECK(x.defined(), "GPTBlock: got an undefined x");
  SACCADE_CHECK(x.dim() == 3 && x.size(2) == d, "GPTBlock: expected x (B, T, {}), got {}", d, x.shape());
}

// x: (B, T, d), attended: (B, T, d) -> (B, T, d)
Variable GPTBlock::finish(const Variable& x, const Variable& attended) {
  Variable h = x + dropout->forward(attended);
  return h + dropout->forward(mlp->forward(ln_2->forward(h)));
}

// x: (B, T, d) -> (B, T, d)
Variable GPTBlock::forward(const Variable& x) {
  ErrorScope scope(name(), {shape_of(x)});
  return run(x, nullptr);
}

// x: (B, T, d) holding packed documents -> (B, T, d)
Variable GPTBlock::forward(const Variable& x, const PackedDocuments& docs) {
  ErrorScope scope(name(), {shape_of(x)});
  return run(x, &docs);
}

Variable GPTBlock::run(const Variable& x, const PackedDocuments* docs) {
  check(x);
  // NOTE: the documents by value: the backward recomputes a checkpointed block after this forward (and its
  // caller's locals) returned
  auto block = [this, packed = docs ? std::optional<PackedDocuments>(*docs)
                                    : std::nullopt](const std::vector<Variable>& in) {
    Variable a = ln_1->forward(in[0]);
    return finish(in[0], packed ? attn->forward(a, *packed) : attn->forward(a, a, a, Tensor(), true));
  };
  // NOTE: a block whose input needs no gradient (the first behind a frozen embedding, under LoRA) is not
  // worth checkpointing: no gradient could reach a recomputation from it
  if (checkpoint_activations && grad_enabled() && x.requires_grad()) {
    std::vector<Generator*> gens = checkpoint_generators;
    gens.push_back(gen_);
    return checkpoint(block, {x}, gens);
  }
  return block({x});
}

// x: (B, Tn, d); cache: (B, H, t, d_head) -> (B, Tn, d)
Variable GPTBlock::step(const Variable& x, KVCache& cache) {
  ErrorScope scope(name(), {shape_of(x)});
  check(x);
  Variable a = ln_1->forward(x);
  return finish(x, attn->forward_cached(a, a, a, cache, Tensor(), true));
}

void gpt2_init_(GPTBlock& block, int64_t n_layer, Generator* gen) {
  SACCADE_CHECK(n_layer >= 1, "gpt2_init_: n_layer must be at least 1, got {}", n_layer);
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(n_layer));
  for (Linear* l : {block.attn->W_q.get(), block.attn->W_k.get(), block.attn->W_v.get(),
                    block.attn->W_o.get(), block.mlp->c_fc.get(), block.mlp->c_proj.get()}) {
    const bool residual = l == block.attn->W_o.get() || l == block.mlp->c_proj.get();
    init::normal_(l->weight.data(), 0.0, residual ? residual_std : 0.02, gen);
    if (l->bias.defined()) init::zeros_(l->bias.data());
  }
  for (LayerNorm* ln : {block.ln_1.get(), block.ln_2.get()}) {
    init::ones_(ln->weight.data());
    init::zeros_(ln->bias.data());
  }
}

}  // namespace saccade::nn
