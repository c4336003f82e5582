#include "nn/embedding.h"

#include "autograd/functions/index.h"
#include "nn/init.h"

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
  // The index bounds are checked once, where the indices are read: ops::embedding copies them to the host
  // in one pass (one transfer, one sync on a GPU) before its kernel runs. Errors are renamed for the module.
  try {
    return embedding(weight, idx, padding_idx_);
  } catch (const Error& e) {
    throw Error(fmt::format("Embedding: {}", e.what()));
  }
}

}  // namespace saccade::nn
