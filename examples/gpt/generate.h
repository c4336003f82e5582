#pragma once
// Sampling from a GPT: temperature, top-k and nucleus (top-p) sampling of the next token, and autoregressive
// generation with one KV cache per block (or, as the reference the tests compare with, by recomputing the
// whole context at every step).
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "examples/gpt/causal_lm.h"
#include "examples/gpt/model.h"

namespace saccade::examples {

/// How to pick the next token.
struct SamplingOptions {
  int64_t max_new_tokens = 200;
  double temperature = 1.0;  ///< logits are divided by it; 0 = greedy (argmax, the first maximum on ties)
  int64_t top_k = 0;         ///< keep only the k most likely tokens (0 = all)
  double top_p = 1.0;        ///< keep the smallest set of most likely tokens whose probability is >= top_p
  uint64_t seed = 0;         ///< of the std::mt19937_64 that draws the samples
};

/// Picks a token from one row of logits (V floats): greedy when temperature is 0; otherwise softmax of
/// logits / temperature restricted to the top_k most likely and then to the top_p nucleus (Holtzman et al.
/// 2020), renormalised, and a draw u = (rng() >> 11) · 2⁻⁵³ by inverse CDF (so a seed gives the same sample
/// everywhere). Throws saccade::Error naming "sample_token" for V < 1, a negative temperature or top_k, or
/// top_p outside (0, 1].
int64_t sample_token(const float* logits, int64_t V, const SamplingOptions& options, std::mt19937_64& rng);

/// What generate() produced: per prompt, the new tokens; and, when asked for, the logits (B, V) float32 CPU
/// from which each new token was picked.
struct Generation {
  std::vector<std::vector<int64_t>> tokens;
  std::vector<Tensor> logits;
};

/// The last `context` tokens of `prompt` (all of it when it fits). Sets *truncated to how many were dropped
/// (when non-null). Throws saccade::Error naming "generate" for an empty prompt.
std::vector<int64_t> fit_prompt(const std::vector<int64_t>& prompt, int64_t context,
                                int64_t* truncated = nullptr);

/// Generates options.max_new_tokens tokens after each of `prompts` (B prompts of 1..context tokens, of any
/// lengths: a batch shares its KV caches) in eval mode without gradients (the mode is restored after).
/// The rows advance in lockstep: the first min-length positions in one step, then one position per step, a
/// row with a longer prompt reading its own next prompt token where the others sample, so each row's tokens
/// are those it gets alone (up to float rounding of the batched products: greedy tokens equal, tested), in
/// longest - shortest + max_new_tokens steps (a row that is done keeps decoding; what it draws is dropped).
/// use_cache: one KV cache per block; when the cache reaches the context it is refilled from the last
/// context / 2 tokens. Otherwise every step runs the model over the last `context` tokens (the reference).
/// `on_tokens` gets each step's B new tokens as they come (-1 for a row that added none: still in its prompt,
/// or done); keep_logits keeps each step's (B, V) logits, one per step. Throws saccade::Error naming
/// "generate" for no prompts, an empty or too long prompt, or a token outside the vocabulary.
Generation generate(GPT& model, const std::vector<std::vector<int64_t>>& prompts,
                    const SamplingOptions& options, bool use_cache = true, bool keep_logits = false,
                    const std::function<void(const std::vector<int64_t>&)>& on_tokens = {});
/// The same for any CausalLM (a GPT, a Hugging Face Llama): its own KV cache is reset first.
Generation generate(CausalLM& model, const std::vector<std::vector<int64_t>>& prompts,
                    const SamplingOptions& options, bool use_cache = true, bool keep_logits = false,
                    const std::function<void(const std::vector<int64_t>&)>& on_tokens = {});

}  // namespace saccade::examples
