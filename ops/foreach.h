#pragma once
// The plumbing of the foreach ops (ops/optim.cpp, ops/amp.cpp): their kernels take lists of contiguous,
// non-empty tensors; an in-place op on a strided tensor runs on a contiguous copy and copies it back.
#include <utility>
#include <vector>

#include "ops/backend.h"
#include "ops/tensor.h"

namespace saccade::ops {

/// Pairs (contiguous copy, strided original) that an in-place foreach op writes back after its kernel.
using CopyBack = std::vector<std::pair<Tensor, Tensor>>;

/// Contiguous versions of the non-empty tensors of `ts` (empty ones are dropped): a contiguous tensor is
/// itself, a strided one a copy, recorded in `*copy_back` when given.
inline std::vector<Tensor> dense(const std::vector<Tensor>& ts, CopyBack* copy_back) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) {
    if (t.numel() == 0) continue;
    out.push_back(t.is_contiguous() ? t : t.contiguous());
    if (copy_back && !t.is_contiguous()) copy_back->emplace_back(out.back(), t);
  }
  return out;
}

/// Copies each contiguous copy of `copy_back` into its strided original (after the in-place kernel).
inline void write_back(const CopyBack& copy_back) {
  for (const auto& [src, dst] : copy_back) backend(dst.device()).copy(src, dst);
}

/// Bumps the version counter of each tensor an in-place foreach op wrote (as every in-place op does,
/// ops/storage.h): a tensor saved for backward then refuses to be read, and autocast's weight cache casts
/// the parameter again.
inline void bump_versions(const std::vector<Tensor>& written) {
  for (const Tensor& t : written) t.bump_version();
}

}  // namespace saccade::ops
