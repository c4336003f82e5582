// The training step that docs/tour.md follows through the code, as a program: a two-layer classifier
// p = softmax(W2 · tanh(W1 x)) on random data, trained with cross-entropy and Adam (the tour's "The step we
// follow"). The tour shows this file's lines between the two markers; scripts/check_tour fails when they
// differ. Exits 0 when the loss after 100 steps is below the first step's, 1 otherwise (CTest: tour_step).
// tour: begin
#include <cstdio>

#include "saccade.h"
using namespace saccade;

int main() {
  manual_seed(0);
  Variable x(ops::randn({64, 10}));          // 64 inputs of 10 features, no gradient
  Tensor target = ops::randint(0, 3, {64});  // one class of 3 for each input
  Variable W1(ops::mul(ops::randn({10, 32}), 0.3), /*requires_grad=*/true);
  Variable W2(ops::mul(ops::randn({32, 3}), 0.3), /*requires_grad=*/true);
  nn::Adam opt({W1, W2}, {.lr = 1e-2});

  double first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    Variable h = tanh(matmul(x, W1));               // (64, 32)
    Variable logits = matmul(h, W2);                // (64, 3)
    Variable loss = cross_entropy(logits, target);  // log-softmax inside
    opt.zero_grad();
    loss.backward();  // fills W1.grad() and W2.grad()
    opt.step();       // Adam updates W1 and W2 in place
    last = loss.item();
    if (step == 0) first = last;
  }
  std::printf("loss: %.4f at the first step, %.4f after 100\n", first, last);
  return last < first ? 0 : 1;
}
// tour: end
