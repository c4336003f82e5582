#pragma once
// One face for the decoder-only language models `gpt` runs: this example's GPT (GPT-2's architecture,
// trained here or loaded from a Hugging Face GPT-2 folder) and nn::LlamaForCausalLM (a Hugging Face Llama
// folder). generate() and score_windows() see only this.
#include <cstdint>
#include <memory>
#include <vector>

#include "examples/gpt/model.h"
#include "nn/llama.h"

namespace saccade::examples {

/// A decoder-only language model with a KV cache of its own.
class CausalLM {
 public:
  virtual ~CausalLM() = default;
  /// Logits (B, T, vocab) of ids int64 (B, T) at positions 0 .. T - 1 (no cache).
  virtual Variable forward(const Tensor& idx) = 0;
  /// Logits (B, Tn, vocab) of ids (B, Tn) at the positions after the cached() ones, or those of the last
  /// logits_to_keep positions only when it is > 0 (transformers' logits_to_keep); the cache grows by Tn.
  virtual Variable step(const Tensor& idx, int64_t logits_to_keep) = 0;
  /// Positions in the cache.
  virtual int64_t cached() const = 0;
  /// Empties the cache (its buffers stay for the next sequence).
  virtual void reset() = 0;
  /// Makes the cache hold `positions` without growing (nn::KVCache::reserve).
  virtual void reserve(int64_t positions) = 0;
  /// The most positions the model sees at once.
  virtual int64_t context() const = 0;
  /// LongRoPE's original context L (ops::RopeScaling): a forward reaching past L rotates every position by
  /// the long factors, so a cache of at most L positions filled by the short ones is stale once a sequence
  /// passes it (generate re-reads the sequence then, as transformers' Phi-3 generation drops its cache). 0
  /// for every other model.
  virtual int64_t rope_switch() const { return 0; }
  virtual int64_t vocab_size() const = 0;
  /// The module (its mode, its parameters' device).
  virtual nn::Module& module() = 0;
  Device device() { return module().parameters().front().device(); }
};

/// `model` as a CausalLM (which refers to it: `model` must outlive it).
std::unique_ptr<CausalLM> as_causal_lm(GPT& model);
std::unique_ptr<CausalLM> as_causal_lm(nn::LlamaForCausalLM& model);

/// What score_windows measured.
struct WindowScore {
  int64_t tokens = 0;  ///< tokens scored
  double nats = 0;     ///< their total cross-entropy (natural log)
};

/// `gpt eval`'s score (issue 41; the way llm.c and transformers' perplexity guide score a stream without
/// overlap): `ids` cut into consecutive windows of model.context() tokens (the last one shorter), each
/// scored on its own, its first token unscored (nothing before it in the window). Eval mode, no gradients,
/// the mode restored after. Throws saccade::Error naming "score_windows" for fewer than 2 ids or an id
/// outside the vocabulary.
WindowScore score_windows(CausalLM& model, const std::vector<int64_t>& ids);

}  // namespace saccade::examples
