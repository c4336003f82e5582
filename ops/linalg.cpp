// matmul, bmm, mm: argument checks, torch.matmul's shape rules and batch broadcasting happen here; the
// backend's bmm kernel only multiplies (B, M, K) @ (B, K, N) matrices handed over with their strides.
#include "ops/linalg.h"

#include <algorithm>

#include <fmt/ranges.h>

#include "ops/backend.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace saccade {

MatrixLayout matrix_layout(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1), sr = t.stride(-2), sc = t.stride(-1);
  // A size-1 dim may have any stride: it is never stepped along, so pick the smallest valid ld.
  if ((cols == 1 || sc == 1) && (rows == 1 || sr >= std::max<int64_t>(cols, 1)))
    return {true, false, rows == 1 ? std::max<int64_t>(cols, 1) : sr};
  if ((rows == 1 || sr == 1) && (cols == 1 || sc >= std::max<int64_t>(rows, 1)))
    return {true, true, cols == 1 ? std::max<int64_t>(rows, 1) : sc};
  return {};
}

}  // namespace saccade

namespace saccade::ops {

namespace {

void check_operands(const char* op, const Tensor& a, const Tensor& b) {
  check_same_device(op, {&a, &b});
  SACCADE_CHECK(is_floating(a.dtype()) && a.dtype() == b.dtype(),
                "{}: expected two floating tensors of one dtype, got {} (shape {}) and {} (shape {})", op,
                a.dtype(), a.shape(), b.dtype(), b.shape());
}

// t (B, R, C) as the kernel wants it: unchanged when its matrices are row- or column-major, otherwise copied.
// A broadcast batch (stride 0) copies one matrix, not B of them.
Tensor blas_ready(const Tensor& t) {
  if (matrix_layout(t).ok) return t;
  if (t.size(0) > 1 && t.stride(0) == 0) return t.select(0, 0).contiguous().unsqueeze(0).expand(t.shape());
  return t.contiguous();
}

// a (B, M, K) @ b (B, K, N) -> (B, M, N) contiguous; shapes already checked.
Tensor gemm(const Tensor& a, const Tensor& b) {
  const int64_t batch = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  Tensor out = Tensor::empty({batch, m, n}, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  if (k == 0) return fill_(out, 0.0);
  backend(a.device()).bmm(blas_ready(a), blas_ready(b), out);
  return out;
}

// True when dims [0, dim-1) of t merge into one dim with stride t.stride(-2): (*, M, K) views as (rows, K).
bool rows_fold(const Tensor& t) {
  int64_t expected = t.stride(-2) * t.size(-2);
  for (int d = t.dim() - 3; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (t.stride(d) != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_operands("matmul", a, b);
  SACCADE_CHECK(a.dim() >= 1 && b.dim() >= 1,
                "matmul: both arguments need at least 1 dimension, got shapes {} and {}", a.shape(),
                b.shape());
  const int64_t ka = a.size(-1), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  SACCADE_CHECK(ka == kb, "matmul: shapes {} and {} cannot be multiplied ({} vs {} in the contracted dim)",
                a.shape(), b.shape(), ka, kb);
  if (a.dim() == 1 && b.dim() == 1)
    return gemm(a.unsqueeze(0).unsqueeze(0), b.unsqueeze(-1).unsqueeze(0)).view(Shape{});
  if (a.dim() == 1) return matmul(a.unsqueeze(0), b).squeeze(-2);
  if (b.dim() == 1) return matmul(a, b.unsqueeze(-1)).squeeze(-1);

  const int64_t m = a.size(-2), n = b.size(-1);
  if (b.dim() == 2 && rows_fold(a)) {
    // (*, M, K) @ (K, N): one GEMM over all rows of a.
    int64_t rows = 1;
    for (int d = 0; d + 1 < a.dim(); ++d) rows *= a.size(d);
    Tensor a2 = a.dim() == 2 ? a : a.view({rows, ka});
    Shape out_shape = a.shape();
    out_shape[out_shape.size() - 1] = n;
    return gemm(a2.unsqueeze(0), b.unsqueeze(0)).view(out_shape);
  }
  // Batch dims broadcast; each operand is expanded (stride 0) and folded to one batch dim without copying
  // when its strides allow.
  Shape batch;
  const int nd = std::max(a.dim(), b.dim()) - 2;
  for (int i = 0; i < nd; ++i) {
    int da = i - (nd - (a.dim() - 2)), db = i - (nd - (b.dim() - 2));
    int64_t x = da >= 0 ? a.size(da) : 1, y = db >= 0 ? b.size(db) : 1;
    SACCADE_CHECK(x == y || x == 1 || y == 1,
                  "matmul: batch dims of shapes {} and {} cannot be broadcast together", a.shape(),
                  b.shape());
    batch.push_back(x == 1 ? y : x);
  }
  const int64_t nb = batch.numel();
  Shape sa = batch, sb = batch, so = batch;
  sa.push_back(m), sa.push_back(ka);
  sb.push_back(kb), sb.push_back(n);
  so.push_back(m), so.push_back(n);
  Tensor a3 = a.expand(sa).reshape({nb, m, ka}), b3 = b.expand(sb).reshape({nb, kb, n});
  return gemm(a3, b3).view(so);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_operands("bmm", a, b);
  SACCADE_CHECK(a.dim() == 3 && b.dim() == 3,
                "bmm: expected two 3-d tensors (B, M, K) and (B, K, N), got shapes {} and {}", a.shape(),
                b.shape());
  SACCADE_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1),
                "bmm: shapes {} and {} cannot be multiplied (need (B, M, K) and (B, K, N))", a.shape(),
                b.shape());
  return gemm(a, b);
}

Tensor mm(const Tensor& a, const Tensor& b) {
  check_operands("mm", a, b);
  SACCADE_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected two 2-d tensors, got shapes {} and {}", a.shape(),
                b.shape());
  SACCADE_CHECK(a.size(1) == b.size(0), "mm: shapes {} and {} cannot be multiplied ({} vs {})", a.shape(),
                b.shape(), a.size(1), b.size(0));
  return gemm(a.unsqueeze(0), b.unsqueeze(0)).select(0, 0);
}

Tensor grouped_mm(const Tensor& a, const Tensor& b, const std::vector<int64_t>& offs) {
  check_operands("grouped_mm", a, b);
  const bool weights = a.dim() == 2 && b.dim() == 3;  // (M, K) @ (G, K, N): groups of rows
  SACCADE_CHECK(weights || (a.dim() == 2 && b.dim() == 2),
                "grouped_mm: expected (M, K) @ (G, K, N) or (K, M) @ (M, N), got shapes {} and {}", a.shape(),
                b.shape());
  const int64_t groups = static_cast<int64_t>(offs.size());
  const int64_t k = weights ? a.size(1) : a.size(0), grouped = weights ? a.size(0) : a.size(1);
  SACCADE_CHECK(weights ? b.size(1) == k && b.size(0) == groups : b.size(0) == grouped,
                "grouped_mm: shapes {} and {} cannot be multiplied in {} groups", a.shape(), b.shape(),
                groups);
  int64_t prev = 0;
  for (const int64_t end : offs) {
    SACCADE_CHECK(end >= prev, "grouped_mm: offsets {} are not non-decreasing", fmt::join(offs, ", "));
    prev = end;
  }
  SACCADE_CHECK(groups > 0 && prev == grouped,
                "grouped_mm: offsets {} do not end at the grouped dim's size {} (shapes {} and {})",
                fmt::join(offs, ", "), grouped, a.shape(), b.shape());
  const int64_t n = b.size(-1);
  Tensor out = weights ? Tensor::empty({grouped, n}, a.dtype(), a.device())
                       : zeros({groups, k, n}, a.dtype(), a.device());
  int64_t start = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t len = offs[static_cast<size_t>(g)] - start;
    if (len > 0 && n > 0) {
      // one contiguous block of out per group: rows [start, start + len), or the (K, N) matrix g
      const Tensor ag = weights ? a.narrow(0, start, len) : a.narrow(1, start, len);
      const Tensor bg = weights ? b.select(0, g) : b.narrow(0, start, len);
      Tensor og = weights ? out.narrow(0, start, len) : out.select(0, g);
      if (weights && k == 0) {
        fill_(og, 0.0);
      } else if (og.numel() > 0) {
        backend(a.device()).bmm(blas_ready(ag.unsqueeze(0)), blas_ready(bg.unsqueeze(0)), og.unsqueeze(0));
      }
    }
    start = offs[static_cast<size_t>(g)];
  }
  return out;
}

}  // namespace saccade::ops
