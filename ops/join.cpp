// Joining and splitting. cat writes each input into a narrow() view of the result through the backend copy
// kernel (which also converts dtypes); splits are narrow() views; repeats are built from expand and cat.
#include "ops/join.h"

#include <limits>

#include "ops/backend.h"
#include "ops/elementwise.h"

namespace saccade::ops {

constexpr int64_t kMaxSize = std::numeric_limits<int64_t>::max();

// torch.cat's legacy rule: a 1-d tensor with no elements is skipped whatever the other shapes are.
static bool skipped_in_cat(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }

// ts: k tensors (S0.., n_i, ..Sd) -> (S0.., Σ n_i, ..Sd)
Tensor cat(const std::vector<Tensor>& ts, int64_t dim) {
  SACCADE_CHECK(!ts.empty(), "cat: expected a non-empty list of tensors");
  for (size_t i = 0; i < ts.size(); ++i) SACCADE_CHECK(ts[i].defined(), "cat: tensor {} is undefined", i);
  for (const Tensor& t : ts) check_same_device("cat", {&ts[0], &t});
  const Tensor* ref = nullptr;  // the first tensor that takes part
  DType dt = ts[0].dtype();
  for (const Tensor& t : ts) {
    dt = promote_types(dt, t.dtype());
    if (!ref && !skipped_in_cat(t)) ref = &t;
  }
  if (!ref) return Tensor::empty({0}, dt, ts[0].device());
  SACCADE_CHECK(ref->dim() > 0, "cat: zero-dimensional tensor (shape {}) cannot be concatenated",
                ref->shape());
  int d = normalize_dim(dim, ref->dim(), "cat");
  Shape out_shape = ref->shape();
  out_shape[d] = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    if (skipped_in_cat(t)) continue;
    bool match = t.dim() == ref->dim();
    for (int k = 0; match && k < t.dim(); ++k) match = k == d || t.shape()[k] == ref->shape()[k];
    SACCADE_CHECK(match, "cat: tensor {} has shape {}, expected {} in every dim except dim {}", i, t.shape(),
                  ref->shape(), d);
    out_shape[d] += t.shape()[d];
  }
  Tensor out = Tensor::empty(out_shape, dt, ref->device());
  int64_t offset = 0;
  for (const Tensor& t : ts) {
    if (skipped_in_cat(t)) continue;
    Tensor dst = out.narrow(d, offset, t.shape()[d]);
    if (dst.numel() > 0) backend(out.device()).copy(t, dst);
    offset += t.shape()[d];
  }
  return out;
}

// ts: k tensors (S..) -> (S0.., k, ..Sd)
Tensor stack(const std::vector<Tensor>& ts, int64_t dim) {
  SACCADE_CHECK(!ts.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < ts.size(); ++i) SACCADE_CHECK(ts[i].defined(), "stack: tensor {} is undefined", i);
  int d = normalize_dim(dim, ts[0].dim() + 1, "stack");
  std::vector<Tensor> us;
  for (size_t i = 0; i < ts.size(); ++i) {
    SACCADE_CHECK(ts[i].shape() == ts[0].shape(),
                  "stack: expects tensors of equal shape, got {} (tensor 0) and {} (tensor {})",
                  ts[0].shape(), ts[i].shape(), i);
    us.push_back(ts[i].unsqueeze(d));
  }
  return cat(us, d);
}

std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim) {
  SACCADE_CHECK(t.defined(), "split: got an undefined tensor");
  SACCADE_CHECK(t.dim() > 0, "split: cannot split a 0-d tensor");
  int d = normalize_dim(dim, t.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    SACCADE_CHECK(s >= 0, "split: negative split size {} for shape {}", s, t.shape());
    total = s > kMaxSize - total ? kMaxSize : total + s;  // saturating: the sum is only compared
  }
  SACCADE_CHECK(total == t.shape()[d], "split: sizes {} do not sum to size {} of dim {} of shape {}",
                fmt::join(sizes, ", "), t.shape()[d], d, t.shape());
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(t.narrow(d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim) {
  SACCADE_CHECK(t.defined(), "split: got an undefined tensor");
  SACCADE_CHECK(t.dim() > 0, "split: cannot split a 0-d tensor");
  int d = normalize_dim(dim, t.dim(), "split");
  int64_t n = t.shape()[d];
  SACCADE_CHECK(split_size > 0 || (split_size == 0 && n == 0),
                "split: split_size must be positive, got {} for dim {} of shape {}", split_size, d,
                t.shape());
  if (n == 0) return {t};
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < n; start += std::min(split_size, n - start))
    sizes.push_back(std::min(split_size, n - start));
  return split(t, sizes, d);
}

std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim) {
  SACCADE_CHECK(t.defined(), "chunk: got an undefined tensor");
  SACCADE_CHECK(chunks > 0, "chunk: number of chunks must be positive, got {}", chunks);
  SACCADE_CHECK(t.dim() > 0, "chunk: cannot chunk a 0-d tensor");
  int d = normalize_dim(dim, t.dim(), "chunk");
  int64_t n = t.shape()[d];
  const int64_t per_chunk = n / chunks + (n % chunks != 0);  // ceil(n / chunks) without overflow
  return split(t, std::max<int64_t>(per_chunk, n == 0 ? 0 : 1), d);
}

// t: (S0.., Sd), repeats: (r0.., rd) with at least t.dim() entries -> (r0 * S0, ..., rd * Sd)
Tensor repeat(const Tensor& t, const Shape& repeats) {
  SACCADE_CHECK(t.defined(), "repeat: got an undefined tensor");
  SACCADE_CHECK(repeats.size() >= t.dim(),
                "repeat: number of repeats {} cannot be smaller than the number of dims of shape {}", repeats,
                t.shape());
  for (int64_t r : repeats) SACCADE_CHECK(r >= 0, "repeat: negative repeat count in {}", repeats);
  Tensor x = t;
  while (x.dim() < repeats.size()) x = x.unsqueeze(0);  // leading size-1 dims
  Shape out_shape = x.shape();
  for (int d = 0; d < out_shape.size(); ++d) out_shape[d] = checked_mul(out_shape[d], repeats[d], "repeat");
  // the one allocation, checked (a new tensor, never a view of t, as torch)
  Tensor out = Tensor::empty(out_shape, t.dtype(), t.device(), "repeat");
  if (out.numel() == 0) return out;
  // x goes to the corner block; then, dim after dim, the filled part is copied after itself, doubling until
  // it covers the dim: O(log r_d) copies per dim whatever the counts, no extra dims (so up to kMaxDims), no
  // list of r_d pieces
  const Shape& in = x.shape();
  // the region of out made of dims < d whole, [start, start + length) of dim d, x's extent in dims > d
  auto block = [&](int d, int64_t start, int64_t length) {
    Tensor v = out;
    for (int k = 0; k < out_shape.size(); ++k)
      v = k < d ? v : k == d ? v.narrow(k, start, length) : v.narrow(k, 0, in[k]);
    return v;
  };
  backend(out.device()).copy(x, out.dim() == 0 ? out : block(0, 0, in[0]));
  for (int d = 0; d < out_shape.size(); ++d)
    for (int64_t filled = in[d]; filled < out_shape[d];) {
      const int64_t n = std::min(filled, out_shape[d] - filled);
      backend(out.device()).copy(block(d, 0, n), block(d, filled, n));
      filled += n;
    }
  return out;
}

// t: (.., n, ..) -> (.., n * repeats, ..)
Tensor repeat_interleave(const Tensor& t, int64_t repeats, int64_t dim) {
  SACCADE_CHECK(t.defined(), "repeat_interleave: got an undefined tensor");
  SACCADE_CHECK(repeats >= 0, "repeat_interleave: repeats must be non-negative, got {}", repeats);
  SACCADE_CHECK(t.dim() > 0, "repeat_interleave: expects a tensor of at least 1 dim, got a 0-d tensor");
  SACCADE_CHECK(t.dim() < kMaxDims, "repeat_interleave: at most {} dims are supported, got shape {}",
                kMaxDims - 1, t.shape());
  int d = normalize_dim(dim, t.dim(), "repeat_interleave");
  Shape wide = t.shape(), out_shape = t.shape();
  wide.insert(d + 1, repeats);
  Tensor out = Tensor::empty(wide, t.dtype(), t.device(), "repeat_interleave");
  out_shape[d] *= repeats;  // fits: `out` holds that many elements
  backend(t.device()).copy(t.unsqueeze(d + 1).expand(wide), out);
  return out.view(out_shape);
}

}  // namespace saccade::ops
