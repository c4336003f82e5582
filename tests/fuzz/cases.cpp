// The fuzz cases: one seeded generator of valid and invalid calls over the public ops, Tensor methods,
// autograd functions and nn modules (tests/fuzz/cases.h). Arguments mix small valid sizes (often shared
// between the operands of one case, so that broadcasting and matmul are often legal) with the values that
// broke things before: negative sizes, sizes whose product overflows int64, dims near the int64 limits, zero
// and 2^32 strides, NaN/inf parameters, undefined tensors.
#include "tests/fuzz/cases.h"

#include <cmath>
#include <limits>
#include <random>

#include "saccade.h"

namespace saccade::fuzz {

namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();

class Gen {
 public:
  Gen(uint64_t seed, int64_t index) : rng_(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(index)) {
    for (auto& b : base_) b = 1 + below(3);
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(rng_() % static_cast<uint64_t>(n)); }
  bool coin(double p = 0.5) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <class T>
  T pick(std::initializer_list<T> v) {
    return v.begin()[below(static_cast<int64_t>(v.size()))];
  }
  // a size: usually one of the case's shared sizes or a small one, sometimes hostile
  // Hostile sizes are chosen so that any tensor they reach is refused (a dim of 2^36 or more is beyond this
  // machine's memory): a fuzz case must never make a legitimate multi-gigabyte allocation.
  int64_t size() {
    if (coin(0.6)) return base_[below(3)];
    if (coin(0.8)) return below(5);
    return pick<int64_t>({-1, -2, int64_t{1} << 36, int64_t{1} << 62, kMax, kMin, int64_t{1} << 40});
  }
  // a dim or an index: usually in [-4, 4], sometimes far out
  int64_t dim() {
    if (coin(0.88)) return below(9) - 4;
    return pick<int64_t>({kMin, kMax, int64_t{1} << 32, -(int64_t{1} << 32), 100});
  }
  // a positive parameter (kernel size, stride, steps, heads, layer size): usually 1..4, sometimes hostile
  int64_t count() {
    if (coin(0.85)) return 1 + below(4);
    return pick<int64_t>({0, -1, int64_t{1} << 36, int64_t{1} << 62, kMax, kMin, 10'000'000'000'000});
  }
  // a stride or a kernel size: count(), or a value that does not fit an int (2^32 once truncated to 0)
  int64_t stride() { return coin(0.9) ? count() : pick<int64_t>({int64_t{1} << 31, int64_t{1} << 32}); }
  // an even positive parameter (num_hiddens with 2 heads), hostile as count()
  int64_t even_count() {
    int64_t c = count();
    return c > 0 && c < (int64_t{1} << 40) ? 2 * c : c;
  }
  double real() {
    if (coin(0.85)) return pick<double>({0, 1, -1, 0.5, 2, 0.1, 3});
    return pick<double>({INFINITY, -INFINITY, NAN, 1e300, -1e300, 0x1p63, 1e-300});
  }
  double prob() {
    if (coin(0.85)) return pick<double>({0, 0.1, 0.5});
    return pick<double>({1, -0.1, INFINITY, NAN, 1.5});
  }
  DType dtype() { return pick({DType::Float32, DType::Float64, DType::Int64, DType::Bool}); }
  DType float_dtype() { return coin(0.85) ? DType::Float32 : dtype(); }
  Shape shape(int max_dims = 4) {
    Shape s;
    for (int64_t i = 0, n = below(max_dims + 1); i < n; ++i) s.push_back(size());
    return s;
  }
  // a small valid shape of `ndim` dims from the shared sizes (0 now and then)
  Shape valid_shape(int64_t ndim) {
    Shape s;
    for (int64_t i = 0; i < ndim; ++i) s.push_back(coin(0.05) ? 0 : base_[below(3)]);
    return s;
  }
  Tensor tensor_of(const Shape& s, DType d) {
    if (d == DType::Int64 || d == DType::Bool)
      return ops::randint(d == DType::Bool ? 0 : -2, d == DType::Bool ? 2 : 5, s, Device::cpu(), &gen_).to(d);
    return ops::randn(s, d, Device::cpu(), &gen_);
  }
  Tensor tensor(int64_t min_dims = 0, int64_t max_dims = 4) {
    if (coin(0.03)) return Tensor();
    Tensor t = tensor_of(valid_shape(min_dims + below(max_dims - min_dims + 1)),
                         coin(0.75) ? DType::Float32 : dtype());
    if (coin(0.15) && t.dim() >= 2) t = t.transpose(0, 1);  // a strided view
    return t;
  }
  Tensor float_tensor(int64_t ndim) { return tensor_of(valid_shape(ndim), float_dtype()); }
  Tensor index_tensor(int64_t n_max) {
    if (coin(0.05)) return tensor();
    return ops::randint(coin(0.9) ? 0 : -3, std::max<int64_t>(n_max, 1) + (coin(0.9) ? 0 : 3),
                        valid_shape(below(3)), Device::cpu(), &gen_);
  }
  Tensor valid_lens(int64_t b, int64_t t) {
    if (coin(0.5)) return Tensor();
    if (coin(0.1)) return tensor();
    return ops::randint(coin(0.9) ? 0 : -2, t + 1 + (coin(0.9) ? 0 : 2), {b}, Device::cpu(), &gen_);
  }
  Variable var(const Tensor& t) {
    return t.defined() ? Variable(t, is_floating(t.dtype()) && coin(0.5)) : Variable();
  }
  int64_t base(int i) const { return base_[i]; }

 private:
  std::mt19937_64 rng_;
  Generator gen_{7};
  int64_t base_[3];
};

void expect(bool ok, const std::string& what) {
  if (!ok) throw FuzzWrong(what);
}

bool same_values(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape())) return false;
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])))) return false;
  return true;
}

// Backward through a Variable result when it has history: exercises the derivative rule too.
void backward_if_possible(const Variable& y) {
  if (y.defined() && y.requires_grad() && is_floating(y.dtype())) sum(y).backward();
}

struct OpCase {
  const char* name;
  void (*run)(Gen& g);
};

// ---- the table ----
const OpCase kCases[] = {
    // creation
    {"zeros",
     [](Gen& g) {
       Shape s = g.shape();
       DType d = g.dtype();
       Tensor t = ops::zeros(s, d);
       expect(t.shape() == s && t.dtype() == d, "zeros: wrong shape or dtype");
       for (double v : t.to_vector<double>()) expect(v == 0, "zeros: nonzero element");
     }},
    {"ones", [](Gen& g) { expect(ops::ones(g.shape(), g.dtype()).numel() >= 0, "ones"); }},
    {"full",
     [](Gen& g) {
       Shape s = g.shape();
       double v = g.real();
       DType d = g.dtype();
       Tensor t = ops::full(s, v, d);
       expect(t.shape() == s, "full: wrong shape");
       if (is_floating(d) && t.numel() > 0 && std::isfinite(v) && std::abs(v) < 1e30)
         expect(std::abs(t.to_vector<double>()[0] - v) <= 1e-6 * std::abs(v) + 1e-37, "full: wrong value");
     }},
    {"empty", [](Gen& g) { expect(ops::empty(g.shape(), g.dtype()).defined(), "empty"); }},
    {"zeros_like", [](Gen& g) { ops::zeros_like(g.tensor()); }},
    {"full_like", [](Gen& g) { ops::full_like(g.tensor(), g.real()); }},
    {"arange",
     [](Gen& g) {
       double a = g.real(), b = g.coin(0.8) ? g.real() + 3 : g.real(), st = g.coin(0.8) ? 1 : g.real();
       Tensor t = ops::arange(a, b, st, g.coin() ? DType::Int64 : g.dtype());
       expect(t.dim() == 1 && t.size(0) == static_cast<int64_t>(std::ceil((b - a) / st)),
              "arange: wrong length");
     }},
    {"linspace",
     [](Gen& g) {
       int64_t n = g.coin(0.8) ? g.below(6) : g.count();
       Tensor t = ops::linspace(g.real(), g.real(), n, g.float_dtype());
       expect(t.dim() == 1 && t.size(0) == n, "linspace: wrong length");
     }},
    {"eye",
     [](Gen& g) {
       int64_t n = g.count(), m = g.coin() ? -1 : g.count();
       Tensor t = ops::eye(n, m, g.dtype());
       const int64_t cols = m < 0 ? n : m;
       expect(t.size(0) == n && t.size(1) == cols, "eye: wrong shape");
       auto v = t.to_vector<double>();
       for (int64_t i = 0; i < n && t.numel() > 0; ++i)
         for (int64_t j = 0; j < cols; ++j) expect(v[i * cols + j] == (i == j ? 1 : 0), "eye: wrong value");
     }},
    {"rand",
     [](Gen& g) {
       Tensor t = ops::rand(g.shape(), g.float_dtype());
       for (double v : t.to_vector<double>()) expect(v >= 0 && v < 1, "rand: value outside [0, 1)");
     }},
    {"randn", [](Gen& g) { ops::randn(g.shape(), g.float_dtype()); }},
    {"normal", [](Gen& g) { ops::normal(g.shape(), g.real(), g.real(), g.float_dtype()); }},
    {"uniform", [](Gen& g) { ops::uniform(g.shape(), g.real(), g.real(), g.float_dtype()); }},
    {"randint",
     [](Gen& g) {
       int64_t lo = g.coin(0.8) ? g.dim() : g.pick<int64_t>({kMin, kMax, 0}),
               hi = g.coin(0.8) ? (lo > kMax - 5 ? kMax : lo + g.below(5))  // no overflow in the test itself
                                : g.pick<int64_t>({kMin, kMax, 0});
       Tensor t = ops::randint(lo, hi, g.shape());
       for (double v : t.to_vector<double>())
         expect(v >= static_cast<double>(lo) && v <= static_cast<double>(hi), "randint: value out of range");
     }},
    {"randperm",
     [](Gen& g) {
       int64_t n = g.coin(0.8) ? g.below(6) : g.count();
       auto v = ops::randperm(n).to_vector<int64_t>();
       std::vector<bool> seen(v.size());
       for (int64_t x : v) {
         expect(x >= 0 && x < n && !seen[x], "randperm: not a permutation");
         seen[x] = true;
       }
     }},
    {"tril", [](Gen& g) { ops::tril(g.tensor(), g.dim()); }},
    {"triu", [](Gen& g) { ops::triu(g.tensor(), g.dim()); }},
    {"causal_mask", [](Gen& g) { nn::causal_mask(g.count(), g.count()); }},
    {"from_vector",
     [](Gen& g) {
       std::vector<float> v(static_cast<size_t>(g.below(6)), 1.f);
       ops::from_vector(v, g.shape());
     }},
    // Tensor methods
    {"view",
     [](Gen& g) {
       Tensor t = g.tensor();
       Shape s = g.coin() && t.defined() ? Shape{-1} : g.shape();
       Tensor v = t.view(s);
       expect(v.numel() == t.numel() && same_values(v.reshape(t.shape()), t), "view: values changed");
     }},
    {"reshape",
     [](Gen& g) {
       Tensor t = g.tensor();
       Tensor v = t.reshape(g.shape());
       expect(v.numel() == t.numel(), "reshape: numel changed");
     }},
    {"permute",
     [](Gen& g) {
       Tensor t = g.tensor();
       Shape d;
       for (int64_t i = 0, n = t.defined() ? t.dim() : 2; i < n; ++i)
         d.push_back(g.coin(0.9) ? n - 1 - i : g.dim());
       t.permute(d);
     }},
    {"transpose", [](Gen& g) { g.tensor().transpose(g.dim(), g.dim()); }},
    {"squeeze", [](Gen& g) { g.tensor().squeeze(g.dim()); }},
    {"unsqueeze", [](Gen& g) { g.tensor().unsqueeze(g.dim()); }},
    {"expand",
     [](Gen& g) {
       Tensor t = g.tensor();
       Tensor e = t.expand(g.shape(5));
       expect(e.numel() >= 0, "expand");
       if (e.numel() > 0 && e.numel() < 4096) expect(ops::sum(e).defined(), "expand");
     }},
    {"flatten", [](Gen& g) { g.tensor().flatten(g.dim(), g.dim()); }},
    {"narrow",
     [](Gen& g) {
       Tensor t = g.tensor();
       Tensor n = t.narrow(g.dim(), g.coin(0.8) ? g.below(3) : g.dim(), g.coin(0.8) ? g.below(3) : g.count());
       if (n.numel() > 0) n.contiguous();
     }},
    {"slice",
     [](Gen& g) {
       Tensor s = g.tensor().slice(g.dim(), g.dim(), g.coin() ? kMax : g.dim(), g.count());
       s.contiguous();
     }},
    {"select", [](Gen& g) { g.tensor().select(g.dim(), g.dim()).contiguous(); }},
    {"contiguous",
     [](Gen& g) {
       Tensor t = g.tensor();
       expect(same_values(t.contiguous(), t), "contiguous: values changed");
     }},
    {"clone", [](Gen& g) { g.tensor().clone(); }},
    {"to", [](Gen& g) { g.tensor().to(g.dtype()); }},
    {"item", [](Gen& g) { g.tensor().item<double>(); }},
    {"size", [](Gen& g) { g.tensor().size(g.dim()); }},
    {"stride", [](Gen& g) { g.tensor().stride(g.dim()); }},
    // elementwise, reductions, joins, indexing, linalg
    {"add",
     [](Gen& g) {
       Tensor a = g.tensor(), b = g.tensor();
       Tensor c = ops::add(a, b);
       expect(c.shape() == broadcast_shapes(a.shape(), b.shape(), "add"), "add: wrong shape");
     }},
    {"mul", [](Gen& g) { ops::mul(g.tensor(), g.real()); }},
    {"div", [](Gen& g) { ops::div(g.tensor(), g.tensor()); }},
    {"pow", [](Gen& g) { ops::pow(g.tensor(), g.real()); }},
    {"maximum", [](Gen& g) { ops::maximum(g.tensor(), g.tensor()); }},
    {"eq", [](Gen& g) { ops::eq(g.tensor(), g.tensor()); }},
    {"exp", [](Gen& g) { ops::exp(g.tensor()); }},
    {"clamp", [](Gen& g) { ops::clamp(g.tensor(), g.real(), g.real()); }},
    {"where", [](Gen& g) { ops::where(g.tensor(), g.tensor(), g.tensor()); }},
    {"masked_fill", [](Gen& g) { ops::masked_fill(g.tensor(), g.tensor(), g.real()); }},
    {"sum",
     [](Gen& g) {
       Tensor t = g.tensor();
       Shape d;
       if (g.coin(0.7)) d.push_back(g.dim());
       Tensor s = ops::sum(t, d, g.coin());
       if (t.numel() > 0 && d.empty()) expect(s.numel() == 1, "sum: a full reduction has one element");
     }},
    {"mean", [](Gen& g) { ops::mean(g.tensor(), Shape{g.dim()}, g.coin()); }},
    {"max", [](Gen& g) { ops::max(g.tensor(), g.dim(), g.coin()); }},
    {"argmax", [](Gen& g) { ops::argmax(g.tensor(), g.dim(), g.coin()); }},
    {"var", [](Gen& g) { ops::var(g.tensor(), Shape{g.dim()}, g.coin()); }},
    {"logsumexp", [](Gen& g) { ops::logsumexp(g.tensor(), Shape{g.dim()}); }},
    {"softmax", [](Gen& g) { ops::softmax(g.tensor(), g.dim()); }},
    {"log_softmax", [](Gen& g) { ops::log_softmax(g.tensor(), g.dim()); }},
    {"masked_softmax",
     [](Gen& g) {
       Tensor x = g.float_tensor(3);
       ops::masked_softmax(x, g.coin() ? g.valid_lens(x.size(0), x.size(2)) : g.tensor());
     }},
    {"cat",
     [](Gen& g) {
       ops::cat({g.tensor(), g.tensor()}, g.dim());
     }},
    {"stack",
     [](Gen& g) {
       ops::stack({g.tensor(), g.tensor()}, g.dim());
     }},
    {"split", [](Gen& g) { ops::split(g.tensor(), g.count(), g.dim()); }},
    {"chunk", [](Gen& g) { ops::chunk(g.tensor(), g.count(), g.dim()); }},
    {"repeat",
     [](Gen& g) {
       Tensor t = g.tensor();
       ops::repeat(t, g.shape());
     }},
    {"repeat_interleave", [](Gen& g) { ops::repeat_interleave(g.tensor(), g.count(), g.dim()); }},
    {"index_select", [](Gen& g) { ops::index_select(g.tensor(), g.dim(), g.index_tensor(3)); }},
    {"gather", [](Gen& g) { ops::gather(g.tensor(), g.dim(), g.index_tensor(3)); }},
    {"scatter_add", [](Gen& g) { ops::scatter_add(g.tensor(), g.dim(), g.index_tensor(3), g.tensor()); }},
    {"matmul",
     [](Gen& g) {
       Tensor a = g.tensor(1, 3), b = g.tensor(1, 3);
       Tensor c = ops::matmul(a, b);
       if (a.dim() == 2 && b.dim() == 2 && is_floating(a.dtype())) {  // against the schoolbook product
         auto x = a.to_vector<double>(), y = b.to_vector<double>(), z = c.to_vector<double>();
         const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
         for (int64_t i = 0; i < n; ++i)
           for (int64_t j = 0; j < m; ++j) {
             double s = 0;
             for (int64_t l = 0; l < k; ++l) s += x[i * k + l] * y[l * m + j];
             expect(std::abs(s - z[i * m + j]) <= 1e-4 * (1 + std::abs(s)), "matmul: wrong product");
           }
       }
     }},
    {"bmm", [](Gen& g) { ops::bmm(g.tensor(), g.tensor()); }},
    {"conv2d",
     [](Gen& g) {
       Tensor x = g.coin(0.8) ? g.float_tensor(4) : g.tensor();
       Tensor w = g.coin(0.7) && x.defined() && x.dim() == 4
                      ? ops::randn({2, x.size(1), 1 + g.below(3), 1 + g.below(3)},
                                   is_floating(x.dtype()) ? x.dtype() : DType::Float32)
                      : g.tensor();
       ops::conv2d(x, w, Tensor(), {g.stride(), g.stride()},
                   {g.coin(0.8) ? 0 : g.count(), g.coin(0.8) ? 0 : g.count()});
     }},
    {"max_pool2d",
     [](Gen& g) {
       ops::max_pool2d(g.coin(0.8) ? g.float_tensor(4) : g.tensor(), {g.stride(), g.stride()},
                       {g.stride(), g.stride()}, {g.coin(0.8) ? 0 : g.stride(), 0});
     }},
    {"avg_pool2d",
     [](Gen& g) {
       ops::avg_pool2d(g.coin(0.8) ? g.float_tensor(4) : g.tensor(), {g.stride(), g.stride()},
                       {g.stride(), g.stride()}, {0, g.coin(0.8) ? 0 : g.stride()});
     }},
    {"layer_norm",
     [](Gen& g) {
       Tensor x = g.tensor();
       ops::layer_norm(x, g.coin() && x.defined() && x.dim() > 0 ? Shape{x.size(-1)} : g.shape(2));
     }},
    {"cross_entropy",
     [](Gen& g) {
       Tensor logits = g.coin(0.7) ? g.float_tensor(2) : g.tensor();
       Tensor target = g.index_tensor(logits.defined() && logits.dim() > 1 ? logits.size(1) : 3);
       ops::cross_entropy(logits, target, g.coin(0.8) ? -100 : g.dim(), ops::Reduction::Mean,
                          g.coin(0.8) ? 0 : g.prob());
     }},
    {"mse_loss", [](Gen& g) { ops::mse_loss(g.tensor(), g.tensor()); }},
    // autograd functions (forward and backward)
    {"matmul", [](Gen& g) { backward_if_possible(matmul(g.var(g.tensor(1, 3)), g.var(g.tensor(1, 3)))); }},
    {"softmax", [](Gen& g) { backward_if_possible(softmax(g.var(g.tensor()), g.dim())); }},
    {"dropout", [](Gen& g) { backward_if_possible(dropout(g.var(g.tensor()), g.prob(), g.coin())); }},
    {"layer_norm",
     [](Gen& g) {
       Variable x = g.var(g.tensor(1, 3));
       backward_if_possible(
           layer_norm(x, x.defined() && x.dim() > 0 && g.coin() ? Shape{x.size(-1)} : g.shape(2)));
     }},
    {"embedding",
     [](Gen& g) { backward_if_possible(embedding(g.var(g.float_tensor(2)), g.index_tensor(3))); }},
    {"scaled_dot_product_attention",
     [](Gen& g) {
       Variable q = g.var(g.float_tensor(3)), k = g.var(g.float_tensor(3)), v = g.var(g.float_tensor(3));
       Tensor m = g.valid_lens(q.size(0), k.size(1));
       backward_if_possible(nn::scaled_dot_product_attention(q, k, v,
                                                             {.attn_mask = m,
                                                              .is_causal = g.coin(),
                                                              .dropout_p = g.coin(0.8) ? 0 : g.prob(),
                                                              .need_weights = g.coin()})
                                .output);
     }},
    // ... with undefined Variables now and then (each must be named by the function called), int64 and bool
    // operands, 0-d inputs reduced over dim 0 or -1
    {"add", [](Gen& g) { backward_if_possible(add(g.var(g.tensor()), g.var(g.tensor()))); }},
    {"pow", [](Gen& g) { backward_if_possible(pow(g.var(g.tensor()), g.var(g.tensor()))); }},
    {"where", [](Gen& g) { backward_if_possible(where(g.tensor(), g.var(g.tensor()), g.var(g.tensor()))); }},
    {"sum",
     [](Gen& g) {
       Variable x = g.var(g.tensor());
       backward_if_possible(g.coin(0.2) ? sum(x) : sum(x, {g.dim()}, g.coin()));
     }},
    {"mean", [](Gen& g) { backward_if_possible(mean(g.var(g.tensor()), {g.dim()}, g.coin())); }},
    {"conv2d",
     [](Gen& g) {
       Variable x = g.var(g.coin(0.8) ? g.float_tensor(4) : g.tensor());
       Variable w = g.var(g.coin(0.7) && x.defined() && x.dim() == 4
                              ? ops::randn({2, x.size(1), 1 + g.below(2), 1 + g.below(2)},
                                           is_floating(x.dtype()) ? x.dtype() : DType::Float32)
                              : g.tensor());
       backward_if_possible(conv2d(x, w));
     }},
    {"cross_entropy",
     [](Gen& g) {
       Variable logits = g.var(g.coin(0.8) ? g.float_tensor(2) : g.tensor());
       backward_if_possible(
           cross_entropy(logits, g.index_tensor(logits.defined() && logits.dim() > 1 ? logits.size(1) : 3)));
     }},
    {"Adam",
     [](Gen& g) {
       Variable p(g.float_tensor(2).to(DType::Float32), true);
       nn::Adam opt({p});
       p.set_grad(g.tensor_of(p.shape(), g.coin(0.7) ? DType::Float32 : g.dtype()));
       opt.step();
     }},
    // nn modules: constructor arguments, then a forward
    {"Linear",
     [](Gen& g) {
       nn::Linear m(g.count(), g.count());
       Variable y = m.forward(g.var(g.tensor(1, 3)));
       expect(y.size(-1) == m.weight.size(0), "Linear: wrong output width");
       backward_if_possible(y);
     }},
    {"Embedding",
     [](Gen& g) {
       nn::Embedding m(g.count(), g.count(), g.coin(0.8) ? std::nullopt : std::optional<int64_t>(g.dim()));
       m.forward(Variable(g.index_tensor(4)));
     }},
    {"LayerNorm",
     [](Gen& g) {
       nn::LayerNorm m(g.count(), g.coin(0.8) ? 1e-5 : g.real());
       backward_if_possible(m.forward(g.var(g.tensor(1, 3))));
     }},
    {"Dropout", [](Gen& g) { nn::Dropout(g.prob()).forward(g.var(g.tensor())); }},
    {"Conv2d",
     [](Gen& g) {
       nn::Conv2d m(g.count(), g.count(), g.stride(), g.stride(), g.coin(0.8) ? 0 : g.stride());
       m.forward(g.var(g.coin(0.8) ? g.float_tensor(4) : g.tensor()));
     }},
    {"MaxPool2d", [](Gen& g) { nn::MaxPool2d(g.stride(), g.stride()).forward(g.var(g.float_tensor(4))); }},
    {"GRUCell",
     [](Gen& g) {
       nn::GRUCell m(g.count(), g.count());
       backward_if_possible(m.forward(g.var(g.tensor(1, 2)), g.coin() ? Variable() : g.var(g.tensor(1, 2))));
     }},
    {"LSTMCell",
     [](Gen& g) {
       nn::LSTMCell m(g.count(), g.count());
       m.forward(g.var(g.tensor(1, 2)));
     }},
    {"GRU",
     [](Gen& g) {
       nn::GRUOptions o;
       o.num_layers = g.coin(0.9) ? 1 + g.below(2) : g.pick<int64_t>({0, -1});
       nn::GRU m(g.count(), g.count(), o);
       m.forward(g.var(g.tensor(2, 3)));
     }},
    {"MultiHeadAttention",
     [](Gen& g) {
       nn::MultiHeadAttention m(g.even_count(), g.coin(0.8) ? 2 : g.count(),
                                {.dropout = g.coin(0.8) ? 0 : g.prob()});
       Variable q = g.var(g.float_tensor(3)), k = g.var(g.float_tensor(3));
       m.forward(q, k, k, g.valid_lens(q.size(0), k.size(1)), g.coin(0.3));
     }},
    {"MultiHeadAttention",  // torch's Packed layout and forward
     [](Gen& g) {
       nn::MultiHeadAttention m(g.even_count(), g.coin(0.8) ? 2 : g.count(),
                                {.bias = true, .layout = nn::ParameterLayout::Packed});
       Variable q = g.var(g.float_tensor(3)), k = g.var(g.float_tensor(3));
       m.forward(q, k, k, {.need_weights = g.coin(0.5), .is_causal = g.coin(0.3)});
     }},
    {"AdditiveAttention",
     [](Gen& g) {
       nn::AdditiveAttention m(g.count(), g.count(), g.count(), g.coin(0.8) ? 0 : g.prob());
       Variable q = g.var(g.float_tensor(3)), k = g.var(g.float_tensor(3));
       m.forward(q, k, g.var(g.float_tensor(3)), g.valid_lens(q.size(0), k.size(1)));
     }},
    {"DotProductAttention",
     [](Gen& g) {
       nn::DotProductAttention m(g.coin(0.8) ? 0 : g.prob());
       Variable q = g.var(g.float_tensor(3)), k = g.var(g.float_tensor(3));
       m.forward(q, k, g.var(g.float_tensor(3)), g.valid_lens(q.size(0), k.size(1)));
     }},
    {"PositionalEncoding",
     [](Gen& g) {
       nn::PositionalEncoding m(g.count(), g.coin(0.8) ? 0 : g.prob(), g.coin(0.8) ? 8 : g.count());
       m.forward(g.var(g.float_tensor(3)), g.coin(0.8) ? 0 : g.dim());
     }},
    {"PositionalEncoding2D",
     [](Gen& g) {
       nn::PositionalEncoding2D m(g.even_count(), 0.0, g.count(), g.count());
       m.forward(g.var(g.float_tensor(4)));
     }},
    {"AddNorm",
     [](Gen& g) {
       nn::AddNorm m(g.count(), g.prob());
       Variable x = g.var(g.float_tensor(3));
       m.forward(x, g.coin(0.7) ? x : g.var(g.float_tensor(3)));
     }},
    {"PositionWiseFFN",
     [](Gen& g) { nn::PositionWiseFFN(g.count(), g.count(), g.count()).forward(g.var(g.float_tensor(3))); }},
    {"BahdanauDecoderCell",
     [](Gen& g) {
       nn::BahdanauDecoderCell m(g.count(), g.count(), g.coin(0.8) ? -1 : g.count());
       m.step(g.var(g.float_tensor(2)), g.var(g.float_tensor(2)), g.var(g.float_tensor(3)), Tensor());
     }},
    {"TransformerEncoderBlock",
     [](Gen& g) {
       nn::TransformerEncoderBlock m(g.even_count(), g.count(), g.coin(0.8) ? 2 : g.count(),
                                     g.coin(0.8) ? 0 : g.prob());
       Variable x = g.var(g.float_tensor(3));
       m.forward(x, g.valid_lens(x.size(0), x.size(1)));
     }},
    {"CrossEntropyLoss",
     [](Gen& g) {
       nn::CrossEntropyLoss m(g.coin(0.8) ? -100 : g.dim(), g.coin(0.8) ? 0 : g.prob());
       Variable logits = g.var(g.coin(0.8) ? g.float_tensor(2) : g.tensor());
       m.forward(logits, g.index_tensor(logits.defined() && logits.dim() > 1 ? logits.size(1) : 3));
     }},
};

}  // namespace

int64_t num_case_kinds() { return static_cast<int64_t>(std::size(kCases)); }

void run_case(int64_t index, uint64_t seed, CaseContext& ctx) {
  Gen g(seed, index);
  const OpCase& c = kCases[index % num_case_kinds()];
  ctx.set_op(c.name);
  c.run(g);
}

}  // namespace saccade::fuzz
