#include "nn/nadaraya_watson.h"

#include "autograd/functions/elementwise.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/shape.h"
#include "nn/init.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace saccade::nn {

namespace {

void check_float_same(const char* op, const Variable& q, const Variable& k, const Variable& v) {
  SACCADE_CHECK(q.defined() && k.defined() && v.defined(),
                "{}: got an undefined queries, keys or values tensor", op);
  SACCADE_CHECK(is_floating(q.dtype()) && q.dtype() == k.dtype() && q.dtype() == v.dtype(),
                "{}: queries, keys and values must share one float dtype, got {}, {}, {}", op, q.dtype(),
                k.dtype(), v.dtype());
}

// kernel values (Q, K) normalised over keys; an all-zero row stays zero (0 / 1, not 0 / 0)
Variable normalise_rows(const Variable& kv) {
  Variable s = sum(kv, {1}, true);
  Variable safe = where(ops::eq(s.data(), 0.0), Variable(ops::ones_like(s.data())), s);
  return div(kv, safe);
}

}  // namespace

NadarayaWatson::NadarayaWatson(Kernel kernel, double width)
    : Module("NadarayaWatson"), kernel(kernel), width(width) {
  ErrorScope scope(name());
  SACCADE_CHECK(width > 0, "NadarayaWatson: width must be positive, got {}", width);
}

// queries: (Q), keys: (K), values: (K) -> predictions (Q), weights (Q, K)
NadarayaWatsonOutput NadarayaWatson::forward(const Variable& queries, const Variable& keys,
                                             const Variable& values) {
  ErrorScope scope(name(), {shape_of(queries), shape_of(keys), shape_of(values)});
  const char* op = "NadarayaWatson";
  check_float_same(op, queries, keys, values);
  SACCADE_CHECK(queries.dim() == 1 && keys.dim() == 1 && values.dim() == 1 && keys.size(0) == values.size(0),
                "{}: expected queries (Q), keys (K) and values (K), got {}, {}, {}", op, queries.shape(),
                keys.shape(), values.shape());
  SACCADE_CHECK(width > 0, "{}: width must be positive, got {}", op, width);
  // u: (Q, K) = (q_i - k_j) / width
  Variable u = div(sub(unsqueeze(queries, 1), unsqueeze(keys, 0)), width);
  Variable weights;
  switch (kernel) {
    case Kernel::Gaussian:
      weights = softmax(mul(mul(u, u), -0.5), -1);
      break;
    case Kernel::Boxcar:
      weights = normalise_rows(Variable(ops::lt(ops::abs(u.data()), 1.0).to(u.dtype())));
      break;
    case Kernel::Epanechnikov:
      weights = normalise_rows(relu(rsub(mul(u, u), 1.0)));
      break;
    case Kernel::Triangular:
      weights = normalise_rows(relu(rsub(abs(u), 1.0)));
      break;
    case Kernel::Constant:
      weights = normalise_rows(Variable(ops::ones_like(u.data())));
      break;
  }
  weights_ = weights.data();
  return {matmul(weights, values), weights};
}

ParametricNadarayaWatson::ParametricNadarayaWatson(Generator* gen) : Module("ParametricNadarayaWatson") {
  ErrorScope scope(name());
  w = register_parameter("w", init::uniform_(ops::empty({1}), 0, 1, gen));
}

// queries: (Q), keys: (K) or (Q, K), values: (K) or (Q, K) -> predictions (Q), weights (Q, K)
NadarayaWatsonOutput ParametricNadarayaWatson::forward(const Variable& queries, const Variable& keys,
                                                       const Variable& values) {
  ErrorScope scope(name(), {shape_of(queries), shape_of(keys), shape_of(values)});
  const char* op = "ParametricNadarayaWatson";
  check_float_same(op, queries, keys, values);
  SACCADE_CHECK(w.dtype() == queries.dtype(), "{}: inputs are {} but the parameter w is {}", op,
                queries.dtype(), w.dtype());
  const int64_t q = queries.dim() == 1 ? queries.size(0) : -1;
  auto fits = [&](const Variable& t) { return (t.dim() == 1) || (t.dim() == 2 && t.size(0) == q); };
  SACCADE_CHECK(queries.dim() == 1 && fits(keys) && fits(values) && keys.size(-1) == values.size(-1),
                "{}: expected queries (Q) and keys, values (K) or (Q, K) of one length K, got {}, {}, {}", op,
                queries.shape(), keys.shape(), values.shape());
  // diff: (Q, K)
  Variable diff = sub(unsqueeze(queries, 1), keys.dim() == 1 ? unsqueeze(keys, 0) : keys);
  Variable scaled = mul(diff, w);
  Variable weights = softmax(mul(mul(scaled, scaled), -0.5), -1);
  weights_ = weights.data();
  Variable predictions = values.dim() == 1 ? matmul(weights, values) : sum(mul(weights, values), {1});
  return {predictions, weights};
}

}  // namespace saccade::nn
