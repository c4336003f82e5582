#include "nn/embedding.h"

#include "autograd/functions/index.h"
#include "nn/init.h"
#include "ops/reduce.h"

namespace saccade::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx,
                     Generator* gen)
    : UnaryModule("Embedding"), num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  ErrorScope scope(name());
  SACCADE_CHECK(num_embeddings > 0 && embedding_dim > 0,
                "Embedding: expected positive sizes, got num_embeddings = {}, embedding_dim = {}",
                num_embeddings, embedding_dim);
  if (padding_idx) {
    SACCADE_CHECK(*padding_idx >= -num_embeddings && *padding_idx < num_embeddings,
                  "Embedding: padding_idx {} out of range for num_embeddings = {}", *padding_idx,
                  num_embeddings);
    padding_idx_ = *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
  }
  Tensor w = Tensor::empty({num_embeddings, embedding_dim});
  init::normal_(w, 0, 1, gen);
  if (padding_idx_) init::zeros_(w.select(0, *padding_idx_));
  weight = register_parameter("weight", w);
}

// indices: int64 (*) , weight: (V, D) -> (*, D)
Variable Embedding::forward(const Variable& indices) {
  ErrorScope scope(name(), {shape_of(indices)});
  SACCADE_CHECK(indices.defined(), "Embedding: got undefined indices");
  const Tensor& idx = indices.data();
  SACCADE_CHECK(idx.dtype() == DType::Int64, "Embedding: expected int64 indices, got {} of shape {}",
                idx.dtype(), idx.shape());
  if (idx.numel() > 0) {
    int64_t lo = ops::min(idx).item<int64_t>(), hi = ops::max(idx).item<int64_t>();
    SACCADE_CHECK(lo >= 0 && hi < num_embeddings_,
                  "Embedding: indices must be in [0, {}) (num_embeddings), got values in [{}, {}]",
                  num_embeddings_, lo, hi);
  }
  return embedding(weight, idx, padding_idx_);
}

}  // namespace saccade::nn
