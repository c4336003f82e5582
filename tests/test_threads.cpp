// The thread-safety promise (README, "Threads"): two threads may train two independent models at once. Run
// under ThreadSanitizer with scripts/tsan (a -fsanitize=thread build of this binary).
#include <thread>

#include "tests/helpers.h"

using namespace saccade;

namespace {
// A few SGD steps of a small MLP on data from `gen` (dropout drawing from the default generator when
// `use_default` is set). Returns the final loss.
double train(Generator* gen, bool use_default, int steps) {
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::UnaryModule>>{
      std::make_shared<nn::Linear>(4, 8, true, gen), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Dropout>(0.1, use_default ? nullptr : gen),
      std::make_shared<nn::Linear>(8, 1, true, gen)});
  nn::SGD opt(model->parameters(), {.lr = 0.05});
  Tensor x = ops::randn({16, 4}, DType::Float32, Device::cpu(), gen);
  Tensor y = ops::sum(x, {1}, true);
  double last = 0;
  for (int i = 0; i < steps; ++i) {
    Variable loss = mse_loss(model->forward(Variable(x)), Variable(y));
    opt.zero_grad();
    loss.backward();
    opt.step();
    last = loss.item();
  }
  return last;
}
}  // namespace

TEST_CASE("threads: two independent models train at once, each as it would alone", "[threads]") {
  Generator g1(1), g2(2);
  const double alone1 = train(&g1, false, 30), alone2 = train(&g2, false, 30);
  Generator h1(1), h2(2);
  double r1 = 0, r2 = 0;
  std::thread t1([&] { r1 = train(&h1, false, 30); });
  std::thread t2([&] { r2 = train(&h2, false, 30); });
  t1.join();
  t2.join();
  CHECK(r1 == alone1);  // bit-identical: nothing leaks between the threads
  CHECK(r2 == alone2);
}

TEST_CASE("threads: the default generator loses no draws when shared", "[threads]") {
  manual_seed(11);
  const uint64_t start = default_generator().offset();
  constexpr int kDraws = 2000;
  auto draw = [] {
    for (int i = 0; i < kDraws; ++i) ops::rand({3});
  };
  std::thread a(draw), b(draw);
  a.join();
  b.join();
  CHECK(default_generator().offset() - start == uint64_t{2} * kDraws * 3);
  // and two models using it for dropout train together without a data race (TSan checks this)
  std::thread t1([] { train(nullptr, true, 5); });
  std::thread t2([] { train(nullptr, true, 5); });
  t1.join();
  t2.join();
}

TEST_CASE("threads: grad mode is per thread", "[threads]") {
  NoGradGuard guard;
  bool other = false;
  std::thread t([&] { other = grad_enabled(); });
  t.join();
  CHECK(other);
  CHECK(!grad_enabled());
}
