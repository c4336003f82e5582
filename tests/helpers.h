#pragma once
// Shared test helpers: tensor comparison, the torch fixtures of tests/data/, and "throws saccade::Error
// mentioning X".
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "saccade.h"

namespace saccade::testing {

/// True when a and b have the same shape and |a - b| <= atol + rtol |b| everywhere (compared in float64).
/// NaNs match NaNs and infinities the same infinity (as numpy.allclose with equal_nan).
inline bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8) {
  if (!(a.shape() == b.shape())) return false;
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if ((std::isnan(x[i]) && std::isnan(y[i])) || x[i] == y[i]) continue;
    if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) return false;
  }
  return true;
}

/// Standard normal float32 draws of `shape` on the CPU from Generator(seed).
inline Tensor randn32(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return ops::randn(shape, DType::Float32, Device::cpu(), &g);
}

/// A float64 tensor of `shape` with values from the seeded generator (for gradchecks).
inline Tensor rand64(const Shape& shape, uint64_t seed = 1) {
  Generator g(seed);
  return ops::randn(shape, DType::Float64, Device::cpu(), &g);
}

/// Reads the fixture tests/data/<name>.txt (values from PyTorch, written by tests/fixtures/make_*.py: per
/// tensor a line "key kind ndim size..." and a line of values) into tensors by key, of the dtype its kind
/// names: f64, f32, i64 or bool.
inline std::map<std::string, Tensor> read_fixture(const std::string& name) {
  std::ifstream f(std::string(SACCADE_TEST_DATA_DIR) + "/" + name + ".txt");
  REQUIRE(f.good());
  const std::map<std::string, DType> kinds{
      {"f64", DType::Float64}, {"f32", DType::Float32}, {"i64", DType::Int64}, {"bool", DType::Bool}};
  std::map<std::string, Tensor> out;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    std::istringstream head(line);
    std::string key, kind;
    int nd = 0;
    head >> key >> kind >> nd;
    REQUIRE(kinds.count(kind) == 1);
    Shape shape;
    for (int i = 0; i < nd; ++i) {
      int64_t s = 0;
      head >> s;
      shape.push_back(s);
    }
    REQUIRE(std::getline(f, line));
    std::istringstream vals(line);
    std::vector<double> v(static_cast<size_t>(shape.numel()));
    for (auto& x : v) vals >> x;
    out[key] = ops::from_vector(v, shape).to(kinds.at(kind));  // exact: integers and bools as doubles
  }
  return out;
}

/// Matches a saccade::Error whose message contains a substring.
class ErrorContains : public Catch::MatcherBase<saccade::Error> {
 public:
  explicit ErrorContains(std::string s) : s_(std::move(s)) {}
  bool match(const saccade::Error& e) const override {
    return std::string(e.what()).find(s_) != std::string::npos;
  }
  std::string describe() const override { return "saccade::Error message contains \"" + s_ + "\""; }

 private:
  std::string s_;
};

/// The message of the saccade::Error `f` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

/// A Llama small enough to check whole: hidden 16, 4 heads of 4 (2 key/value heads), MLP 24, vocab 40, 2
/// layers, context 32.
inline nn::LlamaConfig tiny_llama_config() {
  nn::LlamaConfig c;
  c.hidden_size = 16, c.intermediate_size = 24, c.num_attention_heads = 4, c.num_key_value_heads = 2;
  c.vocab_size = 40, c.num_hidden_layers = 2, c.max_position_embeddings = 32;
  return c;
}

}  // namespace saccade::testing

/// Checks that `expr` throws saccade::Error whose message contains `substr`.
#define REQUIRE_THROWS_SACCADE(expr, substr) \
  REQUIRE_THROWS_MATCHES(expr, ::saccade::Error, ::saccade::testing::ErrorContains(substr))

namespace saccade::testing {

/// Two language models' greedy choices on the same tokens (teacher-forced): ids (1, T); `ref` and `other`
/// have forward(Tensor idx) -> logits (1, T, V) (a quantized model against its float32 original, say). At
/// each position where their argmaxes differ, REQUIREs that the reference's margin there (its top logit
/// minus its logit of the other's choice) is at most twice the largest |logit difference| at that position:
/// a flip only where the reference itself nearly ties. Returns the positions whose argmaxes agree.
template <class A, class B>
int64_t greedy_flips_within_error(A& ref, B& other, const Tensor& ids) {
  const Tensor a = ref.forward(ids).data().select(0, 0).to(DType::Float32).contiguous(),
               b = other.forward(ids).data().select(0, 0).to(DType::Float32).contiguous();
  const int64_t T = a.size(0), V = a.size(1);
  const float *pa = a.data<float>(), *pb = b.data<float>();
  int64_t agree = 0;
  for (int64_t t = 0; t < T; ++t) {
    const float *ra = pa + t * V, *rb = pb + t * V;
    const int64_t ia = std::max_element(ra, ra + V) - ra, ib = std::max_element(rb, rb + V) - rb;
    if (ia == ib) {
      ++agree;
      continue;
    }
    float err = 0;
    for (int64_t v = 0; v < V; ++v) err = std::max(err, std::fabs(ra[v] - rb[v]));
    CAPTURE(t, ia, ib, ra[ia] - ra[ib], err);
    REQUIRE(ra[ia] - ra[ib] <= 2 * err);
  }
  return agree;
}

}  // namespace saccade::testing
