#include "examples/image_caption/encoder.h"

#include "autograd/functions/conv.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/shape.h"
#include "core/error.h"

namespace saccade::examples {

GridEncoder::GridEncoder(int64_t conv1_channels, int64_t conv2_channels, int64_t grid, int64_t d_model,
                         Generator* gen)
    : Module("GridEncoder"), grid_(grid), d_model_(d_model) {
  SACCADE_CHECK(grid == 7 || grid == 14, "GridEncoder: grid must be 7 or 14, got {}", grid);
  conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(1, conv1_channels, 3, 1, 1, true, gen));
  conv2 = register_module("conv2",
                          std::make_shared<nn::Conv2d>(conv1_channels, conv2_channels, 3, 1, 1, true, gen));
  proj = register_module("proj", std::make_shared<nn::Linear>(conv2_channels, d_model, true, gen));
  pos = register_module("pos", std::make_shared<nn::PositionalEncoding2D>(d_model, 0.0, grid, grid, gen));
}

Variable GridEncoder::forward(const Tensor& images) {
  // images: (B, 1, 56, 56) -> (B, c1, 28, 28) -> (B, c2, G, G) -> (B, G, G, d) -> (B, G*G, d)
  const int64_t B = images.size(0), pool2 = 28 / grid_;
  // relu(max_pool(x)) = max_pool(relu(x)) (relu is monotone): pooling first runs relu on 4x (16x) fewer
  // elements.
  Variable x = relu(max_pool2d(conv1->forward(images), {2, 2}));
  x = relu(max_pool2d(conv2->forward(x), {pool2, pool2}));
  x = permute(x, {0, 2, 3, 1});  // channels last: (B, G, G, c2)
  x = pos->forward(relu(proj->forward(x)));
  return reshape(x, {B, grid_ * grid_, d_model_});
}

}  // namespace saccade::examples
