// The engine's helpers on their own (autograd/gradient_sum.h, autograd/grad_capture.h): how the gradients
// meeting at a node are summed, and what saccade::grad's capture keeps.
#include "autograd/grad_capture.h"
#include "autograd/gradient_sum.h"
#include "helpers.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::rand64;

namespace {

// A copy of t's values, to check later that t was not written.
Tensor snapshot(const Tensor& t) { return t.contiguous().clone(); }

}  // namespace

TEST_CASE("gradient sum: adds whole gradients without writing any it was handed", "[autograd][engine]") {
  NoGradGuard no_grad;  // as the engine runs rules without create_graph
  Variable g1(rand64({3, 4}, 1)), g2(rand64({3, 4}, 2)), g3(rand64({3, 4}, 3));
  const Tensor s1 = snapshot(g1.data()), s2 = snapshot(g2.data()), s3 = snapshot(g3.data());
  detail::GradientSum acc;
  CHECK_FALSE(acc.take().defined());  // nothing added: undefined
  acc.add(g1);
  acc.add(g2);  // the first add that allocates: the sum is the engine's from here on
  acc.add(g3);  // in place
  Variable total = acc.take();
  REQUIRE(allclose(total.data(), ops::add(ops::add(s1, s2), s3)));
  for (const auto& [g, s] : std::vector<std::pair<Variable, Tensor>>{{g1, s1}, {g2, s2}, {g3, s3}}) {
    REQUIRE(allclose(g.data(), s, 0, 0));  // a rule may hand one tensor to several inputs
    CHECK(total.data().storage() != g.data().storage());
  }
  // a lone gradient is handed on as it is, without a copy
  detail::GradientSum one;
  one.add(g1);
  CHECK(one.take().data().storage() == g1.data().storage());
}

TEST_CASE("gradient sum: a part view's gradient goes into its part of the input's", "[autograd][engine]") {
  Variable x(rand64({4, 3}), true);
  Variable row = select(x, 0, 2), cols = narrow(x, 1, 1, 2);
  REQUIRE(row.grad_fn()->part());
  const Node& to = *x.gradient_edge();
  Variable g_row(rand64({3}, 5)), g_cols(rand64({4, 2}, 6)), g_whole(rand64({4, 3}, 7));
  const Tensor s_whole = snapshot(g_whole.data());
  Tensor want = s_whole.clone();
  Tensor want_row = want.select(0, 2), want_cols = want.narrow(1, 1, 2);
  ops::add_(want_row, g_row.data());
  ops::add_(want_cols, g_cols.data());
  // a whole gradient first (not the engine's: copied before the parts go in), then two parts
  NoGradGuard no_grad;
  detail::GradientSum acc;
  acc.add(g_whole);
  acc.add(g_row, *row.grad_fn(), to);
  acc.add(g_cols, *cols.grad_fn(), to);
  REQUIRE(allclose(acc.take().data(), want));
  REQUIRE(allclose(g_whole.data(), s_whole, 0, 0));
  // parts alone start from zeros of the input's shape
  detail::GradientSum parts;
  parts.add(g_row, *row.grad_fn(), to);
  Tensor only_row = ops::zeros({4, 3}, DType::Float64);
  Tensor at = only_row.select(0, 2);
  ops::add_(at, g_row.data());
  REQUIRE(allclose(parts.take().data(), only_row));
}

TEST_CASE("gradient sum: under create_graph every sum is recorded", "[autograd][engine]") {
  Variable x(rand64({4, 3}), true);
  Variable row = select(x, 0, 1);
  Variable a = x * 2.0, b = exp(x), r = sin(row);  // gradients that carry a graph back to x
  AutoGradMode record(true);
  detail::GradientSum acc;
  acc.add(a);
  acc.add(b);
  acc.add(r, *row.grad_fn(), *x.gradient_edge());
  Variable total = acc.take();
  REQUIRE(total.grad_fn());
  // d/dx sum(2x + e^x + sin(x[1]) placed in row 1) = 2 + e^x + cos(x[1]) in row 1
  Tensor want = ops::add(ops::full({4, 3}, 2.0, DType::Float64), ops::exp(x.data()));
  Tensor want_row = want.select(0, 1);
  ops::add_(want_row, ops::cos(x.data().select(0, 1)));
  REQUIRE(allclose(grad({sum(total)}, {x})[0].data(), want));
}

TEST_CASE("grad capture: keeps what reaches the asked-for nodes, and nests", "[autograd][engine]") {
  Variable x(rand64({3}), true), w(rand64({3}, 2), true);
  Variable h = x * w, y = exp(h), z = sin(w);
  const std::vector<std::shared_ptr<Node>> roots{y.grad_fn()}, wanted{h.grad_fn(), h.grad_fn()};
  CHECK(detail::GradCapture::current() == nullptr);
  detail::GradCapture capture(roots, wanted);
  CHECK(detail::GradCapture::current() == &capture);
  CHECK(capture.active());
  CHECK(capture.must_run(*y.grad_fn()));        // leads to h
  CHECK_FALSE(capture.must_run(*h.grad_fn()));  // leads to no asked-for node
  Variable g1(rand64({3}, 3)), g2(rand64({3}, 4));
  capture.offer(h.grad_fn().get(), g1);
  capture.offer(h.grad_fn().get(), g2);  // summed
  capture.offer(z.grad_fn().get(), g1);  // not asked for: dropped
  std::vector<Variable> got = capture.results();
  REQUIRE(got.size() == 2);  // one per asked-for node, repeats included
  REQUIRE(allclose(got[0].data(), ops::add(g1.data(), g2.data())));
  REQUIRE(allclose(got[1].data(), got[0].data(), 0, 0));
  {
    const std::vector<std::shared_ptr<Node>> none;
    detail::GradCapture inner({z.grad_fn()}, none);  // a backward() pass: captures nothing
    CHECK(detail::GradCapture::current() == &inner);
    CHECK_FALSE(inner.active());
    CHECK(inner.must_run(*z.grad_fn()));
    CHECK(inner.results().empty());
  }
  CHECK(detail::GradCapture::current() == &capture);
}
