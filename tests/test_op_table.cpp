// The op table (autograd/op_table.h) against the code: every rule names a row of kOpTable, every public
// function of autograd/functions/ has a row (or is a listed composition), running every row's rule records
// that row and only rows, a row's twice_differentiable column holds under create_graph, and
// autograd/README.md's rule index lists exactly the table's ops and files.
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "helpers.h"
#include "profiler/profiler.h"

using namespace saccade;
using saccade::testing::rand64;

namespace {

const std::string kSourceDir = std::string(SACCADE_TEST_DATA_DIR) + "/../..";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::map<std::string, const OpInfo*> rows_by_name() {
  std::map<std::string, const OpInfo*> m;
  for (const OpInfo* r : kOpTable) m[r->name] = r;
  return m;
}

std::map<std::string, const OpInfo*> engine_rows() {
  std::map<std::string, const OpInfo*> m;
  for (const OpInfo* r : kEngineRows) m[r->name] = r;
  return m;
}

const char* const kRuleFiles[] = {"attention", "conv",   "elementwise", "index", "linalg",
                                  "nn",        "reduce", "rotary",      "shape"};

// The dtype of the cases' leaves (float64 but in the autocast test).
DType g_leaf_dtype = DType::Float64;

// A leaf of `shape` (g_leaf_dtype, seeded) that requires grad; `positive`: |x| + 0.5.
Variable leaf(const Shape& shape, uint64_t seed, bool positive = false) {
  Tensor t = rand64(shape, seed);
  return Variable((positive ? ops::add(ops::abs(t), 0.5) : t).to(g_leaf_dtype), true);
}

// One run of a row's rule: its output and the leaves it was computed from.
struct Run {
  Variable y;
  std::vector<Variable> leaves;
};

// Each row's rule, run once on small float64 inputs.
std::vector<std::pair<const OpInfo*, std::function<Run()>>> cases() {
  const Tensor idx = ops::tensor({2, 0, 1}, DType::Int64);
  const Tensor mask = ops::tensor({1, 0, 1, 0, 1, 1}, DType::Bool).reshape({2, 3});
  auto unary = [](Variable (*f)(const Variable&), bool positive = false) {
    return [f, positive] {
      Variable a = leaf({2, 3}, 1, positive);
      return Run{f(a), {a}};
    };
  };
  auto binary = [](Variable (*f)(const Variable&, const Variable&), bool positive = false) {
    return [f, positive] {
      Variable a = leaf({2, 3}, 1, positive), b = leaf({2, 3}, 2, positive);
      return Run{f(a, b), {a, b}};
    };
  };
  auto scalar = [](Variable (*f)(const Variable&, double), double c) {
    return [f, c] {
      Variable a = leaf({2, 3}, 1, true);
      return Run{f(a, c), {a}};
    };
  };
  auto on = [](std::function<Variable(const Variable&)> f, Shape shape = {2, 3}) {
    return [f, shape] {
      Variable a = leaf(shape, 1);
      return Run{f(a), {a}};
    };
  };
  return {
      {&op_info::add, binary(saccade::add)},
      {&op_info::sub, binary(saccade::sub)},
      {&op_info::mul, binary(saccade::mul)},
      {&op_info::div, binary(saccade::div, true)},
      {&op_info::pow, binary(saccade::pow, true)},
      {&op_info::rsub, scalar(saccade::rsub, 2.0)},
      {&op_info::rdiv, scalar(saccade::rdiv, 2.0)},
      {&op_info::maximum, binary(saccade::maximum)},
      {&op_info::minimum, binary(saccade::minimum)},
      {&op_info::neg, unary(saccade::neg)},
      {&op_info::exp, unary(saccade::exp)},
      {&op_info::log, unary(saccade::log, true)},
      {&op_info::sqrt, unary(saccade::sqrt, true)},
      {&op_info::rsqrt, unary(saccade::rsqrt, true)},
      {&op_info::abs, unary(saccade::abs)},
      {&op_info::sin, unary(saccade::sin)},
      {&op_info::cos, unary(saccade::cos)},
      {&op_info::tanh, unary(saccade::tanh)},
      {&op_info::sigmoid, unary(saccade::sigmoid)},
      {&op_info::relu, unary(saccade::relu)},
      {&op_info::gelu, unary(saccade::gelu)},
      {&op_info::gelu_grad, unary(saccade::gelu_grad)},
      {&op_info::silu, unary(saccade::silu)},
      {&op_info::swiglu, binary(saccade::swiglu)},
      {&op_info::clamp, on([](const Variable& a) { return saccade::clamp(a, -0.5, 0.5); })},
      {&op_info::where,
       [mask] {
         Variable a = leaf({2, 3}, 1), b = leaf({2, 3}, 2);
         return Run{saccade::where(mask, a, b), {a, b}};
       }},
      {&op_info::masked_fill, on([mask](const Variable& a) { return saccade::masked_fill(a, mask, 0.0); })},
      //
      {&op_info::sum, on([](const Variable& a) { return saccade::sum(a, {1}); })},
      {&op_info::mean, on([](const Variable& a) { return saccade::mean(a, {0}); })},
      {&op_info::max, on([](const Variable& a) { return saccade::max(a, 1).values; })},
      {&op_info::min, on([](const Variable& a) { return saccade::min(a); })},
      {&op_info::amax, on([](const Variable& a) { return saccade::amax(a, {1}); })},
      {&op_info::amin, on([](const Variable& a) { return saccade::amin(a, {0}); })},
      {&op_info::var, on([](const Variable& a) { return saccade::var(a, {1}); })},
      {&op_info::logsumexp, on([](const Variable& a) { return saccade::logsumexp(a, {1}); })},
      {&op_info::sum_to, on([](const Variable& a) {
         return saccade::sum_to(a, {1, 3});
       })},
      //
      {&op_info::reshape, on([](const Variable& a) {
         return saccade::reshape(a, {3, 2});
       })},
      {&op_info::view, on([](const Variable& a) { return saccade::view(a, {6}); })},
      {&op_info::flatten, on([](const Variable& a) { return saccade::flatten(a); })},
      {&op_info::squeeze, on([](const Variable& a) { return saccade::squeeze(a, 0); }, {1, 3})},
      {&op_info::unsqueeze, on([](const Variable& a) { return saccade::unsqueeze(a, 1); })},
      {&op_info::permute, on([](const Variable& a) {
         return saccade::permute(a, {1, 0});
       })},
      {&op_info::transpose, on([](const Variable& a) { return saccade::transpose(a, 0, 1); })},
      {&op_info::t, on([](const Variable& a) { return saccade::t(a); })},
      {&op_info::expand, on(
                             [](const Variable& a) {
                               return saccade::expand(a, {2, 3});
                             },
                             {1, 3})},
      {&op_info::narrow, on([](const Variable& a) { return saccade::narrow(a, 1, 1, 2); })},
      {&op_info::slice, on([](const Variable& a) { return saccade::slice(a, 1, 0, 3, 2); })},
      {&op_info::select, on([](const Variable& a) { return saccade::select(a, 0, 1); })},
      {&op_info::split, on([](const Variable& a) { return saccade::split(a, 2, 1)[0]; })},
      {&op_info::chunk, on([](const Variable& a) { return saccade::chunk(a, 2, 0)[1]; })},
      {&op_info::contiguous, on([](const Variable& a) { return saccade::contiguous(saccade::t(a)); })},
      {&op_info::to, on([](const Variable& a) { return a.to(DType::Float32); })},
      {&op_info::cat,
       [] {
         Variable a = leaf({2, 3}, 1), b = leaf({1, 3}, 2);
         return Run{saccade::cat({a, b}, 0), {a, b}};
       }},
      {&op_info::stack,
       [] {
         Variable a = leaf({2, 3}, 1), b = leaf({2, 3}, 2);
         return Run{saccade::stack({a, b}, 1), {a, b}};
       }},
      {&op_info::repeat, on([](const Variable& a) {
         return saccade::repeat(a, {2, 1});
       })},
      {&op_info::repeat_interleave,
       on([](const Variable& a) { return saccade::repeat_interleave(a, 2, 1); })},
      {&op_info::tril, on([](const Variable& a) { return saccade::tril(a); })},
      {&op_info::triu, on([](const Variable& a) { return saccade::triu(a, 1); })},
      //
      {&op_info::index_select, on([idx](const Variable& a) { return saccade::index_select(a, 1, idx); })},
      {&op_info::gather, on([](const Variable& a) {
         return saccade::gather(a, 1, ops::tensor({0, 2, 1, 1}, DType::Int64).reshape({2, 2}));
       })},
      {&op_info::scatter_add,
       [] {
         Variable a = leaf({2, 3}, 1), src = leaf({2, 2}, 2);
         return Run{saccade::scatter_add(a, 1, ops::tensor({0, 2, 1, 1}, DType::Int64).reshape({2, 2}), src),
                    {a, src}};
       }},
      {&op_info::index_add,
       [idx] {
         Variable a = leaf({2, 3}, 1), src = leaf({2, 3}, 2);
         return Run{saccade::index_add(a, 1, idx, src), {a, src}};
       }},
      {&op_info::embedding, on([idx](const Variable& w) { return saccade::embedding(w, idx); }, {4, 3})},
      //
      {&op_info::matmul,
       binary([](const Variable& a, const Variable& b) { return saccade::matmul(a, saccade::t(b)); })},
      {&op_info::bmm,
       [] {
         Variable a = leaf({2, 2, 3}, 1), b = leaf({2, 3, 2}, 2);
         return Run{saccade::bmm(a, b), {a, b}};
       }},
      {&op_info::mm,
       binary([](const Variable& a, const Variable& b) { return saccade::mm(a, saccade::t(b)); })},
      {&op_info::grouped_mm,
       [] {
         Variable a = leaf({5, 3}, 1), b = leaf({2, 3, 4}, 2);
         return Run{saccade::grouped_mm(a, b, {2, 5}), {a, b}};
       }},
      {&op_info::linear,
       [] {
         Variable x = leaf({2, 3}, 1), w = leaf({4, 3}, 2), b = leaf({4}, 3);
         return Run{saccade::linear(x, w, b), {x, w, b}};
       }},
      //
      {&op_info::softmax, on([](const Variable& a) { return saccade::softmax(a, -1); })},
      {&op_info::log_softmax, on([](const Variable& a) { return saccade::log_softmax(a, -1); })},
      {&op_info::masked_softmax, on([mask](const Variable& a) { return saccade::masked_softmax(a, mask); })},
      {&op_info::layer_norm, on([](const Variable& a) { return saccade::layer_norm(a, {3}); })},
      {&op_info::layer_norm_composed,
       on([](const Variable& a) { return saccade::layer_norm_composed(a, {3}); })},
      {&op_info::rms_norm, on([](const Variable& a) { return saccade::rms_norm(a, {3}); })},
      {&op_info::rms_norm_composed, on([](const Variable& a) { return saccade::rms_norm_composed(a, {3}); })},
      {&op_info::dropout, on([](const Variable& a) {
         Generator g(7);
         return saccade::dropout(a, 0.5, true, &g);
       })},
      {&op_info::gru_gates,
       [] {
         Variable gi = leaf({2, 6}, 1), gh = leaf({2, 6}, 2), h = leaf({2, 2}, 3);
         return Run{saccade::gru_gates(gi, gh, h), {gi, gh, h}};
       }},
      {&op_info::cross_entropy, on([](const Variable& a) {
         return saccade::cross_entropy(a, ops::tensor({2, 0}, DType::Int64));
       })},
      {&op_info::mse_loss,
       binary([](const Variable& a, const Variable& b) { return saccade::mse_loss(a, b); })},
      //
      {&op_info::conv2d,
       [] {
         Variable x = leaf({1, 2, 4, 4}, 1), w = leaf({3, 2, 3, 3}, 2);
         return Run{saccade::conv2d(x, w), {x, w}};
       }},
      {&op_info::conv2d_input_grad,
       [] {
         Variable g = leaf({1, 3, 2, 2}, 1), w = leaf({3, 2, 3, 3}, 2);
         return Run{saccade::conv2d_input_grad(g, w, {1, 2, 4, 4}, {1, 1}, {0, 0}), {g, w}};
       }},
      {&op_info::conv2d_weight_grad,
       [] {
         Variable x = leaf({1, 2, 4, 4}, 1), g = leaf({1, 3, 2, 2}, 2);
         return Run{saccade::conv2d_weight_grad(x, g, {3, 2, 3, 3}, {1, 1}, {0, 0}), {x, g}};
       }},
      {&op_info::max_pool2d, on(
                                 [](const Variable& x) {
                                   return saccade::max_pool2d(x, {2, 2});
                                 },
                                 {1, 1, 4, 4})},
      {&op_info::max_pool2d_backward,
       [] {
         ops::ValuesIndices r = ops::max_pool2d(rand64({1, 1, 4, 4}, 5), {2, 2});
         Variable g = leaf({1, 1, 2, 2}, 1);
         return Run{saccade::max_pool2d_backward(g, r.indices, {1, 1, 4, 4}), {g}};
       }},
      {&op_info::avg_pool2d, on(
                                 [](const Variable& x) {
                                   return saccade::avg_pool2d(x, {2, 2});
                                 },
                                 {1, 1, 4, 4})},
      {&op_info::avg_pool2d_backward,
       on(
           [](const Variable& g) {
             return saccade::avg_pool2d_backward(g, {1, 1, 4, 4}, {2, 2}, {2, 2}, {0, 0});
           },
           {1, 1, 2, 2})},
      //
      {&op_info::flash_attention,
       [] {
         Variable q = leaf({1, 2, 3, 4}, 1), k = leaf({1, 2, 5, 4}, 2), v = leaf({1, 2, 5, 4}, 3);
         return Run{saccade::flash_attention(q, k, v, ops::AttentionMask{}, 0.5), {q, k, v}};
       }},
      {&op_info::additive_attention_scores,
       [] {
         Variable q = leaf({1, 2, 4}, 1), k = leaf({1, 3, 4}, 2), w = leaf({4}, 3);
         return Run{saccade::additive_attention_scores(q, k, w), {q, k, w}};
       }},
      {&op_info::additive_scores_composed,
       [] {
         Variable q = leaf({1, 2, 4}, 1), k = leaf({1, 3, 4}, 2), w = leaf({4}, 3);
         return Run{saccade::additive_scores_composed(q, k, w), {q, k, w}};
       }},
      //
      {&op_info::rotary_embedding,
       on(
           [](const Variable& x) {
             ops::RotaryTables tab = ops::rotary_tables(
                 3, 4, 10000.0, x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32);
             return saccade::rotary_embedding(x, tab.cos, tab.sin, ops::RotaryStyle::Half);
           },
           {1, 1, 3, 4})},
  };
}

}  // namespace

TEST_CASE("op table: rows are unique and every rule names a row of kOpTable", "[autograd][op_table]") {
  const auto rows = rows_by_name();
  CHECK(rows.size() == std::size(kOpTable));  // no name twice
  // every op_info:: row a rule names is in kOpTable (a row defined but left out of it fails here)
  const std::regex named(R"(op_info::(\w+))");
  for (const char* f : kRuleFiles) {
    const std::string path = kSourceDir + "/autograd/functions/" + f + ".cpp";
    const std::string text = read_text(path);
    int scopes = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), named); it != std::sregex_iterator();
         ++it) {
      INFO(path << ": op_info::" << (*it)[1]);
      CHECK(rows.count((*it)[1]) == 1);
      ++scopes;
    }
    CHECK(scopes > 0);
    // no rule records by a string any more
    CHECK(text.find("make_result(\"") == std::string::npos);
    CHECK(text.find("check_defined(\"") == std::string::npos);
  }
  for (const OpInfo* r : kOpTable) {
    INFO(r->name);
    CHECK(r->cost != nullptr);
    CHECK(r->file != nullptr);
  }
}

TEST_CASE("op table: every public function of autograd/functions has a row", "[autograd][op_table]") {
  const auto rows = rows_by_name();
  // compositions of recorded ops with no scope of their own (each of their parts has a row)
  const std::set<std::string> compositions = {"attention_scores", "attention_values", "gru_gates_composed",
                                              "rotary_embedding_composed", "silu_grad_composed"};
  const std::regex declared(R"((?:^|\n)(?:Variable|VariableIndices|std::vector<Variable>) (\w+)\()");
  int functions = 0;
  for (const char* f : kRuleFiles) {
    const std::string path = kSourceDir + "/autograd/functions/" + f + ".h";
    const std::string text = read_text(path);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), declared); it != std::sregex_iterator();
         ++it) {
      const std::string name = (*it)[1];
      INFO(path << ": " << name);
      CHECK((rows.count(name) == 1 || compositions.count(name) == 1));
      ++functions;
    }
  }
  CHECK(functions > 80);
}

TEST_CASE("op table: running each row's rule records that row, and only rows", "[autograd][op_table]") {
  const auto rows = rows_by_name();
  std::set<const OpInfo*> covered;
  for (const auto& [row, run] : cases()) {
    INFO(row->name);
    covered.insert(row);
    profiler::Profile prof;
    Run r = run();
    // twice differentiable: a gradient built with create_graph can be differentiated again; a row marked
    // otherwise must refuse create_graph (check_once_differentiable)
    Variable loss = sum(mul(r.y, r.y));
    auto second = [&] {
      std::vector<Variable> g = grad({loss}, r.leaves, {}, true, true, true);
      Variable s;
      for (const Variable& gi : g)
        if (gi.defined() && gi.requires_grad()) s = s.defined() ? add(s, sum(gi)) : sum(gi);
      if (s.defined()) grad({s}, r.leaves, {}, std::nullopt, false, true);
    };
    if (row->twice_differentiable)
      CHECK_NOTHROW(second());
    else
      CHECK_THROWS_AS(second(), Error);
    prof.stop();
    bool recorded = false;
    for (const profiler::Event& e : prof.events()) {
      const std::string name = e.name, category = e.category;
      if (category != "forward" && category != "op_in_backward") continue;
      INFO("event " << name << " (" << category << ")");
      // the engine's parts and their sums, and recompute_backward's aliases, are its own rows
      CHECK((rows.count(name) == 1 || engine_rows().count(name) == 1));
      recorded = recorded || (category == "forward" && name == row->name);
    }
    CHECK(recorded == !row->composite);  // a composite's parts record themselves, never it
  }
  for (const OpInfo* r : kOpTable) {
    INFO(r->name << " has no case here: add one to cases()");
    CHECK(covered.count(r) == 1);
  }
}

TEST_CASE("op table: the autocast columns are what autocast does on the CPU",
          "[autograd][op_table][autocast]") {
  // float32 leaves: a Lower row runs in bfloat16, every other row stays float32; bfloat16 leaves: a Float32
  // row gives float32, every other row stays bfloat16 (composites are left out: their parts cast)
  for (DType leaves : {DType::Float32, DType::BFloat16}) {
    g_leaf_dtype = leaves;
    for (const auto& [row, run] : cases()) {
      if (row->composite || row == &op_info::to) continue;
      INFO(row->name << " on " << leaves << " leaves");
      AutocastGuard autocast(DType::BFloat16);
      const DType out = run().y.dtype();
      const AutocastPolicy p = row->autocast_cpu;
      if (leaves == DType::Float32)
        CHECK((out == DType::BFloat16) == (p == AutocastPolicy::Lower));
      else
        CHECK((out == DType::Float32) == (p == AutocastPolicy::Float32));
    }
  }
  g_leaf_dtype = DType::Float64;
}

TEST_CASE("op table: the engine's own nodes record rows of kEngineRows", "[autograd][op_table]") {
  const auto rows = rows_by_name(), engine = engine_rows();
  CHECK(engine.size() == std::size(kEngineRows));
  for (const OpInfo* r : kEngineRows) {
    INFO(r->name);
    CHECK(rows.count(r->name) == 0);  // no public op of that name
    CHECK(!r->composite);
  }
  // each engine file names its rows and records by no string
  for (const char* f : {"gradient_sum.cpp", "function.cpp", "checkpoint.cpp"}) {
    const std::string text = read_text(kSourceDir + "/autograd/" + f);
    INFO(f);
    CHECK(text.find("make_result(\"") == std::string::npos);
  }
  // the nodes: a checkpointed segment, a part view's gradient under create_graph (part_backward, then part
  // when differentiated again), a fused rule's recomputation under create_graph (alias)
  std::set<std::string> seen;
  auto collect = [&](profiler::Profile& prof) {
    for (const profiler::Event& e : prof.events())
      if (engine.count(e.name) == 1) seen.insert(e.name);
  };
  {
    profiler::Profile prof;
    Variable x = leaf({2, 3}, 1);
    Variable y = checkpoint([](const std::vector<Variable>& in) { return tanh(in[0]); }, {x});
    REQUIRE(y.grad_fn());
    CHECK(std::string(y.grad_fn()->name()) == op_info::checkpoint.name);
    sum(y).backward();
    prof.stop();
    collect(prof);
  }
  {
    profiler::Profile prof;
    Variable x = leaf({4, 3}, 2);
    std::vector<Variable> halves = split(x, 2, 0);
    Variable loss = add(sum(mul(halves[0], halves[0])), sum(mul(halves[1], halves[1])));
    std::vector<Variable> g = grad({loss}, {x}, {}, true, true, true);
    grad({sum(mul(g[0], g[0]))}, {x}, {}, std::nullopt, false, true);
    Variable z = leaf({2, 4}, 3), ln = layer_norm(z, {4});
    CHECK(grad({sum(mul(ln, ln))}, {z}, {}, true, true, true)[0].requires_grad());
    prof.stop();
    collect(prof);
  }
  CHECK(seen.count("checkpoint") == 1);
  CHECK(seen.count("part_backward") == 1);
  CHECK(seen.count("part") == 1);
  CHECK(seen.count("alias") == 1);
}

TEST_CASE("op table: a row's 16-bit columns are what the backends do with its kernel",
          "[autograd][op_table][half]") {
  // A row that names its forward's Kernel16 must route 16 bits as the backend it runs on does
  // (Backend::native_16bit, which Widening<> reads); the CUDA half runs where a GPU is.
  auto route = [](Device d, Kernel16 k) {
    return backend(d).native_16bit(k) ? HalfRoute::Native : HalfRoute::Widened;
  };
  int named = 0;
  for (const OpInfo* row : kOpTable) {
    if (!row->kernel16) continue;
    ++named;
    INFO(row->name);
    CHECK(row->half_cpu == route(Device::cpu(), *row->kernel16));
    if (cuda_is_available()) CHECK(row->half_cuda == route(Device::cuda(), *row->kernel16));
  }
  CHECK(named >= 13);  // softmax (3 rows), layer_norm, rms_norm, dropout, pooling (4), additive scores, ...
}

TEST_CASE("op table: autograd/README.md's rule index lists exactly the table's ops and files",
          "[autograd][op_table]") {
  const std::string text = read_text(kSourceDir + "/autograd/README.md");
  const size_t begin = text.find("## The rules: op → file → formula");
  REQUIRE(begin != std::string::npos);
  const size_t end = text.find("\n## ", begin + 1);
  std::istringstream table(text.substr(begin, end - begin));
  // | `add`, `sub` | elementwise.cpp | ... |
  const std::regex line(R"(^\| (.*?) \| ([a-z_]+\.cpp) \|)"), op(R"(`(?:Variable::)?(\w+)`)");
  std::set<std::pair<std::string, std::string>> readme, code;
  for (std::string l; std::getline(table, l);) {
    std::smatch m;
    if (!std::regex_search(l, m, line)) continue;
    const std::string ops_cell = m[1], file = m[2];
    for (auto it = std::sregex_iterator(ops_cell.begin(), ops_cell.end(), op); it != std::sregex_iterator();
         ++it)
      readme.insert({(*it)[1], file});
  }
  for (const OpInfo* r : kOpTable) code.insert({r->name, r->file});
  for (const auto& [name, file] : code) {
    INFO("in the table, not in the README: " << name << " (" << file << ")");
    CHECK(readme.count({name, file}) == 1);
  }
  for (const auto& [name, file] : readme) {
    INFO("in the README, not in the table: " << name << " (" << file << ")");
    CHECK(code.count({name, file}) == 1);
  }
}

TEST_CASE("op table: an OpScope's profiler range closes once, whether recorded, dropped or thrown through",
          "[autograd][op_table][profiler]") {
  profiler::Profile prof;
  const size_t open_before = profiler::detail::open_ops();
  Variable a = leaf({2, 3}, 1);
  Variable y = var(a, {1});                      // a composite: dropped
  REQUIRE_THROWS_AS(matmul(a, a), Error);        // threw: dropped
  std::vector<Variable> parts = split(a, 1, 0);  // one scope, two results
  CHECK(profiler::detail::open_ops() == open_before);
  prof.stop();
  int splits = 0, vars = 0, matmuls = 0;
  for (const profiler::Event& e : prof.events()) {
    splits += e.name == std::string("split");
    vars += e.name == std::string("var");
    matmuls += e.name == std::string("matmul");
  }
  CHECK(splits == 2);
  CHECK(vars == 0);
  CHECK(matmuls == 0);
  CHECK(y.defined());
}
