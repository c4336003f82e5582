// The profiler (profiler/profiler.h): what it records, the Chrome trace, FLOPs, memory, threads, bad input.
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "autograd/functions/attention.h"
#include "nn/linear.h"
#include "nn/optim.h"
#include "ops/creation.h"
#include "ops/threads.h"
#include "profiler/profiler.h"
#include "saccade.h"
#include "temp_dir.h"

using namespace saccade;
using profiler::Event;
using profiler::Profile;
using profiler::ProfileOptions;

namespace {

bool is_cat(const Event& e, const char* c) { return std::strcmp(e.category, c) == 0; }

// How many events named `name` of category `cat`.
int count(const std::vector<Event>& events, const std::string& name, const char* cat) {
  int n = 0;
  for (const Event& e : events) n += e.name == name && is_cat(e, cat);
  return n;
}

const Event* find(const std::vector<Event>& events, const std::string& name, const char* cat) {
  for (const Event& e : events)
    if (e.name == name && is_cat(e, cat)) return &e;
  return nullptr;
}

// A small graph: loss = mean(tanh(x @ w) * 2)
Variable small_graph(const Variable& x, const Variable& w) { return mean(tanh(matmul(x, w)) * 2.0); }

// A failure message when complete events ("X") of one thread overlap without nesting; "" when they nest.
// `tol` in the events' time unit.
template <class Ev>
std::string check_nesting(std::vector<Ev> evs, double tol) {
  std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) {
    return a.tid != b.tid ? a.tid < b.tid : a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  std::vector<Ev> stack;
  for (const Ev& e : evs) {
    while (!stack.empty() && (stack.back().tid != e.tid || stack.back().end <= e.start + tol))
      stack.pop_back();
    if (!stack.empty() && e.end > stack.back().end + tol)
      return fmt::format("thread {}: '{}' [{}, {}] overlaps '{}' [{}, {}]", e.tid, e.name, e.start, e.end,
                         stack.back().name, stack.back().start, stack.back().end);
    stack.push_back(e);
  }
  return "";
}

struct Span {
  int64_t tid;
  std::string name;
  double start, end;
};

}  // namespace

TEST_CASE("profiler: every op of a small graph appears once forward and once backward, linked",
          "[profiler]") {
  Variable x(ops::randn({4, 3}, DType::Float64), true), w(ops::randn({3, 2}, DType::Float64), true);
  Profile prof;
  small_graph(x, w).backward();
  prof.stop();
  const auto& ev = prof.events();
  const std::vector<std::pair<std::string, std::string>> ops = {{"matmul", "MatmulBackward"},
                                                                {"tanh", "TanhBackward"},
                                                                {"mul", "MulBackward"},
                                                                {"mean", "MeanBackward"}};
  for (const auto& [fwd, bwd] : ops) {
    INFO(fwd);
    REQUIRE(count(ev, fwd, "forward") == 1);
    REQUIRE(count(ev, bwd, "backward") == 1);
    const Event *f = find(ev, fwd, "forward"), *b = find(ev, bwd, "backward");
    CHECK(f->flow_out != 0);
    CHECK(b->flow_in == f->flow_out);  // the arrow from the forward op to its node
    CHECK(b->start_ns >= f->end_ns);
  }
  int forward = 0, backward = 0;
  for (const Event& e : ev) forward += is_cat(e, "forward"), backward += is_cat(e, "backward");
  CHECK(forward == 4);
  CHECK(backward == 4);
  CHECK(count(ev, "autograd::backward", "autograd") == 1);
  // nothing recorded once the profile stopped
  small_graph(x, w).backward();
  CHECK(prof.events().size() == ev.size());
}

TEST_CASE("profiler: FLOPs of GEMM (2mnk), conv2d and attention, bytes of elementwise ops", "[profiler]") {
  Profile prof({.with_flops = true});
  Variable a(ops::randn({5, 7}), true), b(ops::randn({7, 3}), true);
  Variable y = matmul(a, b);                                          // 2·5·3·7
  Variable yb = matmul(Variable(ops::randn({2, 5, 7})), b);           // batch 2
  Variable yl = linear(a, Variable(ops::randn({3, 7})), Variable());  // x (5, 7), weight (3, 7)
  Variable c =
      conv2d(Variable(ops::randn({1, 2, 5, 5})), Variable(ops::randn({4, 2, 3, 3})));  // (1, 4, 3, 3)
  Variable q(ops::randn({1, 2, 4, 8})), k(ops::randn({1, 2, 6, 8})), v(ops::randn({1, 2, 6, 5}));
  Variable att = flash_attention(q, k, v, ops::AttentionMask{}, 0.35);
  Variable s = add(y, 1.0);  // elementwise: reads 15 floats, writes 15
  sum(y).backward();
  prof.stop();
  const auto& ev = prof.events();
  std::vector<int64_t> mm;
  for (const Event& e : ev)
    if (e.name == std::string("matmul") && is_cat(e, "forward")) mm.push_back(e.flops);
  REQUIRE(mm.size() == 2);
  CHECK(mm[0] == 2 * 5 * 3 * 7);
  CHECK(mm[1] == 2 * 2 * 5 * 3 * 7);
  CHECK(find(ev, "linear", "forward")->flops == 2 * 5 * 3 * 7);
  CHECK(find(ev, "conv2d", "forward")->flops == 2 * (1 * 4 * 3 * 3) * (2 * 3 * 3));
  CHECK(find(ev, "flash_attention", "forward")->flops == 2 * 2 * 4 * 6 * 8 + 2 * 2 * 4 * 6 * 5);
  CHECK(find(ev, "add", "forward")->bytes == 2 * 15 * 4);
  CHECK(find(ev, "add", "forward")->flops == 0);
  CHECK(find(ev, "MatmulBackward", "backward")->flops == 2 * (2 * 5 * 3 * 7));
  const std::string table = prof.table("flops", 3);
  CHECK(table.find("matmul") != std::string::npos);
  CHECK(table.find("GFLOP/s") != std::string::npos);
  // header, rule, 3 rows, total
  CHECK(std::count(table.begin(), table.end(), '\n') == 6);
}

TEST_CASE("profiler: the Chrome trace parses, nests on every thread, and has arrows and a memory track",
          "[profiler]") {
  testing::TempDir dir("saccade_profiler");
  const std::string path = dir.file("trace.json");
  const int threads = get_num_threads();
  set_num_threads(2);  // the pool's tasks get a lane of their own
  {
    Profile prof({.record_shapes = true, .profile_memory = true, .with_flops = true, .trace_path = path});
    profiler::RecordFunction step("step");
    Variable x(ops::randn({256, 512}), true), w(ops::randn({512, 512}), true);
    Variable loss = mean(tanh(matmul(x, w)) * 2.0);
    loss.backward();
  }
  set_num_threads(threads);
  std::ifstream in(path);
  REQUIRE(in.good());
  nlohmann::json trace = nlohmann::json::parse(in);  // throws (fails the test) when not JSON
  std::vector<Span> spans;
  int flows_s = 0, flows_f = 0, counters = 0, names = 0;
  bool shapes = false;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") {
      spans.push_back({e["tid"].get<int64_t>(), e["name"], e["ts"].get<double>(),
                       e["ts"].get<double>() + e["dur"].get<double>()});
      if (e["name"] == "matmul" && e["args"].contains("input_shapes"))
        shapes = e["args"]["input_shapes"].get<std::string>().find("512") != std::string::npos;
    }
    flows_s += ph == "s";
    flows_f += ph == "f" && e["bp"] == "e";
    counters += ph == "C";
    names += ph == "M" && e["name"] == "thread_name";
  }
  CHECK(check_nesting(spans, 1e-3) == "");
  CHECK(flows_s == 4);
  CHECK(flows_f == 4);
  CHECK(counters > 0);
  CHECK(names >= 1);
  CHECK(shapes);
  CHECK(!std::filesystem::exists(path + ".partial"));
}

TEST_CASE("profiler: after a full training step the memory track is back at its start", "[profiler]") {
  auto model = std::make_shared<nn::Linear>(64, 32);
  nn::Adam opt(model->parameters(), {.lr = 1e-3});
  Variable x(ops::randn({16, 64}));
  auto train_step = [&] {
    opt.zero_grad();
    Variable loss = mean(tanh(model->forward(x)));
    loss.backward();
    opt.step();
  };
  train_step();  // the optimizer's state is made in its first step, and kept
  Profile prof({.profile_memory = true});
  train_step();
  prof.stop();
  int64_t level = 0, peak = 0;
  for (const auto& m : prof.memory_events()) {
    CHECK(std::string(m.device) == "cpu");
    level += m.delta;
    peak = std::max(peak, level);
  }
  CHECK(prof.memory_events().size() > 4);
  CHECK(peak > 0);
  CHECK(level == 0);
}

TEST_CASE("profiler: two threads train two models under one profile without mixing their events",
          "[profiler][threads]") {
  Profile prof;
  auto run = [](const char* range, bool conv) {
    profiler::RecordFunction r(range);
    for (int i = 0; i < 3; ++i) {
      Variable w(ops::randn({4, 2, 3, 3}), true), m(ops::randn({8, 8}), true);
      Variable loss = conv ? sum(conv2d(Variable(ops::randn({1, 2, 6, 6})), w)) : sum(matmul(m, m));
      loss.backward();
    }
  };
  std::thread a(run, "model A", false), b(run, "model B", true);
  a.join();
  b.join();
  prof.stop();
  const auto& ev = prof.events();
  const Event *ra = find(ev, "model A", "user"), *rb = find(ev, "model B", "user");
  REQUIRE(ra);
  REQUIRE(rb);
  REQUIRE(ra->tid != rb->tid);
  std::map<int, std::map<std::string, int>> by_thread;
  for (const Event& e : ev)
    if (is_cat(e, "forward") || is_cat(e, "backward")) {
      ++by_thread[e.tid][e.name];
      const Event* own = e.tid == ra->tid ? ra : rb;
      CHECK((e.tid == ra->tid || e.tid == rb->tid));
      CHECK((e.start_ns >= own->start_ns && e.end_ns <= own->end_ns));
    }
  CHECK(by_thread[ra->tid]["matmul"] == 3);
  CHECK(by_thread[ra->tid]["MatmulBackward"] == 3);
  CHECK(by_thread[ra->tid].count("conv2d") == 0);
  CHECK(by_thread[rb->tid]["conv2d"] == 3);
  CHECK(by_thread[rb->tid]["Conv2dBackward"] == 3);
  CHECK(by_thread[rb->tid].count("matmul") == 0);
  std::vector<Span> spans;
  for (const Event& e : ev) spans.push_back({e.tid, e.name, double(e.start_ns), double(e.end_ns)});
  CHECK(check_nesting(spans, 0) == "");
}

TEST_CASE("profiler: bad input", "[profiler]") {
  SECTION("an unwritable trace path is refused when the profile starts") {
    CHECK_THROWS_WITH(Profile({.trace_path = "/nonexistent_saccade_dir/trace.json"}),
                      Catch::Contains("cannot write the trace file '/nonexistent_saccade_dir/trace.json'"));
    CHECK(!profiler::is_active());
    Profile ok;  // nothing was left active
    CHECK(profiler::is_active());
  }
  SECTION("profiles do not nest") {
    Profile outer;
    CHECK_THROWS_WITH(Profile(), Catch::Contains("another profile is already active"));
    CHECK(profiler::is_active());  // the outer one goes on
    Variable x(ops::randn({2, 2}), true);
    sum(x).backward();
    outer.stop();
    CHECK(count(outer.events(), "sum", "forward") == 1);
  }
  SECTION("an unknown sort key") {
    Profile p;
    CHECK_THROWS_WITH(p.table("speed"), Catch::Contains("unknown sort_by 'speed'"));
  }
  SECTION("ranges and ops outside a profile are not recorded, nor ops that threw") {
    { profiler::RecordFunction before("before"); }
    Profile p;
    CHECK_THROWS(matmul(Variable(ops::randn({2, 3})), Variable(ops::randn({2, 3}))));
    Variable ok = matmul(Variable(ops::randn({2, 3})), Variable(ops::randn({3, 2})));
    p.stop();
    CHECK(find(p.events(), "before", "user") == nullptr);
    CHECK(count(p.events(), "matmul", "forward") == 1);
  }
}

TEST_CASE("profiler: op families for the summary", "[profiler]") {
  CHECK(std::string(profiler::family_of("matmul")) == "GEMM");
  CHECK(std::string(profiler::family_of("MatmulBackward")) == "GEMM");
  CHECK(std::string(profiler::family_of("FlashAttentionBackward")) == "attention");
  CHECK(std::string(profiler::family_of("max_pool2d")) == "convolution");
  CHECK(std::string(profiler::family_of("MaxPool2dBackward")) == "convolution");
  CHECK(std::string(profiler::family_of("tanh")) == "elementwise");
  CHECK(std::string(profiler::family_of("RmsNormBackward")) == "normalization");
  CHECK(std::string(profiler::family_of("rotary_embedding")) == "elementwise");
  CHECK(std::string(profiler::family_of("something new")) == "other");
}
