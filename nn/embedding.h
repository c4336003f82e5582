#pragma once
// Embedding (torch.nn.Embedding).
#include <cstdint>
#include <optional>

#include "nn/unary_module.h"
#include "ops/random.h"

namespace saccade::nn {

/// A lookup table: out[..., :] = weight[indices[...], :] (torch.nn.Embedding).
///
/// Parameter `weight` (num_embeddings, embedding_dim), initialised N(0, 1) from `gen` (the default generator
/// when null) with the row `padding_idx` (when given) set to zeros, as torch. The padding row receives no
/// gradient, so it stays as it is during training. A negative padding_idx counts from the end (stored
/// normalised, as torch).
/// forward: indices int64 of any shape (passed as a Variable or a Tensor) -> (*indices.shape, embedding_dim).
/// Throws saccade::Error naming "Embedding" for non-positive sizes, a padding_idx outside [-num_embeddings,
/// num_embeddings), non-int64 indices, or an index outside [0, num_embeddings).
class Embedding : public UnaryModule {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt,
            Generator* gen = nullptr);
  Variable forward(const Variable& indices) override;

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }
  std::optional<int64_t> padding_idx() const { return padding_idx_; }
  Variable weight;

 private:
  int64_t num_embeddings_, embedding_dim_;
  std::optional<int64_t> padding_idx_;
};

}  // namespace saccade::nn
