// Computes d/dx sum(x * x) at x = (1, 2, 3) through an installed saccade; prints the gradient.
#include <cstdio>

#include <saccade.h>

int main() {
  saccade::Variable x(saccade::ops::tensor({1, 2, 3}, saccade::DType::Float64), true);
  saccade::Variable y = saccade::sum(x * x);
  y.backward();
  auto g = x.grad().to_vector<double>();
  std::printf("grad %g %g %g\n", g[0], g[1], g[2]);
  return (g[0] == 2 && g[1] == 4 && g[2] == 6) ? 0 : 1;
}
