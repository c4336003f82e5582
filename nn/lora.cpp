#include "nn/lora.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/autocast.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/linalg.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "nn/dropout.h"
#include "nn/init.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"

namespace saccade::nn {

double LoraConfig::scale() const { return use_rslora ? lora_alpha / std::sqrt(double(r)) : lora_alpha / r; }

namespace {

std::string last_component(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

// PEFT's list rule: the whole dotted name, or its last components after a dot.
bool matches(const std::string& name, const std::string& target) {
  return name == target || (name.size() > target.size() && name.ends_with(target) &&
                            name[name.size() - target.size() - 1] == '.');
}

}  // namespace

namespace {

// The model's Linears by dotted name.
std::unordered_map<std::string, Linear*> linears_by_name(const Module& model) {
  std::unordered_map<std::string, Linear*> out;
  for (const auto& [name, lin] : named_linears(model)) out.emplace(name, lin);
  return out;
}

}  // namespace

std::vector<LoraUnit> lora_units(const Module& model, const std::vector<LoraUnit>& units) {
  if (units.empty()) {
    std::vector<LoraUnit> out;
    for (const auto& e : named_linears(model)) out.push_back({e.first, {e.first}});
    return out;
  }
  const auto by_name = linears_by_name(model);
  std::set<std::string> seen;
  for (const LoraUnit& u : units) {
    SACCADE_CHECK(!u.linears.empty(), "apply_lora: the unit '{}' names no Linear module", u.name);
    int64_t in = -1;
    for (const std::string& name : u.linears) {
      const auto it = by_name.find(name);
      SACCADE_CHECK(it != by_name.end(),
                    "apply_lora: the unit '{}' names '{}', which is not a Linear of the model", u.name, name);
      SACCADE_CHECK(seen.insert(name).second, "apply_lora: the Linear '{}' is in two units", name);
      SACCADE_CHECK(in < 0 || it->second->in_features() == in,
                    "apply_lora: the unit '{}' joins Linears of {} and {} input features", u.name, in,
                    it->second->in_features());
      in = it->second->in_features();
      SACCADE_CHECK(u.groups >= 1 && it->second->out_features() % u.groups == 0,
                    "apply_lora: the unit '{}' interleaves its Linears in {} groups, and '{}' has {} outputs",
                    u.name, u.groups, name, it->second->out_features());
    }
  }
  return units;
}

std::vector<std::vector<Linear*>> unit_linears(const Module& model, const std::vector<LoraUnit>& units) {
  const auto by_name = linears_by_name(model);
  std::vector<std::vector<Linear*>> out;
  for (const LoraUnit& u : units) {
    out.emplace_back();
    for (const std::string& name : u.linears) {
      const auto it = by_name.find(name);
      SACCADE_CHECK(it != by_name.end(), "apply_lora: '{}' is not a Linear of the model", name);
      out.back().push_back(it->second);
    }
  }
  return out;
}

std::vector<LoraUnit> lora_targets(const Module& model, const std::vector<std::string>& target_modules,
                                   const std::vector<LoraUnit>& units) {
  ErrorScope scope("apply_lora");
  SACCADE_CHECK(!target_modules.empty(), "apply_lora: target_modules is empty");
  const std::vector<LoraUnit> all = lora_units(model, units);
  const std::vector<std::vector<Linear*>> linears = unit_linears(model, all);
  const bool all_linear = target_modules.size() == 1 && target_modules[0] == "all-linear";
  std::vector<LoraUnit> out;
  std::vector<bool> used(target_modules.size(), false);
  for (size_t u = 0; u < all.size(); ++u) {
    const LoraUnit& unit = all[u];
    bool take = false;
    if (all_linear) {
      // PEFT leaves the output layer out of "all-linear"; a MoE layer's router ("<layer>.mlp.gate") is no
      // nn.Linear in transformers 5 (a TopKRouter's weight), so PEFT never targets it either
      take = last_component(unit.name) != "lm_head" && !unit.name.ends_with(".mlp.gate");
      used[0] = used[0] || take;
    } else {
      for (size_t t = 0; t < target_modules.size(); ++t)
        if (matches(unit.name, target_modules[t])) take = used[t] = true;
    }
    if (!take) continue;
    for (const Linear* lin : linears[u])
      SACCADE_CHECK(!lin->lora_A, "apply_lora: '{}' already has a LoRA adapter", unit.name);
    out.push_back(unit);
  }
  for (size_t t = 0; t < target_modules.size(); ++t) {
    if (used[t]) continue;
    std::set<std::string> ends;  // what a target could have named: the last components, sorted
    for (const LoraUnit& unit : all) ends.insert(last_component(unit.name));
    throw Error(fmt::format(
        "apply_lora: target '{}' matches no Linear module; the model's Linear modules are "
        "named {}",
        target_modules[t], ends.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(ends, ", "))));
  }
  return out;
}

std::vector<std::string> apply_lora(Module& model, const LoraConfig& config, Generator* gen,
                                    const std::vector<LoraUnit>& units) {
  ErrorScope scope("apply_lora");
  SACCADE_CHECK(config.r >= 1, "apply_lora: r must be at least 1, got {}", config.r);
  SACCADE_CHECK(config.lora_alpha > 0, "apply_lora: lora_alpha must be positive, got {}", config.lora_alpha);
  SACCADE_CHECK(config.lora_dropout >= 0 && config.lora_dropout < 1,
                "apply_lora: lora_dropout must be in [0, 1), got {}", config.lora_dropout);
  const std::vector<LoraUnit> targets = lora_targets(model, config.target_modules, units);
  // Checked: now change the model. Freeze the base, as get_peft_model does.
  for (Variable& p : model.parameters()) {
    p.requires_grad_(false);
    p.zero_grad();
  }
  const std::vector<std::vector<Linear*>> linears = unit_linears(model, targets);
  std::vector<std::string> names;
  for (size_t u = 0; u < targets.size(); ++u) {
    const std::vector<Linear*>& lins = linears[u];
    const Device device = lins[0]->weight.data().device();
    auto A = std::make_shared<Linear>(lins[0]->in_features(), config.r, /*bias=*/false, gen);
    auto dropout = std::make_shared<Dropout>(config.lora_dropout, gen);
    A->to(device);
    dropout->train(lins[0]->is_training());
    for (Linear* lin : lins) {
      auto B = std::make_shared<Linear>(config.r, lin->out_features(), /*bias=*/false, gen);
      init::zeros_(B->weight.data());
      B->to(device);
      lin->lora_A = lin->register_module("lora_A", A);
      lin->lora_B = lin->register_module("lora_B", B);
      lin->lora_dropout = lin->register_module("lora_dropout", dropout);
      lin->lora_scale = config.scale();
      lin->lora_merged = false;
    }
    names.push_back(targets[u].name);
  }
  return names;
}

// scale · B A dropout(x): x (*, in) -> (*, out)
Variable lora_delta(Linear& layer, const Variable& x) {
  SACCADE_CHECK(layer.lora_A && layer.lora_B && layer.lora_dropout, "lora_delta: the Linear has no adapter");
  const DType adapter = layer.lora_A->weight.dtype();
  if (x.dtype() != adapter && !autocast_enabled() && is_half(x.dtype())) {
    // A 16-bit base with float32 adapters: the adapter's products in the base's dtype, as PEFT's under
    // torch.autocast. A and B (r × in, out × r) are cast, not x (N × in): casting x to float32 cost a pass
    // over every adapted input and kept a float32 copy of it for A's gradient. The factors, their gradients
    // (cast back) and the optimizer's state stay float32.
    const Variable a = layer.lora_A->weight.to(x.dtype()), b = layer.lora_B->weight.to(x.dtype());
    return linear(linear(layer.lora_dropout->forward(x), a) * layer.lora_scale, b);
  }
  // A float32 or float64 x meets the adapter's dtype (autocast casts for itself).
  const bool cast_in = x.dtype() != adapter && !autocast_enabled();
  Variable h = layer.lora_dropout->forward(cast_in ? x.to(adapter) : x);
  // NOTE: the scale multiplies the rank-r intermediate (N, r), not the update (N, out) as PEFT writes it: the
  // same product up to rounding, without one full pass over the layer's output forward and one backward
  Variable d = layer.lora_B->forward(layer.lora_A->forward(h) * layer.lora_scale);
  return d.dtype() == x.dtype() ? d : d.to(x.dtype());
}

namespace {

// W0 += sign · scale · B A for every adapter whose merged flag is `!merge`; flips the flag.
int64_t fold(Module& model, bool merge) {
  NoGradGuard no_grad;
  int64_t n = 0;
  for (auto& [name, lin] : named_linears(model)) {
    if (!lin->lora_A || lin->lora_merged == merge) continue;
    const Tensor delta = ops::mm(lin->lora_B->weight.data(), lin->lora_A->weight.data());  // (out, in)
    Tensor w = lin->weight.data();
    ops::add_(w,
              ops::mul(delta, merge ? lin->lora_scale : -lin->lora_scale));  // rounded once into W0's dtype
    lin->lora_merged = merge;
    ++n;
  }
  return n;
}

}  // namespace

int64_t merge_lora(Module& model) { return fold(model, true); }
int64_t unmerge_lora(Module& model) { return fold(model, false); }

int64_t merge_and_unload(Module& model) {
  merge_lora(model);
  int64_t n = 0;
  for (auto& [name, lin] : lora_layers(model)) {
    for (const char* child : {"lora_A", "lora_B", "lora_dropout"}) lin->unregister_module(child);
    lin->lora_A.reset(), lin->lora_B.reset(), lin->lora_dropout.reset();
    lin->lora_scale = 0;
    lin->lora_merged = false;
    ++n;
  }
  return n;
}

std::vector<std::pair<std::string, Linear*>> lora_layers(const Module& model) {
  std::vector<std::pair<std::string, Linear*>> out;
  for (const auto& e : named_linears(model))
    if (e.second->lora_A) out.push_back(e);
  return out;
}

std::vector<Variable> trainable_parameters(const Module& model) {
  std::vector<Variable> out;
  for (const Variable& p : model.parameters())
    if (p.requires_grad()) out.push_back(p);
  return out;
}

}  // namespace saccade::nn
