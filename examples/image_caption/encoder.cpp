#include "examples/image_caption/encoder.h"

#include <cmath>

#include "autograd/functions/conv.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/shape.h"
#include "nn/init.h"
#include "ops/creation.h"
#include "ops/error.h"

namespace saccade::examples {
namespace {

Variable param(nn::Module& m, const char* name, const Shape& shape) {
  return m.register_parameter(name, ops::empty(shape));
}

// The 2-d sinusoidal table (G * G, d): first d / 2 channels encode the row, the rest the column.
Tensor grid_positions(int64_t g, int64_t d) {
  Tensor p = ops::empty({g * g, d});
  float* out = p.data<float>();
  const int64_t half = d / 2;
  for (int64_t i = 0; i < g; ++i)
    for (int64_t j = 0; j < g; ++j)
      for (int64_t c = 0; c < half; ++c) {
        double freq = std::pow(10000.0, -static_cast<double>(2 * (c / 2)) / half);
        out[(i * g + j) * d + c] = static_cast<float>(c % 2 == 0 ? std::sin(i * freq) : std::cos(i * freq));
        out[(i * g + j) * d + half + c] =
            static_cast<float>(c % 2 == 0 ? std::sin(j * freq) : std::cos(j * freq));
      }
  return p;
}

}  // namespace

GridEncoder::GridEncoder(int64_t conv1, int64_t conv2, int64_t grid, int64_t d_model, Generator* gen)
    : Module("GridEncoder"), grid_(grid), d_model_(d_model) {
  SACCADE_CHECK(grid == 7 || grid == 14, "GridEncoder: grid must be 7 or 14, got {}", grid);
  conv1_w_ = param(*this, "conv1_weight", {conv1, 1, 3, 3});
  conv1_b_ = param(*this, "conv1_bias", {conv1});
  conv2_w_ = param(*this, "conv2_weight", {conv2, conv1, 3, 3});
  conv2_b_ = param(*this, "conv2_bias", {conv2});
  proj_w_ = param(*this, "proj_weight", {d_model, conv2});
  proj_b_ = param(*this, "proj_bias", {d_model});
  nn::init::linear_default_init_(conv1_w_.data(), conv1_b_.data(), gen);
  nn::init::linear_default_init_(conv2_w_.data(), conv2_b_.data(), gen);
  nn::init::linear_default_init_(proj_w_.data(), proj_b_.data(), gen);
  pos_ = register_buffer("pos", grid_positions(grid, d_model));
}

Variable GridEncoder::forward(const Tensor& images) {
  // images: (B, 1, 56, 56) -> (B, c1, 28, 28) -> (B, c2, G, G) -> (B, G*G, d)
  const int64_t B = images.size(0), pool2 = 28 / grid_;
  // relu(max_pool(x)) = max_pool(relu(x)) (relu is monotone): pooling first runs relu on 4x (16x) fewer
  // elements.
  Variable x = relu(max_pool2d(conv2d(images, conv1_w_, conv1_b_, {1, 1}, {1, 1}), {2, 2}));
  x = relu(max_pool2d(conv2d(x, conv2_w_, conv2_b_, {1, 1}, {1, 1}), {pool2, pool2}));
  x = transpose(reshape(x, {B, x.size(1), grid_ * grid_}), 1, 2);
  return relu(linear(x, proj_w_, proj_b_)) + pos_;
}

}  // namespace saccade::examples
