// The fuzz test: a seeded stream of valid and invalid calls over every public op, Tensor method, autograd
// function and nn module (tests/fuzz/cases.cpp), each run in a forked child (tests/fuzz/harness.h). Every
// call must return a correct result or throw a saccade::Error that names the op; never another exception,
// never a crash or a hang.
//
// CI runs a few thousand cases (fewer under the sanitizers, which are slower). For a long run:
//   SACCADE_FUZZ_CASES=100000 SACCADE_FUZZ_SEED=1 build/tests/saccade_tests "[fuzz]"
// It prints the totals and every failing case (number, op, message or signal); rerun one case with
// SACCADE_FUZZ_FIRST=<number> SACCADE_FUZZ_CASES=1.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>

#include "tests/fuzz/cases.h"
#include "tests/helpers.h"

using namespace saccade;

namespace {
int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}
#if defined(SACCADE_ASAN)
constexpr int64_t kDefaultCases = 1500;
#else
constexpr int64_t kDefaultCases = 4000;
#endif
}  // namespace

TEST_CASE("fuzz: every public call returns a result or a saccade::Error naming the op", "[fuzz]") {
  const int64_t count = env_int("SACCADE_FUZZ_CASES", kDefaultCases);
  const int64_t first = env_int("SACCADE_FUZZ_FIRST", 0);
  const auto seed = static_cast<uint64_t>(env_int("SACCADE_FUZZ_SEED", 20261123));
  fuzz::Report r = fuzz::run_forked(fuzz::run_case, first, count, seed);
  std::cout << "fuzz (seed " << seed << ", " << fuzz::num_case_kinds() << " kinds of call): " << r.summary()
            << "\n";
  for (const auto& f : r.failures)
    std::cout << "  case " << f.index << " [" << fuzz::outcome_name(f.outcome) << "] " << f.op << ": "
              << f.detail << "\n";
  CHECK(r.count(fuzz::Outcome::Crash) == 0);
  CHECK(r.count(fuzz::Outcome::Hang) == 0);
  CHECK(r.count(fuzz::Outcome::Foreign) == 0);
  CHECK(r.count(fuzz::Outcome::Wrong) == 0);
  CHECK(r.count(fuzz::Outcome::Misnamed) == 0);
  // the stream exercises both sides: enough calls succeed and enough are refused
  CHECK(r.count(fuzz::Outcome::Ok) > count / 10);
  CHECK(r.count(fuzz::Outcome::Error) > count / 10);
}

TEST_CASE("fuzz harness: a crash, a foreign exception and a misnamed error are reported, not fatal",
          "[fuzz]") {
  fuzz::CaseFn body = [](int64_t i, uint64_t, fuzz::CaseContext& ctx) {
    ctx.set_op("op" + std::to_string(i));
    if (i == 1) std::abort();
    if (i == 2) throw std::length_error("vector");
    if (i == 3) throw Error("other: bad");
    if (i == 4) throw Error("op4: bad");
  };
  fuzz::Report r = fuzz::run_forked(body, 0, 6, 0);
  CHECK(r.count(fuzz::Outcome::Ok) == 2);
  CHECK(r.count(fuzz::Outcome::Crash) == 1);
  CHECK(r.count(fuzz::Outcome::Foreign) == 1);
  CHECK(r.count(fuzz::Outcome::Misnamed) == 1);
  CHECK(r.count(fuzz::Outcome::Error) == 1);
  REQUIRE(r.failures.size() == 3);
  CHECK(r.failures[0].index == 1);
  CHECK(r.failures[0].op == "op1");
}

// ---- issue #21: an undefined argument is reported by the function the user called ----

namespace {
// A Tensor argument travels as a Variable in the table below; an undefined one becomes Tensor().
Tensor tensor_arg(const Variable& v) { return v.defined() ? v.data() : Tensor(); }

struct Arg {
  int position;  // in the function's signature, from 1
  Variable valid;
  bool is_tensor = false;  // passed as tensor_arg(v)
};
struct ArgCase {
  std::string op;
  std::vector<Arg> args;
  std::function<void(const std::vector<Variable>&)> call;
};

std::vector<ArgCase> arg_cases() {
  auto x = [](const Shape& s, uint64_t seed = 1) { return Variable(testing::rand64(s, seed), true); };
  auto v = [](int position, Variable valid) { return Arg{position, std::move(valid)}; };
  auto t = [](int position, Tensor valid) { return Arg{position, Variable(std::move(valid)), true}; };
  const Tensor idx = ops::from_vector(std::vector<int64_t>{1, 0}, {2});
  const Tensor idx2 = ops::from_vector(std::vector<int64_t>{1, 0, 1, 0, 1, 0}, {2, 3});
  const Tensor mask = ops::gt(testing::rand64({2, 3}, 9), 0.0);
  const Tensor target = ops::from_vector(std::vector<int64_t>{2, 0}, {2});
  using V = const std::vector<Variable>&;
  const std::vector<Arg> a1{v(1, x({2, 3}))}, ab{v(1, x({2, 3})), v(2, x({2, 3}, 2))};
  std::vector<ArgCase> cs = {
      {"add", ab, [](V a) { add(a[0], a[1]); }},
      {"sub", ab, [](V a) { sub(a[0], a[1]); }},
      {"mul", ab, [](V a) { mul(a[0], a[1]); }},
      {"div", ab, [](V a) { saccade::div(a[0], a[1]); }},
      {"pow", ab, [](V a) { saccade::pow(a[0], a[1]); }},
      {"maximum", ab, [](V a) { maximum(a[0], a[1]); }},
      {"minimum", ab, [](V a) { minimum(a[0], a[1]); }},
      {"add", a1, [](V a) { add(a[0], 2.0); }},
      {"sub", a1, [](V a) { sub(a[0], 2.0); }},
      {"mul", a1, [](V a) { mul(a[0], 2.0); }},
      {"div", a1, [](V a) { saccade::div(a[0], 2.0); }},
      {"rsub", a1, [](V a) { rsub(a[0], 2.0); }},
      {"rdiv", a1, [](V a) { rdiv(a[0], 2.0); }},
      {"pow", a1, [](V a) { saccade::pow(a[0], 2.0); }},
      {"neg", a1, [](V a) { neg(a[0]); }},
      {"exp", a1, [](V a) { saccade::exp(a[0]); }},
      {"log", a1, [](V a) { saccade::log(a[0]); }},
      {"sqrt", a1, [](V a) { saccade::sqrt(a[0]); }},
      {"rsqrt", a1, [](V a) { rsqrt(a[0]); }},
      {"abs", a1, [](V a) { saccade::abs(a[0]); }},
      {"sin", a1, [](V a) { saccade::sin(a[0]); }},
      {"cos", a1, [](V a) { saccade::cos(a[0]); }},
      {"tanh", a1, [](V a) { saccade::tanh(a[0]); }},
      {"sigmoid", a1, [](V a) { sigmoid(a[0]); }},
      {"relu", a1, [](V a) { relu(a[0]); }},
      {"gelu", a1, [](V a) { gelu(a[0]); }},
      {"clamp", a1, [](V a) { clamp(a[0], 0.0, 1.0); }},
      {"where",
       {t(1, mask), v(2, x({2, 3})), v(3, x({2, 3}, 2))},
       [](V a) { where(tensor_arg(a[0]), a[1], a[2]); }},
      {"masked_fill", {v(1, x({2, 3})), t(2, mask)}, [](V a) { masked_fill(a[0], tensor_arg(a[1]), 0.0); }},
      {"index_select", {v(1, x({2, 3})), t(3, idx)}, [](V a) { index_select(a[0], 0, tensor_arg(a[1])); }},
      {"gather", {v(1, x({2, 3})), t(3, idx2)}, [](V a) { gather(a[0], 0, tensor_arg(a[1])); }},
      {"scatter_add",
       {v(1, x({2, 3})), t(3, idx2), v(4, x({2, 3}, 2))},
       [](V a) { scatter_add(a[0], 0, tensor_arg(a[1]), a[2]); }},
      {"index_add",
       {v(1, x({2, 3})), t(3, idx), v(4, x({2, 3}, 2))},
       [](V a) { index_add(a[0], 0, tensor_arg(a[1]), a[2]); }},
      {"embedding", {v(1, x({4, 3})), t(2, idx)}, [](V a) { embedding(a[0], tensor_arg(a[1])); }},
      {"matmul", {v(1, x({2, 3})), v(2, x({3, 2}))}, [](V a) { matmul(a[0], a[1]); }},
      {"mm", {v(1, x({2, 3})), v(2, x({3, 2}))}, [](V a) { mm(a[0], a[1]); }},
      {"bmm", {v(1, x({1, 2, 3})), v(2, x({1, 3, 2}))}, [](V a) { bmm(a[0], a[1]); }},
      {"linear", {v(1, x({2, 3})), v(2, x({4, 3}))}, [](V a) { linear(a[0], a[1]); }},
      {"conv2d", {v(1, x({1, 1, 3, 3})), v(2, x({1, 1, 2, 2}))}, [](V a) { conv2d(a[0], a[1]); }},
      {"max_pool2d",
       {v(1, x({1, 1, 2, 2}))},
       [](V a) {
         max_pool2d(a[0], {2, 2});
       }},
      {"avg_pool2d",
       {v(1, x({1, 1, 2, 2}))},
       [](V a) {
         avg_pool2d(a[0], {2, 2});
       }},
      {"softmax", a1, [](V a) { softmax(a[0], -1); }},
      {"log_softmax", a1, [](V a) { log_softmax(a[0], -1); }},
      {"masked_softmax", a1, [](V a) { masked_softmax(a[0], Tensor()); }},
      {"layer_norm", a1, [](V a) { layer_norm(a[0], {3}); }},
      {"dropout", a1, [](V a) { dropout(a[0], 0.5); }},
      {"cross_entropy", {v(1, x({2, 3})), t(2, target)}, [](V a) { cross_entropy(a[0], tensor_arg(a[1])); }},
      {"mse_loss", ab, [](V a) { mse_loss(a[0], a[1]); }},
      {"sum", a1, [](V a) { sum(a[0]); }},
      {"sum", a1, [](V a) { sum(a[0], {0}); }},
      {"mean", a1, [](V a) { mean(a[0]); }},
      {"mean", a1, [](V a) { mean(a[0], {0}); }},
      {"max", a1, [](V a) { saccade::max(a[0]); }},
      {"min", a1, [](V a) { saccade::min(a[0]); }},
      {"max", a1, [](V a) { saccade::max(a[0], 0); }},
      {"min", a1, [](V a) { saccade::min(a[0], 0); }},
      {"amax", a1, [](V a) { amax(a[0], {0}); }},
      {"amin", a1, [](V a) { amin(a[0], {0}); }},
      {"var", a1, [](V a) { var(a[0], {0}); }},
      {"logsumexp", a1, [](V a) { logsumexp(a[0], {0}); }},
      {"reshape", a1, [](V a) { reshape(a[0], {-1}); }},
      {"view", a1, [](V a) { view(a[0], {-1}); }},
      {"permute", a1, [](V a) { permute(a[0], {1, 0}); }},
      {"transpose", a1, [](V a) { transpose(a[0], 0, 1); }},
      {"t", a1, [](V a) { saccade::t(a[0]); }},
      {"squeeze", a1, [](V a) { squeeze(a[0]); }},
      {"squeeze", a1, [](V a) { squeeze(a[0], 0); }},
      {"unsqueeze", a1, [](V a) { unsqueeze(a[0], 0); }},
      {"expand", a1, [](V a) { expand(a[0], {2, 2, 3}); }},
      {"flatten", a1, [](V a) { flatten(a[0]); }},
      {"narrow", a1, [](V a) { narrow(a[0], 0, 0, 1); }},
      {"slice", a1, [](V a) { slice(a[0], 0, 0, 1); }},
      {"select", a1, [](V a) { select(a[0], 0, 0); }},
      {"contiguous", a1, [](V a) { contiguous(a[0]); }},
      {"split", a1, [](V a) { split(a[0], 1); }},
      {"split", a1, [](V a) { split(a[0], std::vector<int64_t>{1, 1}); }},
      {"chunk", a1, [](V a) { chunk(a[0], 2); }},
      {"repeat", a1, [](V a) { repeat(a[0], {1, 2}); }},
      {"repeat_interleave", a1, [](V a) { repeat_interleave(a[0], 2, 0); }},
      {"tril", a1, [](V a) { tril(a[0]); }},
      {"triu", a1, [](V a) { triu(a[0]); }},
      {"flash_attention",
       {v(1, x({1, 2, 3})), v(2, x({1, 4, 3}, 2)), v(3, x({1, 4, 3}, 3))},
       [](V a) { flash_attention(a[0], a[1], a[2], ops::AttentionMask{}, 1.0); }},
      {"additive_attention_scores",
       {v(1, x({1, 2, 3})), v(2, x({1, 4, 3}, 2)), v(3, x({3}, 3))},
       [](V a) { additive_attention_scores(a[0], a[1], a[2]); }},
      {"additive_scores_composed",
       {v(1, x({1, 2, 3})), v(2, x({1, 4, 3}, 2)), v(3, x({3}, 3))},
       [](V a) { nn::additive_scores_composed(a[0], a[1], a[2]); }},
      {"scaled_dot_product_attention",
       {v(1, x({1, 2, 3})), v(2, x({1, 4, 3}, 2)), v(3, x({1, 4, 3}, 3))},
       [](V a) { nn::scaled_dot_product_attention(a[0], a[1], a[2]); }},
      {"attend_from_scores",
       {v(1, x({1, 2, 4})), v(2, x({1, 4, 3}, 2))},
       [](V a) { nn::attend_from_scores(a[0], a[1]); }},
  };
  return cs;
}
}  // namespace

TEST_CASE("every saccade:: function names itself and the argument for an undefined Variable or tensor",
          "[fuzz][robust]") {
  for (const ArgCase& c : arg_cases()) {
    std::vector<Variable> valid;
    for (const Arg& a : c.args) valid.push_back(a.valid);
    INFO(c.op);
    REQUIRE_NOTHROW(c.call(valid));
    for (size_t i = 0; i < c.args.size(); ++i) {
      const Arg& a = c.args[i];
      const std::string want = fmt::format("{}: got an undefined {} (argument {})", c.op,
                                           a.is_tensor ? "tensor" : "Variable", a.position);
      INFO(want);
      std::vector<Variable> bad = valid;
      bad[i] = Variable();
      REQUIRE_THROWS_SACCADE(c.call(bad), want);
      if (!a.is_tensor) {  // a Variable holding an undefined tensor is as undefined
        bad[i] = Variable(Tensor());
        REQUIRE_THROWS_SACCADE(c.call(bad), want);
      }
    }
  }
  const Variable a(testing::rand64({2, 3}), true);
  REQUIRE_THROWS_SACCADE(cat({a, Variable()}, 0), "cat: got an undefined Variable (argument 1, element 1)");
  REQUIRE_THROWS_SACCADE(stack({Variable(), a}, 0),
                         "stack: got an undefined Variable (argument 1, element 0)");
  // through an operator, the name is the function's
  REQUIRE_THROWS_SACCADE(a + Variable(), "add: got an undefined Variable (argument 2)");
}

// ---- issue #21: absurd sizes give a saccade::Error naming the op, at once ----

// NOTE: AddressSanitizer reserves terabytes of address space for its shadow memory, so an address-space
// limit cannot be set under it; these cases run in the Release build.
#if !defined(SACCADE_ASAN)
namespace {
// Runs f in a forked child limited to the address space it has now plus `headroom` bytes, for at most
// `timeout_s` seconds: a request that the capacity check lets through (less than the machine's memory) then
// fails in the allocator, as on a machine with less memory free than installed. Returns "error: <message>"
// for a saccade::Error, "foreign: <what>" for another exception, "ok", or "signal <n>" (a crash, or SIGALRM
// at the timeout).
std::string run_with_memory_limit(const std::function<void()>& f, int64_t headroom, unsigned timeout_s = 20) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    for (int sig : {SIGSEGV, SIGABRT, SIGFPE, SIGILL, SIGBUS}) signal(sig, SIG_DFL);
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t limit = static_cast<rlim_t>(pages * sysconf(_SC_PAGE_SIZE) + headroom);
    rlimit rl{limit, limit};
    setrlimit(RLIMIT_AS, &rl);
    alarm(timeout_s);
    std::string out = "ok";
    try {
      f();
    } catch (const Error& e) {
      out = std::string("error: ") + e.what();
    } catch (const std::exception& e) {
      out = std::string("foreign: ") + typeid(e).name() + ": " + e.what();
    }
    if (write(fds[1], out.data(), out.size()) < 0) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return out;
}

// Elements of `bytes_each` bytes that fill a quarter of the machine's memory: passes the capacity check
int64_t quarter_of_memory(int64_t bytes_each) {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE) / 4 / bytes_each;
}
}  // namespace

TEST_CASE("an allocation that fails names the op that asked (linspace eye repeat repeat_interleave)",
          "[fuzz][robust]") {
  using Catch::Contains;
  const int64_t headroom = int64_t{256} << 20;
  const int64_t n = quarter_of_memory(8);  // float64 elements
  CHECK_THAT(run_with_memory_limit([&] { ops::linspace(0, 1, n, DType::Float64); }, headroom),
             Contains("error: linspace > allocate: out of memory"));
  const auto side = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
  CHECK_THAT(run_with_memory_limit([&] { ops::eye(side, side, DType::Float64); }, headroom),
             Contains("error: eye > allocate: out of memory"));
  // repeat used to make a list of n copies of the input (std::bad_alloc); now one checked allocation
  const Tensor one = ops::ones({1}, DType::Float64);
  CHECK_THAT(run_with_memory_limit([&] { ops::repeat(one, {n}); }, headroom),
             Contains("error: repeat > allocate: out of memory"));
  CHECK_THAT(run_with_memory_limit(
                 [&] {
                   ops::repeat(one.view({1, 1}), {2, n / 2});
                 },
                 headroom),
             Contains("error: repeat > allocate: out of memory"));
  CHECK_THAT(run_with_memory_limit([&] { ops::repeat_interleave(one, n, 0); }, headroom),
             Contains("error: repeat_interleave > allocate: out of memory"));
}

TEST_CASE("GRU with absurdly many layers is refused at once, before any layer is made", "[fuzz][robust]") {
  // each layer is small, so no single allocation is refused: the whole was made layer by layer for seconds
  nn::GRUOptions o;
  o.num_layers = int64_t{1} << 40;
  CHECK_THAT(run_with_memory_limit([&] { nn::GRU(1, 1, o); }, int64_t{512} << 20, 10),
             Catch::Contains("error: GRU: cannot allocate"));
  o.num_layers = std::numeric_limits<int64_t>::max();
  CHECK_THAT(run_with_memory_limit([&] { nn::GRU(1, 1, o); }, int64_t{512} << 20, 10),
             Catch::Contains("error: GRU: size too large"));
}
#endif

TEST_CASE("repeat and repeat_interleave with absurd totals: a saccade::Error naming the op",
          "[fuzz][robust]") {
  const Tensor one = ops::ones({1});
  REQUIRE_THROWS_SACCADE(ops::repeat(one, {int64_t{1} << 40}), "repeat: cannot allocate");
  REQUIRE_THROWS_SACCADE(ops::repeat(one, {int64_t{1} << 31, int64_t{1} << 20}), "repeat: cannot allocate");
  REQUIRE_THROWS_SACCADE(ops::repeat(one, {int64_t{1} << 62, 4}), "repeat: size too large");
  REQUIRE_THROWS_SACCADE(ops::repeat_interleave(one, int64_t{1} << 40, 0),
                         "repeat_interleave: cannot allocate");
  // no element, but the repeated dim alone overflows
  REQUIRE_THROWS_SACCADE(ops::repeat_interleave(ops::ones({0, 4}), int64_t{1} << 62, 1),
                         "repeat_interleave: size too large");
  // 2^28 copies of one byte (256 MiB): the list of 2^28 tensors it was made from took 40 GiB (std::bad_alloc)
  const int64_t r = int64_t{1} << 28;
  Tensor big = ops::repeat(ops::ones({1}, DType::Bool), {r});
  REQUIRE(big.shape() == Shape{r});
  REQUIRE(big.narrow(0, 0, 2).to_vector<double>() == std::vector<double>{1, 1});
  REQUIRE(big.narrow(0, r - 2, 2).to_vector<double>() == std::vector<double>{1, 1});
  // the doubling copies tile every dim, up to kMaxDims, as torch.Tensor.repeat
  Tensor x = ops::arange(0, 6, 1, DType::Float32).view({1, 2, 1, 3, 1, 1, 1, 1});
  Tensor y = ops::repeat(x, {1, 3, 1, 5, 2, 1, 1, 1});
  REQUIRE(y.shape() == Shape{1, 6, 1, 15, 2, 1, 1, 1});
  auto yv = y.to_vector<float>();
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 15; ++j)
      for (int64_t k = 0; k < 2; ++k)
        REQUIRE(yv[static_cast<size_t>((i * 15 + j) * 2 + k)] == (i % 2) * 3 + j % 3);
}

TEST_CASE("GRUCell GRU LSTMCell: parameters that cannot fit are refused before anything is allocated",
          "[fuzz][robust]") {
  // weight_ih (3 * 2^20, 16) fits (192 MiB) and used to be allocated and drawn before weight_hh (3 * 2^20,
  // 2^20: 12 TiB) was refused
  const int64_t H = int64_t{1} << 20;
  const int64_t before = memory_stats().alloc_count;
  REQUIRE_THROWS_SACCADE(nn::GRUCell(16, H), "GRUCell: cannot allocate");
  REQUIRE_THROWS_SACCADE(nn::LSTMCell(16, H), "LSTMCell: cannot allocate");
  REQUIRE_THROWS_SACCADE(nn::GRU(16, H), "GRU: cannot allocate");
  REQUIRE(memory_stats().alloc_count == before);  // nothing was allocated
  REQUIRE_THROWS_SACCADE(nn::LSTMCell(int64_t{1} << 62, 4), "LSTMCell: size too large");
  nn::GRUOptions o;  // sizes that fit still work
  o.num_layers = 2;
  o.bidirectional = true;
  nn::GRU ok(3, 4, o);
  REQUIRE(ok.parameters().size() == 16);
}
