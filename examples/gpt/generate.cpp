#include "examples/gpt/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/creation.h"

namespace saccade::examples {

int64_t sample_token(const float* logits, int64_t V, const SamplingOptions& o, std::mt19937_64& rng) {
  SACCADE_CHECK(V >= 1 && o.temperature >= 0 && o.top_k >= 0 && o.top_p > 0 && o.top_p <= 1,
                "sample_token: need V >= 1, temperature >= 0, top_k >= 0 and top_p in (0, 1], got V {}, "
                "temperature {}, top_k {}, top_p {}",
                V, o.temperature, o.top_k, o.top_p);
  if (o.temperature == 0) return std::max_element(logits, logits + V) - logits;
  // candidates by decreasing logit (ties: lower id first)
  std::vector<int64_t> ids(V);
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  int64_t keep = o.top_k > 0 ? std::min(o.top_k, V) : V;
  std::vector<double> p(keep);
  const double top = logits[ids[0]];
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += p[i] = std::exp((logits[ids[i]] - top) / o.temperature);
  if (o.top_p < 1) {  // the smallest prefix with probability >= top_p
    double cum = 0;
    int64_t n = 0;
    while (n < keep && cum < o.top_p * total) cum += p[n++];
    keep = std::max<int64_t>(n, 1);
    total = std::accumulate(p.begin(), p.begin() + keep, 0.0);
  }
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;
  double cum = 0;
  for (int64_t i = 0; i < keep; ++i)
    if ((cum += p[i]) > u) return ids[i];
  return ids[keep - 1];
}

std::vector<int64_t> fit_prompt(const std::vector<int64_t>& prompt, int64_t context, int64_t* truncated) {
  SACCADE_CHECK(!prompt.empty(), "generate: the prompt is empty (give at least one token)");
  const int64_t drop = std::max<int64_t>(0, static_cast<int64_t>(prompt.size()) - context);
  if (truncated) *truncated = drop;
  return std::vector<int64_t>(prompt.begin() + drop, prompt.end());
}

namespace {

// rows: B sequences of one length T -> int64 (B, T) on `device`
Tensor to_ids(const std::vector<std::vector<int64_t>>& rows, int64_t begin, int64_t end, Device device) {
  const int64_t B = static_cast<int64_t>(rows.size()), T = end - begin;
  Tensor t = ops::empty({B, T}, DType::Int64);
  for (int64_t b = 0; b < B; ++b)
    std::copy(rows[b].begin() + begin, rows[b].begin() + end, t.data<int64_t>() + b * T);
  return t.to(device);
}

}  // namespace

Generation generate(GPT& model, const std::vector<std::vector<int64_t>>& prompts, const SamplingOptions& o,
                    bool use_cache, bool keep_logits,
                    const std::function<void(const std::vector<int64_t>&)>& on_tokens) {
  return generate(*as_causal_lm(model), prompts, o, use_cache, keep_logits, on_tokens);
}

Generation generate(CausalLM& model, const std::vector<std::vector<int64_t>>& prompts,
                    const SamplingOptions& o, bool use_cache, bool keep_logits,
                    const std::function<void(const std::vector<int64_t>&)>& on_tokens) {
  struct {
    int64_t context, vocab_size;
  } c{model.context(), model.vocab_size()};
  SACCADE_CHECK(!prompts.empty(), "generate: no prompts");
  SACCADE_CHECK(o.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got {}", o.max_new_tokens);
  for (const auto& p : prompts) {
    SACCADE_CHECK(!p.empty(), "generate: the prompt is empty (give at least one token)");
    SACCADE_CHECK(static_cast<int64_t>(p.size()) <= c.context,
                  "generate: a prompt of {} tokens is longer than the context of {} (fit_prompt crops it)",
                  p.size(), c.context);
    for (int64_t id : p)
      SACCADE_CHECK(id >= 0 && id < c.vocab_size, "generate: token {} outside the vocabulary of {}", id,
                    c.vocab_size);
  }
  const int64_t B = static_cast<int64_t>(prompts.size()), V = c.vocab_size;
  auto by_length = [](const auto& a, const auto& b) { return a.size() < b.size(); };
  const int64_t shortest =
      static_cast<int64_t>(std::min_element(prompts.begin(), prompts.end(), by_length)->size());
  const int64_t longest =
      static_cast<int64_t>(std::max_element(prompts.begin(), prompts.end(), by_length)->size());
  const Device device = model.device();
  // Rows advance in lockstep, one position per step after a prefill of the shortest prompt; a row whose
  // prompt is longer is fed its own next prompt token until it runs out. Every row sees exactly the
  // positions and tokens it would see alone, so unequal prompts share one batch and one KV cache.
  std::vector<std::vector<int64_t>> seq(B);
  for (int64_t b = 0; b < B; ++b) seq[b].assign(prompts[b].begin(), prompts[b].begin() + shortest);
  Generation out;
  out.tokens.resize(B);
  std::mt19937_64 rng(o.seed);
  nn::Module& module = model.module();
  const bool was_training = module.is_training();
  module.eval();
  NoGradGuard no_grad;
  model.reset();
  // the longest row's positions (its last sampled token is never fed), so no step grows the KV cache
  model.reserve(std::min(c.context, longest + o.max_new_tokens));
  const int64_t steps = o.max_new_tokens == 0 ? 0 : longest - shortest + o.max_new_tokens;
  for (int64_t n = 0; n < steps; ++n) {
    const int64_t len = shortest + n;  // every row's length
    Variable logits;                   // (B, t, V)
    if (!use_cache) {
      logits = model.forward(to_ids(seq, std::max<int64_t>(0, len - c.context), len, device));
    } else {
      if (model.cached() >= c.context) model.reset();  // full: refill from the last context / 2
      // LongRoPE: the first step past its original context re-reads the whole sequence, every position by
      // the long factors (CausalLM::rope_switch)
      const int64_t L = model.rope_switch();
      const bool reread = L > 0 && len > L && model.cached() > 0 && model.cached() <= L;
      if (reread) model.reset();
      // the first step prefills every row's common prompt start (at most the context); a refill keeps the
      // last context / 2 tokens, a re-read the last context; otherwise one new position
      const int64_t from = model.cached() != 0 ? len - 1
                           : n == 0            ? 0
                           : reread            ? std::max<int64_t>(0, len - c.context)
                                    : std::max<int64_t>(0, len - std::max<int64_t>(c.context / 2, 1));
      logits = model.step(to_ids(seq, from, len, device), 1);  // only the last position is sampled
    }
    Tensor last =  // (B, V) float32 (a 16-bit model's logits widened)
        logits.data().select(1, logits.size(1) - 1).to(Device::cpu()).to(DType::Float32).contiguous();
    if (keep_logits) out.logits.push_back(last.clone());
    std::vector<int64_t> next(B, -1);
    for (int64_t b = 0; b < B; ++b) {
      const auto& p = prompts[b];
      if (len < static_cast<int64_t>(p.size())) {  // still reading its prompt
        seq[b].push_back(p[len]);
        continue;
      }
      const int64_t id = sample_token(last.data<float>() + b * V, V, o, rng);
      seq[b].push_back(id);
      if (static_cast<int64_t>(out.tokens[b].size()) < o.max_new_tokens)
        out.tokens[b].push_back(next[b] = id);
    }
    if (on_tokens) on_tokens(next);
  }
  module.train(was_training);
  return out;
}

}  // namespace saccade::examples
